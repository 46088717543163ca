package vfs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
	"github.com/filepath-dev/filepath/protocol"
)

// The inode API: making files, directories, symlinks and hard links.

// Create creates a regular file name in parent with permission bits mode. If
// it exists and exclusive is false, the existing file is returned (O_CREAT
// without O_EXCL); a directory there is EISDIR.
func (fs *FS) Create(ctx context.Context, parent int64, name string, mode uint32, exclusive bool) (Attr, error) {
	if err := paths.ValidName(name); err != nil {
		return Attr{}, err
	}
	if _, err := fs.init(ctx); err != nil {
		return Attr{}, err
	}
	if err := fs.checkInodeAccess(ctx, "create", parent, name, true); err != nil {
		return Attr{}, err
	}
	var out Attr
	var ev event
	err := fs.v.tx(ctx, func(tx *txn) error {
		if a, err := fs.lookup(ctx, tx, parent, name); err == nil {
			if exclusive {
				return errorf(syscall.EEXIST, name, "%s already exists", name)
			}
			if a.IsDir() {
				return errorf(syscall.EISDIR, name, "%s is a directory", name)
			}
			out = a
			return nil
		}
		a, err := fs.mknod(ctx, tx, parent, name, ModeRegular|mode&ModePerm, "")
		if err != nil {
			return err
		}
		if err := fs.stamp(ctx, tx, a.Ino, ""); err != nil {
			return err
		}
		out = a
		ev = event{op: protocol.FileCreated, parent: parent, name: name}
		return fs.resolveEvent(ctx, tx, &ev)
	})
	if err != nil {
		return Attr{}, err
	}
	fs.notify(ev)
	return out, nil
}

// Mkdir creates directory name in parent.
func (fs *FS) Mkdir(ctx context.Context, parent int64, name string, mode uint32) (Attr, error) {
	return fs.makeNode(ctx, "mkdir", parent, name, ModeDir|mode&ModePerm, "", 0)
}

// Symlink creates a symbolic link name in parent pointing to target.
func (fs *FS) Symlink(ctx context.Context, parent int64, name, target string) (Attr, error) {
	if target == "" || len(target) > paths.MaxPathLen {
		return Attr{}, errorf(syscall.EINVAL, name, "symlink target must be 1 to %d bytes", paths.MaxPathLen)
	}
	return fs.makeNode(ctx, "symlink", parent, name, ModeSymlink|0o777, target, 0)
}

// Mknod creates the special file name in parent: a FIFO, a socket (the
// inode a bind() of a Unix socket makes; the connection is the kernel's)
// or a character or block device with device number rdev, as mode's type
// bits say, with mode's permission bits. A regular file type (or none)
// makes an empty regular file (mknod(2) allows it). Whether the caller
// may make a device (CAP_MKNOD) is the kernel's check, made before it
// asks; the path API makes no special files.
func (fs *FS) Mknod(ctx context.Context, parent int64, name string, mode, rdev uint32) (Attr, error) {
	switch mode & ModeType {
	case 0, ModeRegular:
		return fs.makeNode(ctx, "mknod", parent, name, ModeRegular|mode&ModePerm, "", 0)
	case ModeFIFO, ModeSocket:
		rdev = 0
	case ModeCharDev, ModeBlkDev:
	default:
		return Attr{}, errorf(syscall.EINVAL, name, "mknod of type %o is not supported", mode&ModeType)
	}
	return fs.makeNode(ctx, "mknod", parent, name, mode&(ModeType|ModePerm), "", rdev)
}

func (fs *FS) makeNode(ctx context.Context, op string, parent int64, name string, mode uint32, target string, rdev uint32) (Attr, error) {
	if err := paths.ValidName(name); err != nil {
		return Attr{}, err
	}
	if _, err := fs.init(ctx); err != nil {
		return Attr{}, err
	}
	if err := fs.checkInodeAccess(ctx, op, parent, name, true); err != nil {
		return Attr{}, err
	}
	var out Attr
	var ev event
	err := fs.v.tx(ctx, func(tx *txn) error {
		a, err := fs.mknodIno(ctx, tx, parent, name, 0, mode, target, rdev)
		if err != nil {
			return err
		}
		out = a
		ev = event{op: protocol.FileCreated, parent: parent, name: name, size: a.Size}
		return fs.resolveEvent(ctx, tx, &ev)
	})
	if err != nil {
		return Attr{}, err
	}
	fs.notify(ev)
	return out, nil
}

// mknod creates an inode of mode (with target for a symlink) under parent.
func (fs *FS) mknod(ctx context.Context, tx *txn, parent int64, name string, mode uint32, target string) (Attr, error) {
	return fs.mknodIno(ctx, tx, parent, name, 0, mode, target, 0)
}

