package vfs

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/protocol"
)

// The inode API: changing attributes (mode, owner, times, size).

// AttrChange lists the attributes SetAttr changes; nil fields stay as they are.
type AttrChange struct {
	Mode  *uint32 // permission bits only; the type is kept
	Size  *int64  // truncate or zero-extend a regular file
	Atime *time.Time
	Mtime *time.Time
	UID   *uint32
	GID   *uint32
}

// WithOwner returns a view of fs whose new inodes get uid and gid.
func (fs *FS) WithOwner(uid, gid uint32) *FS {
	c := *fs
	c.uid, c.gid = uid, gid
	return &c
}

// SetAttr changes the attributes named in ch and returns the new attributes.
func (fs *FS) SetAttr(ctx context.Context, ino int64, ch AttrChange) (Attr, error) {
	cs, err := fs.init(ctx)
	if err != nil {
		return Attr{}, err
	}
	if err := fs.checkInodeAccess(ctx, "setattr", ino, "", true); err != nil {
		return Attr{}, err
	}
	now := fs.v.cfg.Now()
	var out Attr
	var ev event
	err = fs.v.tx(ctx, func(tx *txn) error {
		if err := fs.ownIno(ctx, tx, ino); err != nil {
			return err
		}
		a, err := fs.getAttr(ctx, tx, ino)
		if err != nil {
			return err
		}
		if ch.Size != nil {
			if a.IsDir() {
				return errorf(syscall.EISDIR, "", "cannot truncate a directory")
			}
			if !a.IsRegular() {
				return errorf(syscall.EINVAL, "", "cannot truncate a non-regular file")
			}
			if *ch.Size < 0 {
				return errorf(syscall.EINVAL, "", "negative size %d", *ch.Size)
			}
			if a.Readonly {
				return errorf(syscall.EACCES, "", "file is readonly")
			}
			if err := fs.resize(ctx, tx, ino, cs, a.Size, *ch.Size); err != nil {
				return err
			}
			if err := fs.touch(ctx, tx, ino, now); err != nil {
				return err
			}
			ev = event{op: protocol.FileModified, ino: ino, size: *ch.Size}
		}
		if ch.Mode != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET mode=? WHERE session_id=? AND ino=?`, a.Mode&ModeType|*ch.Mode&ModePerm, fs.sid, ino); err != nil {
				return fmt.Errorf("chmod: %w", err)
			}
		}
		if ch.UID != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET uid=? WHERE session_id=? AND ino=?`, *ch.UID, fs.sid, ino); err != nil {
				return fmt.Errorf("chown: %w", err)
			}
		}
		if ch.GID != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET gid=? WHERE session_id=? AND ino=?`, *ch.GID, fs.sid, ino); err != nil {
				return fmt.Errorf("chown: %w", err)
			}
		}
		if ch.Atime != nil {
			s, ns := splitTime(*ch.Atime)
			if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET atime=?, atime_ns=? WHERE session_id=? AND ino=?`, s, ns, fs.sid, ino); err != nil {
				return fmt.Errorf("set atime: %w", err)
			}
		}
		if ch.Mtime != nil {
			s, ns := splitTime(*ch.Mtime)
			if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET mtime=?, mtime_ns=? WHERE session_id=? AND ino=?`, s, ns, fs.sid, ino); err != nil {
				return fmt.Errorf("set mtime: %w", err)
			}
		}
		if err := fs.touchCtime(ctx, tx, ino, now); err != nil {
			return err
		}
		if ev.op != "" {
			if err := fs.resolveEvent(ctx, tx, &ev); err != nil {
				return err
			}
		}
		out, err = fs.getAttr(ctx, tx, ino)
		return err
	})
	if err != nil {
		return Attr{}, err
	}
	fs.notify(ev)
	return out, nil
}
