package workspace

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is one inode of the mount. go-fuse keeps one node per inode number,
// so hard links share it, and with it the write buffer.
type node struct {
	fs.Inode
	m   *MountPoint
	ino int64

	// mu guards the write buffer and the attributes last shown to the
	// kernel. It is held across VFS writes so that buffered data reaches
	// the VFS in order.
	mu   sync.Mutex
	wbuf []byte // contiguous bytes not yet written, starting at woff
	woff int64
	werr error // a failed deferred write, reported by the next write/flush/fsync

	seen    bool      // attr holds what the kernel may have cached
	attr    Attr      // the attributes the VFS last returned
	seenAt  time.Time // when; zero once a change through this mount made attr stale
	seenGen uint64    // the mount's invalidation count before they were read
	// wgen counts writes and resizes through this mount (see cacheStore)
	wgen atomic.Uint64

	// pend is set while the file is created in the kernel but not yet in
	// the VFS (see lazyCreate); guarded by mu. noVFSOpen: the creating
	// handle has no VFS Open to release (the create failed).
	pend      *pending
	noVFSOpen bool

	// kids are this directory's pending children by name; guarded by kmu
	// (taken after a child's mu, never before).
	kmu  sync.Mutex
	kids map[string]*node
}

// pending is a file created through this mount that the VFS does not have
// yet: the first flush (close, fsync, a full buffer, a stat, a read, an
// open, or any change or listing of its directory through this mount)
// creates it with the buffered data in one transaction.
type pending struct {
	parent   *node
	name     string
	mode     uint32
	uid, gid uint32
	created  time.Time // the CREATE: the directory's mtime from then on
}

var (
	_ fs.NodeLookuper   = (*node)(nil)
	_ fs.NodeGetattrer  = (*node)(nil)
	_ fs.NodeSetattrer  = (*node)(nil)
	_ fs.NodeCreater    = (*node)(nil)
	_ fs.NodeMkdirer    = (*node)(nil)
	_ fs.NodeUnlinker   = (*node)(nil)
	_ fs.NodeRmdirer    = (*node)(nil)
	_ fs.NodeRenamer    = (*node)(nil)
	_ fs.NodeSymlinker  = (*node)(nil)
	_ fs.NodeReadlinker = (*node)(nil)
	_ fs.NodeLinker     = (*node)(nil)
	_ fs.NodeReaddirer  = (*node)(nil)
	_ fs.NodeOpener     = (*node)(nil)
	_ fs.NodeReader     = (*node)(nil)
	_ fs.NodeWriter     = (*node)(nil)
	_ fs.NodeFlusher    = (*node)(nil)
	_ fs.NodeReleaser   = (*node)(nil)
	_ fs.NodeFsyncer    = (*node)(nil)
	_ fs.NodeStatfser   = (*node)(nil)
)

// handle is an open file. All state lives in the node; go-fuse only calls
// Release for opens that returned a non-nil handle.
type handle struct{ _ byte }

// ctx prepares a request's context for VFS calls. It drops the request's
// cancellation: the kernel cancels a request when the calling thread gets a
// signal; a VFS operation is one short transaction, and failing it with
// EINTR would surface as a failed close() or write() in programs that do
// not retry (most do not). It names this mount as the origin of the
// changes made, which the Fanout does not tell back to it.
func (n *node) ctx(ctx context.Context) context.Context {
	return vfs.WithOrigin(context.WithoutCancel(ctx), n.m)
}

// blockSize is the st_blksize reported; tools size their buffers by it.
const blockSize = 64 << 10

// fillAttr fills out from a. A readonly file shows no write bits: programs
// and the kernel's own permission check (default_permissions) see that it
// cannot be written.
func fillAttr(a *Attr, out *fuse.Attr) {
	out.Ino = uint64(a.Ino)
	out.Mode = a.Mode
	if a.Readonly {
		out.Mode &^= 0o222
	}
	out.Nlink = a.Nlink
	out.Size = uint64(a.Size)
	out.Blocks = (uint64(a.Size) + 511) / 512
	out.Blksize = blockSize
	out.Owner = fuse.Owner{Uid: a.UID, Gid: a.GID}
	out.SetTimes(&a.Atime, &a.Mtime, &a.Ctime)
}

