package vfs

import (
	"context"
	"database/sql"
	"fmt"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/protocol"
)

// The inode API: reading and writing a file's content at an offset.

// ReadAt reads up to len(p) bytes of regular file ino at off. It returns
// fewer bytes (and no error) at the end of the file. Reads do not update
// atime (noatime: a read must not cost a write transaction).
func (fs *FS) ReadAt(ctx context.Context, ino int64, p []byte, off int64) (int, error) {
	cs, err := fs.init(ctx)
	if err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, errorf(syscall.EINVAL, "", "negative offset")
	}
	if fork, err := fs.isFork(ctx, fs.v.rq); err != nil {
		return 0, err
	} else if fork {
		return fs.readAtFork(ctx, cs, ino, p, off)
	}
	// One query (one snapshot) for the inode's type and size and the
	// chunks overlapping [off, off+len(p)).
	first := off / int64(cs) * int64(cs)
	fs.settleIno(ctx, ino)
	rows, err := fs.v.rq.QueryContext(ctx, `SELECT i.mode, i.size, d.offset, d.data FROM fs_inode i
		LEFT JOIN fs_data d ON d.session_id=i.session_id AND d.ino=i.ino AND d.offset>=? AND d.offset<?
		WHERE i.session_id=? AND i.ino=? ORDER BY d.offset`, first, off+int64(len(p)), fs.sid, ino)
	if err != nil {
		return 0, fmt.Errorf("read inode %d: %w", ino, err)
	}
	defer rows.Close()
	n, found := 0, false
	for rows.Next() {
		var size int64
		var mode uint32
		var coff sql.NullInt64
		var data []byte
		if err := rows.Scan(&mode, &size, &coff, &data); err != nil {
			return 0, fmt.Errorf("read inode %d: %w", ino, err)
		}
		if !found {
			found = true
			if mode&ModeType == ModeDir {
				return 0, errorf(syscall.EISDIR, "", "inode %d is a directory", ino)
			}
			if off >= size {
				return 0, nil
			}
			n = int(min(int64(len(p)), size-off))
			clear(p[:n])
		}
		if !coff.Valid {
			continue
		}
		// overlap of [coff, coff+len(data)) with [off, off+n)
		end := off + int64(n)
		lo, hi := max(coff.Int64, off), min(coff.Int64+int64(len(data)), end)
		if lo < hi {
			copy(p[lo-off:hi-off], data[lo-coff.Int64:hi-coff.Int64])
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read inode %d: %w", ino, err)
	}
	if !found {
		return 0, errorf(syscall.ENOENT, "", "inode %d not found", ino)
	}
	return n, nil
}

