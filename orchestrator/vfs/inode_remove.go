package vfs

import (
	"context"
	"fmt"
	"syscall"

	"github.com/filepath-dev/filepath/protocol"
)

// The inode API: removing names (unlink, rmdir).

// Unlink removes the non-directory entry name from parent. The inode goes
// when its last name goes, unless it is open (see Open/Release).
func (fs *FS) Unlink(ctx context.Context, parent int64, name string) error {
	return fs.remove(ctx, "unlink", parent, name, false)
}

// Rmdir removes the empty directory name from parent (ENOTEMPTY otherwise).
func (fs *FS) Rmdir(ctx context.Context, parent int64, name string) error {
	return fs.remove(ctx, "rmdir", parent, name, true)
}

func (fs *FS) remove(ctx context.Context, op string, parent int64, name string, dir bool) error {
	if _, err := fs.init(ctx); err != nil {
		return err
	}
	if err := fs.checkInodeAccess(ctx, op, parent, name, true); err != nil {
		return err
	}
	var ev event
	err := fs.v.tx(ctx, func(tx *txn) error {
		a, err := fs.lookup(ctx, tx, parent, name)
		if err != nil {
			return err
		}
		if dir && !a.IsDir() {
			return errorf(syscall.ENOTDIR, name, "%s is not a directory", name)
		}
		if !dir && a.IsDir() {
			return errorf(syscall.EISDIR, name, "%s is a directory", name)
		}
		if dir {
			if err := fs.checkEmpty(ctx, tx, a.Ino, name); err != nil {
				return err
			}
		}
		ev = event{op: protocol.FileDeleted, parent: parent, name: name}
		if err := fs.resolveEvent(ctx, tx, &ev); err != nil {
			return err
		}
		if err := fs.unlinkEntry(ctx, tx, parent, name, a.Ino); err != nil {
			return err
		}
		return fs.touch(ctx, tx, parent, fs.v.cfg.Now())
	})
	if err != nil {
		return err
	}
	fs.notify(ev)
	return nil
}

func (fs *FS) checkEmpty(ctx context.Context, q querier, ino int64, name string) error {
	lv, layered, err := fs.levels(ctx, q)
	if err != nil {
		return err
	}
	var n int
	if layered {
		var some bool
		if some, err = fs.hasEntriesLayered(ctx, q, lv, ino); err != nil {
			return fmt.Errorf("check empty: %w", err)
		}
		if some {
			n = 1
		}
	} else if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM fs_dentry WHERE session_id=? AND parent_ino=? LIMIT 1) AS one`, fs.sid, ino).Scan(&n); err != nil {
		return fmt.Errorf("check empty: %w", err)
	}
	if n > 0 {
		return errorf(syscall.ENOTEMPTY, name, "directory %s is not empty", name)
	}
	return nil
}

func (fs *FS) unlinkEntry(ctx context.Context, tx *txn, parent int64, name string, ino int64) error {
	lv, layered, err := fs.levels(ctx, tx)
	if err != nil {
		return err
	}
	if layered {
		if err := fs.dropDentry(ctx, tx, lv, parent, name, ino); err != nil {
			return err
		}
	} else if _, err := tx.ExecContext(ctx, `DELETE FROM fs_dentry WHERE session_id=? AND parent_ino=? AND name=?`, fs.sid, parent, name); err != nil {
		return fmt.Errorf("delete dentry %q: %w", name, err)
	}
	fs.changedEntry(tx, parent, name)
	if err := fs.touchCtime(ctx, tx, ino, fs.v.cfg.Now()); err != nil {
		return err
	}
	return fs.removeInodeIfUnlinked(ctx, tx, ino)
}