// remember records the attributes the kernel now holds for n, read from
// the VFS when the mount's invalidation count was gen (m.gen before the
// VFS call).
func (n *node) remember(a *Attr, gen uint64) {
	n.seen, n.attr, n.seenAt, n.seenGen = true, *a, time.Now(), gen
}

// fresh reports whether attr may answer GETATTR without asking the VFS: it
// is younger than the attribute timeout, the same staleness the kernel's
// own attribute cache allows, and no change made elsewhere has been
// reported to this mount since it was read. Caller holds n.mu.
func (n *node) fresh() bool {
	return n.seen && !n.seenAt.IsZero() && time.Since(n.seenAt) < n.m.opts.AttrTimeout &&
		n.seenGen == n.m.gen.Load()
}

// stale marks n's cached attributes out of date after a change through this
// mount (data written, a link added or removed, an entry changed in a
// directory).
func (n *node) stale() {
	n.mu.Lock()
	n.seenAt = time.Time{}
	n.mu.Unlock()
}

// staleChild marks the cached attributes of n's child name out of date.
func (n *node) staleChild(name string) {
	if c := n.GetChild(name); c != nil {
		if cn, ok := c.Operations().(*node); ok {
			cn.stale()
		}
	}
}

// child returns the go-fuse inode for a, creating its node if needed, and
// fills out.
func (n *node) child(ctx context.Context, a *Attr, out *fuse.EntryOut, gen uint64) *fs.Inode {
	fillAttr(a, &out.Attr)
	n.m.handed(a.Ino)
	ch := n.NewInode(ctx, &node{m: n.m, ino: a.Ino}, fs.StableAttr{Mode: a.Mode & syscall.S_IFMT, Ino: uint64(a.Ino)})
	if cn, ok := ch.Operations().(*node); ok {
		cn.mu.Lock()
		cn.remember(a, gen)
		cn.mu.Unlock()
	}
	return ch
}

// own gives a new inode to the calling user when the VFS created it for
// someone else (the VFS does not know the caller).
func (n *node) own(ctx context.Context, a *Attr) error {
	c, ok := fuse.FromContext(ctx)
	if !ok || (c.Uid == a.UID && c.Gid == a.GID) {
		return nil
	}
	uid, gid := c.Uid, c.Gid
	na, err := n.m.fs.SetAttr(ctx, a.Ino, AttrChange{UID: &uid, GID: &gid})
	if err != nil {
		return err
	}
	*a = na
	return nil
}

// settle creates in the VFS every pending file of directory n, so that a
// VFS call about n's entries sees them. A failure stays with the file (its
// close reports it).
func (n *node) settle(ctx context.Context) {
	n.kmu.Lock()
	if len(n.kids) == 0 {
		n.kmu.Unlock()
		return
	}
	kids := make([]*node, 0, len(n.kids))
	for _, k := range n.kids {
		kids = append(kids, k)
	}
	n.kmu.Unlock()
	for _, k := range kids {
		k.mu.Lock()
		_ = k.materializeLocked(ctx, false)
		k.mu.Unlock()
	}
}

// settleChild settles the pending files of n's child directory name (before
// it is removed or replaced: it must not look empty).
func (n *node) settleChild(ctx context.Context, name string) {
	if c := n.GetChild(name); c != nil {
		if cn, ok := c.Operations().(*node); ok {
			cn.settle(ctx)
		}
	}
}

