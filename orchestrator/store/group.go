package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mattn/go-sqlite3"
	"gorm.io/gorm"

	"github.com/filepath-dev/filepath/protocol"
)

// DefaultGroupAppends is Config.GroupAppends when 0.
const DefaultGroupAppends = 128

// Group commit of appends (AppendWith, so every relay's batch with its
// cursor): the appends that wait for the write connection while another
// group commits are committed together in the next transaction, each under
// its own SAVEPOINT, so one that fails (a deleted node, a bad ref) rolls
// back alone. Under no load a group is one append and commits at once (no
// timer); under load N relays pay one commit instead of N. The caller whose
// append found no group committing leads: it commits the queued appends
// (its own among them) and then hands the lead to the first append still
// queued, so no caller commits for others for longer than its own append.
//
// What each append is promised does not change: its records get the next
// seqs of their session in queue order (a caller's appends are in its call
// order); they are published, in seq order, only after the transaction
// that holds them committed (durable before visible), and the call returns
// after that. The group holds the log lock of each session it appends to
// from before BEGIN until after its publishes (LOCKS.md: one goroutine takes
// several log locks only here, always before the write connection).

// appendReq is one AppendWith waiting in a group.
type appendReq struct {
	ctx       context.Context
	sessionID string
	recs      []protocol.Record // checked
	fn        func(tx *Tx, stored []protocol.Record) error

	out []protocol.Record
	err error
	// done receives false when the append was committed (or failed), true
	// when its caller is to lead the next group. Buffered: never blocks.
	done chan bool
}

// grouper queues appends for the next group.
type grouper struct {
	mu    sync.Mutex // guards queue, busy; leaf
	queue []*appendReq
	busy  bool // a leader is committing or about to
}

// appendGrouped runs one AppendWith through the group commit.
func (s *Store) appendGrouped(ctx context.Context, sessionID string, recs []protocol.Record, fn func(*Tx, []protocol.Record) error) ([]protocol.Record, error) {
	req := &appendReq{ctx: ctx, sessionID: sessionID, recs: recs, fn: fn, done: make(chan bool, 1)}
	g := &s.group
	g.mu.Lock()
	g.queue = append(g.queue, req)
	lead := !g.busy
	g.busy = true
	g.mu.Unlock()
	if !lead {
		// The leader commits or fails this append, or hands over the lead,
		// in bounded time: waiting is not abandoned on ctx (the append may
		// be committed already).
		if !<-req.done {
			return req.out, req.err
		}
	}
	for {
		g.mu.Lock()
		n := min(len(g.queue), s.cfg.GroupAppends)
		batch := append([]*appendReq(nil), g.queue[:n]...)
		g.queue = append(g.queue[:0], g.queue[n:]...)
		g.mu.Unlock()
		mine := false
		for _, r := range batch {
			mine = mine || r == req
		}
		s.commitGroup(batch)
		for _, r := range batch {
			if r != req {
				r.done <- false
			}
		}
		if mine {
			break
		}
	}
	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].done <- true // busy stays true: the lead passes on
	} else {
		g.busy = false
	}
	g.mu.Unlock()
	return req.out, req.err
}

// groupLog is a session's log within a group: its lock, held from before
// the transaction until after the publishes, and its last seq so far.
type groupLog struct {
	st     *logState
	last   int64
	known  bool // last is valid (read or cached)
	failed bool // an append of it failed: forget the cached seq
}

