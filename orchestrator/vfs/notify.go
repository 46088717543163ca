package vfs

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
	"github.com/filepath-dev/filepath/protocol"
)

// Notifier receives every change made through either API, after its
// commit, with a FileChange op (protocol.FileCreated, FileModified,
// FileDeleted), and the node whose view made it ("": the session's, a
// person's). events.Coalescer implements it.
type Notifier interface {
	FileChanged(sessionID, nodeID, op, path string, size int64)
}

// event is a change to report after commit. Its path is resolved inside the
// transaction (from parent+name, or from ino).
type event struct {
	op     string
	ino    int64
	parent int64
	name   string
	path   string
	size   int64
}

func (fs *FS) resolveEvent(ctx context.Context, tx *txn, ev *event) error {
	if fs.v.cfg.Notifier == nil || ev.op == "" {
		return nil
	}
	parent, name := ev.parent, ev.name
	if name == "" {
		// the first name of a written file (pathOf's choice for hard links)
		var err error
		parent, name, err = fs.firstName(ctx, tx, ev.ino)
		if err == sql.ErrNoRows {
			ev.op = "" // an orphan being written: it has no path
			return nil
		}
		if err != nil {
			return fmt.Errorf("path of inode %d: %w", ev.ino, err)
		}
	}
	dir, err := fs.dirPath(ctx, tx, parent)
	if err != nil {
		ev.op = "" // a directory without a name (orphan): nothing to report
		return nil
	}
	ev.path = paths.Join(dir, name)
	return nil
}

func (fs *FS) notify(ev event) {
	if fs.v.cfg.Notifier == nil || ev.op == "" || ev.path == "" {
		return
	}
	if fork, err := fs.isFork(context.Background(), fs.v.rq); fork || err != nil {
		return // a fork's changes are its diff, not the session's file records
	}
	if len(ev.path) > paths.MaxPathLen {
		// The path API names paths of at most MaxPathLen bytes: a change
		// deeper is reported as a change of the deepest directory above
		// it that it can name.
		cut := strings.LastIndexByte(ev.path[:paths.MaxPathLen+1], '/')
		ev.op, ev.path, ev.size = protocol.FileModified, ev.path[:max(cut, 1)], 0
	}
	fs.v.cfg.Notifier.FileChanged(fs.sid, fs.nodeID, ev.op, ev.path, ev.size)
}