// materializeLocked creates a pending file in the VFS with the buffered
// data; at a close or fsync (cache set), when the buffer is the whole file,
// it also has the data put in the kernel's page cache (cacheStore).
// Caller holds n.mu.
func (n *node) materializeLocked(ctx context.Context, cache bool) error {
	p := n.pend
	if p == nil {
		return nil
	}
	n.pend = nil
	p.parent.kmu.Lock()
	if p.parent.kids[p.name] == n {
		delete(p.parent.kids, p.name)
	}
	p.parent.kmu.Unlock()
	fc := n.m.fs.(fileCreator)
	gen, pushes := n.m.gen.Load(), n.m.inval.pushes.Load()
	a, dirMtime, err := fc.CreateFile(ctx, p.parent.ino, p.name, p.mode, p.uid, p.gid, n.ino, n.wbuf, n.woff, p.created)
	if err == nil && cache && n.m.opts.Fanout != nil && n.woff == 0 && len(n.wbuf) > 0 && len(n.wbuf) <= maxStore {
		n.m.inval.pushStore(&cacheStore{n: n, data: bytes.Clone(n.wbuf), pushes: pushes, wgen: n.wgen.Load()})
	}
	n.wbuf = n.wbuf[:0]
	if err != nil {
		p.parent.stale()
		n.werr = err
		n.noVFSOpen = true
		n.seenAt = time.Time{}
		n.m.opts.Logger.Warn("workspace: create", "dir", n.m.dir, "name", p.name, "err", err)
		return err
	}
	n.m.fs.Open(n.ino) // the creating handle
	n.remember(&a, gen)
	p.parent.created(dirMtime)
	if !dirMtime.Equal(p.created) && n.m.opts.Fanout != nil {
		// The directory changed since the CREATE, so its mtime is now,
		// not the CREATE's time this kernel was shown: drop it there.
		n.m.inval.push(invalItem{ch: vfs.Change{Attrs: []int64{p.parent.ino}}, self: true})
	}
	return nil
}

// created applies to directory n's cached attributes the creation of an
// entry at t through this mount: the VFS moves its mtime and ctime to t
// unless they are later (CreateFile) and changes nothing else.
func (n *node) created(t time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fresh() {
		if t.After(n.attr.Mtime) {
			n.attr.Mtime = t
		}
		if t.After(n.attr.Ctime) {
			n.attr.Ctime = t
		}
		return
	}
	n.seenAt = time.Time{}
}

