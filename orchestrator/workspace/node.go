package workspace

import (
	"context"
	"errors"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is one inode of the mount. go-fuse keeps one node per inode number,
// so hard links share it, and with it the write buffer.
type node struct {
	fs.Inode
	m   *MountPoint
	ino int64

	// mu guards the attributes last shown to the kernel.
	mu sync.Mutex

	seen    bool      // attr holds what the kernel may have cached
	attr    Attr      // the attributes the VFS last returned
	seenAt  time.Time // when; zero once a change through this mount made attr stale
	seenGen uint64    // the mount's invalidation count before they were read
}

var (
	_ fs.NodeLookuper    = (*node)(nil)
	_ fs.NodeGetattrer   = (*node)(nil)
	_ fs.NodeSetattrer   = (*node)(nil)
	_ fs.NodeCreater     = (*node)(nil)
	_ fs.NodeMkdirer     = (*node)(nil)
	_ fs.NodeMknoder     = (*node)(nil)
	_ fs.NodeUnlinker    = (*node)(nil)
	_ fs.NodeRmdirer     = (*node)(nil)
	_ fs.NodeRenamer     = (*node)(nil)
	_ fs.NodeSymlinker   = (*node)(nil)
	_ fs.NodeReadlinker  = (*node)(nil)
	_ fs.NodeLinker      = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeReader      = (*node)(nil)
	_ fs.NodeWriter      = (*node)(nil)
	_ fs.NodeAllocater   = (*node)(nil)
	_ fs.NodeFlusher     = (*node)(nil)
	_ fs.NodeReleaser    = (*node)(nil)
	_ fs.NodeFsyncer     = (*node)(nil)
	_ fs.NodeStatfser    = (*node)(nil)
	_ fs.NodeOnForgetter = (*node)(nil)
)

// handle is the file handle of a CREATE. The kernel opens files without
// asking (no_open: Open answers ENOSYS) and closes them without telling
// (no_flush, and no RELEASE without OPEN), so all state lives in the node.
type handle struct{ _ byte }

// ctx prepares a request's context for VFS calls. It drops the request's
// cancellation: the kernel cancels a request when the calling thread gets a
// signal; a VFS operation is one short transaction, and failing it with
// EINTR would surface as a failed close() or write() in programs that do
// not retry (most do not). It names this mount as the origin of the
// changes made, which the Fanout does not tell back to it.
func (n *node) ctx(ctx context.Context) context.Context {
	return events.WithOrigin(context.WithoutCancel(ctx), n.m)
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
	out.Rdev = a.Rdev
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
		cn.hold()
		cn.mu.Lock()
		cn.remember(a, gen)
		cn.mu.Unlock()
	}
	return ch
}

// hold makes the VFS count n's inode as open while the kernel knows it:
// the kernel opens and closes files without telling the mount (no_open,
// no_flush), so an inode unlinked while the kernel may still use it is kept
// (an orphan) until the kernel forgets it, not until a RELEASE. Holds are
// per inode number: go-fuse may drop the node a lookup made for an inode
// it already has, and calls OnForget only for the node it kept.
func (n *node) hold() {
	if n.m.fs != nil && n.m.hold(n.ino) {
		n.m.fs.Open(n.ino)
	}
}

// OnForget ends the hold: the kernel no longer refers to the inode, so an
// unlinked one can go.
func (n *node) OnForget() {
	if !n.m.unhold(n.ino) {
		return
	}
	if err := n.m.fs.Release(events.WithOrigin(context.Background(), n.m), n.ino); err != nil {
		n.m.opts.Logger.Warn("workspace: forget", "dir", n.m.dir, "ino", n.ino, "err", err)
	}
}

