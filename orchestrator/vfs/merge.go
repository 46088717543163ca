package vfs

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
)

// Conflict is a path the fork and the workspace it came from both changed
// since the fork point, to different results.
type Conflict struct {
	Path   string `json:"path"`
	Fork   string `json:"fork"`   // what the fork did: added | changed | deleted
	Parent string `json:"parent"` // what the parent did (to the path or a directory above it)
}

// MergeResult is what Merge applied and what it left.
type MergeResult struct {
	Fork      ForkInfo     `json:"fork"`
	Applied   []FileChange `json:"applied"`
	Conflicts []Conflict   `json:"conflicts"`
}

// MergeOptions restrict a merge to the paths a node may write (nil: all).
type MergeOptions struct {
	NodeID  string
	Allowed []string
}

// Merge applies fork ws's changes since its fork point to the workspace it
// was forked from, in one transaction. Paths the parent also changed since
// the fork point, to another result, are conflicts: listed and left as the
// parent has them. A change the parent already has is neither. On any error
// (quota, a readonly file, a path the node may not write) nothing changes.
func (v *VFS) Merge(ctx context.Context, ws string, opt MergeOptions) (MergeResult, error) {
	fk, err := v.ForkByID(ctx, ws)
	if err != nil {
		return MergeResult{}, err
	}
	if err := v.Session(ws).materializeAll(ctx); err != nil {
		return MergeResult{}, err
	}
	pfs, err := v.Session(fk.Origin).ForNode(opt.NodeID, opt.Allowed)
	if err != nil {
		return MergeResult{}, err
	}
	cs, err := pfs.init(ctx)
	if err != nil {
		return MergeResult{}, err
	}
	cfs := v.Session(fk.ID)
	var res MergeResult
	var evs []event
	err = v.tx(ctx, func(tx *txn) error {
		res = MergeResult{Fork: fk, Applied: []FileChange{}, Conflicts: []Conflict{}}
		evs = evs[:0]
		sb, err := v.wsSnapshot(ctx, tx, fk.Base)
		if err != nil {
			return err
		}
		sc, err := v.wsSnapshot(ctx, tx, fk.ID)
		if err != nil {
			return err
		}
		sp, err := v.wsSnapshot(ctx, tx, fk.Origin)
		if err != nil {
			return err
		}
		dc, err := v.changes(ctx, tx, fk.Base, sb, fk.ID, sc)
		if err != nil {
			return err
		}
		dp, err := v.changes(ctx, tx, fk.Base, sb, fk.Origin, sp)
		if err != nil {
			return err
		}
		byParent := make(map[string]FileChange, len(dp))
		for _, c := range dp {
			byParent[c.Path] = c
		}
		var apply []FileChange
		for _, c := range dc {
			ec, inC := sc[c.Path]
			ep, inP := sp[c.Path]
			if inC == inP {
				same := !inC
				if inC {
					if same, err = v.same(ctx, tx, fk.ID, ec, fk.Origin, ep, false); err != nil {
						return err
					}
				}
				if same {
					continue // the parent has it already
				}
			}
			if pc, ok := byParent[c.Path]; ok {
				res.Conflicts = append(res.Conflicts, Conflict{Path: c.Path, Fork: c.Op, Parent: pc.Op})
				continue
			}
			if pop := parentConflict(c, byParent, sp, dp); pop != "" {
				res.Conflicts = append(res.Conflicts, Conflict{Path: c.Path, Fork: c.Op, Parent: pop})
				continue
			}
			apply = append(apply, c)
		}
		// deletions deepest first, then the rest parents first
		sort.SliceStable(apply, func(i, j int) bool {
			di, dj := apply[i].Op == DiffDeleted, apply[j].Op == DiffDeleted
			if di != dj {
				return di
			}
			if di {
				return apply[i].Path > apply[j].Path
			}
			return apply[i].Path < apply[j].Path
		})
		for _, c := range apply {
			if err := pfs.checkPathTx("merge", c.Path, true); err != nil {
				return err
			}
			if err := pfs.mergeOne(ctx, tx, cfs, cs, c, sc[c.Path], &evs); err != nil {
				return err
			}
			res.Applied = append(res.Applied, c)
		}
		return nil
	})
	if err != nil {
		return MergeResult{}, err
	}
	pfs.notifyAll(evs)
	return res, nil
}

