package workspace

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Fanout passes the VFS's change reports to every mount of the changed
// session except the one the change came through (whose kernel saw it), so
// that each kernel drops the names, attributes and pages it cached of what
// another node or the REST API changed. Install it with
// vfs.VFS.SetInvalidator and give it to the mounts in Options.Fanout; the
// Manager does both for its mounts.
//
// With it the kernel may cache for long (Options timeouts default to 30 s):
// a change shows in the other mounts as soon as the notice is delivered,
// instead of when a 1 s cache entry expires.
type Fanout struct {
	mu       sync.Mutex
	sessions map[string]map[*MountPoint]struct{}
}

var _ vfs.Invalidator = (*Fanout)(nil)

// Invalidate queues ch for every mount of the session but origin. A change
// with no mount as origin (the REST API) waits, up to deliverWait, until
// every mount has told its kernel, so that when the API answers, every
// container sees the change.
//
// A mount that let such a wait time out (its notices wait on a busy
// directory) is not waited for again until it has caught up, so that one
// stuck mount does not slow every API change down.
func (f *Fanout) Invalidate(sessionID string, origin any, ch events.Change) {
	var w *waiter
	var pushed func() // holds the waiter open until every push is made
	if origin == nil {
		w = &waiter{all: make(chan struct{})}
		pushed = w.add()
	}
	var waited []*MountPoint
	f.mu.Lock()
	for m := range f.sessions[sessionID] {
		if m == origin {
			continue
		}
		var done func()
		if w != nil && !m.inval.lagging.Load() {
			done = w.add()
			waited = append(waited, m)
		}
		m.inval.push(invalItem{ch: ch, done: done})
	}
	f.mu.Unlock()
	if w == nil {
		return
	}
	pushed()
	if len(waited) == 0 {
		return
	}
	t := time.NewTimer(deliverWait)
	defer t.Stop()
	select {
	case <-w.all:
	case <-t.C:
		for _, m := range waited {
			m.inval.lagging.Store(true) // cleared when its queue is handled
		}
	}
}

// deliverWait bounds how long a change from the REST API waits for the
// mounts' notices.
const deliverWait = 2 * time.Second

// waiter closes all once every function add returned has been called.
type waiter struct {
	mu   sync.Mutex
	n    int
	all  chan struct{}
	done bool
}

func (w *waiter) add() func() {
	w.mu.Lock()
	w.n++
	w.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.n--
			if w.n == 0 && !w.done {
				w.done = true
				close(w.all)
			}
		})
	}
}

func (f *Fanout) add(sessionID string, m *MountPoint) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sessions == nil {
		f.sessions = map[string]map[*MountPoint]struct{}{}
	}
	if f.sessions[sessionID] == nil {
		f.sessions[sessionID] = map[*MountPoint]struct{}{}
	}
	f.sessions[sessionID][m] = struct{}{}
}

func (f *Fanout) remove(sessionID string, m *MountPoint) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sessions[sessionID], m)
	if len(f.sessions[sessionID]) == 0 {
		delete(f.sessions, sessionID)
	}
}

// invalQueue holds what a mount has still to tell its kernel, in order.
// push never blocks (it runs on the goroutine that committed the change,
// which may hold locks a FUSE request of this mount waits for); the
// mount's own goroutine sends the notices.
type invalQueue struct {
	mu    sync.Mutex
	items []invalItem
	wake  chan struct{}
	// pushes counts changes pushed from elsewhere; it is incremented
	// before the change is queued.
	pushes atomic.Uint64
	// lagging: an API change timed out waiting for this queue (see
	// Fanout.Invalidate); cleared when the queue has been handled.
	lagging atomic.Bool
}

// invalItem is a change made elsewhere, a change this mount made that its
// kernel did not see (self), or a notice to send again.
type invalItem struct {
	ch    events.Change
	self  bool   // the mount's own attribute cache knows: no generation bump
	retry int    // earlier attempts of a notice that failed with ENOENT
	done  func() // called once the item is handled
}

const (
	// retryAfter and maxRetries: an inode notice that fails with ENOENT
	// for an inode this mount has just handed to the kernel (its reply may
	// not be installed yet) is sent again after retryAfter, 2×, 4×.
	retryAfter = 20 * time.Millisecond
	maxRetries = 3
	// recentFor is how long after a reply an inode counts as just handed;
	// maxReplied bounds how many are remembered.
	recentFor  = time.Second
	maxReplied = 1 << 16
)

// push queues a change made elsewhere.
func (q *invalQueue) push(it invalItem) {
	if !it.self && it.retry == 0 {
		q.pushes.Add(1)
	}
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
	q.signal()
}

func (q *invalQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *invalQueue) take() []invalItem {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.items
	q.items = nil
	return b
}

// invalidator sends the queued notices until stop is closed (the server
// has stopped). Then it cancels the retries it scheduled and reports what is
// still queued as done (there is no kernel left to tell; the Fanout no
// longer pushes to the mount, which left it before stop).
func (m *MountPoint) invalidator(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			m.retries.stop()
			for _, it := range m.inval.take() {
				if it.done != nil {
					it.done()
				}
			}
			return
		case <-m.inval.wake:
		}
		m.handle(m.inval.take())
		m.inval.lagging.Store(false)
	}
}

// handle sends the notices of a batch, then reports the batch done (a
// notice retried later is not waited for).
func (m *MountPoint) handle(batch []invalItem) {
	m.applyInvalidations(batch)
	for _, it := range batch {
		if it.done != nil {
			it.done()
		}
	}
}

