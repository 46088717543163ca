package vfs

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/protocol"
)

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
		err := tx.QueryRowContext(ctx, `SELECT parent_ino, name FROM fs_dentry WHERE session_id=? AND ino=? ORDER BY id LIMIT 1`, fs.sid, ev.ino).Scan(&parent, &name)
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
	ev.path = joinPath(dir, name)
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

// Appender durably records a file change in the session log (the store's
// Append satisfies it through a small adapter).
type Appender interface {
	Append(ctx context.Context, sessionID, kind string, data any) error
}

// FileEvent is the data of a "file" log record, defined once in protocol.
type FileEvent = protocol.FileChange

// Coalescer is a Notifier that collects changes per session and path for a
// window and then appends one record per path with the net operation:
// created+modified is created, created+deleted is nothing, modified×N is one
// modified, deleted+created is modified. Run owns the flushing goroutine.
type Coalescer struct {
	window time.Duration
	now    func() time.Time
	out    Appender
	log    *slog.Logger

	mu      sync.Mutex
	seq     int
	pending map[string]map[string]*pendingChange // session → path → change
}

type pendingChange struct {
	first   time.Time
	seq     int
	startOp string // the first op seen in this window
	op      string // the net op so far ("" means nothing to report)
	size    int64
}

// NewCoalescer returns a Coalescer with the given window (<= 0: 200 ms) and
// clock (nil: time.Now).
func NewCoalescer(out Appender, window time.Duration, now func() time.Time, log *slog.Logger) *Coalescer {
	if window <= 0 {
		window = 200 * time.Millisecond
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Coalescer{window: window, now: now, out: out, log: log, pending: map[string]map[string]*pendingChange{}}
}

var _ Notifier = (*Coalescer)(nil)

// FileChanged records a change; it never blocks on the Appender.
func (c *Coalescer) FileChanged(sessionID, op, path string, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.pending[sessionID]
	if m == nil {
		m = map[string]*pendingChange{}
		c.pending[sessionID] = m
	}
	p := m[path]
	if p == nil {
		c.seq++
		m[path] = &pendingChange{first: c.now(), seq: c.seq, startOp: op, op: op, size: size}
		return
	}
	p.size = size
	p.op = merge(p.startOp, p.op, op)
}

// merge returns the net op after next, given the window's first op and the net op so far.
func merge(start, cur, next string) string {
	switch next {
	case OpDeleted:
		if start == OpCreated {
			return "" // born and gone inside the window
		}
		return OpDeleted
	case OpCreated:
		if cur == OpDeleted || (cur == "" && start != OpCreated) {
			return OpModified // replaced
		}
		if start == OpCreated {
			return OpCreated
		}
		return OpModified
	default: // modified
		if cur == OpCreated || (cur == "" && start == OpCreated) {
			return OpCreated
		}
		return OpModified
	}
}

// Flush appends every change older than the window (all when force is set).
func (c *Coalescer) Flush(ctx context.Context, force bool) {
	now := c.now()
	type rec struct {
		sid string
		seq int
		ev  FileEvent
	}
	var due []rec
	c.mu.Lock()
	for sid, m := range c.pending {
		for path, p := range m {
			if !force && now.Sub(p.first) < c.window {
				continue
			}
			delete(m, path)
			if p.op != "" {
				due = append(due, rec{sid, p.seq, FileEvent{Op: p.op, Path: path, Size: p.size}})
			}
		}
		if len(m) == 0 {
			delete(c.pending, sid)
		}
	}
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].seq < due[j].seq })
	for _, r := range due {
		if err := c.out.Append(ctx, r.sid, "file", r.ev); err != nil {
			c.log.WarnContext(ctx, "append file event", "session_id", r.sid, "path", r.ev.Path, "err", err)
		}
	}
}

// Run flushes due changes every half window until ctx ends, then flushes the rest.
func (c *Coalescer) Run(ctx context.Context) {
	t := time.NewTicker(c.window / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.Flush(context.WithoutCancel(ctx), true)
			return
		case <-t.C:
			c.Flush(ctx, false)
		}
	}
}
