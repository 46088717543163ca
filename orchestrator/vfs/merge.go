package vfs

import (
	"context"
	"fmt"
	"syscall"

	"github.com/filepath-dev/filepath/orchestrator/vfs/treediff"
	"github.com/filepath-dev/filepath/protocol"
)

// MergeResult is what Merge applied and what it left.
type MergeResult struct {
	Fork      ForkInfo              `json:"fork"`
	Applied   []treediff.FileChange `json:"applied"`
	Conflicts []treediff.Conflict   `json:"conflicts"`
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
		res = MergeResult{Fork: fk, Applied: []treediff.FileChange{}, Conflicts: []treediff.Conflict{}}
		evs = evs[:0]
		plan, sc, err := v.mergePlan(ctx, tx, fk, false)
		if err != nil {
			return err
		}
		res.Conflicts = plan.Conflicts
		old, writeOld := plan.Old, plan.Write
		// an old inode that loses its last name before it gets its new one
		// (the fork renamed it) is kept until the end
		pfs.pinned = old
		defer func() { pfs.pinned = nil }()
		target := map[int64]int64{} // fork inode -> parent inode, once made or linked
		for ino := range old {
			target[ino] = ino
		}
		for ino, p := range plan.Seed {
			target[ino] = p
		}
		for _, c := range plan.Apply {
			if err := pfs.checkPathTx("merge", c.Path, true); err != nil {
				return err
			}
			e := sc.Paths[c.Path]
			var link int64
			write := true
			if c.Op != treediff.Deleted && !e.IsDir() {
				link = target[e.Ino]
				write = link == 0 || writeOld[e.Ino]
			}
			ino, err := pfs.mergeOne(ctx, tx, cfs, cs, c, e, link, write, &evs)
			if err != nil {
				return err
			}
			if link != 0 {
				writeOld[e.Ino] = false // its bytes are in place
			} else if c.Op != treediff.Deleted && !e.IsDir() {
				target[e.Ino] = ino
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

// mergeOne makes path c.Path of fs (the merge target) what it is in fork cfs
// (entry e), in tx, and returns the inode it names (0 for a deletion).
// link, when not 0, is the parent's inode the path is to name (another name
// of it was merged, or it is from before the fork); write: the inode takes
// e's mode and bytes (else it keeps its own).
func (fs *FS) mergeOne(ctx context.Context, tx *txn, cfs *FS, cs int, c treediff.FileChange, e treediff.Entry, link int64, write bool, evs *[]event) (int64, error) {
	var mk *[]event
	if c.Op != treediff.Deleted {
		mk = evs // create missing directories above
	}
	r, err := fs.resolve(ctx, tx, c.Path, false, mk)
	if err != nil {
		return 0, err
	}
	now := fs.v.cfg.Now()
	if c.Op == treediff.Deleted {
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
	if r.exists && r.attr.Readonly {
		return 0, errorf(syscall.EACCES, c.Path, "%s is readonly", c.Path)
	}
	newType := e.Mode & ModeType
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
		a, err := fs.mknodIno(ctx, tx, r.parent, r.name, 0, e.Mode, e.Target, e.Rdev)
		if err != nil {
			return 0, err
		}
		r.attr = a
		if err := fs.touch(ctx, tx, r.parent, now); err != nil {
			return 0, err
		}
	}
	if err := fs.ownIno(ctx, tx, r.attr.Ino); err != nil {
		return 0, err
	}
	if r.attr.Mode != e.Mode {
		if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET mode=? WHERE session_id=? AND ino=?`, e.Mode, fs.sid, r.attr.Ino); err != nil {
			return 0, fmt.Errorf("merge %s: %w", c.Path, err)
		}
		fs.changedAttrs(tx, r.attr.Ino)
	}
	if r.attr.Rdev != e.Rdev {
		if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET rdev=? WHERE session_id=? AND ino=?`, e.Rdev, fs.sid, r.attr.Ino); err != nil {
			return 0, fmt.Errorf("merge %s: %w", c.Path, err)
		}
		fs.changedAttrs(tx, r.attr.Ino)
	}
	ino := r.attr.Ino
	if newType != ModeRegular {
		*evs = append(*evs, event{op: op, path: r.path})
		return ino, nil
	}
	data, err := cfs.readAllIn(ctx, tx, e.Ino, e.Size)
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

// mergePlan reads the trees of fork fk's merge in q and plans it; whole:
// read the trees whole even where the fork point records the origin's
// changes (tests compare the two).
func (v *VFS) mergePlan(ctx context.Context, q querier, fk ForkInfo, whole bool) (treediff.Plan, treediff.Tree, error) {
	var sb, sc, sp treediff.Tree
	var err error
	if whole {
		sb, sc, sp, err = v.wholeTrees(ctx, q, fk)
	} else {
		sb, sc, sp, err = v.mergeSnapshots(ctx, q, fk)
	}
	if err != nil {
		return treediff.Plan{}, sc, err
	}
	same := v.sameIn(ctx, q, fk)
	dc, err := changes(same, sb, treediff.Fork, sc)
	if err != nil {
		return treediff.Plan{}, sc, err
	}
	dp, err := changes(same, sb, treediff.Parent, sp)
	if err != nil {
		return treediff.Plan{}, sc, err
	}
	// Hard links: the names of one fork inode become names of one
	// parent inode. An inode from before the fork that the parent still
	// names is that inode (plan.Old): the fork's names link to it, and
	// its bytes become the fork's when only the fork changed them.
	plan, err := treediff.Merge(sb, sc, sp, dc, dp, same)
	return plan, sc, err
}

// mergeSnapshots reads the three trees a merge compares: only what either
// side changed since the fork (partialMergeTrees), or, where the fork point
// does not record the origin's changes, whole (a layered fork's and its
// fork point's through their levels: nothing is copied).
func (v *VFS) mergeSnapshots(ctx context.Context, q querier, fk ForkInfo) (sb, sc, sp treediff.Tree, err error) {
	var ok bool
	if sb, sc, sp, ok, err = v.partialMergeTrees(ctx, q, fk); ok || err != nil {
		return
	}
	return v.wholeTrees(ctx, q, fk)
}

// wholeTrees reads the three trees of fork fk's merge whole.
func (v *VFS) wholeTrees(ctx context.Context, tx querier, fk ForkInfo) (sb, sc, sp treediff.Tree, err error) {
	if sb, err = v.wsSnapshot(ctx, tx, fk.Base); err != nil {
		return
	}
	if sc, err = v.wsSnapshot(ctx, tx, fk.ID); err != nil {
		return
	}
	sp, err = v.wsSnapshot(ctx, tx, fk.Origin)
	return
}
