package vfs

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
)

// Notifier receives every change made through either API, after its
// commit, with a FileChange op (protocol.FileCreated, FileModified,
// FileDeleted). events.Coalescer implements it.
type Notifier interface {
	FileChanged(sessionID, op, path string, size int64)
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
	fs.v.cfg.Notifier.FileChanged(fs.sid, ev.op, ev.path, ev.size)
}
