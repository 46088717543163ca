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

// Mode bits (agentfs-spec.md).
const (
	ModeType    = 0o170000
	ModeRegular = 0o100000
	ModeDir     = 0o040000
	ModeSymlink = 0o120000
	ModePerm    = 0o7777
)

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
}

// IsDir reports whether the inode is a directory.
func (a Attr) IsDir() bool { return a.Mode&ModeType == ModeDir }

// IsRegular reports whether the inode is a regular file.
func (a Attr) IsRegular() bool { return a.Mode&ModeType == ModeRegular }

// IsSymlink reports whether the inode is a symbolic link.
func (a Attr) IsSymlink() bool { return a.Mode&ModeType == ModeSymlink }

// attrCols are the columns scanAttr reads. The link count is a column kept
// by triggers on fs_dentry (migration 0010), not a count per lookup.
const attrCols = `i.ino, i.mode, i.uid, i.gid, i.size, i.atime, i.atime_ns, i.mtime, i.mtime_ns, i.ctime, i.ctime_ns, i.created_ns, i.is_readonly, i.nlink`

type scanner interface{ Scan(dest ...any) error }

func scanAttr(r scanner) (Attr, error) {
	var a Attr
	var as, ans, ms, mns, cs, cns, created, nlink int64
	var ro int
	if err := r.Scan(&a.Ino, &a.Mode, &a.UID, &a.GID, &a.Size, &as, &ans, &ms, &mns, &cs, &cns, &created, &ro, &nlink); err != nil {
		return Attr{}, err
	}
	a.Atime, a.Mtime, a.Ctime, a.Created = joinTime(as, ans), joinTime(ms, mns), joinTime(cs, cns), time.Unix(0, created)
	a.Readonly = ro != 0
	if a.Ino == RootIno && nlink == 0 {
		nlink = 1
	}
	a.Nlink = uint32(nlink)
	return a, nil
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
