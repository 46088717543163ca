package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// fakeKernel stands in for the kernel's side of the notices: it records
// them and answers ENOENT for inodes it does not know yet.
type fakeKernel struct {
	mu    sync.Mutex
	known map[uint64]bool
	soon  map[uint64]bool // installed right after the first notice about it
	log   []string
}

func (k *fakeKernel) EntryNotify(parent uint64, name string) fuse.Status {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.log = append(k.log, fmt.Sprintf("entry %d/%s", parent, name))
	return fuse.OK
}

func (k *fakeKernel) InodeNotify(node uint64, off, length int64) fuse.Status {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.log = append(k.log, fmt.Sprintf("inode %d %d", node, off))
	if !k.known[node] {
		k.known[node] = k.soon[node]
		return fuse.ENOENT
	}
	return fuse.OK
}

func (k *fakeKernel) InodeNotifyStoreCache(node uint64, off int64, data []byte) fuse.Status {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.log = append(k.log, fmt.Sprintf("store %d", node))
	return fuse.OK
}

func (k *fakeKernel) snapshot() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.log...)
}

func (k *fakeKernel) count(s string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, l := range k.log {
		if l == s {
			n++
		}
	}
	return n
}

// TestNoticeRetriedForInodeJustHanded: a notice about an inode that a reply
// has just handed to the kernel, but that the kernel has not installed yet
// (ENOENT), is sent again until the kernel has it; a notice about an inode
// the mount never handed out is sent once. Otherwise the reply would
// install the attributes the change made stale, for the whole 30 s.
func TestNoticeRetriedForInodeJustHanded(t *testing.T) {
	// The kernel installs inode 42 (just handed out by a reply) right after
	// the first notice about it arrives; it never learns of 43.
	k := &fakeKernel{known: map[uint64]bool{}, soon: map[uint64]bool{42: true}}
	m := &MountPoint{opts: Options{Fanout: &Fanout{}}.withDefaults(), notify: k, done: make(chan struct{}), replied: map[int64]time.Time{}}
	m.inval.wake = make(chan struct{}, 1)
	defer close(m.done)
	go m.invalidator(m.done)

	m.handed(42)
	gen := m.gen.Load()
	m.inval.push(invalItem{ch: events.Change{Data: []int64{42, 43}, Entries: []events.Entry{{Parent: 1, Name: "f"}}}})
	testkit.EventuallyNil(t, 2*time.Second, "the notices, and the one about 42 again", func() error {
		if k.count("inode 42 0") != 2 || k.count("inode 43 0") != 1 || k.count("entry 1/f") != 1 {
			return fmt.Errorf("log %v", k.snapshot())
		}
		return nil
	})
	if m.gen.Load() == gen {
		t.Fatal("a change from elsewhere left the mount's attribute cache trusted")
	}
	// Time is the point: no notice may come after the last retry's time.
	time.Sleep(2 * retryAfter << maxRetries)
	if n := k.count("inode 43 0"); n != 1 {
		t.Fatalf("a notice about an inode never handed out was sent %d times", n)
	}
	if n := k.count("inode 42 0"); n != 2 {
		t.Fatalf("the notice about 42 was sent %d times, want 2 (ENOENT, then delivered)", n)
	}
}

