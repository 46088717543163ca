package vfs

import "context"

// Invalidator learns, after each committed change, which names and inodes
// it touched, so that caches of them can be dropped: the workspace Manager
// tells the kernel behind every other FUSE mount of the session, which can
// then cache names and attributes for long instead of asking again.
//
// Invalidate runs on the committing goroutine, after the commit (no
// database connection or VFS lock is held). For a change made through a
// mount it must not block (that mount's FUSE request is still running);
// for one with no origin (the REST API) it may wait, bounded, until the
// caches know.
type Invalidator interface {
	Invalidate(sessionID string, origin any, ch Change)
}

// Change is what one transaction changed. Lists may repeat an item.
type Change struct {
	// Entries are names added, removed or pointed at another inode.
	Entries []Entry
	// Attrs are inodes whose attributes changed (times, mode, owner, link
	// count, size); Data are inodes whose content changed (their
	// attributes too).
	Attrs []int64
	Data  []int64
}

// Entry is a name in a directory.
type Entry struct {
	Parent int64
	Name   string
}

func (c *Change) empty() bool { return len(c.Entries)+len(c.Attrs)+len(c.Data) == 0 }

type originKey struct{}

// WithOrigin tags ctx with the cache a change made under it comes from (a
// mount), passed to the Invalidator: that cache saw the change itself.
func WithOrigin(ctx context.Context, origin any) context.Context {
	return context.WithValue(ctx, originKey{}, origin)
}

func originOf(ctx context.Context) any { return ctx.Value(originKey{}) }

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
	if p == nil || t.sid == "" || t.changes.empty() {
		return
	}
	(*p).Invalidate(t.sid, originOf(ctx), t.changes)
}

// changedEntry records that name in parent changed (and with it the
// directory's attributes).
func (fs *FS) changedEntry(tx *txn, parent int64, name string) {
	tx.sid = fs.sid
	tx.changes.Entries = append(tx.changes.Entries, Entry{parent, name})
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
