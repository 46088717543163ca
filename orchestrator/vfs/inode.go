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

// Rename flags (linux/fs.h).
const (
	RenameNoReplace = 1 << 0
	RenameExchange  = 1 << 1
)

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name string
	Ino  int64
	Mode uint32
}

// AttrChange lists the attributes SetAttr changes; nil fields stay as they are.
type AttrChange struct {
	Mode  *uint32 // permission bits only; the type is kept
	Size  *int64  // truncate or zero-extend a regular file
	Atime *time.Time
	Mtime *time.Time
	UID   *uint32
	GID   *uint32
}

// Statfs is the quota-based filesystem usage.
type Statfs struct {
	Bsize   uint32
	Blocks  uint64
	Bfree   uint64
	Bavail  uint64
	Files   uint64
	Ffree   uint64
	NameLen uint32
}

// WithOwner returns a view of fs whose new inodes get uid and gid.
func (fs *FS) WithOwner(uid, gid uint32) *FS {
	c := *fs
	c.uid, c.gid = uid, gid
	return &c
}

// GetAttr returns the attributes of ino.
func (fs *FS) GetAttr(ctx context.Context, ino int64) (Attr, error) {
	if _, err := fs.init(ctx); err != nil {
		return Attr{}, err
	}
	fs.settleIno(ctx, ino)
	return fs.getAttr(ctx, fs.v.rq, ino)
}

// Lookup returns the attributes of the entry name in directory parent.
func (fs *FS) Lookup(ctx context.Context, parent int64, name string) (Attr, error) {
	if _, err := fs.init(ctx); err != nil {
		return Attr{}, err
	}
	if err := fs.ensureDir(ctx, parent); err != nil { // a lazy fork copies it first (forklazy.go)
		return Attr{}, err
	}
	if err := fs.checkInodeAccess(ctx, "lookup", parent, name, false); err != nil {
		return Attr{}, err
	}
	fs.settleEntry(ctx, parent, name)
	a, err := fs.lookup(ctx, fs.v.rq, parent, name)
	if err == nil && fs.settleIno(ctx, a.Ino) {
		a, err = fs.lookup(ctx, fs.v.rq, parent, name)
	}
	return a, err
}

