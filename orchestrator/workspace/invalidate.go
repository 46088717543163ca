package workspace

import (
	"sync"
	"sync/atomic"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
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

// Invalidate queues ch for every mount of the session but origin.
func (f *Fanout) Invalidate(sessionID string, origin any, ch vfs.Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for m := range f.sessions[sessionID] {
		if m != origin {
			m.inval.push(ch)
		}
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

// invalQueue holds the changes a mount has still to tell its kernel.
// push never blocks (it runs on the goroutine that committed the change,
// which may hold locks a FUSE request of this mount waits for); the
// mount's own goroutine sends the notices.
type invalQueue struct {
	mu     sync.Mutex
	q      []vfs.Change
	stores []cacheStore
	wake   chan struct{}
	// pushes counts changes pushed from elsewhere; it is incremented
	// before the change is queued (see cacheStore).
	pushes atomic.Uint64
}

// cacheStore is the content of a file this mount has just created, to put in the
// kernel's page cache so that reading it back needs no READ (nor, since a
// cached read does not invalidate atime, a GETATTR at the next stat). It is
// dropped when any change from elsewhere was pushed since pushes was read,
// before the file reached the VFS: that change may be to this file, and its
// notice may have been handled already.
type cacheStore struct {
	ino    int64
	data   []byte
	pushes uint64
}

// maxStore bounds the content put in the page cache per new file.
const maxStore = 256 << 10

func (q *invalQueue) push(ch vfs.Change) {
	q.pushes.Add(1)
	q.mu.Lock()
	q.q = append(q.q, ch)
	q.mu.Unlock()
	q.signal()
}

func (q *invalQueue) pushStore(s cacheStore) {
	q.mu.Lock()
	q.stores = append(q.stores, s)
	q.mu.Unlock()
	q.signal()
}

func (q *invalQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *invalQueue) take() ([]vfs.Change, []cacheStore) {
	q.mu.Lock()
	defer q.mu.Unlock()
	b, s := q.q, q.stores
	q.q, q.stores = nil, nil
	return b, s
}

// invalidator sends the queued notices until the server stops.
func (m *MountPoint) invalidator() {
	for {
		select {
		case <-m.done:
			return
		case <-m.inval.wake:
		}
		changes, stores := m.inval.take()
		m.applyInvalidations(changes)
		for _, s := range stores {
			if m.inval.pushes.Load() != s.pushes {
				continue
			}
			if id, ok := m.nodeID(s.ino); ok {
				m.notified(m.server.InodeNotifyStoreCache(id, 0, s.data))
			}
		}
	}
}

// applyInvalidations first makes every attribute this mount cached stale
// (a cheap, coarse step that needs no inode → node map), then tells the
// kernel which names, attributes and pages to drop. Notices for what the
// kernel does not know fail with ENOENT, which is fine.
func (m *MountPoint) applyInvalidations(batch []vfs.Change) {
	if len(batch) == 0 {
		return
	}
	m.gen.Add(1)
	type entry struct {
		parent uint64
		name   string
	}
	entries := map[entry]struct{}{}
	data := map[uint64]struct{}{}
	attrs := map[uint64]struct{}{}
	for _, ch := range batch {
		for _, e := range ch.Entries {
			if p, ok := m.nodeID(e.Parent); ok {
				entries[entry{p, e.Name}] = struct{}{}
			}
		}
		for _, ino := range ch.Data {
			if id, ok := m.nodeID(ino); ok {
				data[id] = struct{}{}
			}
		}
		for _, ino := range ch.Attrs {
			if id, ok := m.nodeID(ino); ok {
				attrs[id] = struct{}{}
			}
		}
	}
	for e := range entries {
		m.notified(m.server.EntryNotify(e.parent, e.name))
	}
	for id := range data {
		m.notified(m.server.InodeNotify(id, 0, 0)) // pages and attributes
	}
	for id := range attrs {
		if _, ok := data[id]; !ok {
			m.notified(m.server.InodeNotify(id, -1, 0)) // attributes only
		}
	}
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
