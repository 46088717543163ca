package vfs

import (
	"context"

	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
)

// Invalidator learns, after each committed change, which names and inodes
// it touched, so that caches of them can be dropped: the workspace Manager
// tells the kernel behind every other FUSE mount of the session, which can
// then cache names and attributes for long instead of asking again.
//
// The origin is the one the change's context carries (events.WithOrigin).
// Invalidate runs on the committing goroutine, after the commit (no
// database connection or VFS lock is held). For a change made through a
// mount it must not block (that mount's FUSE request is still running);
// for one with no origin (the REST API) it may wait, bounded, until the
// caches know.
type Invalidator interface {
	Invalidate(sessionID string, origin any, ch events.Change)
}

// SetInvalidator installs inv (nil removes it). Changes committed after it
// returns are reported to inv.
func (v *VFS) SetInvalidator(inv Invalidator) {
	if inv == nil {
		v.inval.Store(nil)
		return
	}
	v.inval.Store(&inv)
}

// Invalidator returns the Invalidator installed in fs's VFS, or nil.
func (fs *FS) Invalidator() Invalidator {
	if p := fs.v.inval.Load(); p != nil {
		return *p
	}
	return nil
}

// invalidate reports a committed transaction's changes.
func (v *VFS) invalidate(ctx context.Context, t *txn) {
	p := v.inval.Load()
	if p == nil || t.sid == "" || t.changes.Empty() {
		return
	}
	(*p).Invalidate(t.sid, events.Origin(ctx), t.changes)
}

// changedEntry records that name in parent changed (and with it the
// directory's attributes).
func (fs *FS) changedEntry(tx *txn, parent int64, name string) {
	tx.sid = fs.sid
	tx.changes.Entries = append(tx.changes.Entries, events.Entry{Parent: parent, Name: name})
	tx.changes.Attrs = append(tx.changes.Attrs, parent)
}

// changedAttrs records that the attributes of ino changed.
func (fs *FS) changedAttrs(tx *txn, ino int64) {
	tx.sid = fs.sid
	tx.changes.Attrs = append(tx.changes.Attrs, ino)
}

// changedData records that the content of ino changed.
func (fs *FS) changedData(tx *txn, ino int64) {
	tx.sid = fs.sid
	tx.changes.Data = append(tx.changes.Data, ino)
}
