package vfs

import (
	"context"
	"database/sql"
	"fmt"
	"syscall"

	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
	"github.com/filepath-dev/filepath/protocol"
)

// The inode API: renaming, with the RENAME_NOREPLACE and RENAME_EXCHANGE
// flags of renameat2.

// Rename flags (linux/fs.h).
const (
	RenameNoReplace = 1 << 0
	RenameExchange  = 1 << 1
)

// isAncestor reports whether dir is anc or lies below anc.
func (fs *FS) isAncestor(ctx context.Context, q querier, anc, dir int64) (bool, error) {
	for i := 0; i < maxDepth; i++ {
		if dir == anc {
			return true, nil
		}
		if dir == RootIno {
			return false, nil
		}
		var err error
		if dir, _, err = fs.firstName(ctx, q, dir); err != nil {
			if err == sql.ErrNoRows {
				return false, nil
			}
			return false, fmt.Errorf("walk parents: %w", err)
		}
	}
	return false, errorf(syscall.ELOOP, "", "directory tree too deep")
}

// Rename moves oldParent/oldName to newParent/newName in one transaction,
// atomically replacing an existing target (unless RenameNoReplace) or
// swapping the two (RenameExchange).
func (fs *FS) Rename(ctx context.Context, oldParent int64, oldName string, newParent int64, newName string, flags uint32) error {
	if err := paths.ValidName(newName); err != nil {
		return err
	}
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return errorf(syscall.EINVAL, newName, "unsupported rename flags %#x", flags)
	}
	if _, err := fs.init(ctx); err != nil {
		return err
	}
	if err := fs.checkInodeAccess(ctx, "rename", oldParent, oldName, true); err != nil {
		return err
	}
	if err := fs.checkInodeAccess(ctx, "rename", newParent, newName, true); err != nil {
		return err
	}
	var evs []event
	err := fs.v.tx(ctx, func(tx *txn) error {
		var err error
		evs, err = fs.rename(ctx, tx, oldParent, oldName, newParent, newName, flags)
		return err
	})
	if err != nil {
		return err
	}
	for _, ev := range evs {
		fs.notify(ev)
	}
	return nil
}

