package vfs

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"syscall"
)

// WalkEntry is one path of a workspace with the attributes a comparison of
// working trees needs (orchestrator/changes): what git keeps of a file in
// its index, and the inode's data generation, which every write bumps.
type WalkEntry struct {
	Path   string // absolute, "/a/b"
	Ino    int64
	Mode   uint32 // type | permissions
	Size   int64
	Gen    int64 // data generation: changes with every write of the content
	Mtime  int64 // nanoseconds since the epoch
	Ctime  int64
	Target string // a symlink's target
}

// IsDir reports whether e is a directory.
func (e WalkEntry) IsDir() bool { return e.Mode&ModeType == ModeDir }

// walkInodeCols are the inode columns Walk reads.
const walkInodeCols = `ino, mode, size, data_gen, mtime*1000000000+mtime_ns, ctime*1000000000+ctime_ns`

// Walk lists every path of the workspace (every name of a hard link), in
// one read snapshot, sorted by path, in three queries whatever the number
// of files (a layered fork: three per level). skip, when set, leaves out a
// directory with everything below it (e.g. "/.git").
func (fs *FS) Walk(ctx context.Context, skip func(dir string) bool) ([]WalkEntry, error) {
	if _, err := fs.init(ctx); err != nil {
		return nil, err
	}
	tx, err := fs.v.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("walk: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	type name struct {
		name string
		ino  int64
	}
	inodes := map[int64]WalkEntry{}
	kids := map[int64][]name{}
	lv, layered, err := fs.levels(ctx, tx)
	if err != nil {
		return nil, err
	}
	if layered {
		// a layered fork or a fork point: the first level with a row wins
		t, err := loadLayered(ctx, tx, lv)
		if err != nil {
			return nil, err
		}
		for ino, a := range t.inodes {
			inodes[ino] = WalkEntry{Ino: ino, Mode: a.Mode, Size: a.Size, Gen: t.gens[ino].gen, Mtime: a.Mtime.UnixNano(), Ctime: a.Ctime.UnixNano(), Target: t.symlinks[ino]}
		}
		for k, ino := range t.names {
			kids[k.parent] = append(kids[k.parent], name{k.name, ino})
		}
	} else {
		rows, err := tx.QueryContext(ctx, `SELECT `+walkInodeCols+` FROM fs_inode WHERE session_id=?`, fs.sid)
		if err != nil {
			return nil, fmt.Errorf("walk %s: %w", fs.sid, err)
		}
		for rows.Next() {
			var e WalkEntry
			if err := rows.Scan(&e.Ino, &e.Mode, &e.Size, &e.Gen, &e.Mtime, &e.Ctime); err != nil {
				rows.Close()
				return nil, err
			}
			inodes[e.Ino] = e
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		rows, err = tx.QueryContext(ctx, `SELECT ino, target FROM fs_symlink WHERE session_id=?`, fs.sid)
		if err != nil {
			return nil, fmt.Errorf("walk %s: %w", fs.sid, err)
		}
		for rows.Next() {
			var ino int64
			var t string
			if err := rows.Scan(&ino, &t); err != nil {
				rows.Close()
				return nil, err
			}
			if e, ok := inodes[ino]; ok {
				e.Target = t
				inodes[ino] = e
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		rows, err = tx.QueryContext(ctx, `SELECT parent_ino, name, ino FROM fs_dentry WHERE session_id=?`, fs.sid)
		if err != nil {
			return nil, fmt.Errorf("walk %s: %w", fs.sid, err)
		}
		for rows.Next() {
			var parent int64
			var n name
			if err := rows.Scan(&parent, &n.name, &n.ino); err != nil {
				rows.Close()
				return nil, err
			}
			kids[parent] = append(kids[parent], n)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	var out []WalkEntry
	var walk func(dir int64, prefix string, depth int)
	walk = func(dir int64, prefix string, depth int) {
		if depth > maxWalkDepth {
			return // a cycle cannot be made; bounded all the same
		}
		for _, n := range kids[dir] {
			e, ok := inodes[n.ino]
			if !ok {
				continue
			}
			e.Path = prefix + "/" + n.name
			if e.IsDir() && skip != nil && skip(e.Path) {
				continue
			}
			out = append(out, e)
			if e.IsDir() {
				walk(n.ino, e.Path, depth+1)
			}
		}
	}
	walk(RootIno, "", 0)
	sort.Slice(out, func(i, j int) bool { return strings.Compare(out[i].Path, out[j].Path) < 0 })
	return out, nil
}

// maxWalkDepth bounds Walk's recursion (paths are at most 4096 bytes, so
// no real tree is deeper than 2048 directories).
const maxWalkDepth = 4096

// ReadInode reads the whole content of regular file ino (at most max
// bytes; a larger file is an EFBIG error). It reads in one snapshot.
func (fs *FS) ReadInode(ctx context.Context, ino, max int64) ([]byte, error) {
	a, err := fs.GetAttr(ctx, ino)
	if err != nil {
		return nil, err
	}
	if !a.IsRegular() {
		return nil, errorf(syscall.EISDIR, "", "inode %d is not a regular file", ino)
	}
	if a.Size > max {
		return nil, errorf(syscall.EFBIG, "", "inode %d has %d bytes, more than %d", ino, a.Size, max)
	}
	buf := make([]byte, a.Size)
	n := 0
	for n < len(buf) {
		m, err := fs.ReadAt(ctx, ino, buf[n:], int64(n))
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break // truncated meanwhile
		}
		n += m
	}
	return buf[:n], nil
}
