package workspace

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirPlusReader is implemented by an FS (as *vfs.FS does) that lists a
// directory with its entries' attributes in one query. The mount then
// answers READDIRPLUS from that listing (dirHandle) instead of a lookup
// per entry.
type dirPlusReader interface {
	ReadDirPlus(ctx context.Context, ino int64) ([]DirEntryAttr, error)
}

// dirHandle is an open directory whose READDIRPLUS is served from one
// listing: Readdirent walks it and Lookup (which go-fuse calls for each
// entry it sends) answers from it. The listing is read at the first
// READDIRPLUS, not at OPENDIR, so that the kernel, which ignores entry
// attributes older than a change it made since it sent the request, never
// takes older ones for new.
type dirHandle struct {
	n *node

	mu    sync.Mutex
	list  []DirEntryAttr
	attrs map[string]int // name → index in list
	gen   uint64         // the mount's invalidation count before the listing
	names bool           // the listing has names and types only: look up
	pos   int            // next entry (0, 1: "." and "..")
	read  bool
}

var (
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.FileReaddirenter   = (*dirHandle)(nil)
	_ fs.FileLookuper       = (*dirHandle)(nil)
	_ fs.FileSeekdirer      = (*dirHandle)(nil)
)

// OpendirHandle opens directory n. With a Fanout the kernel may keep the
// listing it read (FOPEN_CACHE_DIR): a change to the directory made
// elsewhere reaches it as a notice that drops it, one made through this
// mount the kernel sees itself.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	var out uint32
	if n.m.opts.Fanout != nil {
		out = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	}
	return &dirHandle{n: n}, out, 0
}

// load reads the listing. Caller holds h.mu.
func (h *dirHandle) load(ctx context.Context) syscall.Errno {
	n := h.n
	ctx = n.ctx(ctx)
	h.gen = n.m.gen.Load()
	var list []DirEntryAttr
	if dp, ok := n.m.fs.(dirPlusReader); ok {
		l, err := dp.ReadDirPlus(ctx, n.ino)
		if err != nil {
			return errno(err)
		}
		list = l
	} else {
		l, err := n.m.fs.ReadDir(ctx, n.ino)
		if err != nil {
			return errno(err)
		}
		for _, e := range l {
			list = append(list, DirEntryAttr{Name: e.Name, Attr: Attr{Ino: e.Ino, Mode: e.Mode}})
		}
		h.names = true
	}
	h.list, h.read = list, true
	h.attrs = make(map[string]int, len(list))
	for i, e := range list {
		h.attrs[e.Name] = i
	}
	return 0
}

func (h *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.read || h.pos == 0 {
		if e := h.load(ctx); e != 0 {
			return nil, e
		}
	}
	i := h.pos
	h.pos++
	switch {
	case i == 0:
		return &fuse.DirEntry{Name: ".", Ino: uint64(h.n.ino), Mode: syscall.S_IFDIR, Off: 1}, 0
	case i == 1:
		return &fuse.DirEntry{Name: "..", Mode: syscall.S_IFDIR, Off: 2}, 0
	case i-2 < len(h.list):
		e := &h.list[i-2]
		return &fuse.DirEntry{Name: e.Name, Ino: uint64(e.Attr.Ino), Mode: e.Attr.Mode & syscall.S_IFMT, Off: uint64(i + 1)}, 0
	}
	h.pos--
	return nil, 0
}

// Seekdir moves to the entry after offset off (0: the start, read again).
func (h *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off > uint64(len(h.list)+2) {
		return syscall.EINVAL
	}
	h.pos = int(off)
	return 0
}

// Lookup answers READDIRPLUS's lookup of name from the listing, unless a
// change made elsewhere was reported since it was read (then from the FS).
func (h *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	h.mu.Lock()
	i, ok := h.attrs[name]
	var a Attr
	if ok {
		a = h.list[i].Attr
	}
	gen, names := h.gen, h.names
	h.mu.Unlock()
	n := h.n
	if !ok || names || gen != n.m.gen.Load() {
		return n.Lookup(ctx, name, out)
	}
	return n.child(n.ctx(ctx), &a, out, gen), 0
}