// parentConflict returns what the parent did to a directory above c's path
// (it is no longer a directory there) or below it (c deletes or replaces a
// directory the parent changed something in); "" when neither.
func parentConflict(c FileChange, byParent map[string]FileChange, sp map[string]entry, dp []FileChange) string {
	for a := parentDir(c.Path); a != "/"; a = parentDir(a) {
		if pc, ok := byParent[a]; ok {
			if e, ok := sp[a]; !ok || e.mode&ModeType != ModeDir {
				return pc.Op
			}
		}
	}
	if c.Op == DiffDeleted || c.Kind != "dir" {
		i := sort.Search(len(dp), func(i int) bool { return dp[i].Path > c.Path })
		if i < len(dp) && isUnder(dp[i].Path, c.Path) {
			return dp[i].Op
		}
	}
	return ""
}

func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// mergeOne makes path c.Path of fs (the merge target) what it is in fork cfs
// (entry e), in tx.
func (fs *FS) mergeOne(ctx context.Context, tx *txn, cfs *FS, cs int, c FileChange, e entry, evs *[]event) error {
	var mk *[]event
	if c.Op != DiffDeleted {
		mk = evs // create missing directories above
	}
	r, err := fs.resolve(ctx, tx, c.Path, false, mk)
	if err != nil {
		return err
	}
	now := fs.v.cfg.Now()
	if c.Op == DiffDeleted {
		if !r.exists {
			return nil
		}
		if r.attr.Readonly {
			return errorf(syscall.EACCES, c.Path, "%s is readonly", c.Path)
		}
		*evs = append(*evs, event{op: OpDeleted, path: r.path})
		if err := fs.deleteTree(ctx, tx, r.parent, r.name, r.attr); err != nil {
			return err
		}
		return fs.touch(ctx, tx, r.parent, now)
	}
	if err := checkPathLen(r.path); err != nil {
		return err
	}
	if r.exists && r.attr.Readonly {
		return errorf(syscall.EACCES, c.Path, "%s is readonly", c.Path)
	}
	newType := e.mode & ModeType
	if r.exists && (r.attr.Mode&ModeType != newType || newType == ModeSymlink) {
		if err := fs.deleteTree(ctx, tx, r.parent, r.name, r.attr); err != nil {
			return err
		}
		r.exists = false
	}
	created := !r.exists
	if created {
		a, err := fs.mknod(ctx, tx, r.parent, r.name, e.mode, e.target)
		if err != nil {
			return err
		}
		r.attr = a
		if err := fs.touch(ctx, tx, r.parent, now); err != nil {
			return err
		}
	} else if r.attr.Mode != e.mode {
		if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET mode=? WHERE session_id=? AND ino=?`, e.mode, fs.sid, r.attr.Ino); err != nil {
			return fmt.Errorf("merge %s: %w", c.Path, err)
		}
		fs.changedAttrs(tx, r.attr.Ino)
	}
	op := OpModified
	if created {
		op = OpCreated
	}
	if newType != ModeRegular {
		*evs = append(*evs, event{op: op, path: r.path})
		return nil
	}
	data, err := cfs.readAllIn(ctx, tx, e.ino, e.size)
	if err != nil {
		return err
	}
	if err := fs.checkFileSize(int64(len(data)), c.Path); err != nil {
		return err
	}
	ino := r.attr.Ino
	if _, err := tx.ExecContext(ctx, `DELETE FROM fs_data WHERE session_id=? AND ino=?`, fs.sid, ino); err != nil {
		return fmt.Errorf("merge %s: %w", c.Path, err)
	}
	if err := fs.addUsage(ctx, tx, int64(len(data))-r.attr.Size); err != nil {
		return err
	}
	if _, err := fs.writeChunks(ctx, tx, ino, cs, 0, data, 0); err != nil {
		return err
	}
	s, ns := splitTime(now)
	if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET size=?, sha256=NULL, data_gen=data_gen+1, mtime=?, mtime_ns=?, ctime=?, ctime_ns=? WHERE session_id=? AND ino=?`,
		len(data), s, ns, s, ns, fs.sid, ino); err != nil {
		return fmt.Errorf("merge %s: %w", c.Path, err)
	}
	fs.changedData(tx, ino)
	*evs = append(*evs, event{op: op, path: r.path, size: int64(len(data))})
	return nil
}