// TestRewrittenNewFileNotCachedStale: a new file whose start is rewritten
// before close (as zip and tar writers do) must not have its first version
// put in the page cache; later opens through the mount read what was
// written, also after a stat made the attributes fresh.
func TestRewrittenNewFileNotCachedStale(t *testing.T) {
	e := newEnv(t, vfs.Config{})
	m := e.mount(t, Options{})
	for i := 0; i < 20; i++ {
		p := filepath.Join(m.Dir(), fmt.Sprintf("z%d", i))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("HEADER-old body of the archive\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("HEADER-new"), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // time is the point: room for a wrong store of the first version
		os.Stat(p)
		for j := 0; j < 2; j++ {
			wantContent(t, p, "HEADER-new body of the archive\n")
		}
	}
	// Data written after the close, through another descriptor, wins over
	// a store of the first version too.
	p := filepath.Join(m.Dir(), "late")
	mustWrite(t, p, "first version\n")
	if err := os.WriteFile(p, []byte("second\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // time is the point: room for a wrong store of the first version
	os.Stat(p)
	wantContent(t, p, "second\n")
}

// TestDirMtimeAfterLazyCreate: the directory's mtime the mount shows follows
// the VFS after a lazily created file reaches it, even when the kernel
// asked for the directory's attributes in between.
func TestDirMtimeAfterLazyCreate(t *testing.T) {
	e := newEnv(t, vfs.Config{})
	m := e.mount(t, Options{})
	ctx := ctxT(t)
	d := filepath.Join(m.Dir(), "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // time is the point: a later mtime for the create
	f, err := os.Create(filepath.Join(d, "new"))
	if err != nil {
		t.Fatal(err)
	}
	os.Stat(d) // the kernel caches the directory's attributes before the file is in the VFS
	f.WriteString("x")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	da, err := e.fs.Lookup(ctx, vfs.RootIno, "d")
	if err != nil {
		t.Fatal(err)
	}
	sameMtime := func(what, dir string) {
		t.Helper()
		testkit.EventuallyNil(t, 2*time.Second, what, func() error {
			da, err := e.fs.Lookup(ctx, vfs.RootIno, "d")
			if err != nil {
				return err
			}
			st, err := os.Stat(dir)
			if err != nil {
				return err
			}
			if !st.ModTime().Equal(da.Mtime) {
				return fmt.Errorf("mount shows %v, VFS has %v", st.ModTime(), da.Mtime)
			}
			return nil
		})
	}
	if !da.Mtime.After(time.Now().Add(-time.Minute)) {
		t.Fatalf("directory mtime %v", da.Mtime)
	}
	sameMtime("the directory's mtime through the mount", d)

	// A new file still open in this mount while another mount changes the
	// directory: when the file reaches the VFS, its CREATE time is older
	// than the directory's mtime, which then moves to now; both mounts
	// show that.
	other := e.mount(t, Options{})
	od := filepath.Join(other.Dir(), "d")
	f1, err := os.Create(filepath.Join(d, "one"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // time is the point: the other mount's change comes later
	mustWrite(t, filepath.Join(od, "from-other"), "b")
	sameMtime("the other mount's change", d)
	f1.WriteString("1")
	f1.Close()
	sameMtime("the directory's mtime after the late create", d)
	sameMtime("the directory's mtime in another mount", od)
}

// TestAPIWriteSeenWhenItReturns: when a change through the REST API (the
// path API, no mount as origin) returns, every mount already shows it.
func TestAPIWriteSeenWhenItReturns(t *testing.T) {
	e := newEnv(t, vfs.Config{})
	b := e.mount(t, Options{}).Dir()
	ctx := ctxT(t)
	if _, _, err := e.fs.WriteFile(ctx, "/f", []byte("v000"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 50; i++ {
		wantContent(t, filepath.Join(b, "f"), fmt.Sprintf("v%03d", i-1)) // cached in b's kernel
		if _, _, err := e.fs.WriteFile(ctx, "/f", []byte(fmt.Sprintf("v%03d", i)), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wantContent(t, filepath.Join(b, "f"), "v050")
}

// TestManagerNeedsFanout: a Manager refuses to mount a filesystem whose VFS
// does not report to its Fanout, instead of serving stale files.
func TestManagerNeedsFanout(t *testing.T) {
	e := newEnv(t, vfs.Config{}) // its VFS reports to the env's own Fanout
	mgr, err := NewManager(ManagerConfig{
		Dir:  sharedDir(t),
		Open: func(context.Context, string) (FS, error) { return e.fs, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	_, err = mgr.Mount(ctxT(t), "node-1")
	if err == nil || !strings.Contains(err.Error(), "SetInvalidator") {
		t.Fatalf("mount: %v, want an error naming SetInvalidator", err)
	}
	e.v.SetInvalidator(mgr.Fanout())
	if _, err := mgr.Mount(ctxT(t), "node-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mgr.Path("node-1"), ".")); err != nil {
		t.Fatal(err)
	}
}

// TestStoppedMountReportsQueuedDone: whatever a stopping mount still has
// queued is reported done, so a REST change waiting on it returns at once.
func TestStoppedMountReportsQueuedDone(t *testing.T) {
	for i := 0; i < 20; i++ {
		k := &fakeKernel{known: map[uint64]bool{}}
		m := &MountPoint{opts: Options{Fanout: &Fanout{}}.withDefaults(), notify: k, done: make(chan struct{}), replied: map[int64]time.Time{}}
		m.inval.wake = make(chan struct{}, 1)
		called := 0
		m.inval.push(invalItem{ch: events.Change{Attrs: []int64{5}}, done: func() { called++ }})
		close(m.done) // the server stopped before the goroutine ran
		m.invalidator(m.done)
		if called != 1 {
			t.Fatalf("round %d: done called %d times, want 1", i, called)
		}
	}
}

// TestStoppedMountCancelsRetries: a notice waiting to be sent again is
// cancelled when the mount stops: no timer of the mount fires after its
// invalidator has ended.
func TestStoppedMountCancelsRetries(t *testing.T) {
	k := &fakeKernel{known: map[uint64]bool{}}
	m := &MountPoint{opts: Options{Fanout: &Fanout{}}.withDefaults(), notify: k, done: make(chan struct{}), replied: map[int64]time.Time{}}
	m.inval.wake = make(chan struct{}, 1)
	stop := make(chan struct{})
	ended := make(chan struct{})
	go func() { defer close(ended); m.invalidator(stop) }()
	m.handed(42) // the kernel does not know 42 yet: its notice is retried
	m.inval.push(invalItem{ch: events.Change{Data: []int64{42}}})
	testkit.EventuallyNil(t, 2*time.Second, "a retry scheduled", func() error {
		if m.retries.len() == 0 {
			return fmt.Errorf("no retry pending; log %v", k.snapshot())
		}
		return nil
	})
	close(stop)
	<-ended
	if n := m.retries.len(); n != 0 {
		t.Fatalf("%d retries pending after the mount stopped", n)
	}
	m.retries.after(time.Nanosecond, func() { t.Error("a retry was scheduled after the mount stopped") })
	if n := m.retries.len(); n != 0 {
		t.Fatalf("%d retries pending after the mount stopped", n)
	}
	if items := m.inval.take(); len(items) != 0 {
		t.Fatalf("a cancelled retry queued %d notices", len(items))
	}
}