// applyInvalidations tells the kernel which names, attributes and pages to
// drop. For a new change it first makes every attribute this mount cached
// stale (a cheap, coarse step that needs no inode → node map).
// Notices for what the kernel does not know fail with ENOENT, which is
// fine, except for an inode this mount has just handed to the kernel: the
// reply that makes the kernel know it may still be on its way, so the
// notice is sent again a little later.
func (m *MountPoint) applyInvalidations(batch []invalItem) {
	if len(batch) == 0 {
		return
	}
	for _, it := range batch {
		if !it.self && it.retry == 0 {
			m.gen.Add(1)
			break
		}
	}
	type entry struct {
		parent uint64
		name   string
	}
	entries := map[entry]struct{}{}
	data := map[int64]int{} // ino → retries so far
	attrs := map[int64]int{}
	for _, it := range batch {
		for _, e := range it.ch.Entries {
			if p, ok := m.nodeID(e.Parent); ok {
				entries[entry{p, e.Name}] = struct{}{}
			}
			// A changed entry changes its directory's listing, which
			// the kernel may cache (FOPEN_CACHE_DIR): drop it with the
			// directory's pages.
			data[e.Parent] = max(data[e.Parent], it.retry)
		}
		for _, ino := range it.ch.Data {
			data[ino] = max(data[ino], it.retry)
		}
		for _, ino := range it.ch.Attrs {
			attrs[ino] = max(attrs[ino], it.retry)
		}
	}
	for e := range entries {
		m.notified(m.notify.EntryNotify(e.parent, e.name))
	}

	for ino, r := range data {
		m.inodeNotice(ino, true, r)
	}
	for ino, r := range attrs {
		if _, ok := data[ino]; !ok {
			m.inodeNotice(ino, false, r)
		}
	}
}

// inodeNotice drops the kernel's attributes of ino, and its pages too when
// data is set; it schedules a retry when the kernel does not know ino yet
// but should soon.
func (m *MountPoint) inodeNotice(ino int64, data bool, retries int) {
	id, ok := m.nodeID(ino)
	if !ok {
		return
	}
	off := int64(-1) // attributes only
	if data {
		off = 0
	}
	st := m.notify.InodeNotify(id, off, 0)
	if st == fuse.ENOENT && retries < maxRetries && m.recent(ino) {
		ch := events.Change{Attrs: []int64{ino}}
		if data {
			ch = events.Change{Data: []int64{ino}}
		}
		m.retries.after(retryAfter<<retries, func() {
			m.inval.push(invalItem{ch: ch, retry: retries + 1})
		})
		return
	}
	m.notified(st)
}

// retryTimers are the pending retries of a mount's notices, cancelled when
// the mount stops so that none fires after it (Close joins them).
type retryTimers struct {
	mu      sync.Mutex
	pending map[*time.Timer]struct{}
	stopped bool
	running sync.WaitGroup // timers not stopped in time: their f may run
}

// after runs f after d unless stop comes first.
func (r *retryTimers) after(d time.Duration, f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	if r.pending == nil {
		r.pending = map[*time.Timer]struct{}{}
	}
	r.running.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer r.running.Done()
		r.mu.Lock() // after the Lock in after: t is set
		_, live := r.pending[t]
		delete(r.pending, t)
		r.mu.Unlock()
		if live {
			f()
		}
	})
	r.pending[t] = struct{}{}
}

// stop cancels every pending timer and waits for any that already fired.
func (r *retryTimers) stop() {
	r.mu.Lock()
	r.stopped = true
	for t := range r.pending {
		if t.Stop() {
			r.running.Done()
		}
	}
	clear(r.pending)
	r.mu.Unlock()
	r.running.Wait()
}

// len returns how many timers are pending.
func (r *retryTimers) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}

// handed records that a reply has just given ino to the kernel.
func (m *MountPoint) handed(ino int64) {
	if m.opts.Fanout == nil {
		return
	}
	now := time.Now()
	m.rmu.Lock()
	defer m.rmu.Unlock()
	if len(m.replied) >= maxReplied {
		for k, t := range m.replied {
			if now.Sub(t) > recentFor {
				delete(m.replied, k)
			}
		}
		if len(m.replied) >= maxReplied {
			clear(m.replied) // more than maxReplied lookups in recentFor
		}
	}
	m.replied[ino] = now
}

// recent reports whether a reply gave ino to the kernel within recentFor.
func (m *MountPoint) recent(ino int64) bool {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	t, ok := m.replied[ino]
	return ok && time.Since(t) < recentFor
}

// notifier is the part of *fuse.Server the invalidator uses (a test can
// stand in for the kernel).
type notifier interface {
	EntryNotify(parent uint64, name string) fuse.Status
	InodeNotify(node uint64, off int64, length int64) fuse.Status
	InodeNotifyStoreCache(node uint64, offset int64, data []byte) fuse.Status
}

// nodeID is the FUSE node id of a VFS inode: the mount uses inode numbers
// as node ids (fs.Options.ExternalNodeID), except for its root, which the
// kernel knows as 1.
func (m *MountPoint) nodeID(ino int64) (uint64, bool) {
	switch {
	case ino == m.opts.Root:
		return fuse.FUSE_ROOT_ID, true
	case ino == fuse.FUSE_ROOT_ID || ino <= 0:
		return 0, false // the session root, outside this mount's subtree
	}
	return uint64(ino), true
}

func (m *MountPoint) notified(st fuse.Status) {
	if st != fuse.OK && st != fuse.ENOENT {
		m.opts.Logger.Debug("workspace: invalidation notice", "dir", m.dir, "status", st)
	}
}