// WriteAt writes p at off into regular file ino, extending it (a gap is zero
// filled), as one change (see batch.go).
func (fs *FS) WriteAt(ctx context.Context, ino int64, p []byte, off int64) (int, error) {
	_, err := fs.WriteAtAttr(ctx, ino, p, off)
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteAtAttr is WriteAt that returns the file's attributes after the
// write (the FUSE mount answers the kernel's next GETATTR with them).
func (fs *FS) WriteAtAttr(ctx context.Context, ino int64, p []byte, off int64) (Attr, error) {
	var out Attr
	cs, err := fs.init(ctx)
	if err != nil {
		return Attr{}, err
	}
	if off < 0 {
		return Attr{}, errorf(syscall.EINVAL, "", "negative offset")
	}
	if err := fs.checkInodeAccess(ctx, "write", ino, "", true); err != nil {
		return Attr{}, err
	}
	var ev event
	err = fs.v.tx(ctx, func(tx *txn) error {
		var size int64
		var mode uint32
		var ro int
		if err := fs.ownIno(ctx, tx, ino); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT mode, size, is_readonly FROM fs_inode WHERE session_id=? AND ino=?`, fs.sid, ino).Scan(&mode, &size, &ro); err != nil {
			if err == sql.ErrNoRows {
				return errorf(syscall.ENOENT, "", "inode %d not found", ino)
			}
			return fmt.Errorf("read inode %d: %w", ino, err)
		}
		switch mode & ModeType {
		case ModeRegular:
		case ModeDir:
			return errorf(syscall.EISDIR, "", "inode %d is a directory", ino)
		default:
			return errorf(syscall.EINVAL, "", "inode %d is not a regular file", ino)
		}
		if ro != 0 {
			return errorf(syscall.EACCES, "", "file is readonly")
		}
		newSize, err := fs.writeData(ctx, tx, ino, cs, size, p, off, fs.v.cfg.Now())
		if err != nil {
			return err
		}
		if err := fs.stampIfNew(ctx, tx, ino); err != nil {
			return err
		}
		ev = event{op: protocol.FileModified, ino: ino, size: newSize}
		if err := fs.resolveEvent(ctx, tx, &ev); err != nil {
			return err
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

// writeData writes p at off into regular file ino of size bytes in tx:
// limits, usage, chunks, size and times. It returns the new size.
func (fs *FS) writeData(ctx context.Context, tx *txn, ino int64, cs int, size int64, p []byte, off int64, now time.Time) (int64, error) {
	end := off + int64(len(p))
	if end > size {
		if err := fs.checkFileSize(end, ""); err != nil {
			return 0, err
		}
		if err := fs.addUsage(ctx, tx, end-size); err != nil {
			return 0, err
		}
	}
	newSize, err := fs.writeChunks(ctx, tx, ino, cs, size, p, off)
	if err != nil {
		return 0, err
	}
	s, ns := splitTime(now)
	if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET size=?, mtime=?, mtime_ns=?, ctime=?, ctime_ns=?, sha256=NULL, data_gen=data_gen+1 WHERE session_id=? AND ino=?`,
		newSize, s, ns, s, ns, fs.sid, ino); err != nil {
		return 0, fmt.Errorf("update inode %d: %w", ino, err)
	}
	fs.changedData(tx, ino)
	return newSize, nil
}

// Fsync commits the open batch, which holds every change made before it
// (also of ino), with a full sync.
func (fs *FS) Fsync(ctx context.Context, ino int64) error { return fs.v.Sync(ctx, true) }

// Flags of fallocate(2) that Allocate takes (linux/falloc.h).
const (
	AllocKeepSize  = 0x01
	AllocPunchHole = 0x02
	AllocZeroRange = 0x10
)

// Allocate is fallocate(2) of regular file ino over [off, off+length).
// Holes are stored as zeros (doc.go), so there is nothing to reserve: mode
// 0 extends the file to off+length when it is shorter (the quota counts
// the new bytes, EFBIG past the largest file), AllocKeepSize alone changes
// nothing, AllocPunchHole (with AllocKeepSize) and AllocZeroRange write
// zeros over the part of the range inside the file, the latter extending
// it too unless AllocKeepSize. Other modes are EOPNOTSUPP.
func (fs *FS) Allocate(ctx context.Context, ino int64, off, length int64, mode uint32) (Attr, error) {
	if off < 0 || length <= 0 {
		return Attr{}, errorf(syscall.EINVAL, "", "invalid range")
	}
	if mode&^(AllocKeepSize|AllocPunchHole|AllocZeroRange) != 0 || mode&AllocPunchHole != 0 && mode&(AllocKeepSize|AllocZeroRange) != AllocKeepSize {
		return Attr{}, errorf(syscall.EOPNOTSUPP, "", "fallocate mode %#x is not supported", mode)
	}
	cs, err := fs.init(ctx)
	if err != nil {
		return Attr{}, err
	}
	if err := fs.checkInodeAccess(ctx, "write", ino, "", true); err != nil {
		return Attr{}, err
	}
	var out Attr
	var ev event
	err = fs.v.tx(ctx, func(tx *txn) error {
		a, err := fs.getAttr(ctx, tx, ino)
		if err != nil {
			return err
		}
		switch {
		case a.IsDir():
			return errorf(syscall.EISDIR, "", "inode %d is a directory", ino)
		case !a.IsRegular():
			return errorf(syscall.ENODEV, "", "inode %d is not a regular file", ino)
		case a.Readonly:
			return errorf(syscall.EACCES, "", "file is readonly")
		}
		end := off + length
		if end < off {
			return errorf(syscall.EFBIG, "", "file exceeds the %s per-file limit", humanBytes(fs.v.cfg.MaxFileSize))
		}
		size, changed := a.Size, false
		if mode&(AllocPunchHole|AllocZeroRange) != 0 && off < size {
			zeros := make([]byte, min(end, size)-off)
			if _, err := fs.writeChunks(ctx, tx, ino, cs, size, zeros, off); err != nil {
				return err
			}
			changed = true
		}
		if mode&AllocKeepSize == 0 && end > size {
			if err := fs.resize(ctx, tx, ino, cs, size, end); err != nil {
				return err
			}
			size, changed = end, true
		}
		if !changed {
			out = a
			return nil
		}
		s, ns := splitTime(fs.v.cfg.Now())
		if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET sha256=NULL, data_gen=data_gen+1, mtime=?, mtime_ns=?, ctime=?, ctime_ns=? WHERE session_id=? AND ino=?`,
			s, ns, s, ns, fs.sid, ino); err != nil {
			return fmt.Errorf("allocate inode %d: %w", ino, err)
		}
		fs.changedData(tx, ino)
		ev = event{op: protocol.FileModified, ino: ino, size: size}
		if err := fs.resolveEvent(ctx, tx, &ev); err != nil {
			return err
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
