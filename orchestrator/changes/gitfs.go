package changes

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-git/go-billy/v5"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// gitFS is a read-only billy filesystem over a directory of a workspace
// (its .git): what go-git's filesystem storage reads objects, refs and the
// index through, on the host, from the session filesystem's inode API. It
// lives for one request (ctx): lookups are cached for its lifetime, so one
// request sees one set of names.
type gitFS struct {
	ctx  context.Context
	fs   *vfs.FS
	root string // absolute path in the workspace, "/.git"

	mu    sync.Mutex
	attrs map[string]vfs.Attr // absolute path -> attributes (lookups of this request)
}

var _ billy.Filesystem = (*gitFS)(nil)

func newGitFS(ctx context.Context, fs *vfs.FS, root string) *gitFS {
	return &gitFS{ctx: ctx, fs: fs, root: root, attrs: map[string]vfs.Attr{}}
}

// abs is the workspace path of name (relative to the root; go-git passes
// slash-separated names).
func (g *gitFS) abs(name string) string {
	return path.Join(g.root, path.Clean("/"+name))
}

// lookup resolves a workspace path without following symlinks.
func (g *gitFS) lookup(p string) (vfs.Attr, error) {
	g.mu.Lock()
	a, ok := g.attrs[p]
	g.mu.Unlock()
	if ok {
		return a, nil
	}
	if p == "/" {
		a, err := g.fs.GetAttr(g.ctx, vfs.RootIno)
		return a, err
	}
	parent, err := g.lookup(path.Dir(p))
	if err != nil {
		return vfs.Attr{}, err
	}
	if !parent.IsDir() {
		return vfs.Attr{}, &fs.PathError{Op: "lookup", Path: p, Err: syscall.ENOTDIR}
	}
	a, err = g.fs.Lookup(g.ctx, parent.Ino, path.Base(p))
	if err != nil {
		if vfs.IsErrno(err, syscall.ENOENT) {
			return vfs.Attr{}, &fs.PathError{Op: "lookup", Path: p, Err: os.ErrNotExist}
		}
		return vfs.Attr{}, err
	}
	g.mu.Lock()
	g.attrs[p] = a
	g.mu.Unlock()
	return a, nil
}

func (g *gitFS) Open(name string) (billy.File, error) {
	return g.OpenFile(name, os.O_RDONLY, 0)
}

func (g *gitFS) OpenFile(name string, flag int, _ os.FileMode) (billy.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		return nil, billy.ErrReadOnly
	}
	a, err := g.lookup(g.abs(name))
	if err != nil {
		return nil, err
	}
	if a.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	return &gitFile{g: g, name: name, ino: a.Ino, size: a.Size}, nil
}

func (g *gitFS) Stat(name string) (os.FileInfo, error) { return g.Lstat(name) }

func (g *gitFS) Lstat(name string) (os.FileInfo, error) {
	a, err := g.lookup(g.abs(name))
	if err != nil {
		return nil, err
	}
	return fileInfo{name: path.Base(name), a: a}, nil
}

func (g *gitFS) ReadDir(name string) ([]os.FileInfo, error) {
	p := g.abs(name)
	a, err := g.lookup(p)
	if err != nil {
		return nil, err
	}
	ents, err := g.fs.ReadDirPlus(g.ctx, a.Ino)
	if err != nil {
		return nil, err
	}
	out := make([]os.FileInfo, 0, len(ents))
	g.mu.Lock()
	for _, e := range ents {
		g.attrs[path.Join(p, e.Name)] = e.Attr
		out = append(out, fileInfo{name: e.Name, a: e.Attr})
	}
	g.mu.Unlock()
	return out, nil
}

func (g *gitFS) Readlink(name string) (string, error) {
	a, err := g.lookup(g.abs(name))
	if err != nil {
		return "", err
	}
	return g.fs.Readlink(g.ctx, a.Ino)
}

func (g *gitFS) Join(elem ...string) string { return path.Join(elem...) }

func (g *gitFS) Chroot(p string) (billy.Filesystem, error) {
	return &gitFS{ctx: g.ctx, fs: g.fs, root: g.abs(p), attrs: map[string]vfs.Attr{}}, nil
}

