// Package events is what the session filesystem (orchestrator/vfs) tells
// the rest of the orchestrator after each commit, independent of FUSE:
// file changes, coalesced into the session log's "file" records
// (Coalescer), and the names and inodes a commit touched (Change), which
// the FUSE mounts turn into cache invalidations.
package events

import "context"

// Change is what one committed transaction of the session filesystem
// changed, as its Invalidator learns it. Lists may repeat an item.
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

// Empty reports whether c names nothing.
func (c *Change) Empty() bool { return len(c.Entries)+len(c.Attrs)+len(c.Data) == 0 }

type originKey struct{}

// WithOrigin tags ctx with the cache a change made under it comes from (a
// mount), passed to the Invalidator: that cache saw the change itself.
func WithOrigin(ctx context.Context, origin any) context.Context {
	return context.WithValue(ctx, originKey{}, origin)
}

// Origin returns the origin WithOrigin tagged ctx with, nil when none (a
// change through the REST API).
func Origin(ctx context.Context) any { return ctx.Value(originKey{}) }
