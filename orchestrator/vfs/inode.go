package vfs

import (
	"context"
	"database/sql"
	"fmt"
	"syscall"

	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
)

// The inode API, what the FUSE mount (orchestrator/workspace) calls: here
// lookups and listings; attributes in inode_attr.go, creating in
// inode_create.go, file content in inode_data.go, removing in
// inode_remove.go, renaming in inode_rename.go. Each change is one
// savepoint of the open batch (batch.go).

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name string
	Ino  int64
	Mode uint32
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

// GetAttr returns the attributes of ino.
func (fs *FS) GetAttr(ctx context.Context, ino int64) (Attr, error) {
	if _, err := fs.init(ctx); err != nil {
		return Attr{}, err
	}
	fs.settleIno(ctx, ino)
	return fs.getAttr(ctx, fs.v.rq, ino)
}

// Lookup returns the attributes of the entry name in directory parent. A
// name longer than paths.MaxNameLen is ENAMETOOLONG, not ENOENT: no entry
// can have it.
func (fs *FS) Lookup(ctx context.Context, parent int64, name string) (Attr, error) {
	if len(name) > paths.MaxNameLen {
		return Attr{}, paths.ValidName(name)
	}
	if _, err := fs.init(ctx); err != nil {
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
	fs.settleIno(ctx, ino) // a change of an entry touches its directory
	a, err := fs.getAttr(ctx, fs.v.rq, ino)
	if err != nil {
		return nil, err
	}
	if !a.IsDir() {
		return nil, errorf(syscall.ENOTDIR, "", "inode %d is not a directory", ino)
	}
	out, err := fs.dirEntries(ctx, ino)
	if err != nil {
		return nil, err
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

// dirEntries lists directory ino's entries (names, inodes, modes).
func (fs *FS) dirEntries(ctx context.Context, ino int64) ([]DirEntry, error) {
	lv, layered, err := fs.levels(ctx, fs.v.rq)
	if err != nil {
		return nil, err
	}
	if layered {
		kids, _, err := fs.childrenLayered(ctx, fs.v.rq, lv, ino, false)
		out := make([]DirEntry, len(kids))
		for i, c := range kids {
			out[i] = DirEntry{Name: c.name, Ino: c.attr.Ino, Mode: c.attr.Mode}
		}
		return out, err
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

// Readlink returns the target of symlink ino.
func (fs *FS) Readlink(ctx context.Context, ino int64) (string, error) {
	if _, err := fs.init(ctx); err != nil {
		return "", err
	}
	fs.settleIno(ctx, ino)
	return fs.readlink(ctx, fs.v.rq, ino)
}

func (fs *FS) readlink(ctx context.Context, q querier, ino int64) (string, error) {
	lv, layered, err := fs.levels(ctx, q)
	if err != nil {
		return "", err
	}
	var t string
	if layered {
		t, err = readlinkLayered(ctx, q, lv, ino)
	} else {
		err = q.QueryRowContext(ctx, `SELECT target FROM fs_symlink WHERE session_id=? AND ino=?`, fs.sid, ino).Scan(&t)
	}
	if err == sql.ErrNoRows {
		return "", errorf(syscall.EINVAL, "", "inode %d is not a symlink", ino)
	}
	if err != nil {
		return "", fmt.Errorf("read symlink: %w", err)
	}
	return t, nil
}

// Statfs reports the workspace as a filesystem: its size is the session
// quota, its free space what is left of it (never more than the data
// directory's filesystem has free, when Config.DataDir is set), its files
// the inodes the workspace has (a fork's through its levels).
func (fs *FS) Statfs(ctx context.Context) (Statfs, error) {
	if _, err := fs.init(ctx); err != nil {
		return Statfs{}, err
	}
	var used int64
	if err := fs.v.r.QueryRowContext(ctx, `SELECT used_bytes FROM fs_meta WHERE session_id=?`, fs.sid).Scan(&used); err != nil {
		return Statfs{}, fmt.Errorf("statfs: %w", err)
	}
	files, err := fs.inodeCount(ctx, fs.v.rq)
	if err != nil {
		return Statfs{}, fmt.Errorf("statfs: %w", err)
	}
	const bs = 4096
	quota := fs.v.cfg.SessionQuota
	free := max(quota-used, 0)
	if d := fs.v.cfg.DataDir; d != "" {
		var st syscall.Statfs_t
		if err := syscall.Statfs(d, &st); err == nil {
			free = min(free, int64(st.Bavail)*st.Bsize)
		}
	}
	return Statfs{
		Bsize: bs, Blocks: uint64(quota / bs), Bfree: uint64(free / bs), Bavail: uint64(free / bs),
		Files: uint64(max(DefaultMaxInodes, files)), Ffree: uint64(max(DefaultMaxInodes-files, 0)), NameLen: paths.MaxNameLen,
	}, nil
}

// inodeCount returns how many inodes the workspace has. A layered fork's
// count is its fork point's (counted once: a fork point never changes)
// plus its own new inodes, less the tombstones over its fork point's: so
// it costs the fork's changes, not its files.
func (fs *FS) inodeCount(ctx context.Context, q querier) (int64, error) {
	lv, layered, err := fs.levels(ctx, q)
	if err != nil {
		return 0, err
	}
	var n int64
	if !layered {
		err = q.QueryRowContext(ctx, `SELECT COUNT(*) FROM fs_inode WHERE session_id=? AND mode != 0`, fs.sid).Scan(&n)
		return n, err
	}
	base, err := fs.v.viewCount(ctx, q, lv[1:])
	if err != nil {
		return 0, err
	}
	// each own row: a new inode (+1), a tombstone over one below (-1), a
	// copy-up (0)
	b := &sqlb{args: []any{fs.sid}}
	below := `(SELECT mode FROM (` + rowUnion(b, lv[1:], "fs_inode", "i.mode", "$.ino=o.ino") + `) AS u ORDER BY lvl LIMIT 1)`
	err = q.QueryRowContext(ctx, `SELECT COALESCE(SUM(CASE WHEN o.mode != 0 AND COALESCE(`+below+`, 0) = 0 THEN 1
		WHEN o.mode = 0 AND COALESCE(`+below+`, 0) != 0 THEN -1 ELSE 0 END), 0) FROM fs_inode o WHERE o.session_id=?1`, b.args...).Scan(&n)
	return base + n, err
}

// viewCount returns how many inodes levels lv (a fork point's view) have,
// counted once per fork point.
func (v *VFS) viewCount(ctx context.Context, q querier, lv []mlevel) (int64, error) {
	key := lv[0].ws
	if c, ok := v.counts.Load(key); ok {
		return c.(int64), nil
	}
	b := &sqlb{pg: v.pg}
	var n int64
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM (`+firstBy(b.pg, "ino", "ino, mode", rowUnion(b, lv, "fs_inode", "i.ino, i.mode", "1=1"))+`) AS c WHERE mode != 0`, b.args...).Scan(&n)
	if err != nil {
		return 0, err
	}
	v.counts.Store(key, n)
	return n, nil
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
	parent, name, err := fs.firstName(ctx, q, ino)
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

// firstName returns the parent and name of ino's first name (its oldest);
// sql.ErrNoRows when it has none.
func (fs *FS) firstName(ctx context.Context, q querier, ino int64) (int64, string, error) {
	lv, layered, err := fs.levels(ctx, q)
	if err != nil {
		return 0, "", err
	}
	if layered {
		return firstNameLayered(ctx, q, lv, ino)
	}
	var parent int64
	var name string
	err = q.QueryRowContext(ctx, `SELECT parent_ino, name FROM fs_dentry WHERE session_id=? AND ino=? ORDER BY id LIMIT 1`, fs.sid, ino).Scan(&parent, &name)
	return parent, name, err
}

// walkPath is pathOf without the directory cache: one query per level.
func (fs *FS) walkPath(ctx context.Context, q querier, ino int64) (string, error) {
	var parts []string
	n := 0
	for cur := ino; cur != RootIno; {
		if len(parts) > maxDepth {
			return "", errorf(syscall.ELOOP, "", "inode %d is more than %d levels deep", ino, maxDepth)
		}
		var name string
		var err error
		cur, name, err = fs.firstName(ctx, q, cur)
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