// lazyCreate creates the new file name in the kernel only (see pending),
// or reports ok=false when the file must be created now: O_EXCL (lock
// files must be exclusive across mounts), no write buffering, an FS
// without CreateFile, or a name that exists in the VFS.
func (n *node) lazyCreate(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, bool, syscall.Errno) {
	fc, ok := n.m.fs.(fileCreator)
	if !ok || flags&syscall.O_EXCL != 0 || n.m.opts.WriteBuffer <= 0 {
		return nil, false, 0
	}
	if err := fc.CheckCreate(ctx, n.ino, name); err != nil {
		return nil, false, errno(err) // refused at open, as an eager create would be
	}
	if _, err := n.m.fs.Lookup(ctx, n.ino, name); !vfs.IsErrno(err, syscall.ENOENT) {
		if err != nil {
			return nil, false, errno(err)
		}
		return nil, false, 0 // exists: open it the usual way
	}
	n.mu.Lock()
	fresh := n.fresh()
	n.mu.Unlock()
	if !fresh {
		gen := n.m.gen.Load()
		pa, err := n.m.fs.GetAttr(ctx, n.ino)
		if err != nil {
			return nil, false, errno(err)
		}
		if !pa.IsDir() {
			return nil, false, syscall.ENOTDIR
		}
		n.mu.Lock()
		n.remember(&pa, gen)
		n.mu.Unlock()
	}
	ino, err := fc.ReserveIno(ctx)
	if err != nil {
		return nil, false, errno(err)
	}
	var uid, gid uint32
	if c, ok := fuse.FromContext(ctx); ok {
		uid, gid = c.Uid, c.Gid
	}
	now := time.Now()
	a := Attr{Ino: ino, Mode: syscall.S_IFREG | mode&07777, Nlink: 1, UID: uid, GID: gid, Atime: now, Mtime: now, Ctime: now, Created: now}
	kid := &node{m: n.m, ino: ino, pend: &pending{parent: n, name: name, mode: mode & 07777, uid: uid, gid: gid, created: now}}
	n.kmu.Lock()
	if n.kids == nil {
		n.kids = map[string]*node{}
	}
	n.kids[name] = kid
	n.kmu.Unlock()
	fillAttr(&a, &out.Attr)
	ch := n.NewInode(ctx, kid, fs.StableAttr{Mode: syscall.S_IFREG, Ino: uint64(ino)})
	kid.mu.Lock()
	kid.remember(&a, n.m.gen.Load())
	kid.mu.Unlock()
	n.m.handed(ino)
	// The directory's mtime is the CREATE's from now on: the kernel may
	// ask for it before the file reaches the VFS, which then sets the same
	// time (CreateFile's created).
	n.created(now)
	return ch, true, 0
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.ctx(ctx)
	n.settle(ctx)
	gen := n.m.gen.Load()
	a, err := n.m.fs.Lookup(ctx, n.ino, name)
	if err != nil {
		return nil, errno(err)
	}
	return n.child(ctx, &a, out, gen), 0
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	ctx = n.ctx(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.wbuf) == 0 && n.werr == nil && n.fresh() {
		fillAttr(&n.attr, &out.Attr)
		return 0
	}
	if err := n.materializeLocked(ctx, false); err != nil {
		return errno(err)
	}
	if err := n.flushLocked(ctx); err != nil {
		return errno(err)
	}
	gen := n.m.gen.Load()
	a, err := n.m.fs.GetAttr(ctx, n.ino)
	if err != nil {
		return errno(err)
	}
	fillAttr(&a, &out.Attr)
	n.remember(&a, gen)
	return 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx = n.ctx(ctx)
	var ch AttrChange
	if v, ok := in.GetMode(); ok {
		ch.Mode = &v
	}
	if v, ok := in.GetUID(); ok {
		ch.UID = &v
	}
	if v, ok := in.GetGID(); ok {
		ch.GID = &v
	}
	if v, ok := in.GetSize(); ok {
		n.wgen.Add(1) // a truncate changes the pages (see cacheStore)
		s := int64(v)
		ch.Size = &s
	}
	if v, ok := in.GetATime(); ok {
		ch.Atime = &v
	}
	if v, ok := in.GetMTime(); ok {
		ch.Mtime = &v
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.flushLocked(ctx); err != nil {
		return errno(err)
	}
	gen := n.m.gen.Load()
	a, err := n.m.fs.SetAttr(ctx, n.ino, ch)
	if err != nil {
		return errno(err)
	}
	fillAttr(&a, &out.Attr)
	n.remember(&a, gen)
	return 0
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ctx = n.ctx(ctx)
	gen := n.m.gen.Load()
	n.settle(ctx)
	// A lazily created file reaches the VFS at its first flush; the
	// directory shows the CREATE's time from now on (lazyCreate).
	if ch, ok, e := n.lazyCreate(ctx, name, flags, mode, out); e != 0 || ok {
		if e != 0 {
			return nil, nil, 0, e
		}
		return ch, &handle{}, 0, 0
	}
	defer n.stale()
	a, err := n.m.fs.Create(ctx, n.ino, name, syscall.S_IFREG|mode&07777, flags&syscall.O_EXCL != 0)
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	if a.Readonly && writes(flags) {
		return nil, nil, 0, syscall.EACCES // it existed
	}
	if err := n.own(ctx, &a); err != nil {
		return nil, nil, 0, errno(err)
	}
	if flags&syscall.O_TRUNC != 0 && a.Size > 0 {
		zero := int64(0)
		if a, err = n.m.fs.SetAttr(ctx, a.Ino, AttrChange{Size: &zero}); err != nil {
			return nil, nil, 0, errno(err)
		}
	}
	n.m.fs.Open(a.Ino)
	return n.child(ctx, &a, out, gen), &handle{}, 0, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.ctx(ctx)
	gen := n.m.gen.Load()
	n.settle(ctx)
	defer n.stale()
	a, err := n.m.fs.Mkdir(ctx, n.ino, name, syscall.S_IFDIR|mode&07777)
	if err == nil {
		err = n.own(ctx, &a)
	}
	if err != nil {
		return nil, errno(err)
	}
	return n.child(ctx, &a, out, gen), 0
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.ctx(ctx)
	gen := n.m.gen.Load()
	n.settle(ctx)
	defer n.stale()
	a, err := n.m.fs.Symlink(ctx, n.ino, name, target)
	if err == nil {
		err = n.own(ctx, &a)
	}
	if err != nil {
		return nil, errno(err)
	}
	return n.child(ctx, &a, out, gen), 0
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	ctx = n.ctx(ctx)
	t, err := n.m.fs.Readlink(ctx, n.ino)
	if err != nil {
		return nil, errno(err)
	}
	return []byte(t), 0
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.ctx(ctx)
	gen := n.m.gen.Load()
	defer n.stale()
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	n.settle(ctx)
	t.mu.Lock()
	err := t.materializeLocked(ctx, false)
	t.mu.Unlock()
	if err != nil {
		return nil, errno(err)
	}
	a, err := n.m.fs.Link(ctx, t.ino, n.ino, name)
	if err != nil {
		return nil, errno(err)
	}
	return n.child(ctx, &a, out, gen), 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx = n.ctx(ctx)
	n.settle(ctx)
	defer n.stale()
	err := n.m.fs.Unlink(ctx, n.ino, name)
	n.staleChild(name) // its nlink dropped (go-fuse drops the child after we return)
	return errno(err)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx = n.ctx(ctx)
	n.settle(ctx)
	n.settleChild(ctx, name)
	defer n.stale()
	return errno(n.m.fs.Rmdir(ctx, n.ino, name))
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	ctx = n.ctx(ctx)
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	n.settle(ctx)
	np.settle(ctx)
	n.settleChild(ctx, name)
	np.settleChild(ctx, newName)
	defer n.stale()
	defer np.stale()
	err := n.m.fs.Rename(ctx, n.ino, name, np.ino, newName, flags)
	n.staleChild(name)
	np.staleChild(newName) // a replaced file's nlink dropped
	return errno(err)
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	ctx = n.ctx(ctx)
	n.settle(ctx)
	list, err := n.m.fs.ReadDir(ctx, n.ino)
	if err != nil {
		return nil, errno(err)
	}
	out := make([]fuse.DirEntry, 0, len(list)+2)
	out = append(out,
		fuse.DirEntry{Name: ".", Ino: uint64(n.ino), Mode: syscall.S_IFDIR},
		fuse.DirEntry{Name: "..", Mode: syscall.S_IFDIR})
	for _, e := range list {
		out = append(out, fuse.DirEntry{Name: e.Name, Ino: uint64(e.Ino), Mode: e.Mode & syscall.S_IFMT})
	}
	return fs.NewListDirStream(out), 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ctx = n.ctx(ctx)
	n.mu.Lock()
	if err := n.materializeLocked(ctx, false); err != nil {
		n.mu.Unlock()
		return nil, 0, errno(err)
	}
	fresh := n.fresh()
	n.mu.Unlock()
	keep := fresh
	if !fresh {
		// Close-to-open consistency: keep the kernel's page cache only
		// when the file has not changed since the kernel last saw it.
		gen := n.m.gen.Load()
		a, err := n.m.fs.GetAttr(ctx, n.ino)
		if err != nil {
			return nil, 0, errno(err)
		}
		n.mu.Lock()
		keep = n.seen && n.attr.Size == a.Size && n.attr.Mtime.Equal(a.Mtime)
		n.remember(&a, gen)
		n.mu.Unlock()
	}
	n.mu.Lock()
	ro := n.attr.Readonly
	n.mu.Unlock()
	if ro && writes(flags) {
		return nil, 0, syscall.EACCES
	}
	if writes(flags) {
		// A store of the file's content still queued (cacheStore) must
		// not land over this handle's writes: the kernel puts a write's
		// bytes in its pages before the WRITE reaches us, too late for
		// the WRITE's own count to stop the store.
		n.wgen.Add(1)
	}
	n.m.fs.Open(n.ino)
	var out uint32
	if keep {
		out |= fuse.FOPEN_KEEP_CACHE
	}
	if flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		// Nothing to flush on close of a read-only handle: spare the
		// kernel the FLUSH round trip (writers flush their own data).
		out |= fuse.FOPEN_NOFLUSH
	}
	return &handle{}, out, 0
}

