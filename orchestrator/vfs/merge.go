package vfs

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"

	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
	"github.com/filepath-dev/filepath/protocol"
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
		// Hard links: the names of one fork inode become names of one
		// parent inode. An inode from before the fork that the parent still
		// names is that inode (old): the fork's names link to it, and its
		// bytes become the fork's when only the fork changed them.
		old := map[int64]bool{}      // fork inode -> the parent links to its own
		seed := map[int64]int64{}    // fork inode -> the parent's, where a name of it is merged already
		writeOld := map[int64]bool{} // of those, the ones the fork rewrote
		var apply []FileChange
		for _, c := range dc {
			ec, inC := sc.paths[c.Path]
			ep, inP := sp.paths[c.Path]
			// the path names an inode from before the fork that the parent
			// still names: did the fork, the parent, change its bytes?
			isOld, forkSame, parentSame, bothSame := false, true, true, true
			if inC && ec.mode&ModeType != ModeDir {
				if eb, inB := sb.inodes[ec.ino]; inB && len(sp.names[ec.ino]) > 0 {
					isOld = true
					px := sp.inodes[ec.ino]
					if forkSame, err = v.same(ctx, tx, fk.Base, eb, fk.ID, ec, true); err != nil {
						return err
					}
					if parentSame, err = v.same(ctx, tx, fk.Base, eb, fk.Origin, px, true); err != nil {
						return err
					}
					if !forkSame {
						if bothSame, err = v.same(ctx, tx, fk.ID, ec, fk.Origin, px, false); err != nil {
							return err
						}
					}
				}
			}
			if inC == inP {
				same := !inC
				if inC {
					if same, err = v.alreadyMerged(ctx, tx, fk, c.Path, sb, ec, sc, ep, sp, isOld, forkSame || bothSame, seed); err != nil {
						return err
					}
				}
				if same {
					continue // the parent has it already
				}
			}
			// where both name the same inode from before the fork (a
			// merge made the name before) only its bytes can conflict
			sameName := isOld && inP && ep.ino == ec.ino
			if pc, ok := byParent[c.Path]; ok && !sameName {
				res.Conflicts = append(res.Conflicts, Conflict{Path: c.Path, Fork: c.Op, Parent: pc.Op})
				continue
			}
			if pop := parentConflict(c, byParent, sp.paths, dp); pop != "" && !sameName {
				res.Conflicts = append(res.Conflicts, Conflict{Path: c.Path, Fork: c.Op, Parent: pop})
				continue
			}
			if isOld {
				if !forkSame && !parentSame && !bothSame {
					// the parent rewrote the file this name is of, otherwise
					res.Conflicts = append(res.Conflicts, Conflict{Path: c.Path, Fork: c.Op, Parent: DiffChanged})
					continue
				}
				old[ec.ino] = true
				writeOld[ec.ino] = !forkSame && !bothSame
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
		// an old inode that loses its last name before it gets its new one
		// (the fork renamed it) is kept until the end
		pfs.pinned = old
		defer func() { pfs.pinned = nil }()
		target := map[int64]int64{} // fork inode -> parent inode, once made or linked
		for ino := range old {
			target[ino] = ino
		}
		for ino, p := range seed {
			target[ino] = p
		}
		for _, c := range apply {
			if err := pfs.checkPathTx("merge", c.Path, true); err != nil {
				return err
			}
			e := sc.paths[c.Path]
			var link int64
			write := true
			if c.Op != DiffDeleted && e.mode&ModeType != ModeDir {
				link = target[e.ino]
				write = link == 0 || writeOld[e.ino]
			}
			ino, err := pfs.mergeOne(ctx, tx, cfs, cs, c, e, link, write, &evs)
			if err != nil {
				return err
			}
			if link != 0 {
				writeOld[e.ino] = false // its bytes are in place
			} else if c.Op != DiffDeleted && e.mode&ModeType != ModeDir {
				target[e.ino] = ino
			}
			res.Applied = append(res.Applied, c)
		}
		pfs.pinned = nil
		for ino := range old {
			if err := pfs.removeInodeIfUnlinked(ctx, tx, ino); err != nil {
				return err
			}
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

// alreadyMerged reports whether the parent has path p (entry ep of sp) as
// the fork has it (ec of sc), hard links included. isOld: ec is an inode
// from before the fork that the parent still names; then p must name it in
// the parent, with bytes the three-way rule keeps (keep). Otherwise the
// parent's inode may not be one from before the fork that the fork has
// under other names, the bytes must be the same, the parent's inode may
// have no name the fork gives another inode, and the names of one fork
// inode that the parent has already must be of one parent inode: the
// first such name (in path order) records it in seed, for the names still
// to merge to link to.
func (v *VFS) alreadyMerged(ctx context.Context, tx *txn, fk ForkInfo, p string, sb wsSnap, ec entry, sc wsSnap, ep entry, sp wsSnap, isOld, keep bool, seed map[int64]int64) (bool, error) {
	if isOld {
		return ep.ino == ec.ino && keep, nil
	}
	if _, inB := sb.inodes[ep.ino]; inB && len(sc.names[ep.ino]) > 0 {
		return false, nil // the parent's is a file the fork has under other names
	}
	same, err := v.same(ctx, tx, fk.ID, ec, fk.Origin, ep, false)
	if err != nil || !same {
		return false, err
	}
	for _, q := range sp.others(p, ep) {
		if e, ok := sc.paths[q]; ok && e.ino != ec.ino {
			return false, nil
		}
	}
	if sc.linked(ec) {
		if t, ok := seed[ec.ino]; ok {
			return t == ep.ino, nil
		}
		seed[ec.ino] = ep.ino
	}
	return true, nil
}

func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// mergeOne makes path c.Path of fs (the merge target) what it is in fork cfs
// (entry e), in tx, and returns the inode it names (0 for a deletion).
// link, when not 0, is the parent's inode the path is to name (another name
// of it was merged, or it is from before the fork); write: the inode takes
// e's mode and bytes (else it keeps its own).
func (fs *FS) mergeOne(ctx context.Context, tx *txn, cfs *FS, cs int, c FileChange, e entry, link int64, write bool, evs *[]event) (int64, error) {
	var mk *[]event
	if c.Op != DiffDeleted {
		mk = evs // create missing directories above
	}
	r, err := fs.resolve(ctx, tx, c.Path, false, mk)
	if err != nil {
		return 0, err
	}
	now := fs.v.cfg.Now()
	if c.Op == DiffDeleted {
		if !r.exists {
			return 0, nil
		}
		if r.attr.Readonly {
			return 0, errorf(syscall.EACCES, c.Path, "%s is readonly", c.Path)
		}
		*evs = append(*evs, event{op: protocol.FileDeleted, path: r.path})
		if err := fs.deleteTree(ctx, tx, r.parent, r.name, r.attr); err != nil {
			return 0, err
		}
		return 0, fs.touch(ctx, tx, r.parent, now)
	}
	if err := paths.CheckLen(r.path); err != nil {
		return 0, err
	}
	if r.exists && r.attr.Readonly {
		return 0, errorf(syscall.EACCES, c.Path, "%s is readonly", c.Path)
	}
	newType := e.mode & ModeType
	// the name goes (to be made again) when it is of another type or a
	// symlink, when it is to name another inode, or when its inode has
	// other names in the parent that the fork does not give these bytes,
	// or is one the fork still has elsewhere (pinned: it moved)
	if r.exists && (r.attr.Mode&ModeType != newType || newType == ModeSymlink && link == 0 ||
		link != 0 && r.attr.Ino != link ||
		link == 0 && newType != ModeDir && (r.attr.Nlink > 1 || fs.pinned[r.attr.Ino])) {
		if err := fs.deleteTree(ctx, tx, r.parent, r.name, r.attr); err != nil {
			return 0, err
		}
		r.exists = false
	}
	created := !r.exists
	op := protocol.FileModified
	if created {
		op = protocol.FileCreated
	}
	if link != 0 {
		if created {
			if err := fs.addDentry(ctx, tx, r.parent, r.name, link); err != nil {
				return 0, err
			}
			if err := fs.touch(ctx, tx, r.parent, now); err != nil {
				return 0, err
			}
			if err := fs.touchCtime(ctx, tx, link, now); err != nil {
				return 0, err
			}
		}
		a, err := fs.getAttr(ctx, tx, link)
		if err != nil {
			return 0, err
		}
		if !write {
			*evs = append(*evs, event{op: op, path: r.path, size: a.Size})
			return link, nil
		}
		if a.Readonly {
			return 0, errorf(syscall.EACCES, c.Path, "%s is readonly", c.Path)
		}
		r.attr = a
	} else if created {
		a, err := fs.mknod(ctx, tx, r.parent, r.name, e.mode, e.target)
		if err != nil {
			return 0, err
		}
		r.attr = a
		if err := fs.touch(ctx, tx, r.parent, now); err != nil {
			return 0, err
		}
	}
	if r.attr.Mode != e.mode {
		if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET mode=? WHERE session_id=? AND ino=?`, e.mode, fs.sid, r.attr.Ino); err != nil {
			return 0, fmt.Errorf("merge %s: %w", c.Path, err)
		}
		fs.changedAttrs(tx, r.attr.Ino)
	}
	ino := r.attr.Ino
	if newType != ModeRegular {
		*evs = append(*evs, event{op: op, path: r.path})
		return ino, nil
	}
	data, err := cfs.readAllIn(ctx, tx, e.ino, e.size)
	if err != nil {
		return 0, err
	}
	if err := fs.checkFileSize(int64(len(data)), c.Path); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM fs_data WHERE session_id=? AND ino=?`, fs.sid, ino); err != nil {
		return 0, fmt.Errorf("merge %s: %w", c.Path, err)
	}
	if err := fs.addUsage(ctx, tx, int64(len(data))-r.attr.Size); err != nil {
		return 0, err
	}
	if _, err := fs.writeChunks(ctx, tx, ino, cs, 0, data, 0); err != nil {
		return 0, err
	}
	s, ns := splitTime(now)
	if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET size=?, sha256=NULL, data_gen=data_gen+1, mtime=?, mtime_ns=?, ctime=?, ctime_ns=? WHERE session_id=? AND ino=?`,
		len(data), s, ns, s, ns, fs.sid, ino); err != nil {
		return 0, fmt.Errorf("merge %s: %w", c.Path, err)
	}
	fs.changedData(tx, ino)
	*evs = append(*evs, event{op: op, path: r.path, size: int64(len(data))})
	return ino, nil
}
