package vfs

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
	"github.com/filepath-dev/filepath/protocol"
	"golang.org/x/sys/unix"
)

// FileInfo describes a file or directory for the path-level API (and REST).
type FileInfo struct {
	Path      string `json:"path"`
	Name      string `json:"name"`
	Ino       int64  `json:"-"`
	IsDir     bool   `json:"is_directory"`
	IsSymlink bool   `json:"is_symlink,omitempty"`
	// Type is what the entry is (TypeName): "file", "directory",
	// "symlink", or a special file made through a mount: "fifo",
	// "socket", "char-device", "block-device". Only a file has content.
	Type string `json:"type" jsonschema:"enum=file,enum=directory,enum=symlink,enum=fifo,enum=socket,enum=char-device,enum=block-device"`
	// Device is a device's number as "major:minor".
	Device   string `json:"device,omitempty"`
	Target   string `json:"target,omitempty"`
	Readonly bool   `json:"is_readonly"`
	Size     int64  `json:"size_bytes"`
	Mode     uint32 `json:"mode"`
	Hash     string `json:"hash,omitempty"`
	// Gen is the content's generation (fs_inode.data_gen): every write of
	// the content moves it, so a cache keyed by inode checks it.
	Gen       int64     `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func infoOf(p, name string, a Attr) FileInfo {
	info := FileInfo{
		Path: p, Name: name, Ino: a.Ino, IsDir: a.IsDir(), IsSymlink: a.IsSymlink(), Type: TypeName(a.Mode), Readonly: a.Readonly,
		Size: a.Size, Mode: a.Mode, CreatedAt: a.Created.UTC(), UpdatedAt: a.Mtime.UTC(),
	}
	if t := a.Mode & ModeType; t == ModeCharDev || t == ModeBlkDev {
		info.Device = fmt.Sprintf("%d:%d", unix.Major(uint64(a.Rdev)), unix.Minor(uint64(a.Rdev)))
	}
	return info
}

// notContent refuses reading or writing the special file p as a file: it
// has no content the path API could give (a FIFO or a socket connects
// programs on one machine; a device is the kernel's).
func notContent(p string, a Attr) error {
	return errorf(syscall.EINVAL, p, "%s is a %s, not a regular file: it has no content to read or write", p, TypeName(a.Mode)).WithCode(orchestrator.EConflict)
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

// cleanFor validates p and checks the node policy for op.
func (fs *FS) cleanFor(ctx context.Context, op, p string, write bool) (string, error) {
	c, err := paths.CleanPath(p)
	if err != nil {
		return "", err
	}
	if err := fs.checkPath(ctx, op, c, write); err != nil {
		return "", err
	}
	return c, nil
}

// notFound is ENOENT naming the path the caller asked for.
func notFound(p string) error { return errorf(syscall.ENOENT, p, "%s not found", p) }

// Stat returns the metadata of p (symlinks followed), with the content hash of a file.
func (fs *FS) Stat(ctx context.Context, p string) (FileInfo, error) {
	p, r, err := fs.resolveExisting(ctx, p)
	if err != nil {
		return FileInfo{}, err
	}
	if err := fs.checkPath(ctx, "stat", r.path, false); err != nil {
		return FileInfo{}, err
	}
	info := infoOf(p, baseName(p), r.attr)
	if r.attr.IsRegular() {
		if info.Hash, info.Gen, err = fs.hashOf(ctx, r.attr.Ino); err != nil {
			return FileInfo{}, err
		}
	}
	return info, nil
}

// hashOf returns the sha256 of a file's content and its generation,
// computing and caching the hash when an inode-level write has cleared it.
func (fs *FS) hashOf(ctx context.Context, ino int64) (string, int64, error) {
	h, gen, err := fs.storedHash(ctx, ino)
	if err != nil {
		return "", 0, err
	}
	if h.Valid {
		return h.String, gen, nil
	}
	sum, err := fs.computeHash(ctx, fs.v.r, ino)
	if err != nil {
		return "", 0, err
	}
	// cache only if no write happened meanwhile
	if _, err := fs.v.db.ExecContext(ctx, `UPDATE fs_inode SET sha256=? WHERE session_id=? AND ino=? AND data_gen=? AND sha256 IS NULL`, sum, fs.sid, ino, gen); err != nil {
		return "", 0, fmt.Errorf("cache hash: %w", err)
	}
	return sum, gen, nil
}

// storedHash reads the hash stored for ino (not valid when a write cleared
// it) and its generation.
func (fs *FS) storedHash(ctx context.Context, ino int64) (sql.NullString, int64, error) {
	var h sql.NullString
	var gen int64
	q, args := `SELECT sha256, data_gen FROM fs_inode WHERE session_id=? AND ino=?`, []any{fs.sid, ino}
	if lv, layered, err := fs.levels(ctx, fs.v.r); err != nil {
		return h, 0, err
	} else if layered {
		b := &sqlb{args: []any{ino}}
		q, args = `SELECT sha256, data_gen FROM (`+rowUnion(b, lv, "fs_inode", "i.sha256, i.data_gen, i.mode", "$.ino=?1")+`) AS u WHERE mode != 0 ORDER BY lvl LIMIT 1`, b.args
	}
	if err := fs.v.r.QueryRowContext(ctx, q, args...).Scan(&h, &gen); err != nil {
		if err == sql.ErrNoRows {
			return h, 0, errorf(syscall.ENOENT, "", "inode %d not found", ino)
		}
		return h, 0, fmt.Errorf("read hash: %w", err)
	}
	return h, gen, nil
}

func (fs *FS) computeHash(ctx context.Context, q querier, ino int64) (string, error) {
	if fork, err := fs.isFork(ctx, q); err != nil {
		return "", err
	} else if fork {
		return fs.computeHashFork(ctx, q, ino)
	}
	h := sha256.New()
	rows, err := q.QueryContext(ctx, `SELECT data FROM fs_data WHERE session_id=? AND ino=? ORDER BY "offset"`, fs.sid, ino)
	if err != nil {
		return "", fmt.Errorf("hash inode %d: %w", ino, err)
	}
	defer rows.Close()
	for rows.Next() {
		var b sql.RawBytes
		if err := rows.Scan(&b); err != nil {
			return "", fmt.Errorf("hash inode %d: %w", ino, err)
		}
		h.Write(b)
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("hash inode %d: %w", ino, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ReadFile opens file p for streaming. The reader reads committed chunks as
// it goes (a concurrent write may be seen part-way); FileInfo.Hash is the
// hash at open time.
func (fs *FS) ReadFile(ctx context.Context, p string) (FileInfo, io.Reader, error) {
	info, err := fs.Stat(ctx, p)
	if err != nil {
		return FileInfo{}, nil, err
	}
	if info.IsDir {
		return FileInfo{}, nil, errorf(syscall.EISDIR, p, "%s is a directory", info.Path)
	}
	if info.Type != "file" {
		return FileInfo{}, nil, notContent(info.Path, Attr{Mode: info.Mode})
	}
	cs, err := fs.init(ctx)
	if err != nil {
		return FileInfo{}, nil, err
	}
	return info, &fileReader{ctx: ctx, fs: fs, ino: info.Ino, size: info.Size, cs: cs}, nil
}

// ReadAll reads the whole file p.
func (fs *FS) ReadAll(ctx context.Context, p string) (FileInfo, []byte, error) {
	info, r, err := fs.ReadFile(ctx, p)
	if err != nil {
		return FileInfo{}, nil, err
	}
	b := make([]byte, 0, info.Size)
	b, err = readAllInto(b, r)
	return info, b, err
}

func readAllInto(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

type fileReader struct {
	ctx  context.Context
	fs   *FS
	ino  int64
	size int64
	off  int64
	cs   int
}

func (r *fileReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.size-r.off, 1<<20))
	if err := r.fs.readChunks(r.ctx, r.fs.v.r, r.ino, r.cs, p[:n], r.off); err != nil {
		return 0, err
	}
	r.off += int64(n)
	return n, nil
}

// List returns the entries of directory p (symlinks in p are not followed).
func (fs *FS) List(ctx context.Context, p string) ([]FileInfo, error) {
	p, err := fs.cleanFor(ctx, "list", p, false)
	if err != nil {
		return nil, err
	}
	if _, err := fs.init(ctx); err != nil {
		return nil, err
	}
	r, err := fs.resolveRead(ctx, p, true)
	if err != nil {
		return nil, err
	}
	if !r.exists {
		return nil, notFound(p)
	}
	if !r.attr.IsDir() {
		return nil, errorf(syscall.ENOTDIR, p, "%s is not a directory", p)
	}
	if lv, layered, err := fs.levels(ctx, fs.v.r); err != nil {
		return nil, err
	} else if layered {
		kids, targets, err := fs.childrenLayered(ctx, fs.v.r, lv, r.attr.Ino, true)
		if err != nil {
			return nil, err
		}
		out := []FileInfo{}
		for i, c := range kids {
			if !fs.allowedPath(paths.Join(r.path, c.name), false) {
				continue
			}
			info := infoOf(paths.Join(p, c.name), c.name, c.attr)
			info.Target = targets[i]
			out = append(out, info)
		}
		return out, nil
	}
	rows, err := fs.v.r.QueryContext(ctx, `SELECT d.name, `+attrCols+`, COALESCE(s.target, '') FROM fs_dentry d
		JOIN fs_inode i ON i.session_id=d.session_id AND i.ino=d.ino
		LEFT JOIN fs_symlink s ON s.session_id=i.session_id AND s.ino=i.ino
		WHERE d.session_id=? AND d.parent_ino=? ORDER BY d.name`, fs.sid, r.attr.Ino)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p, err)
	}
	defer rows.Close()
	out := []FileInfo{}
	for rows.Next() {
		var name, target string
		var a Attr
		a, err := scanAttr(scanFunc(func(dest ...any) error {
			return rows.Scan(append(append([]any{&name}, dest...), &target)...)
		}))
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", p, err)
		}
		cp := paths.Join(p, name)
		if !fs.allowedPath(paths.Join(r.path, name), false) {
			continue
		}
		info := infoOf(cp, name, a)
		info.Target = target
		out = append(out, info)
	}
	return out, rows.Err()
}

type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// WriteMode says whether WriteFile may create, update or both.
type WriteMode int

// Write modes.
const (
	WriteUpsert WriteMode = iota // create or replace
	WriteCreate                  // fail with conflict when it exists
	WriteUpdate                  // fail with not_found when it is missing
)

// WriteOptions tune WriteFile.
type WriteOptions struct {
	Mode      WriteMode
	IfMatch   string // expected sha256 of the current content ("" = no check)
	Readonly  *bool  // set the readonly flag
	NoContent bool   // change only the flags, keep the content
	Perm      uint32 // permission bits of a new file (0: 0644)
	// Mtime is the written file's modification time (zero: now).
	Mtime time.Time
}

// WriteFile creates or replaces file p with data in one transaction, creating
// missing parent directories (except in WriteUpdate mode). Limits are checked
// before anything is written; on any error nothing changes.
func (fs *FS) WriteFile(ctx context.Context, p string, data []byte, opt WriteOptions) (FileInfo, bool, error) {
	p, err := fs.cleanFor(ctx, "write", p, true)
	if err != nil {
		return FileInfo{}, false, err
	}
	if err := fs.checkFileSize(int64(len(data)), p); err != nil {
		return FileInfo{}, false, err
	}
	cs, err := fs.init(ctx)
	if err != nil {
		return FileInfo{}, false, err
	}
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	var evs []event
	var ino int64
	created := false
	err = fs.v.tx(ctx, func(tx *txn) error {
		var mk *[]event
		if opt.Mode != WriteUpdate {
			mk = &evs
		}
		r, err := fs.resolve(ctx, tx, p, true, mk)
		if err != nil {
			return err
		}
		if err := fs.checkPathTx("write", r.path, true); err != nil {
			return err
		}
		if !r.exists {
			if opt.Mode == WriteUpdate {
				return notFound(p)
			}
			if opt.IfMatch != "" {
				return preconditionFailed(p)
			}
			perm := opt.Perm
			if perm == 0 {
				perm = 0o644
			}
			a, err := fs.mknod(ctx, tx, r.parent, r.name, ModeRegular|perm&ModePerm, "")
			if err != nil {
				return err
			}
			r.attr, created = a, true
		} else {
			if r.attr.IsDir() {
				return errorf(syscall.EISDIR, p, "%s is a directory", p).WithCode(orchestrator.EConflict)
			}
			if opt.Mode == WriteCreate {
				return errorf(syscall.EEXIST, p, "%s already exists", p)
			}
			if r.attr.IsSpecial() && !opt.NoContent {
				return notContent(p, r.attr)
			}
			if opt.IfMatch != "" {
				cur, err := fs.computeHash(ctx, tx, r.attr.Ino)
				if err != nil {
					return err
				}
				if cur != opt.IfMatch {
					return preconditionFailed(p)
				}
			}
			if r.attr.Readonly && !opt.NoContent && (opt.Readonly == nil || *opt.Readonly) {
				return errorf(syscall.EACCES, p, "%s is readonly", p)
			}
		}
		ino = r.attr.Ino
		if err := fs.ownIno(ctx, tx, ino); err != nil {
			return err
		}
		if !opt.NoContent {
			if _, err := tx.ExecContext(ctx, `DELETE FROM fs_data WHERE session_id=? AND ino=?`, fs.sid, ino); err != nil {
				return fmt.Errorf("write %s: %w", p, err)
			}
			if err := fs.addUsage(ctx, tx, int64(len(data))-r.attr.Size); err != nil {
				return err
			}
			if _, err := fs.writeChunks(ctx, tx, ino, cs, 0, data, 0); err != nil {
				return err
			}
			now := fs.v.cfg.Now()
			mt := now
			if !opt.Mtime.IsZero() {
				mt = opt.Mtime
			}
			s, ns := splitTime(now)
			ms, mns := splitTime(mt)
			if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET size=?, sha256=?, data_gen=data_gen+1, mtime=?, mtime_ns=?, ctime=?, ctime_ns=? WHERE session_id=? AND ino=?`,
				len(data), hexSum, ms, mns, s, ns, fs.sid, ino); err != nil {
				return fmt.Errorf("write %s: %w", p, err)
			}
			fs.changedData(tx, ino)
			if err := fs.stamp(ctx, tx, ino, ""); err != nil {
				return err
			}
			op := protocol.FileModified
			if created {
				op = protocol.FileCreated
			}
			evs = append(evs, event{op: op, path: r.path, size: int64(len(data))})
		}
		if opt.Readonly != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET is_readonly=? WHERE session_id=? AND ino=?`, *opt.Readonly, fs.sid, ino); err != nil {
				return fmt.Errorf("set readonly on %s: %w", p, err)
			}
			fs.changedAttrs(tx, ino)
		}
		return nil
	})
	if err != nil {
		return FileInfo{}, false, err
	}
	fs.notifyAll(evs)
	info, err := fs.Stat(ctx, p)
	return info, created, err
}

func preconditionFailed(p string) error {
	return errorf(syscall.EINVAL, p, "%s has changed: its hash does not match If-Match", p).WithCode(orchestrator.EPreconditionFailed)
}

func (fs *FS) notifyAll(evs []event) {
	for _, ev := range evs {
		fs.notify(ev)
	}
}

// MkdirAll creates directory p and its parents. With exclusive, an existing p
// is a conflict; otherwise an existing directory is returned (created=false).
func (fs *FS) MkdirAll(ctx context.Context, p string, exclusive bool) (FileInfo, bool, error) {
	p, err := fs.cleanFor(ctx, "mkdir", p, true)
	if err != nil {
		return FileInfo{}, false, err
	}
	if _, err := fs.init(ctx); err != nil {
		return FileInfo{}, false, err
	}
	var evs []event
	created := false
	err = fs.v.tx(ctx, func(tx *txn) error {
		r, err := fs.resolve(ctx, tx, p, true, &evs)
		if err != nil {
			return err
		}
		if r.exists {
			if exclusive || !r.attr.IsDir() {
				return errorf(syscall.EEXIST, p, "%s already exists", p)
			}
			return nil
		}
		if err := fs.checkPathTx("mkdir", r.path, true); err != nil {
			return err
		}
		if _, err := fs.mknod(ctx, tx, r.parent, r.name, ModeDir|0o755, ""); err != nil {
			return err
		}
		created = true
		evs = append(evs, event{op: protocol.FileCreated, path: r.path})
		return nil
	})
	if err != nil {
		return FileInfo{}, false, err
	}
	fs.notifyAll(evs)
	info, err := fs.Stat(ctx, p)
	return info, created, err
}

// Delete removes p (a symlink itself, not its target). A non-empty directory
// needs recursive.
func (fs *FS) Delete(ctx context.Context, p string, recursive bool) error {
	p, err := fs.cleanFor(ctx, "delete", p, true)
	if err != nil {
		return err
	}
	if p == "/" {
		return errorf(syscall.EPERM, p, "cannot delete the root directory")
	}
	if _, err := fs.init(ctx); err != nil {
		return err
	}
	var evs []event
	err = fs.v.tx(ctx, func(tx *txn) error {
		r, err := fs.resolve(ctx, tx, p, false, nil)
		if err != nil {
			return err
		}
		if !r.exists {
			return notFound(p)
		}
		if r.attr.IsDir() && !recursive {
			if err := fs.checkEmpty(ctx, tx, r.attr.Ino, p); err != nil {
				return errorf(syscall.ENOTEMPTY, p, "directory not empty; use ?recursive=true")
			}
		}
		// One event: a deleted directory's stands for everything in it.
		evs = append(evs, event{op: protocol.FileDeleted, path: r.path})
		if err := fs.deleteTree(ctx, tx, r.parent, r.name, r.attr); err != nil {
			return err
		}
		return fs.touch(ctx, tx, r.parent, fs.v.cfg.Now())
	})
	if err != nil {
		return err
	}
	fs.notifyAll(evs)
	return nil
}

// deleteTree removes the entry name of parent (inode a) and, for a
// directory, everything below it: a few statements per entry, no paths.
func (fs *FS) deleteTree(ctx context.Context, tx *txn, parent int64, name string, a Attr) error {
	if a.IsDir() {
		kids, err := fs.children(ctx, tx, a.Ino)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := fs.deleteTree(ctx, tx, a.Ino, k.name, k.attr); err != nil {
				return err
			}
		}
	}
	return fs.unlinkEntry(ctx, tx, parent, name, a.Ino)
}

type child struct {
	name string
	attr Attr
}

func (fs *FS) children(ctx context.Context, q querier, dir int64) ([]child, error) {
	lv, layered, err := fs.levels(ctx, q)
	if err != nil {
		return nil, err
	}
	if layered {
		kids, _, err := fs.childrenLayered(ctx, q, lv, dir, false)
		return kids, err
	}
	rows, err := q.QueryContext(ctx, `SELECT d.name, `+attrCols+` FROM fs_dentry d JOIN fs_inode i ON i.session_id=d.session_id AND i.ino=d.ino
		WHERE d.session_id=? AND d.parent_ino=? ORDER BY d.name`, fs.sid, dir)
	if err != nil {
		return nil, fmt.Errorf("list directory %d: %w", dir, err)
	}
	defer rows.Close()
	var out []child
	for rows.Next() {
		var c child
		a, err := scanAttr(scanFunc(func(dest ...any) error { return rows.Scan(append([]any{&c.name}, dest...)...) }))
		if err != nil {
			return nil, fmt.Errorf("list directory %d: %w", dir, err)
		}
		c.attr = a
		out = append(out, c)
	}
	return out, rows.Err()
}

// Move renames src to dst (parents of dst created); dst must not exist.
func (fs *FS) Move(ctx context.Context, src, dst string) (FileInfo, error) {
	src, err := fs.cleanFor(ctx, "move", src, true)
	if err != nil {
		return FileInfo{}, err
	}
	dst, err = fs.cleanFor(ctx, "move", dst, true)
	if err != nil {
		return FileInfo{}, err
	}
	if src == "/" || dst == "/" {
		return FileInfo{}, errorf(syscall.EINVAL, src, "cannot move the root directory")
	}
	if _, err := fs.init(ctx); err != nil {
		return FileInfo{}, err
	}
	var evs []event
	err = fs.v.tx(ctx, func(tx *txn) error {
		rs, rd, err := fs.resolveTransfer(ctx, tx, "move", src, dst, false, &evs)
		if err != nil {
			return err
		}
		evs = append(evs, event{op: protocol.FileDeleted, path: rs.path}, event{op: protocol.FileCreated, path: rd.path, size: rs.attr.Size})
		_, err = fs.rename(ctx, tx, rs.parent, rs.name, rd.parent, rd.name, RenameNoReplace)
		return err
	})
	if err != nil {
		return FileInfo{}, err
	}
	fs.notifyAll(evs)
	return fs.lstat(ctx, dst)
}

// resolveTransfer resolves the source of a move or copy, which must exist
// (a copy follows a final symlink and must be allowed to read it), and its
// destination, which must not exist and must be allowed to be written; the
// destination's missing parents are created, with their events in evs.
func (fs *FS) resolveTransfer(ctx context.Context, tx *txn, op, src, dst string, copying bool, evs *[]event) (rs, rd resolved, err error) {
	if rs, err = fs.resolve(ctx, tx, src, copying, nil); err != nil {
		return rs, rd, err
	}
	if !rs.exists {
		return rs, rd, notFound(src)
	}
	if copying {
		if err := fs.checkPathTx(op, rs.path, false); err != nil {
			return rs, rd, err
		}
	}
	if rd, err = fs.resolve(ctx, tx, dst, false, evs); err != nil {
		return rs, rd, err
	}
	if rd.exists {
		return rs, rd, errorf(syscall.EEXIST, dst, "%s already exists", dst)
	}
	return rs, rd, fs.checkPathTx(op, rd.path, true)
}

// lstat is Stat without following a final symlink.
func (fs *FS) lstat(ctx context.Context, p string) (FileInfo, error) {
	r, err := fs.resolveRead(ctx, p, false)
	if err != nil {
		return FileInfo{}, err
	}
	if !r.exists {
		return FileInfo{}, notFound(p)
	}
	if r.attr.IsSymlink() {
		info := infoOf(p, baseName(p), r.attr)
		info.Target, err = fs.readlink(ctx, fs.v.r, r.attr.Ino)
		return info, err
	}
	return fs.Stat(ctx, p)
}

// Copy copies src (a file, or a directory recursively; a final symlink is
// followed, symlinks inside a directory are copied as links) to dst, which
// must not exist. Parents of dst are created; the quota applies.
func (fs *FS) Copy(ctx context.Context, src, dst string) (FileInfo, error) {
	src, err := fs.cleanFor(ctx, "copy", src, false)
	if err != nil {
		return FileInfo{}, err
	}
	dst, err = fs.cleanFor(ctx, "copy", dst, true)
	if err != nil {
		return FileInfo{}, err
	}
	if dst == "/" {
		return FileInfo{}, errorf(syscall.EEXIST, dst, "/ already exists")
	}
	if _, err := fs.init(ctx); err != nil {
		return FileInfo{}, err
	}
	var evs []event
	err = fs.v.tx(ctx, func(tx *txn) error {
		rs, rd, err := fs.resolveTransfer(ctx, tx, "copy", src, dst, true, &evs)
		if err != nil {
			return err
		}
		if rs.attr.IsDir() {
			inside, err := fs.isAncestor(ctx, tx, rs.attr.Ino, rd.parent)
			if err != nil {
				return err
			}
			if inside {
				return errorf(syscall.EINVAL, dst, "cannot copy directory %s into itself", src)
			}
		}
		// One event: a created directory's stands for everything in it.
		evs = append(evs, event{op: protocol.FileCreated, path: rd.path, size: rs.attr.Size})
		return fs.copyTree(ctx, tx, rs.attr, rd.parent, rd.name)
	})
	if err != nil {
		return FileInfo{}, err
	}
	fs.notifyAll(evs)
	return fs.lstat(ctx, dst)
}

// copyTree copies inode a as the entry name of parent, and for a
// directory everything below it (a special file is copied as a special
// file of the same type and device number).
func (fs *FS) copyTree(ctx context.Context, tx *txn, a Attr, parent int64, name string) error {
	var target string
	if a.IsSymlink() {
		t, err := fs.readlink(ctx, tx, a.Ino)
		if err != nil {
			return err
		}
		target = t
	}
	na, err := fs.mknodIno(ctx, tx, parent, name, 0, a.Mode, target, a.Rdev)
	if err != nil {
		return err
	}
	switch {
	case a.IsRegular():
		if err := fs.addUsage(ctx, tx, a.Size); err != nil {
			return err
		}
		if fork, err := fs.isFork(ctx, tx); err != nil {
			return err
		} else if fork {
			if err := fs.copyDataFork(ctx, tx, a.Ino, na.Ino, a.Size); err != nil {
				return fmt.Errorf("copy data to %s: %w", name, err)
			}
		} else if _, err := tx.ExecContext(ctx, `INSERT INTO fs_data(session_id, ino, "offset", size, data) SELECT session_id, ?, "offset", size, data FROM fs_data WHERE session_id=? AND ino=?`,
			na.Ino, fs.sid, a.Ino); err != nil {
			return fmt.Errorf("copy data to %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET size=?, sha256=(SELECT sha256 FROM fs_inode WHERE session_id=? AND ino=?) WHERE session_id=? AND ino=?`,
			a.Size, fs.sid, a.Ino, fs.sid, na.Ino); err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
		if err := fs.copyMeta(ctx, tx, a.Ino, na.Ino); err != nil {
			return err
		}
	case a.IsDir():
		kids, err := fs.children(ctx, tx, a.Ino)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := fs.copyTree(ctx, tx, k.attr, na.Ino, k.name); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolveAttr returns the attributes of p (symlinks followed) for callers
// that mix both APIs.
func (fs *FS) resolveAttr(ctx context.Context, p string) (Attr, error) {
	_, r, err := fs.resolveExisting(ctx, p)
	return r.attr, err
}

// resolveExisting cleans p and resolves it, symlinks followed, to an entry
// that exists; it returns the cleaned path.
func (fs *FS) resolveExisting(ctx context.Context, p string) (string, resolved, error) {
	p, err := fs.cleanFor(ctx, "stat", p, false)
	if err != nil {
		return "", resolved{}, err
	}
	if _, err := fs.init(ctx); err != nil {
		return "", resolved{}, err
	}
	r, err := fs.resolveRead(ctx, p, true)
	if err != nil {
		return "", resolved{}, err
	}
	if !r.exists {
		return "", resolved{}, notFound(p)
	}
	return p, r, nil
}

// resolveRead resolves p on the read pool, recording a symlink escape in the audit log.
func (fs *FS) resolveRead(ctx context.Context, p string, followLast bool) (resolved, error) {
	r, err := fs.resolve(ctx, fs.v.r, p, followLast, nil)
	if err != nil {
		fs.v.recordDenial(ctx, err)
	}
	return r, err
}