// writes reports whether an open with flags may change the file: write
// access, O_TRUNC or O_APPEND. A readonly file refuses such an open with
// EACCES, what the kernel answers for a file without write permission
// (shells print "Permission denied"), rather than failing only at close,
// after the program believed its writes had succeeded.
func writes(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&(syscall.O_TRUNC|syscall.O_APPEND) != 0
}

func (n *node) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	ctx = n.ctx(ctx)
	n.mu.Lock()
	err := n.flushLocked(ctx)
	n.mu.Unlock()
	if err != nil {
		return nil, errno(err)
	}
	c, err := n.m.fs.ReadAt(ctx, n.ino, dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, errno(err)
	}
	return fuse.ReadResultData(dest[:c]), 0
}

func (n *node) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	ctx = n.ctx(ctx)
	if h := n.m.beforeWrite.Load(); h != nil {
		(*h)()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.wgen.Add(1)
	if err := n.takeErr(); err != nil {
		return 0, errno(err)
	}
	limit := n.m.opts.WriteBuffer
	if len(n.wbuf) > 0 && (off != n.woff+int64(len(n.wbuf)) || len(n.wbuf)+len(data) > limit) {
		if err := n.flushLocked(ctx); err != nil {
			return 0, errno(err)
		}
	}
	if len(data) >= limit {
		if err := n.materializeLocked(ctx, false); err != nil {
			return 0, errno(err)
		}
		c, err := n.m.fs.WriteAt(ctx, n.ino, data, off)
		n.seenAt = time.Time{}
		if err != nil {
			return 0, errno(err)
		}
		return uint32(c), 0
	}
	if len(n.wbuf) == 0 {
		n.woff = off
		if n.wbuf == nil {
			n.wbuf = make([]byte, 0, min(limit, max(len(data), 64<<10)))
		}
	}
	n.wbuf = append(n.wbuf, data...)
	return uint32(len(data)), 0
}