// rename renames in tx. Until its first change the directory cache holds
// what tx reads (it is all committed); from then on tx bypasses it and
// the cache is cleared, now and at commit.
func (fs *FS) rename(ctx context.Context, tx *txn, oldParent int64, oldName string, newParent int64, newName string, flags uint32) ([]event, error) {
	src, err := fs.lookup(ctx, tx, oldParent, oldName)
	if err != nil {
		return nil, err
	}
	np, err := fs.getAttr(ctx, tx, newParent)
	if err != nil {
		return nil, err
	}
	if !np.IsDir() {
		return nil, errorf(syscall.ENOTDIR, newName, "target parent is not a directory")
	}
	if removedDir(np) {
		return nil, errorf(syscall.ENOENT, newName, "the directory of %s was removed", newName)
	}
	if oldParent == newParent && oldName == newName {
		return nil, nil
	}
	if src.IsDir() {
		inside, err := fs.isAncestor(ctx, tx, src.Ino, newParent)
		if err != nil {
			return nil, err
		}
		if inside {
			return nil, errorf(syscall.EINVAL, newName, "cannot move directory %s into itself", oldName)
		}
	}
	dst, err := fs.lookup(ctx, tx, newParent, newName)
	exists := err == nil
	if err != nil && !IsErrno(err, syscall.ENOENT) {
		return nil, err
	}
	oldEv := event{op: protocol.FileDeleted, parent: oldParent, name: oldName}
	newEv := event{op: protocol.FileCreated, parent: newParent, name: newName, size: src.Size}
	if err := fs.resolveEvent(ctx, tx, &oldEv); err != nil {
		return nil, err
	}
	if err := fs.resolveEvent(ctx, tx, &newEv); err != nil {
		return nil, err
	}
	now := fs.v.cfg.Now()
	if flags&RenameExchange != 0 {
		if !exists {
			return nil, errorf(syscall.ENOENT, newName, "%s not found", newName)
		}
		if dst.IsDir() {
			inside, err := fs.isAncestor(ctx, tx, dst.Ino, oldParent)
			if err != nil {
				return nil, err
			}
			if inside {
				return nil, errorf(syscall.EINVAL, newName, "cannot move directory %s into itself", newName)
			}
		}
		fs.forgetDirPaths(tx)
		tx.onCommit(func() { fs.forgetDirPaths(nil) })
		_, layered, err := fs.levels(ctx, tx)
		if err != nil {
			return nil, err
		}
		for _, u := range []struct {
			parent   int64
			name     string
			old, ino int64
		}{{oldParent, oldName, src.Ino, dst.Ino}, {newParent, newName, dst.Ino, src.Ino}} {
			if layered {
				if err := fs.setDentryIno(ctx, tx, u.parent, u.name, u.old, u.ino); err != nil {
					return nil, err
				}
			} else if _, err := tx.ExecContext(ctx, `UPDATE fs_dentry SET ino=? WHERE session_id=? AND parent_ino=? AND name=?`, u.ino, fs.sid, u.parent, u.name); err != nil {
				return nil, fmt.Errorf("exchange: %w", err)
			}
			fs.changedEntry(tx, u.parent, u.name)
			fs.changedAttrs(tx, u.ino)
		}
		for _, ino := range []int64{oldParent, newParent} {
			if err := fs.touch(ctx, tx, ino, now); err != nil {
				return nil, err
			}
		}
		oldEv.op, oldEv.size = protocol.FileModified, dst.Size
		newEv.op = protocol.FileModified
		return []event{oldEv, newEv}, nil
	}
	fs.forgetDirPaths(tx)
	tx.onCommit(func() { fs.forgetDirPaths(nil) })
	if exists {
		if flags&RenameNoReplace != 0 {
			return nil, errorf(syscall.EEXIST, newName, "%s already exists", newName)
		}
		if dst.Ino == src.Ino {
			return nil, nil // both names are links to one inode: POSIX does nothing
		}
		if src.IsDir() {
			if !dst.IsDir() {
				return nil, errorf(syscall.ENOTDIR, newName, "%s is not a directory", newName)
			}
			if err := fs.checkEmpty(ctx, tx, dst.Ino, newName); err != nil {
				return nil, err
			}
		} else if dst.IsDir() {
			return nil, errorf(syscall.EISDIR, newName, "%s is a directory", newName)
		}
		if err := fs.unlinkEntry(ctx, tx, newParent, newName, dst.Ino); err != nil {
			return nil, err
		}
		newEv.op = protocol.FileModified
	}
	lv, layered, err := fs.levels(ctx, tx)
	if err != nil {
		return nil, err
	}
	if layered {
		// one name goes (a whiteout if the base has it), one comes: the
		// names below a moved directory stay keyed by its inode
		if err := fs.dropDentry(ctx, tx, lv, oldParent, oldName, src.Ino); err != nil {
			return nil, err
		}
		if err := fs.putDentry(ctx, tx, lv, newParent, newName, src.Ino); err != nil {
			return nil, err
		}
	} else if _, err := tx.ExecContext(ctx, `UPDATE fs_dentry SET parent_ino=?, name=? WHERE session_id=? AND parent_ino=? AND name=?`,
		newParent, newName, fs.sid, oldParent, oldName); err != nil {
		return nil, fmt.Errorf("rename: %w", err)
	}
	fs.changedEntry(tx, oldParent, oldName)
	fs.changedEntry(tx, newParent, newName)
	for _, ino := range []int64{oldParent, newParent} {
		if err := fs.touch(ctx, tx, ino, now); err != nil {
			return nil, err
		}
	}
	if err := fs.touchCtime(ctx, tx, src.Ino, now); err != nil {
		return nil, err
	}
	return []event{oldEv, newEv}, nil
}