// commitGroup appends the batch in one transaction and sets each request's
// out and err. Requests whose context ended before it began are not run.
func (s *Store) commitGroup(batch []*appendReq) {
	logs := make(map[string]*groupLog)
	order := make([]string, 0, 1)
	for _, r := range batch {
		if _, ok := logs[r.sessionID]; !ok {
			logs[r.sessionID] = nil
			order = append(order, r.sessionID)
		}
	}
	// Log locks before the write connection, one goroutine at a time
	// taking several (only the leader does), so no cycle.
	for _, sid := range order {
		st := s.acquireLog(sid)
		logs[sid] = &groupLog{st: st, last: st.last, known: st.known}
	}
	defer func() {
		for _, sid := range order {
			l := logs[sid]
			s.releaseLog(sid, l.st, l.failed)
		}
	}()

	now := s.now()
	var run []*appendReq // the requests that ran in the transaction
	// The transaction is not any one caller's: it ends on its own.
	ctx := context.WithoutCancel(batch[0].ctx)
	err := s.db.WithContext(ctx).Transaction(func(g *gorm.DB) error {
		for i, r := range batch {
			if err := r.ctx.Err(); err != nil {
				r.err = err
				continue
			}
			sp := fmt.Sprintf("a%d", i)
			if err := g.Exec("SAVEPOINT " + sp).Error; err != nil {
				return fmt.Errorf("savepoint: %w", err)
			}
			l := logs[r.sessionID]
			out, err := s.appendOne(ctx, r, g, l, now)
			if err != nil {
				if rerr := g.Exec("ROLLBACK TO " + sp + "; RELEASE " + sp).Error; rerr != nil {
					return fmt.Errorf("roll back an append: %w (after: %w)", rerr, err)
				}
				r.err, l.failed = err, true
				continue
			}
			if err := g.Exec("RELEASE " + sp).Error; err != nil {
				return fmt.Errorf("release savepoint: %w", err)
			}
			r.out = out
			run = append(run, r)
		}
		return nil
	})
	if err != nil {
		for _, r := range batch {
			if r.err == nil {
				r.out, r.err = nil, err
			}
		}
		for _, l := range logs {
			l.failed = true
		}
		return
	}
	for _, sid := range order {
		l := logs[sid]
		if l.known {
			l.st.last, l.st.known = l.last, true
		}
	}
	// Durable: publish in queue order, which is seq order per session.
	for _, r := range run {
		for _, rec := range r.out {
			s.pub.Publish(r.sessionID, rec)
		}
	}
	for _, r := range batch {
		if r.err != nil {
			r.err = s.appendError(r.ctx, r.sessionID, r.err)
		}
	}
}

// appendOne appends one request inside the group's transaction (under its
// savepoint), advancing l.last only when it succeeds. Its statements run
// under the group's ctx, not the caller's: a caller's cancel would interrupt
// the connection (sqlite3_interrupt), which may roll back the whole
// transaction, other callers' appends with it. A panic of its fn is its
// error: the others' appends, the log locks and the lead must not hang on it.
func (s *Store) appendOne(ctx context.Context, r *appendReq, g *gorm.DB, l *groupLog, now time.Time) (_ []protocol.Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("append to session %s panicked: %v", r.sessionID, p)
		}
	}()
	t := &Tx{ctx: ctx, g: g, s: s, sessionID: r.sessionID, now: now}
	if !l.known {
		last, err := readLast(g, r.sessionID)
		if err != nil {
			return nil, err
		}
		l.last, l.known = last, true
	}
	t.last = l.last
	t.checked = true
	stored, err := t.Append(r.recs...)
	t.checked = false
	if err == nil && r.fn != nil {
		err = r.fn(t, stored)
	}
	if err != nil {
		return nil, err
	}
	l.last = t.last
	return t.recs, nil
}

// readLast reads sessionID's last seq in the transaction; not_found when the
// session does not exist.
func readLast(g *gorm.DB, sessionID string) (int64, error) {
	var row struct {
		Exists int
		Last   int64
	}
	if err := g.Raw(`SELECT
		(SELECT COUNT(*) FROM agent_session WHERE id = ?) AS "exists",
		COALESCE((SELECT MAX(seq) FROM session_log WHERE session_id = ?), 0) AS last`,
		sessionID, sessionID).Scan(&row).Error; err != nil {
		return 0, fmt.Errorf("read last seq: %w", err)
	}
	if row.Exists == 0 {
		return 0, NotFound("session", sessionID)
	}
	return row.Last, nil
}

// appendError maps a foreign-key failure of an append to a session that is
// gone to not_found (the cached last seq hid the deletion).
func (s *Store) appendError(ctx context.Context, sessionID string, err error) error {
	if !IsConstraint(err, sqlite3.ErrConstraintForeignKey) || errors.Is(err, context.Canceled) {
		return err
	}
	var n int64
	if s.rdb.WithContext(ctx).Raw(`SELECT COUNT(*) FROM agent_session WHERE id = ?`, sessionID).Scan(&n).Error == nil && n == 0 {
		return NotFound("session", sessionID)
	}
	return err
}
