package vfs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// An inode's attributes: the fs_inode row as Attr, read by number or by
// name, and the times a change moves.

// Mode bits (agentfs-spec.md, which names the first three types; the
// special files have the kernel's st_mode types too).
const (
	ModeType    = 0o170000
	ModeRegular = 0o100000
	ModeDir     = 0o040000
	ModeSymlink = 0o120000
	ModeFIFO    = 0o010000
	ModeSocket  = 0o140000
	ModeCharDev = 0o020000
	ModeBlkDev  = 0o060000
	ModePerm    = 0o7777
)

// IsSpecialType reports whether the type bits of mode are those of a
// special file: a FIFO, a socket or a device. Such an inode has no
// content; a device has a device number (Attr.Rdev).
func IsSpecialType(mode uint32) bool {
	switch mode & ModeType {
	case ModeFIFO, ModeSocket, ModeCharDev, ModeBlkDev:
		return true
	}
	return false
}

// TypeName names the type of an inode of mode, as the path API and its
// errors say it: "file", "directory", "symlink", "fifo", "socket",
// "char-device" or "block-device".
func TypeName(mode uint32) string {
	switch mode & ModeType {
	case ModeDir:
		return "directory"
	case ModeSymlink:
		return "symlink"
	case ModeFIFO:
		return "fifo"
	case ModeSocket:
		return "socket"
	case ModeCharDev:
		return "char-device"
	case ModeBlkDev:
		return "block-device"
	}
	return "file"
}

func splitTime(t time.Time) (int64, int64) { return t.Unix(), int64(t.Nanosecond()) }

func joinTime(s, ns int64) time.Time { return time.Unix(s, ns) }

// Attr is an inode's metadata.
type Attr struct {
	Ino      int64
	Mode     uint32 // type | permissions
	Nlink    uint32
	UID      uint32
	GID      uint32
	Size     int64
	Atime    time.Time
	Mtime    time.Time
	Ctime    time.Time
	Created  time.Time
	Readonly bool
	Rdev     uint32 // device number of a character or block device
}

// IsDir reports whether the inode is a directory.
func (a Attr) IsDir() bool { return a.Mode&ModeType == ModeDir }

// IsRegular reports whether the inode is a regular file.
func (a Attr) IsRegular() bool { return a.Mode&ModeType == ModeRegular }

// IsSymlink reports whether the inode is a symbolic link.
func (a Attr) IsSymlink() bool { return a.Mode&ModeType == ModeSymlink }

// IsSpecial reports whether the inode is a FIFO, a socket or a device.
func (a Attr) IsSpecial() bool { return IsSpecialType(a.Mode) }

// attrCols are the columns scanAttr reads. The link count is a column kept
// by triggers on fs_dentry (migrations 0010 and 0030), not a count per
// lookup.
const attrCols = `i.ino, i.mode, i.uid, i.gid, i.size, i.atime, i.atime_ns, i.mtime, i.mtime_ns, i.ctime, i.ctime_ns, i.created_ns, i.is_readonly, i.nlink, i.rdev`

type scanner interface{ Scan(dest ...any) error }

func scanAttr(r scanner) (Attr, error) {
	var a Attr
	var as, ans, ms, mns, cs, cns, created, nlink, rdev int64
	var ro int
	if err := r.Scan(&a.Ino, &a.Mode, &a.UID, &a.GID, &a.Size, &as, &ans, &ms, &mns, &cs, &cns, &created, &ro, &nlink, &rdev); err != nil {
		return Attr{}, err
	}
	a.Atime, a.Mtime, a.Ctime, a.Created = joinTime(as, ans), joinTime(ms, mns), joinTime(cs, cns), time.Unix(0, created)
	a.Readonly = ro != 0
	a.Rdev = uint32(rdev)
	a.Nlink = linkCount(a.Ino, a.Mode, nlink)
	return a, nil
}

// linkCount is the link count of an inode whose fs_inode.nlink is stored.
// The column counts an inode's names and, for a directory, the ".." of
// each subdirectory (migration 0030); a directory also links to itself
// (".") and the root is its own parent (".."), so a directory shows 2 plus
// its subdirectories, as POSIX has it. A directory with nothing naming it
// (removed while open) shows 0.
func linkCount(ino int64, mode uint32, stored int64) uint32 {
	switch {
	case mode&ModeType != ModeDir:
	case ino == RootIno:
		stored += 2
	case stored > 0:
		stored++
	}
	return uint32(max(stored, 0))
}

func (fs *FS) getAttr(ctx context.Context, q querier, ino int64) (Attr, error) {
	lv, layered, err := fs.levels(ctx, q)
	if err != nil {
		return Attr{}, err
	}
	var a Attr
	if layered {
		a, err = fs.getAttrLayered(ctx, q, lv, ino)
	} else {
		a, err = scanAttr(q.QueryRowContext(ctx, `SELECT `+attrCols+` FROM fs_inode i WHERE i.session_id=? AND i.ino=?`, fs.sid, ino))
	}
	if errors.Is(err, sql.ErrNoRows) {
		return Attr{}, errorf(syscall.ENOENT, "", "inode %d not found", ino)
	}
	if err != nil {
		return Attr{}, fmt.Errorf("read inode %d: %w", ino, err)
	}
	return a, nil
}

func (fs *FS) lookup(ctx context.Context, q querier, parent int64, name string) (Attr, error) {
	lv, layered, err := fs.levels(ctx, q)
	if err != nil {
		return Attr{}, err
	}
	var a Attr
	if layered {
		a, err = fs.lookupLayered(ctx, q, lv, parent, name)
	} else {
		a, err = scanAttr(q.QueryRowContext(ctx, `SELECT `+attrCols+` FROM fs_dentry d JOIN fs_inode i ON i.session_id=d.session_id AND i.ino=d.ino
		WHERE d.session_id=? AND d.parent_ino=? AND d.name=?`, fs.sid, parent, name))
	}
	if errors.Is(err, sql.ErrNoRows) {
		return Attr{}, errorf(syscall.ENOENT, name, "%s not found", name)
	}
	if err != nil {
		return Attr{}, fmt.Errorf("look up %q: %w", name, err)
	}
	return a, nil
}

// touch sets mtime and ctime of ino to now.
func (fs *FS) touch(ctx context.Context, tx *txn, ino int64, now time.Time) error {
	if err := fs.ownIno(ctx, tx, ino); err != nil {
		return err
	}
	s, ns := splitTime(now)
	_, err := tx.ExecContext(ctx, `UPDATE fs_inode SET mtime=?, mtime_ns=?, ctime=?, ctime_ns=? WHERE session_id=? AND ino=?`, s, ns, s, ns, fs.sid, ino)
	if err != nil {
		return fmt.Errorf("touch inode %d: %w", ino, err)
	}
	fs.changedAttrs(tx, ino)
	return nil
}

func (fs *FS) touchCtime(ctx context.Context, tx *txn, ino int64, now time.Time) error {
	if err := fs.ownIno(ctx, tx, ino); err != nil {
		return err
	}
	s, ns := splitTime(now)
	_, err := tx.ExecContext(ctx, `UPDATE fs_inode SET ctime=?, ctime_ns=? WHERE session_id=? AND ino=?`, s, ns, fs.sid, ino)
	if err != nil {
		return fmt.Errorf("touch inode %d: %w", ino, err)
	}
	fs.changedAttrs(tx, ino)
	return nil
}
