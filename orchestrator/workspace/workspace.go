// Package workspace serves a session VFS as a FUSE filesystem, one mount per
// node, which the container runtime bind-mounts at /workspace.
package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FS is the inode-level session filesystem a mount serves (*vfs.FS satisfies
// it). Errors carry a syscall.Errno reachable with errors.As; anything else
// becomes EIO.
type FS interface {
	Lookup(ctx context.Context, parent int64, name string) (Attr, error)
	GetAttr(ctx context.Context, ino int64) (Attr, error)
	SetAttr(ctx context.Context, ino int64, ch AttrChange) (Attr, error)
	ReadDir(ctx context.Context, ino int64) ([]DirEntry, error)
	Create(ctx context.Context, parent int64, name string, mode uint32, exclusive bool) (Attr, error)
	Mkdir(ctx context.Context, parent int64, name string, mode uint32) (Attr, error)
	Symlink(ctx context.Context, parent int64, name, target string) (Attr, error)
	Mknod(ctx context.Context, parent int64, name string, mode, rdev uint32) (Attr, error)
	Readlink(ctx context.Context, ino int64) (string, error)
	Link(ctx context.Context, ino, newParent int64, newName string) (Attr, error)
	Unlink(ctx context.Context, parent int64, name string) error
	Rmdir(ctx context.Context, parent int64, name string) error
	Rename(ctx context.Context, oldParent int64, oldName string, newParent int64, newName string, flags uint32) error
	ReadAt(ctx context.Context, ino int64, p []byte, off int64) (int, error)
	WriteAt(ctx context.Context, ino int64, p []byte, off int64) (int, error)
	Allocate(ctx context.Context, ino int64, off, length int64, mode uint32) (Attr, error)
	Fsync(ctx context.Context, ino int64) error
	Statfs(ctx context.Context) (Statfs, error)
	// Open and Release bracket the time the kernel knows an inode (from
	// its first lookup or create to its FORGET), so that an inode unlinked
	// while a program may still have it open survives until then.
	Open(ino int64)
	Release(ctx context.Context, ino int64) error
}

// Defaults for Options. The kernel cache timeouts are an hour for a mount
// with a Fanout, which pushes every change made elsewhere to it as a notice
// (so the timeout only bounds how long an entry the kernel keeps unused
// stays), and 1 s (UnsharedTimeout) for one without, which learns of such
// changes only when its cache entries expire.
const (
	DefaultEntryTimeout    = time.Hour
	DefaultAttrTimeout     = time.Hour
	DefaultNegativeTimeout = time.Hour
	UnsharedTimeout        = time.Second
	DefaultMaxWrite        = 1 << 20
)

// Options tune a mount. Zero values take the defaults.
type Options struct {
	// Root is the inode served as the mount's root (vfs.RootIno when 0).
	Root int64
	// EntryTimeout, AttrTimeout and NegativeTimeout are how long the kernel
	// may cache names, attributes and failed lookups. Without a Fanout,
	// changes made through another mount or the REST API become visible
	// after at most this long; with one, as soon as the notice arrives.
	EntryTimeout    time.Duration
	AttrTimeout     time.Duration
	NegativeTimeout time.Duration
	// MaxWrite is the largest READ/WRITE request the kernel sends. Every
	// WRITE goes to the VFS as it comes (the kernel tells the mount of no
	// open or close: no_open, no_flush); the VFS groups them into batched
	// commits (vfs.Config.BatchDelay).
	MaxWrite int
	// Writeback enables the kernel's writeback cache. Faster for small
	// writes, but the kernel then trusts its own file sizes and mtimes,
	// so changes from other mounts or the REST API to a cached file are
	// not seen. Off by default.
	Writeback bool
	// Fanout, when set, tells this mount of changes to its session made
	// through other mounts or the REST API (see Fanout). The filesystem
	// must report its session (SessionID() string, as *vfs.FS does).
	Fanout *Fanout
	// Debug logs every FUSE request.
	Debug  bool
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Root == 0 {
		o.Root = 1
	}
	entry, attr, neg := DefaultEntryTimeout, DefaultAttrTimeout, DefaultNegativeTimeout
	if o.Fanout == nil {
		entry, attr, neg = UnsharedTimeout, UnsharedTimeout, UnsharedTimeout
	}
	if o.EntryTimeout == 0 {
		o.EntryTimeout = entry
	}
	if o.AttrTimeout == 0 {
		o.AttrTimeout = attr
	}
	if o.NegativeTimeout == 0 {
		o.NegativeTimeout = neg
	}
	if o.MaxWrite <= 0 {
		o.MaxWrite = DefaultMaxWrite
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// MountPoint is one FUSE mount of a session filesystem.
type MountPoint struct {
	dir    string
	fs     FS
	opts   Options
	server *fuse.Server
	dev    uint64 // st_dev of the mount, for aborting the connection

	// inval holds changes made elsewhere to tell the kernel about; gen
	// counts the batches told, so that attributes read from the VFS before
	// a batch are not cached as fresh after it (see node.remember).
	inval   invalQueue
	retries retryTimers // notices to send again, owned by the invalidator
	gen     atomic.Uint64
	notify  notifier // the server
	// replied: inodes handed to the kernel lately (see handed)
	rmu     sync.Mutex
	replied map[int64]time.Time

	// holds: the inodes the VFS counts as open for this mount (node.hold),
	// released when the kernel forgets them or the server stops.
	hmu   sync.Mutex
	holds map[int64]struct{}

	closeOnce sync.Once
	closeErr  error
	done      chan struct{} // closed when the serve loop and the invalidator have ended
}

// Mount mounts fsys at dir (which must exist) and serves it until Close.
//
// When dir holds a dead mount left by a crashed server, the new mount is
// stacked on top of it instead of replacing it: a running container that
// bound the dead mount with rslave propagation receives the new one, which
// it would not if the dead mount were detached first.
func Mount(ctx context.Context, dir string, fsys FS, opts Options) (*MountPoint, error) {
	opts = opts.withDefaults()
	var sid string
	if opts.Fanout != nil {
		s, ok := fsys.(interface{ SessionID() string })
		if !ok {
			return nil, fmt.Errorf("mount %s: a Fanout needs a filesystem that reports its session", dir)
		}
		sid = s.SessionID()
	}
	if _, err := fsys.GetAttr(ctx, opts.Root); err != nil {
		return nil, fmt.Errorf("mount %s: root inode %d: %w", dir, opts.Root, err)
	}
	m := &MountPoint{dir: dir, fs: fsys, opts: opts, done: make(chan struct{}), replied: map[int64]time.Time{}, holds: map[int64]struct{}{}}
	m.inval.wake = make(chan struct{}, 1)
	root := &node{m: m, ino: opts.Root}
	entry, attr, neg := opts.EntryTimeout, opts.AttrTimeout, opts.NegativeTimeout
	var extra uint64
	if opts.Writeback {
		extra |= fuse.CAP_WRITEBACK_CACHE
	}
	fo := &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:        "filepath",
			Name:          "filepath",
			MaxWrite:      opts.MaxWrite,
			MaxBackground: 64,
			DisableXAttrs: true,
			// READDIRPLUS, answered from one VFS query per directory
			// (dirHandle): the kernel learns every entry's attributes
			// with the listing, so the lstat of each that follows (ls
			// -l, git status, find) needs no LOOKUP.
			// With a Fanout every change made elsewhere drops the
			// pages it affects, and OPEN keeps the page cache only
			// when the file is unchanged: the kernel need not drop a
			// file's pages whenever its mtime moves (which would also
			// drop what a new file's cacheStore put there).
			ExplicitDataCacheControl: opts.Fanout != nil,
			ExtraCapabilities:        extra,
			Debug:                    opts.Debug,
		},
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &neg,
		RootStableAttr:  &fs.StableAttr{Ino: uint64(opts.Root)},
		// A mode without permission bits (open(O_CREAT) or mkdir with
		// mode 0, chmod 0) is shown as it is, not as go-fuse's 0644/0755.
		NullPermissions: true,
		// Node ids are inode numbers (never reused by the VFS), so that
		// invalidation notices need no inode → node table.
		ExternalNodeID: true,
	}
	fd, err := mountFUSE(dir, opts.MaxWrite)
	if err != nil {
		return nil, err
	}
	// go-fuse serves an already mounted /dev/fuse descriptor passed as
	// the magic mount point /dev/fd/N; we mount ourselves because go-fuse
	// refuses a dead mount point (it stats it first).
	server, err := fuse.NewServer(fs.NewNodeFS(root, fo), fmt.Sprintf("/dev/fd/%d", fd), &fo.MountOptions)
	if err != nil {
		_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		syscall.Close(fd)
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	m.server, m.notify = server, server
	// The invalidator ends after the server and before done: whoever
	// waits for done (Close, Manager.Shutdown) has joined both.
	served := make(chan struct{})
	var invalidated sync.WaitGroup
	if opts.Fanout != nil {
		// Before serving, so that the mount leaves the Fanout however
		// early its server stops.
		opts.Fanout.add(sid, m)
		invalidated.Go(func() { m.invalidator(served) })
	}
	go func() {
		defer close(m.done)
		server.Serve()
		m.releaseHolds()
		if opts.Fanout != nil {
			opts.Fanout.remove(sid, m)
		}
		close(served)
		invalidated.Wait()
	}()
	if err := server.WaitMount(); err != nil {
		_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		_ = m.Close()
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	m.dev = st.Dev
	pollHack(dir)
	return m, nil
}

// pollHack makes the kernel send one POLL now, which go-fuse answers with
// ENOSYS so that the kernel never polls this connection again. Otherwise the
// first epoll_ctl on a file of the mount by this process (os.Open registers
// files with the Go netpoller) waits for a POLL answer while holding the
// runtime's epoll lock, and the server, which needs the netpoller, never
// answers: a deadlock. go-fuse does this itself only for mounts it makes
// (it is the .go-fuse-epoll-hack file go-fuse serves in the root).
func pollHack(dir string) {
	fd, err := syscall.Open(dir+"/.go-fuse-epoll-hack", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer syscall.Close(fd)
	_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLPRI | unix.POLLOUT}}, 0)
}

// mountFUSE opens /dev/fuse and mounts it at dir (as fusermount would, with
// default_permissions and allow_other: permission checks are the kernel's,
// and every uid in a container may use the mount). It returns the device
// descriptor.
func mountFUSE(dir string, maxWrite int) (int, error) {
	fd, err := syscall.Open("/dev/fuse", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("mount %s: open /dev/fuse: %w", dir, err)
	}
	data := fmt.Sprintf("fd=%d,rootmode=40000,user_id=%d,group_id=%d,default_permissions,allow_other,max_read=%d",
		fd, os.Geteuid(), os.Getegid(), maxWrite)
	if err := syscall.Mount("filepath", dir, "fuse.filepath", syscall.MS_NOSUID|syscall.MS_NODEV, data); err != nil {
		syscall.Close(fd)
		return -1, fmt.Errorf("mount %s: %w", dir, err)
	}
	return fd, nil
}

// hold records a hold of ino; it reports whether ino was not held yet.
func (m *MountPoint) hold(ino int64) bool {
	m.hmu.Lock()
	defer m.hmu.Unlock()
	if _, ok := m.holds[ino]; ok {
		return false
	}
	m.holds[ino] = struct{}{}
	return true
}

// unhold ends the hold of ino; it reports whether ino was held.
func (m *MountPoint) unhold(ino int64) bool {
	m.hmu.Lock()
	defer m.hmu.Unlock()
	if _, ok := m.holds[ino]; !ok {
		return false
	}
	delete(m.holds, ino)
	return true
}

// releaseHolds ends the holds left when the server stops: its kernel
// refers to nothing any more.
func (m *MountPoint) releaseHolds() {
	m.hmu.Lock()
	inos := make([]int64, 0, len(m.holds))
	for ino := range m.holds {
		inos = append(inos, ino)
	}
	clear(m.holds)
	m.hmu.Unlock()
	ctx := events.WithOrigin(context.Background(), m)
	for _, ino := range inos {
		if err := m.fs.Release(ctx, ino); err != nil {
			m.opts.Logger.Warn("workspace: release at unmount", "dir", m.dir, "ino", ino, "err", err)
		}
	}
}

// Dir returns the mount point.
func (m *MountPoint) Dir() string { return m.dir }

// Close unmounts and waits for the server to stop. When the mount is busy,
// or a container still holds a bind of it, it is detached and the FUSE
// connection aborted, so that Close always ends the server. Safe to call
// more than once.
func (m *MountPoint) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.close() })
	return m.closeErr
}