// creator returns the FS that creates inodes for the calling user: a view
// that gives them the caller's uid and gid when the FS has one (as
// *vfs.FS has), so that no change of owner follows (see own).
func (n *node) creator(ctx context.Context) FS {
	o, ok := n.m.fs.(interface{ WithOwner(uid, gid uint32) *vfs.FS })
	c, cok := fuse.FromContext(ctx)
	if !ok || !cok {
		return n.m.fs
	}
	return o.WithOwner(c.Uid, c.Gid)
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

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.ctx(ctx)
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
	if n.fresh() {
		fillAttr(&n.attr, &out.Attr)
		return 0
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
	gen := n.m.gen.Load()
	a, err := n.m.fs.SetAttr(ctx, n.ino, ch)
	if err != nil {
		return errno(err)
	}
	fillAttr(&a, &out.Attr)
	n.remember(&a, gen)
	return 0
}

// Create creates the file in the VFS at once: its name (and, as every
// write is, its quota) is taken when open(O_CREAT) returns, so that no
// error is left for a close, which the mount never sees (no_flush).
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ctx = n.ctx(ctx)
	gen := n.m.gen.Load()
	a, err := n.creator(ctx).Create(ctx, n.ino, name, syscall.S_IFREG|mode&07777, flags&syscall.O_EXCL != 0)
	if err != nil {
		n.stale()
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
	n.madeChild(&a)
	return n.child(ctx, &a, out, gen), &handle{}, 0, 0
}

// madeChild applies to directory n's cached attributes the creation of
// the entry a through this mount: the VFS moved the directory's mtime and
// ctime to the new inode's creation time and changed nothing else but, for
// a new subdirectory, its link count, so the
// GETATTR the kernel sends next (it drops the directory's attributes at a
// create) is answered without the VFS. For an inode that is not new (O_CREAT
// of an existing file; changed since it was made, as by own) the
// attributes are read again.
func (n *node) madeChild(a *Attr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.fresh() || !a.Mtime.Equal(a.Created) || !a.Ctime.Equal(a.Created) {
		n.seenAt = time.Time{}
		return
	}
	if a.Created.After(n.attr.Mtime) {
		n.attr.Mtime = a.Created
	}
	if a.Created.After(n.attr.Ctime) {
		n.attr.Ctime = a.Created
	}
	if a.IsDir() {
		n.attr.Nlink++ // the new directory's ".."
	}
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.ctx(ctx)
	gen := n.m.gen.Load()
	a, err := n.creator(ctx).Mkdir(ctx, n.ino, name, syscall.S_IFDIR|mode&07777)
	if err == nil {
		err = n.own(ctx, &a)
	}
	if err != nil {
		n.stale()
		return nil, errno(err)
	}
	n.madeChild(&a)
	return n.child(ctx, &a, out, gen), 0
}

// Mknod makes a FIFO, the inode of a Unix socket (bind), a device (the
// kernel lets only a caller with CAP_MKNOD ask) or an empty regular file.
// mode is after the caller's umask, which the kernel applied.
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.ctx(ctx)
	gen := n.m.gen.Load()
	a, err := n.creator(ctx).Mknod(ctx, n.ino, name, mode, dev)
	if err == nil {
		err = n.own(ctx, &a)
	}
	if err != nil {
		n.stale()
		return nil, errno(err)
	}
	n.madeChild(&a)
	return n.child(ctx, &a, out, gen), 0
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.ctx(ctx)
	gen := n.m.gen.Load()
	a, err := n.creator(ctx).Symlink(ctx, n.ino, name, target)
	if err == nil {
		err = n.own(ctx, &a)
	}
	if err != nil {
		n.stale()
		return nil, errno(err)
	}
	n.madeChild(&a)
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
	a, err := n.m.fs.Link(ctx, t.ino, n.ino, name)
	if err != nil {
		return nil, errno(err)
	}
	return n.child(ctx, &a, out, gen), 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx = n.ctx(ctx)
	defer n.stale()
	err := n.m.fs.Unlink(ctx, n.ino, name)
	n.staleChild(name) // its nlink dropped (go-fuse drops the child after we return)
	return errno(err)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx = n.ctx(ctx)
	defer n.stale()
	return errno(n.m.fs.Rmdir(ctx, n.ino, name))
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	ctx = n.ctx(ctx)
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	defer n.stale()
	defer np.stale()
	err := n.m.fs.Rename(ctx, n.ino, name, np.ino, newName, flags)
	n.staleChild(name)
	np.staleChild(newName) // a replaced file's nlink dropped
	return errno(err)
}

// Open answers ENOSYS: the kernel then opens files without asking this
// mount again (no_open) and sends no RELEASE. Every open keeps the kernel's
// page cache (the Fanout drops what changes elsewhere). A readonly file
// shows no write bits, so the kernel's own permission check
// (default_permissions) refuses an open for writing with EACCES; a caller
// that may override modes (root) is refused at its first write or
// truncate instead, before anything changes.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, syscall.ENOSYS
}

// writes reports whether an open with flags may change the file: write
// access, O_TRUNC or O_APPEND. A readonly file refuses such a create of an
// existing file with EACCES.
func writes(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&(syscall.O_TRUNC|syscall.O_APPEND) != 0
}

func (n *node) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	ctx = n.ctx(ctx)
	c, err := n.m.fs.ReadAt(ctx, n.ino, dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, errno(err)
	}
	return fuse.ReadResultData(dest[:c]), 0
}

// Write writes through to the VFS: the mount sees no close (no_flush) at
// which buffered bytes could be written or an error reported, so each
// WRITE is one VFS write, and its error (quota, readonly) is the
// write()'s. The VFS groups writes into batched commits.
func (n *node) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	ctx = n.ctx(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	if wa, ok := n.m.fs.(attrWriter); ok {
		gen := n.m.gen.Load()
		a, err := wa.WriteAtAttr(ctx, n.ino, data, off)
		if err != nil {
			n.seenAt = time.Time{}
			return 0, errno(err)
		}
		n.remember(&a, gen) // the kernel asks for them next
		return uint32(len(data)), 0
	}
	c, err := n.m.fs.WriteAt(ctx, n.ino, data, off)
	n.seenAt = time.Time{}
	if err != nil {
		return 0, errno(err)
	}
	return uint32(c), 0
}

// Allocate is fallocate(2): the VFS stores holes as zeros, so it extends
// the file (or zeroes a range) and reserves nothing (vfs.FS.Allocate).
func (n *node) Allocate(ctx context.Context, f fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	ctx = n.ctx(ctx)
	if off > 1<<62 || size > 1<<62 {
		return syscall.EFBIG
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	gen := n.m.gen.Load()
	a, err := n.m.fs.Allocate(ctx, n.ino, int64(off), int64(size), mode)
	if err != nil {
		n.seenAt = time.Time{}
		return errno(err)
	}
	n.remember(&a, gen)
	return 0
}

// attrWriter is implemented by an FS (as *vfs.FS does) whose write returns
// the file's new attributes.
type attrWriter interface {
	WriteAtAttr(ctx context.Context, ino int64, p []byte, off int64) (Attr, error)
}

// Flush answers ENOSYS: the kernel then sends no FLUSH at close
// (no_flush); nothing is buffered here.
func (n *node) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	return syscall.ENOSYS
}

// Fsync makes the file's changes durable: the VFS commits the batch that
// holds them, with a full sync.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	ctx = n.ctx(ctx)
	return errno(n.m.fs.Fsync(ctx, n.ino))
}

// Release ends a CREATE's handle (sent only before the kernel learned
// no_open); the node's hold, not the handle, keeps an unlinked inode.
func (n *node) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	return 0
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