// ReadDir lists directory ino ordered by name, without "." and "..".
func (fs *FS) ReadDir(ctx context.Context, ino int64) ([]DirEntry, error) {
	if _, err := fs.init(ctx); err != nil {
		return nil, err
	}
	if err := fs.ensureDir(ctx, ino); err != nil { // a lazy fork copies it first (forklazy.go)
		return nil, err
	}
	fs.settleIno(ctx, ino) // a change of an entry touches its directory
	a, err := fs.getAttr(ctx, fs.v.rq, ino)
	if err != nil {
		return nil, err
	}
	if !a.IsDir() {
		return nil, errorf(syscall.ENOTDIR, "", "inode %d is not a directory", ino)
	}
	rows, err := fs.v.rq.QueryContext(ctx, `SELECT d.name, d.ino, i.mode FROM fs_dentry d JOIN fs_inode i ON i.session_id=d.session_id AND i.ino=d.ino
		WHERE d.session_id=? AND d.parent_ino=? ORDER BY d.name`, fs.sid, ino)
	if err != nil {
		return nil, fmt.Errorf("read directory %d: %w", ino, err)
	}
	defer rows.Close()
	var out []DirEntry
	for rows.Next() {
		var e DirEntry
		if err := rows.Scan(&e.Name, &e.Ino, &e.Mode); err != nil {
			return nil, fmt.Errorf("read directory %d: %w", ino, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read directory %d: %w", ino, err)
	}
	if fs.allowed != nil {
		dir, err := fs.pathOf(ctx, fs.v.r, ino)
		if err != nil {
			return nil, err
		}
		kept := out[:0]
		for _, e := range out {
			if fs.allowedPath(paths.Join(dir, e.Name), false) {
				kept = append(kept, e)
			}
		}
		out = kept
	}
	return out, nil
}

// DirEntryAttr is one entry of a directory listing with its inode's
// attributes (ReadDirPlus).
type DirEntryAttr struct {
	Name string
	Attr Attr
}

// ReadDirPlus lists directory ino ordered by name with each entry's
// attributes, in one query: what a FUSE READDIRPLUS answers, without a
// lookup per entry. It sees every change made before it (it commits an
// open batch of the session first).
func (fs *FS) ReadDirPlus(ctx context.Context, ino int64) ([]DirEntryAttr, error) {
	if _, err := fs.init(ctx); err != nil {
		return nil, err
	}
	if err := fs.ensureDir(ctx, ino); err != nil { // a lazy fork copies it first (forklazy.go)
		return nil, err
	}
	// a listing shows its entries' attributes: settle for any change
	fs.v.settle(ctx, fs.sid, nil)
	a, err := fs.getAttr(ctx, fs.v.rq, ino)
	if err != nil {
		return nil, err
	}
	if !a.IsDir() {
		return nil, errorf(syscall.ENOTDIR, "", "inode %d is not a directory", ino)
	}
	kids, err := fs.children(ctx, fs.v.rq, ino)
	if err != nil {
		return nil, err
	}
	var dir string
	if fs.allowed != nil {
		if dir, err = fs.pathOf(ctx, fs.v.r, ino); err != nil {
			return nil, err
		}
	}
	out := make([]DirEntryAttr, 0, len(kids))
	for _, c := range kids {
		if fs.allowed != nil && !fs.allowedPath(paths.Join(dir, c.name), false) {
			continue
		}
		out = append(out, DirEntryAttr{Name: c.name, Attr: c.attr})
	}
	return out, nil
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
	if err := fs.ensureDir(ctx, parent); err != nil { // a lazy fork copies it first (forklazy.go)
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
		if err := fs.checkNewPath(ctx, tx, parent, name); err != nil {
			return err
		}
		a, err := fs.mknod(ctx, tx, parent, name, ModeRegular|mode&ModePerm, "")
		if err != nil {
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
	return fs.makeNode(ctx, "mkdir", parent, name, ModeDir|mode&ModePerm, "")
}

// Symlink creates a symbolic link name in parent pointing to target.
func (fs *FS) Symlink(ctx context.Context, parent int64, name, target string) (Attr, error) {
	if target == "" || len(target) > paths.MaxPathLen {
		return Attr{}, errorf(syscall.EINVAL, name, "symlink target must be 1 to %d bytes", paths.MaxPathLen)
	}
	return fs.makeNode(ctx, "symlink", parent, name, ModeSymlink|0o777, target)
}

func (fs *FS) makeNode(ctx context.Context, op string, parent int64, name string, mode uint32, target string) (Attr, error) {
	if err := paths.ValidName(name); err != nil {
		return Attr{}, err
	}
	if _, err := fs.init(ctx); err != nil {
		return Attr{}, err
	}
	if err := fs.ensureDir(ctx, parent); err != nil { // a lazy fork copies it first (forklazy.go)
		return Attr{}, err
	}
	if err := fs.checkInodeAccess(ctx, op, parent, name, true); err != nil {
		return Attr{}, err
	}
	var out Attr
	var ev event
	err := fs.v.tx(ctx, func(tx *txn) error {
		if err := fs.checkNewPath(ctx, tx, parent, name); err != nil {
			return err
		}
		a, err := fs.mknod(ctx, tx, parent, name, mode, target)
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
	return fs.mknodIno(ctx, tx, parent, name, 0, mode, target)
}

// mknodIno is mknod with a reserved inode number (0: allocate one).
func (fs *FS) mknodIno(ctx context.Context, tx *txn, parent int64, name string, ino int64, mode uint32, target string) (Attr, error) {
	var pmode uint32
	if err := tx.QueryRowContext(ctx, `SELECT mode FROM fs_inode WHERE session_id=? AND ino=?`, fs.sid, parent).Scan(&pmode); err != nil {
		if err == sql.ErrNoRows {
			return Attr{}, errorf(syscall.ENOENT, name, "parent of %s not found", name)
		}
		return Attr{}, fmt.Errorf("read parent of %s: %w", name, err)
	}
	if pmode&ModeType != ModeDir {
		return Attr{}, errorf(syscall.ENOTDIR, name, "parent of %s is not a directory", name)
	}
	now := fs.v.cfg.Now()
	var size int64
	if mode&ModeType == ModeSymlink {
		size = int64(len(target))
	}
	ino, err := fs.newInode(ctx, tx, ino, mode, fs.uid, fs.gid, size, now)
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
	return Attr{Ino: ino, Mode: mode, Nlink: 1, UID: fs.uid, GID: fs.gid, Size: size, Atime: t, Mtime: t, Ctime: t, Created: t}, nil
}

// Readlink returns the target of symlink ino.
func (fs *FS) Readlink(ctx context.Context, ino int64) (string, error) {
	if _, err := fs.init(ctx); err != nil {
		return "", err
	}
	fs.settleIno(ctx, ino)
	return fs.readlink(ctx, fs.v.rq, ino)
}

func (fs *FS) readlink(ctx context.Context, q querier, ino int64) (string, error) {
	var t string
	err := q.QueryRowContext(ctx, `SELECT target FROM fs_symlink WHERE session_id=? AND ino=?`, fs.sid, ino).Scan(&t)
	if err == sql.ErrNoRows {
		return "", errorf(syscall.EINVAL, "", "inode %d is not a symlink", ino)
	}
	if err != nil {
		return "", fmt.Errorf("read symlink: %w", err)
	}
	return t, nil
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
	if err := fs.ensureDir(ctx, newParent); err != nil { // a lazy fork copies it first (forklazy.go)
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
		if err := fs.checkNewPath(ctx, tx, newParent, newName); err != nil {
			return err
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
	if err := fs.ensureDir(ctx, parent); err != nil { // a lazy fork copies it first (forklazy.go)
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
	if tx, ok := q.(*txn); ok {
		if err := fs.ensureDirTx(ctx, tx, ino); err != nil { // a lazy fork's names may be in its base
			return err
		}
	} else if err := fs.ensureDir(ctx, ino); err != nil {
		return err
	}
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM fs_dentry WHERE session_id=? AND parent_ino=? LIMIT 1)`, fs.sid, ino).Scan(&n); err != nil {
		return fmt.Errorf("check empty: %w", err)
	}
	if n > 0 {
		return errorf(syscall.ENOTEMPTY, name, "directory %s is not empty", name)
	}
	return nil
}

func (fs *FS) unlinkEntry(ctx context.Context, tx *txn, parent int64, name string, ino int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM fs_dentry WHERE session_id=? AND parent_ino=? AND name=?`, fs.sid, parent, name); err != nil {
		return fmt.Errorf("delete dentry %q: %w", name, err)
	}
	fs.changedEntry(tx, parent, name)
	if err := fs.touchCtime(ctx, tx, ino, fs.v.cfg.Now()); err != nil {
		return err
	}
	return fs.removeInodeIfUnlinked(ctx, tx, ino)
}

// isAncestor reports whether dir is anc or lies below anc.
func (fs *FS) isAncestor(ctx context.Context, q querier, anc, dir int64) (bool, error) {
	for i := 0; i < paths.MaxPathLen; i++ {
		if dir == anc {
			return true, nil
		}
		if dir == RootIno {
			return false, nil
		}
		if err := q.QueryRowContext(ctx, `SELECT parent_ino FROM fs_dentry WHERE session_id=? AND ino=? ORDER BY id LIMIT 1`, fs.sid, dir).Scan(&dir); err != nil {
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
	if err := fs.ensureDir(ctx, oldParent); err != nil { // a lazy fork copies it first (forklazy.go)
		return err
	}
	if err := fs.ensureDir(ctx, newParent); err != nil { // a lazy fork copies it first (forklazy.go)
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
	if err := fs.checkRenamedPath(ctx, tx, src, oldParent, oldName, newParent, newName); err != nil {
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
		if err := fs.checkRenamedPath(ctx, tx, dst, newParent, newName, oldParent, oldName); err != nil {
			return nil, err
		}
		fs.forgetDirPaths(tx)
		tx.onCommit(func() { fs.forgetDirPaths(nil) })
		for _, u := range []struct {
			parent int64
			name   string
			ino    int64
		}{{oldParent, oldName, dst.Ino}, {newParent, newName, src.Ino}} {
			if _, err := tx.ExecContext(ctx, `UPDATE fs_dentry SET ino=? WHERE session_id=? AND parent_ino=? AND name=?`, u.ino, fs.sid, u.parent, u.name); err != nil {
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
	if _, err := tx.ExecContext(ctx, `UPDATE fs_dentry SET parent_ino=?, name=? WHERE session_id=? AND parent_ino=? AND name=?`,
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

// checkRenamedPath refuses moving a (oldParent/oldName) to newParent/newName
// when its new path, or for a directory a path below it, would be longer
// than paths.MaxPathLen.
func (fs *FS) checkRenamedPath(ctx context.Context, tx *txn, a Attr, oldParent int64, oldName string, newParent int64, newName string) error {
	if err := fs.checkNewPath(ctx, tx, newParent, newName); err != nil || !a.IsDir() {
		return err
	}
	op, err := fs.dirInfo(ctx, tx, oldParent)
	if err != nil {
		return err
	}
	np, err := fs.dirInfo(ctx, tx, newParent)
	if err != nil {
		return err
	}
	return fs.checkMovedTree(ctx, tx, a.Ino, childLen(op.plen, oldName), childLen(np.plen, newName), newName)
}

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
		if err := tx.QueryRowContext(ctx, `SELECT mode, size, is_readonly FROM fs_inode WHERE session_id=? AND ino=?`, fs.sid, ino).Scan(&mode, &size, &ro); err != nil {
			if err == sql.ErrNoRows {
				return errorf(syscall.ENOENT, "", "inode %d not found", ino)
			}
			return fmt.Errorf("read inode %d: %w", ino, err)
		}
		if mode&ModeType != ModeRegular {
			return errorf(syscall.EISDIR, "", "inode %d is not a regular file", ino)
		}
		if ro != 0 {
			return errorf(syscall.EACCES, "", "file is readonly")
		}
		newSize, err := fs.writeData(ctx, tx, ino, cs, size, p, off, fs.v.cfg.Now())
		if err != nil {
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
	if err := fs.ensureDir(ctx, parent); err != nil { // a lazy fork copies it first (forklazy.go)
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
		err := tx.QueryRowContext(ctx, `UPDATE fs_inode SET
			mtime    = CASE WHEN (mtime, mtime_ns) < (?1, ?2) THEN ?1 ELSE ?3 END,
			mtime_ns = CASE WHEN (mtime, mtime_ns) < (?1, ?2) THEN ?2 ELSE ?4 END,
			ctime    = CASE WHEN (ctime, ctime_ns) < (?1, ?2) THEN ?1 ELSE ?3 END,
			ctime_ns = CASE WHEN (ctime, ctime_ns) < (?1, ?2) THEN ?2 ELSE ?4 END
			WHERE session_id=?5 AND ino=?6 AND mode & 61440 = 16384
			RETURNING mtime, mtime_ns`, ds, dns, s, ns, fs.sid, parent).Scan(&ms, &mns)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("touch parent of %s: %w", name, err)
		}
		dirMtime = joinTime(ms, mns)
		if errors.Is(err, sql.ErrNoRows) {
			if _, err := fs.getAttr(ctx, tx, parent); err != nil {
				return errorf(syscall.ENOENT, name, "parent of %s not found", name)
			}
			return errorf(syscall.ENOTDIR, name, "parent of %s is not a directory", name)
		}
		if err := fs.checkNewPath(ctx, tx, parent, name); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns, created_ns, data_gen)
			VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, fs.sid, ino, mode, uid, gid, size, s, s, s, ns, ns, ns, now.UnixNano(), gen); err != nil {
			return fmt.Errorf("insert inode: %w", err)
		}
		if err := fs.addDentry(ctx, tx, parent, name, ino); err != nil {
			return err
		}
		var used int64
		if err := tx.QueryRowContext(ctx, `UPDATE fs_meta SET used_bytes=used_bytes+?, next_ino=MAX(next_ino, ?) WHERE session_id=? RETURNING used_bytes`, size, ino+1, fs.sid).Scan(&used); err != nil {
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

// Fsync commits the open batch, which holds every change made before it
// (also of ino), with a full sync.
func (fs *FS) Fsync(ctx context.Context, ino int64) error { return fs.v.Sync(ctx, true) }

// Statfs reports the quota as the filesystem size.
func (fs *FS) Statfs(ctx context.Context) (Statfs, error) {
	if _, err := fs.init(ctx); err != nil {
		return Statfs{}, err
	}
	var used, files int64
	if err := fs.v.r.QueryRowContext(ctx, `SELECT used_bytes, (SELECT COUNT(*) FROM fs_inode WHERE session_id=?) FROM fs_meta WHERE session_id=?`, fs.sid, fs.sid).Scan(&used, &files); err != nil {
		return Statfs{}, fmt.Errorf("statfs: %w", err)
	}
	const bs = 4096
	quota := fs.v.cfg.SessionQuota
	free := max(quota-used, 0)
	return Statfs{
		Bsize: bs, Blocks: uint64(quota / bs), Bfree: uint64(free / bs), Bavail: uint64(free / bs),
		Files: uint64(DefaultMaxInodes), Ffree: uint64(max(DefaultMaxInodes-files, 0)), NameLen: paths.MaxNameLen,
	}, nil
}

// PathOf returns a path of ino (its first name when it has hard links).
func (fs *FS) PathOf(ctx context.Context, ino int64) (string, error) {
	if _, err := fs.init(ctx); err != nil {
		return "", err
	}
	return fs.pathOf(ctx, fs.v.r, ino)
}

// pathOf returns the path of ino (its first name), from the directory
// cache when its directory is there.
func (fs *FS) pathOf(ctx context.Context, q querier, ino int64) (string, error) {
	if ino == RootIno {
		return "/", nil
	}
	var parent int64
	var name string
	err := q.QueryRowContext(ctx, `SELECT parent_ino, name FROM fs_dentry WHERE session_id=? AND ino=? ORDER BY id LIMIT 1`, fs.sid, ino).Scan(&parent, &name)
	if err == sql.ErrNoRows {
		return "", errorf(syscall.ENOENT, "", "inode %d has no name", ino)
	}
	if err != nil {
		return "", fmt.Errorf("path of inode %d: %w", ino, err)
	}
	dir, err := fs.dirPath(ctx, q, parent)
	if err != nil {
		return "", err
	}
	return paths.Join(dir, name), nil
}

// walkPath is pathOf without the directory cache: one query per level.
func (fs *FS) walkPath(ctx context.Context, q querier, ino int64) (string, error) {
	var parts []string
	n := 0
	for cur := ino; cur != RootIno; {
		if len(parts) > paths.MaxPathLen/2 {
			return "", errorf(syscall.ENAMETOOLONG, "", "the path of inode %d is longer than %d bytes", ino, paths.MaxPathLen)
		}
		var name string
		err := q.QueryRowContext(ctx, `SELECT parent_ino, name FROM fs_dentry WHERE session_id=? AND ino=? ORDER BY id LIMIT 1`, fs.sid, cur).Scan(&cur, &name)
		if err == sql.ErrNoRows {
			return "", errorf(syscall.ENOENT, "", "inode %d has no name", ino)
		}
		if err != nil {
			return "", fmt.Errorf("path of inode %d: %w", ino, err)
		}
		parts = append(parts, name)
		n += 1 + len(name)
	}
	if len(parts) == 0 {
		return "/", nil
	}
	b := make([]byte, 0, n)
	for i := len(parts) - 1; i >= 0; i-- {
		b = append(b, '/')
		b = append(b, parts[i]...)
	}
	return string(b), nil
}

// CheckCreate reports whether the file name may be created in parent: a
// valid name the node's policy allows (EACCES, logged and audited, when
// not), with a path within paths.MaxPathLen (ENAMETOOLONG). It creates nothing:
// the FUSE mount's lazy create checks at open what CreateFile would refuse
// only at the first flush.
func (fs *FS) CheckCreate(ctx context.Context, parent int64, name string) error {
	if err := paths.ValidName(name); err != nil {
		return err
	}
	if _, err := fs.init(ctx); err != nil {
		return err
	}
	if err := fs.ensureDir(ctx, parent); err != nil { // a lazy fork copies it first (forklazy.go)
		return err
	}
	if err := fs.checkNewPath(ctx, fs.v.r, parent, name); err != nil {
		return err
	}
	return fs.checkInodeAccess(ctx, "create", parent, name, true)
}