func (m *MountPoint) close() error {
	if err := syscall.Unmount(m.dir, 0); err != nil {
		if derr := syscall.Unmount(m.dir, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("unmount %s: %v; lazy unmount: %w", m.dir, err, derr)
		}
	}
	select {
	case <-m.done:
		return nil
	case <-time.After(time.Second):
	}
	// Still served: something (a container's bind) holds the connection,
	// or the server is still ending (releasing its holds). An abort of a
	// connection that has ended already finds no control file.
	if err := m.Abort(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unmount %s: detached, but %w", m.dir, err)
	}
	select {
	case <-m.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("unmount %s: server did not stop after abort", m.dir)
	}
}

// Abort ends the FUSE connection without unmounting, as a crash would: the
// mount point then fails with ENOTCONN until a new mount is stacked on it
// or it is unmounted.
func (m *MountPoint) Abort() error {
	const ctl = "/sys/fs/fuse/connections"
	abort := fmt.Sprintf("%s/%d/abort", ctl, minor(m.dev))
	if _, err := os.Stat(abort); errors.Is(err, os.ErrNotExist) {
		// The fusectl filesystem is not mounted everywhere by default.
		if err := syscall.Mount("fusectl", ctl, "fusectl", 0, ""); err != nil && !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("abort fuse connection: mount fusectl: %w", err)
		}
	}
	if err := os.WriteFile(abort, []byte("1"), 0o200); err != nil {
		return fmt.Errorf("abort fuse connection: %w", err)
	}
	return nil
}

// minor extracts the minor device number from a Linux dev_t.
func minor(dev uint64) uint64 { return (dev & 0xff) | ((dev >> 12) & 0xfff00) }

// ClearMounts lazily unmounts every mount stacked at dir (live or dead).
func ClearMounts(dir string) error {
	for i := 0; i < 64; i++ {
		mp, _, err := mountInfo(dir)
		if err != nil {
			return err
		}
		if !mp {
			return nil
		}
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
	return fmt.Errorf("unmount %s: too many stacked mounts", dir)
}

// errno maps a VFS error to the errno the kernel gets.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.Canceled) {
		return syscall.EINTR
	}
	return syscall.EIO
}

var _ FS = (*vfs.FS)(nil)