// flushLocked writes the buffered bytes to the VFS. A failure is returned
// and also kept for the next write/flush/fsync, since the write that buffered
// the data has already succeeded.
func (n *node) flushLocked(ctx context.Context) error {
	if err := n.werr; err != nil {
		return err
	}
	if n.pend != nil {
		return n.materializeLocked(ctx, false)
	}
	if len(n.wbuf) == 0 {
		return nil
	}
	_, err := n.m.fs.WriteAt(ctx, n.ino, n.wbuf, n.woff)
	n.wbuf = n.wbuf[:0]
	n.seenAt = time.Time{}
	if err != nil {
		n.werr = err
	}
	return err
}

// closeFlushLocked is flushLocked for a close or an fsync, where a new
// file's whole content may go to the kernel's page cache (cacheStore).
func (n *node) closeFlushLocked(ctx context.Context) error {
	if n.werr == nil && n.pend != nil {
		return n.materializeLocked(ctx, true)
	}
	return n.flushLocked(ctx)
}

// takeErr returns and clears a deferred write error.
func (n *node) takeErr() error {
	err := n.werr
	n.werr = nil
	return err
}

func (n *node) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	ctx = n.ctx(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closeFlushLocked(ctx)
	return errno(n.takeErr())
}

func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	ctx = n.ctx(ctx)
	n.mu.Lock()
	n.closeFlushLocked(ctx)
	err := n.takeErr()
	n.mu.Unlock()
	if err != nil {
		return errno(err)
	}
	return errno(n.m.fs.Fsync(ctx, n.ino))
}

func (n *node) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	ctx = n.ctx(ctx)
	n.mu.Lock()
	n.flushLocked(ctx)
	err := n.takeErr()
	if len(n.wbuf) == 0 && cap(n.wbuf) > 0 {
		n.wbuf = nil // do not keep a buffer per closed file
	}
	skip := n.noVFSOpen
	n.noVFSOpen = false
	n.mu.Unlock()
	if skip {
		// the create failed: there is no VFS Open to end
	} else if rerr := n.m.fs.Release(ctx, n.ino); err == nil {
		err = rerr
	}
	if err != nil {
		n.m.opts.Logger.Warn("workspace: release", "dir", n.m.dir, "ino", n.ino, "err", err)
	}
	return errno(err)
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	ctx = n.ctx(ctx)
	s, err := n.m.fs.Statfs(ctx)
	if err != nil {
		return errno(err)
	}
	out.Bsize, out.Frsize, out.NameLen = s.Bsize, s.Bsize, s.NameLen
	out.Blocks, out.Bfree, out.Bavail = s.Blocks, s.Bfree, s.Bavail
	out.Files, out.Ffree = s.Files, s.Ffree
	return 0
}
