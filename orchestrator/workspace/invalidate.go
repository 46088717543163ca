package workspace

import (
	"sync"

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
	mu   sync.Mutex
	q    []vfs.Change
	wake chan struct{}
}

func (q *invalQueue) push(ch vfs.Change) {
	q.mu.Lock()
	q.q = append(q.q, ch)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *invalQueue) take() []vfs.Change {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.q
	q.q = nil
	return b
}

// invalidator sends the queued notices until the server stops.
func (m *MountPoint) invalidator() {
	for {
		select {
		case <-m.done:
			return
		case <-m.inval.wake:
		}
		m.applyInvalidations(m.inval.take())
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
