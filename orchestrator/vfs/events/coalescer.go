package events

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/protocol"
)

// Appender durably records a file change in the session log (the store's
// Append satisfies it through a small adapter).
type Appender interface {
	// Append writes one record of the session log; nodeID is the node
	// whose agent made the change ("": a person, or filepath).
	Append(ctx context.Context, sessionID, nodeID, kind string, data any) error
}

// FileEvent is the data of a "file" log record, defined once in protocol.
type FileEvent = protocol.FileChange

// Coalescer is the session filesystem's Notifier (vfs.Config.Notifier):
// it collects changes per session and path for a window and then appends
// one record per path with the net operation:
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
	node    string // the last writer's node ("" : a person, or unknown)
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

// FileChanged records a change; it never blocks on the Appender.
func (c *Coalescer) FileChanged(sessionID, nodeID, op, path string, size int64) {
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
		m[path] = &pendingChange{first: c.now(), seq: c.seq, startOp: op, op: op, size: size, node: nodeID}
		return
	}
	p.size, p.node = size, nodeID
	p.op = merge(p.startOp, p.op, op)
}

// merge returns the net op after next, given the window's first op and the net op so far.
func merge(start, cur, next string) string {
	switch next {
	case protocol.FileDeleted:
		if start == protocol.FileCreated {
			return "" // born and gone inside the window
		}
		return protocol.FileDeleted
	case protocol.FileCreated:
		if cur == protocol.FileDeleted || (cur == "" && start != protocol.FileCreated) {
			return protocol.FileModified // replaced
		}
		if start == protocol.FileCreated {
			return protocol.FileCreated
		}
		return protocol.FileModified
	default: // modified
		if cur == protocol.FileCreated || (cur == "" && start == protocol.FileCreated) {
			return protocol.FileCreated
		}
		return protocol.FileModified
	}
}

// Flush appends every change older than the window (all when force is set).
func (c *Coalescer) Flush(ctx context.Context, force bool) {
	now := c.now()
	type rec struct {
		sid  string
		node string
		seq  int
		ev   FileEvent
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
				due = append(due, rec{sid, p.node, p.seq, FileEvent{Op: p.op, Path: path, Size: p.size}})
			}
		}
		if len(m) == 0 {
			delete(c.pending, sid)
		}
	}
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].seq < due[j].seq })
	for _, r := range due {
		if err := c.out.Append(ctx, r.sid, r.node, "file", r.ev); err != nil {
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
