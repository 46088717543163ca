package vfs

import (
	"context"
	"database/sql"
	"sync"

	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
)

// stmtCache keeps prepared statements by SQL text. Preparing on the writer
// database needs its one connection, so inside a transaction a missing
// statement is only noted; VFS.tx prepares the noted ones after the
// transaction ends, and later transactions reuse them (Tx.StmtContext reuses
// a statement already prepared on the transaction's connection).
type stmtCache struct {
	db    *sql.DB
	eager bool // prepare on a miss (read pool only)

	mu   sync.Mutex
	m    map[string]*sql.Stmt
	want map[string]bool
}

func newStmtCache(db *sql.DB, eager bool) *stmtCache {
	return &stmtCache{db: db, eager: eager, m: map[string]*sql.Stmt{}, want: map[string]bool{}}
}

// cached returns the statement prepared for q, or nil after noting it
// for prepareWanted: what a read transaction uses, which must not prepare
// on the pool while it holds one of its connections.
func (c *stmtCache) cached(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.m[q]
	if s == nil {
		c.want[q] = true
	}
	return s
}

func (c *stmtCache) get(ctx context.Context, q string) *sql.Stmt {
	c.mu.Lock()
	s := c.m[q]
	if s == nil && !c.eager {
		c.want[q] = true
	}
	c.mu.Unlock()
	if s != nil || !c.eager {
		return s
	}
	s, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[q]; old != nil {
		s.Close()
		return old
	}
	c.m[q] = s
	return s
}

// prepareWanted prepares the statements noted inside transactions. It must
// not run while the caller holds a transaction.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	c.mu.Lock()
	var qs []string
	for q := range c.want {
		qs = append(qs, q)
	}
	clear(c.want)
	c.mu.Unlock()
	for _, q := range qs {
		s, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if c.m[q] == nil {
			c.m[q] = s
		} else {
			s.Close()
		}
		c.mu.Unlock()
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, s := range c.m {
		s.Close()
		delete(c.m, q)
	}
}

// txn is a write transaction that uses the statement cache.
type txn struct {
	tx    *sql.Tx
	c     *stmtCache
	after []func() // run after a successful commit
	// noPathCache: this transaction renamed something; it must not use
	// the directory cache (see dirCache); dirs are the links it read,
	// added to the cache when it commits
	noPathCache bool
	dirs        map[int64]dirLink
	// sid and changes: what the transaction changed, for the Invalidator
	sid     string
	changes events.Change
	// written counts the bytes of file data written (group commit: a
	// batch with much data commits early)
	written int64
}

// onCommit runs f once the transaction has committed (never after a rollback).
func (t *txn) onCommit(f func()) { t.after = append(t.after, f) }

func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if s := t.c.get(ctx, q); s != nil {
		return t.tx.StmtContext(ctx, s).ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, q, args...)
}

func (t *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s := t.c.get(ctx, q); s != nil {
		return t.tx.StmtContext(ctx, s).QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, q, args...)
}

func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if s := t.c.get(ctx, q); s != nil {
		return t.tx.StmtContext(ctx, s).QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, q, args...)
}

// reader runs reads on the read pool with cached statements.
type reader struct {
	db *sql.DB
	c  *stmtCache
}

func (r *reader) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return r.db.ExecContext(ctx, q, args...)
}

func (r *reader) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s := r.c.get(ctx, q); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return r.db.QueryContext(ctx, q, args...)
}

func (r *reader) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if s := r.c.get(ctx, q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return r.db.QueryRowContext(ctx, q, args...)
}

// readTx is a read-only transaction on the read pool that uses the pool's
// prepared statements (a diff runs hundreds of small queries of a few
// shapes: preparing each was half its time).
type readTx struct {
	tx *sql.Tx
	c  *stmtCache
}

// beginRead starts a readTx; end it with done.
func (r *reader) beginRead(ctx context.Context) (*readTx, error) {
	tx, err := r.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return &readTx{tx: tx, c: r.c}, nil
}

// done rolls the transaction back and prepares the statements it missed.
func (t *readTx) done(ctx context.Context) {
	_ = t.tx.Rollback()
	t.c.prepareWanted(context.WithoutCancel(ctx))
}

func (t *readTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, q, args...)
}

func (t *readTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s := t.c.cached(q); s != nil {
		return t.tx.StmtContext(ctx, s).QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, q, args...)
}

func (t *readTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if s := t.c.cached(q); s != nil {
		return t.tx.StmtContext(ctx, s).QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, q, args...)
}

// BeginTx starts a read transaction on the read pool (export's snapshot).
func (r *reader) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	return r.db.BeginTx(ctx, opts)
}
