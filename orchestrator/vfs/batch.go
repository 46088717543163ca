package vfs

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
)

// Group commit. Every change (VFS.tx) runs inside one open write
// transaction, the batch, as a savepoint of its own: a change that fails
// rolls back to its savepoint and leaves the others in the batch. The batch
// commits when it is Config.BatchDelay old, holds Config.BatchOps changes,
// a change without an origin (the REST API: its caller is told the change
// is done) is in it, or an Fsync asks; a batch with an Fsync in it commits
// with synchronous=FULL. So many small changes through a mount (a create
// and a write per file) share one commit, and what a crash loses is at
// most the last BatchDelay of changes no one was told were durable.
//
// Reads see the batch: the read pool's connections do not, so a read of
// something the open batch changed commits the batch first (settle). The
// inode reads the mount makes settle only for what they read (an inode, a
// name), so that a burst of creates is not committed by the mount's own
// lookups of the next, new, names; every other read settles for any
// change.

// Defaults for Config.BatchDelay and Config.BatchOps; batchBytes is how
// much file data a batch holds before it commits (a large write gains
// nothing from sharing a commit, and an open transaction with many MiB
// spills SQLite's page cache).
const (
	DefaultBatchDelay       = 2 * time.Millisecond
	DefaultBatchOps         = 1000
	batchBytes        int64 = 1 << 20
)

// batch is the open group commit. mu is held while a change runs in it and
// while it commits: it is what holding the write connection means now
// (LOCKS.md).
type batch struct {
	mu      sync.Mutex
	conn    *sql.Conn // the write connection, held while tx is open
	tx      *sql.Tx
	ops     int
	bytes   int64 // file data written in the batch
	full    bool  // an Fsync waits: commit with synchronous=FULL
	gen     uint64
	timer   *time.Timer
	touched map[string]*touched // by session: what the open batch changed

	open atomic.Bool // tx != nil and it holds a change (read without mu)
}

// touched is what the open batch changed in one session.
type touched struct {
	inos    map[int64]bool
	entries map[events.Entry]bool
}

// note records a change's Change in the batch's touched set.
func (b *batch) note(t *txn) {
	if t.sid == "" || t.changes.Empty() {
		return
	}
	if b.touched == nil {
		b.touched = map[string]*touched{}
	}
	tc := b.touched[t.sid]
	if tc == nil {
		tc = &touched{inos: map[int64]bool{}, entries: map[events.Entry]bool{}}
		b.touched[t.sid] = tc
	}
	for _, e := range t.changes.Entries {
		tc.entries[e] = true
	}
	for _, ino := range t.changes.Attrs {
		tc.inos[ino] = true
	}
	for _, ino := range t.changes.Data {
		tc.inos[ino] = true
	}
}

// batched runs f as one change in the open batch (opening one if needed).
func (v *VFS) batched(ctx context.Context, f func(*txn) error) error {
	b := &v.b
	b.mu.Lock()
	if err := v.beginLocked(ctx); err != nil {
		b.mu.Unlock()
		return err
	}
	if _, err := b.tx.ExecContext(ctx, `SAVEPOINT op`); err != nil {
		v.abortLocked(ctx, err)
		b.mu.Unlock()
		return fmt.Errorf("begin: %w", err)
	}
	t := &txn{tx: b.tx, c: v.wc}
	if err := f(t); err != nil {
		_, rerr := b.tx.ExecContext(ctx, `ROLLBACK TO op`)
		if rerr == nil {
			_, rerr = b.tx.ExecContext(ctx, `RELEASE op`)
		}
		switch {
		case rerr != nil:
			v.abortLocked(ctx, rerr)
		case b.ops == 0:
			// nothing else in the batch: give the connection back
			v.abortLocked(ctx, nil)
		}
		b.mu.Unlock()
		v.recordDenial(ctx, err)
		return err
	}
	if _, err := b.tx.ExecContext(ctx, `RELEASE op`); err != nil {
		v.abortLocked(ctx, err)
		b.mu.Unlock()
		return fmt.Errorf("commit: %w", err)
	}
	b.ops++
	b.bytes += t.written
	b.note(t)
	if b.touched[t.sid] != nil {
		b.open.Store(true)
	}
	for _, f := range t.after {
		f()
	}
	var err error
	if events.Origin(ctx) == nil || b.ops >= v.cfg.BatchOps || b.bytes >= batchBytes {
		err = v.commitLocked(ctx)
	}
	b.mu.Unlock()
	v.invalidate(ctx, t)
	return err
}

// beginLocked opens a batch unless one is open, and arms its timer.
func (v *VFS) beginLocked(ctx context.Context) error {
	b := &v.b
	if b.tx != nil {
		return nil
	}
	conn, err := v.db.Conn(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		conn.Close()
		return fmt.Errorf("begin: %w", err)
	}
	b.conn, b.tx = conn, tx
	gen := b.gen
	b.timer = time.AfterFunc(v.cfg.BatchDelay, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.gen == gen && b.tx != nil {
			_ = v.commitLocked(context.Background())
		}
	})
	return nil
}