// mknodIno is mknod with a reserved inode number (0: allocate one) and a
// device number (for a device; 0 otherwise).
func (fs *FS) mknodIno(ctx context.Context, tx *txn, parent int64, name string, ino int64, mode uint32, target string, rdev uint32) (Attr, error) {
	pa, err := fs.getAttr(ctx, tx, parent)
	if IsErrno(err, syscall.ENOENT) {
		return Attr{}, errorf(syscall.ENOENT, name, "parent of %s not found", name)
	}
	if err != nil {
		return Attr{}, fmt.Errorf("read parent of %s: %w", name, err)
	}
	if pa.Mode&ModeType != ModeDir {
		return Attr{}, errorf(syscall.ENOTDIR, name, "parent of %s is not a directory", name)
	}
	if removedDir(pa) {
		return Attr{}, errorf(syscall.ENOENT, name, "the directory of %s was removed", name)
	}
	now := fs.v.cfg.Now()
	var size int64
	if mode&ModeType == ModeSymlink {
		size = int64(len(target))
	}
	ino, err = fs.newInode(ctx, tx, ino, mode, fs.uid, fs.gid, size, rdev, now)
	if err != nil {
		return Attr{}, err
	}
	if err := fs.addDentry(ctx, tx, parent, name, ino); err != nil {
		return Attr{}, err
	}
	if mode&ModeType == ModeSymlink {
		if _, err := tx.ExecContext(ctx, `INSERT INTO fs_symlink(session_id, ino, target) VALUES(?,?,?)`, fs.sid, ino, target); err != nil {
			return Attr{}, fmt.Errorf("insert symlink: %w", err)
		}
	}
	if err := fs.touch(ctx, tx, parent, now); err != nil {
		return Attr{}, err
	}
	// the row just written, without reading it back
	t := time.Unix(0, now.UnixNano())
	return Attr{Ino: ino, Mode: mode, Nlink: linkCount(ino, mode, 1), UID: fs.uid, GID: fs.gid, Size: size, Atime: t, Mtime: t, Ctime: t, Created: t, Rdev: rdev}, nil
}