func (g *gitFS) Root() string { return g.root }

func (g *gitFS) Create(string) (billy.File, error)           { return nil, billy.ErrReadOnly }
func (g *gitFS) Rename(string, string) error                 { return billy.ErrReadOnly }
func (g *gitFS) Remove(string) error                         { return billy.ErrReadOnly }
func (g *gitFS) TempFile(string, string) (billy.File, error) { return nil, billy.ErrReadOnly }
func (g *gitFS) MkdirAll(string, os.FileMode) error          { return billy.ErrReadOnly }
func (g *gitFS) Symlink(string, string) error                { return billy.ErrReadOnly }
func (g *gitFS) Capabilities() billy.Capability              { return billy.ReadCapability | billy.SeekCapability }
func (g *gitFS) readAt(ino int64, p []byte, off int64) (int, error) {
	return g.fs.ReadAt(g.ctx, ino, p, off)
}

// fileInfo is an os.FileInfo of an inode.
type fileInfo struct {
	name string
	a    vfs.Attr
}

func (f fileInfo) Name() string { return f.name }
func (f fileInfo) Size() int64  { return f.a.Size }
func (f fileInfo) Mode() os.FileMode {
	m := os.FileMode(f.a.Mode & 0o777)
	switch {
	case f.a.IsDir():
		m |= os.ModeDir
	case f.a.IsSymlink():
		m |= os.ModeSymlink
	}
	return m
}
func (f fileInfo) ModTime() time.Time { return f.a.Mtime }
func (f fileInfo) IsDir() bool        { return f.a.IsDir() }
func (f fileInfo) Sys() any           { return nil }

// blockSize is the unit gitFile reads and caches in: the session
// filesystem's chunk size, so one read is one chunk row.
const blockSize = 64 << 10

// maxBlocks bounds the blocks one open file caches (4 MiB).
const maxBlocks = 64

// gitFile is an open file of a gitFS. go-git reads packfiles in small
// pieces at scattered offsets; each piece would be a query, so it reads
// whole blocks and keeps the last maxBlocks of them.
type gitFile struct {
	g    *gitFS
	name string
	ino  int64
	size int64
	off  int64

	mu     sync.Mutex
	blocks map[int64][]byte
}

func (f *gitFile) Name() string { return f.name }

func (f *gitFile) block(i int64) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.blocks[i]; ok {
		return b, nil
	}
	n := min(int64(blockSize), f.size-i*blockSize)
	if n <= 0 {
		return nil, nil
	}
	b := make([]byte, n)
	got := 0
	for got < len(b) {
		m, err := f.g.readAt(f.ino, b[got:], i*blockSize+int64(got))
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
		got += m
	}
	b = b[:got]
	if f.blocks == nil {
		f.blocks = map[int64][]byte{}
	}
	if len(f.blocks) >= maxBlocks {
		for k := range f.blocks {
			delete(f.blocks, k)
			break
		}
	}
	f.blocks[i] = b
	return b, nil
}

func (f *gitFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	n := 0
	for n < len(p) {
		at := off + int64(n)
		if at >= f.size {
			break
		}
		b, err := f.block(at / blockSize)
		if err != nil {
			return n, err
		}
		in := int(at % blockSize)
		if in >= len(b) {
			break // the file shrank meanwhile
		}
		n += copy(p[n:], b[in:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *gitFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *gitFile) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += f.off
	case io.SeekEnd:
		off += f.size
	default:
		return 0, errors.New("bad whence")
	}
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	f.off = off
	return off, nil
}

func (f *gitFile) Write([]byte) (int, error) { return 0, billy.ErrReadOnly }
func (f *gitFile) Truncate(int64) error      { return billy.ErrReadOnly }
func (f *gitFile) Close() error              { return nil }
func (f *gitFile) Lock() error               { return nil }
func (f *gitFile) Unlock() error             { return nil }

// trimSlash is p without its leading slash: a git path.
func trimSlash(p string) string { return strings.TrimPrefix(p, "/") }