// commitLocked commits the open batch, if any.
func (v *VFS) commitLocked(ctx context.Context) error {
	b := &v.b
	if b.tx == nil {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	var prev string
	if b.full && !v.pg { // PostgreSQL commits durably (synchronous_commit) always
		// The level is per connection; back to the configured one after.
		if err := b.tx.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&prev); err == nil {
			if _, err := b.tx.ExecContext(ctx, `PRAGMA synchronous=FULL`); err != nil {
				prev = ""
			}
		}
	}
	err := b.tx.Commit()
	if prev != "" {
		_, _ = b.conn.ExecContext(ctx, `PRAGMA synchronous=`+prev)
	}
	v.endLocked()
	if err != nil {
		v.cfg.Logger.Error("vfs: a batch of changes failed to commit and is lost", "err", err)
		v.forgetAll()
		return fmt.Errorf("commit: %w", err)
	}
	v.wc.prepareWanted(ctx)
	return nil
}

// abortLocked rolls the open batch back (cause: why, nil when it held no
// change).
func (v *VFS) abortLocked(ctx context.Context, cause error) {
	b := &v.b
	if b.tx == nil {
		return
	}
	_ = b.tx.Rollback()
	lost := b.ops > 0
	v.endLocked()
	if lost {
		v.cfg.Logger.Error("vfs: a batch of changes was rolled back and is lost", "err", cause)
		v.forgetAll()
	}
	v.wc.prepareWanted(context.WithoutCancel(ctx))
}

// endLocked forgets the batch after its commit or rollback.
func (v *VFS) endLocked() {
	b := &v.b
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.conn.Close()
	b.conn, b.tx, b.ops, b.bytes, b.full = nil, nil, 0, 0, false
	clear(b.touched)
	b.open.Store(false)
	b.gen++
}

// forgetAll drops the in-memory state that a lost batch may have made
// wrong: reserved inode numbers and the directory caches.
func (v *VFS) forgetAll() {
	v.mu.Lock()
	sids := make([]string, 0, len(v.sessions))
	for sid, st := range v.sessions {
		sids = append(sids, sid)
		st.writers = nil // what they noted may be lost
	}
	v.mu.Unlock()
	for _, sid := range sids {
		v.dropReserved(sid)
	}
}

// Sync commits the open batch; with full, with synchronous=FULL. It
// returns when what every change before it did is durable.
func (v *VFS) Sync(ctx context.Context, full bool) error {
	b := &v.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tx == nil {
		return nil
	}
	b.full = b.full || full
	return v.commitLocked(ctx)
}

// settle commits the open batch when it holds a change to session sid that
// need reports (need nil: any change of the session, or of any session
// when sid is ""). It reports whether it committed.
func (v *VFS) settle(ctx context.Context, sid string, need func(*touched) bool) bool {
	b := &v.b
	if !b.open.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tx == nil {
		return false
	}
	if sid != "" {
		tc := b.touched[sid]
		if tc == nil || (need != nil && !need(tc)) {
			return false
		}
	}
	_ = v.commitLocked(ctx)
	return true
}

// settleIno settles for a read of inode ino (its attributes, content or
// entries).
func (fs *FS) settleIno(ctx context.Context, ino int64) bool {
	return fs.v.settle(ctx, fs.sid, func(t *touched) bool { return t.inos[ino] })
}

// settleEntry settles for a lookup of name in parent.
func (fs *FS) settleEntry(ctx context.Context, parent int64, name string) bool {
	return fs.v.settle(ctx, fs.sid, func(t *touched) bool { return t.entries[events.Entry{Parent: parent, Name: name}] })
}

// settleAll settles for a read of anything.
func (v *VFS) settleAll(ctx context.Context) { v.settle(ctx, "", nil) }

// settlingReader is the read pool behind VFS.r: every read through it
// first settles for any change.
type settlingReader struct {
	*reader
	v *VFS
}

func (r settlingReader) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	r.v.settleAll(ctx)
	return r.reader.QueryContext(ctx, q, args...)
}

func (r settlingReader) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	r.v.settleAll(ctx)
	return r.reader.QueryRowContext(ctx, q, args...)
}

func (r settlingReader) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	r.v.settleAll(ctx)
	return r.reader.ExecContext(ctx, q, args...)
}

func (r settlingReader) beginRead(ctx context.Context) (*readTx, error) {
	r.v.settleAll(ctx)
	return r.reader.beginRead(ctx)
}

func (r settlingReader) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	r.v.settleAll(ctx)
	return r.reader.BeginTx(ctx, opts)
}