// Link adds the name newName in newParent for ino (a hard link). Directories
// cannot be linked (EPERM).
func (fs *FS) Link(ctx context.Context, ino, newParent int64, newName string) (Attr, error) {
	if err := paths.ValidName(newName); err != nil {
		return Attr{}, err
	}
	if _, err := fs.init(ctx); err != nil {
		return Attr{}, err
	}
	if err := fs.checkInodeAccess(ctx, "link", newParent, newName, true); err != nil {
		return Attr{}, err
	}
	var out Attr
	var ev event
	err := fs.v.tx(ctx, func(tx *txn) error {
		a, err := fs.getAttr(ctx, tx, ino)
		if err != nil {
			return err
		}
		if a.IsDir() {
			return errorf(syscall.EPERM, newName, "cannot hard-link a directory")
		}
		pa, err := fs.getAttr(ctx, tx, newParent)
		if err != nil {
			return err
		}
		if !pa.IsDir() {
			return errorf(syscall.ENOTDIR, newName, "parent of %s is not a directory", newName)
		}
		if removedDir(pa) {
			return errorf(syscall.ENOENT, newName, "the directory of %s was removed", newName)
		}
		if err := fs.addDentry(ctx, tx, newParent, newName, ino); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM fs_orphan WHERE session_id=? AND ino=?`, fs.sid, ino); err != nil {
			return fmt.Errorf("link: %w", err)
		}
		now := fs.v.cfg.Now()
		if err := fs.touch(ctx, tx, newParent, now); err != nil {
			return err
		}
		if err := fs.touchCtime(ctx, tx, ino, now); err != nil {
			return err
		}
		out, err = fs.getAttr(ctx, tx, ino)
		ev = event{op: protocol.FileCreated, parent: newParent, name: newName, size: a.Size}
		if err == nil {
			err = fs.resolveEvent(ctx, tx, &ev)
		}
		return err
	})
	if err != nil {
		return Attr{}, err
	}
	fs.notify(ev)
	return out, nil
}

// removedDir reports whether a is a directory that was removed while in
// use (an open orphan): nothing can be made in it.
func removedDir(a Attr) bool { return a.IsDir() && a.Ino != RootIno && a.Nlink == 0 }

// CreateFile creates the regular file name in parent as inode ino (a
// number from ReserveIno), owned by uid:gid, with data written at off, in
// one transaction: the FUSE mount creates a new file this way when it is
// first flushed. EEXIST when the name exists. created is when the file was
// created (the mount's CREATE, which told the kernel so): the directory's
// mtime and ctime move to it, or to now when something changed them since
// (so that others see the directory change); zero means now. It returns the
// file and the directory's new mtime.
func (fs *FS) CreateFile(ctx context.Context, parent int64, name string, mode, uid, gid uint32, ino int64, data []byte, off int64, created time.Time) (Attr, time.Time, error) {
	if err := paths.ValidName(name); err != nil {
		return Attr{}, time.Time{}, err
	}
	if ino <= RootIno {
		return Attr{}, time.Time{}, errorf(syscall.EINVAL, name, "invalid inode number %d", ino)
	}
	if off < 0 {
		return Attr{}, time.Time{}, errorf(syscall.EINVAL, name, "negative offset")
	}
	cs, err := fs.init(ctx)
	if err != nil {
		return Attr{}, time.Time{}, err
	}
	if err := fs.checkInodeAccess(ctx, "create", parent, name, true); err != nil {
		return Attr{}, time.Time{}, err
	}
	mode = ModeRegular | mode&ModePerm
	var size, gen int64
	if len(data) > 0 {
		size, gen = off+int64(len(data)), 1
		if err := fs.checkFileSize(size, name); err != nil {
			return Attr{}, time.Time{}, err
		}
	}
	now := fs.v.cfg.Now()
	t := time.Unix(0, now.UnixNano())
	s, ns := splitTime(now)
	if created.IsZero() || created.After(now) {
		created = now
	}
	ds, dns := splitTime(created)
	var ev event
	var dirMtime time.Time
	// Four statements for a new file with data: touch the parent (which
	// also checks it is a directory), insert the inode with its final
	// size, insert the name, account the bytes (and keep next_ino above
	// ino), then the chunks.
	err = fs.v.tx(ctx, func(tx *txn) error {
		var ms, mns int64
		if err := fs.ownIno(ctx, tx, parent); err != nil {
			return err
		}
		err := tx.QueryRowContext(ctx, `UPDATE fs_inode SET
			mtime    = CASE WHEN (mtime, mtime_ns) < (?1, ?2) THEN ?1 ELSE ?3 END,
			mtime_ns = CASE WHEN (mtime, mtime_ns) < (?1, ?2) THEN ?2 ELSE ?4 END,
			ctime    = CASE WHEN (ctime, ctime_ns) < (?1, ?2) THEN ?1 ELSE ?3 END,
			ctime_ns = CASE WHEN (ctime, ctime_ns) < (?1, ?2) THEN ?2 ELSE ?4 END
			WHERE session_id=?5 AND ino=?6 AND mode & 61440 = 16384 AND (ino = 1 OR nlink > 0)
			RETURNING mtime, mtime_ns`, ds, dns, s, ns, fs.sid, parent).Scan(&ms, &mns)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("touch parent of %s: %w", name, err)
		}
		dirMtime = joinTime(ms, mns)
		if errors.Is(err, sql.ErrNoRows) {
			pa, err := fs.getAttr(ctx, tx, parent)
			if err != nil || removedDir(pa) {
				return errorf(syscall.ENOENT, name, "parent of %s not found", name)
			}
			return errorf(syscall.ENOTDIR, name, "parent of %s is not a directory", name)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns, created_ns, data_gen)
			VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, fs.sid, ino, mode, uid, gid, size, s, s, s, ns, ns, ns, now.UnixNano(), gen); err != nil {
			return fmt.Errorf("insert inode: %w", err)
		}
		if err := fs.addDentry(ctx, tx, parent, name, ino); err != nil {
			return err
		}
		if err := fs.stamp(ctx, tx, ino, ""); err != nil {
			return err
		}
		var used int64
		if err := tx.QueryRowContext(ctx, `UPDATE fs_meta SET used_bytes=used_bytes+?1, next_ino=CASE WHEN next_ino > ?2 THEN next_ino ELSE ?2 END WHERE session_id=?3 RETURNING used_bytes`, size, ino+1, fs.sid).Scan(&used); err != nil {
			return fmt.Errorf("update usage: %w", err)
		}
		if size > 0 && used > fs.v.cfg.SessionQuota {
			return errorf(syscall.ENOSPC, name, "session quota of %s exceeded", humanBytes(fs.v.cfg.SessionQuota))
		}
		if size > 0 {
			if _, err := fs.writeChunks(ctx, tx, ino, cs, 0, data, off); err != nil {
				return err
			}
		}
		ev = event{op: protocol.FileCreated, parent: parent, name: name, size: size}
		return fs.resolveEvent(ctx, tx, &ev)
	})
	if err != nil {
		return Attr{}, time.Time{}, err
	}
	fs.notify(ev)
	return Attr{Ino: ino, Mode: mode, Nlink: 1, UID: uid, GID: gid, Size: size, Atime: t, Mtime: t, Ctime: t, Created: t}, dirMtime, nil
}

// CheckCreate reports whether the file name may be created in parent: a
// valid name (ENAMETOOLONG past paths.MaxNameLen) the node's policy allows
// (EACCES, logged and audited, when not). It creates nothing: the FUSE
// mount's lazy create checks at open what CreateFile would refuse only at
// the first flush.
func (fs *FS) CheckCreate(ctx context.Context, parent int64, name string) error {
	if err := paths.ValidName(name); err != nil {
		return err
	}
	if _, err := fs.init(ctx); err != nil {
		return err
	}
	return fs.checkInodeAccess(ctx, "create", parent, name, true)
}
