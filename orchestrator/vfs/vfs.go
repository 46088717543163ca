package vfs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/internal/pgsql"
	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
)

// RootIno is the inode number of every session's root directory.
const RootIno int64 = 1

// Defaults for Config.
const (
	DefaultMaxFileSize  int64 = 50 << 20
	DefaultSessionQuota int64 = 1 << 30
	DefaultChunkSize          = 64 << 10
	// DefaultMaxInodes is only what Statfs reports as the inode total; the
	// quota bounds bytes, not the number of files.
	DefaultMaxInodes int64 = 1 << 20
)

// Config holds the VFS limits and collaborators. Zero values take the defaults.
type Config struct {
	MaxFileSize  int64 // per file, bytes
	SessionQuota int64 // per session, bytes of file content
	ChunkSize    int   // for sessions initialised by this VFS
	Notifier     Notifier
	// ReadDB, when set, serves reads that need no transaction (the store's
	// read-only pool); writes and transactions use the db given to New.
	ReadDB *sql.DB
	// BatchDelay is how long a batch of changes stays open for more
	// before it commits (group commit, batch.go); negative: every change
	// commits alone. BatchOps is how many changes a batch holds at most.
	BatchDelay time.Duration
	BatchOps   int
	Logger     *slog.Logger
	Now        func() time.Time
	// DataDir, when set, is the directory the database lives in: Statfs
	// reports no more free space than its filesystem has.
	DataDir string
}

// VFS is the session filesystem over one SQLite database.
type VFS struct {
	db  *sql.DB        // writer; the store keeps one connection, so never use it inside a tx
	pg  bool           // db is PostgreSQL (pgsql.Is): a few statements differ
	r   settlingReader // read pool (the writer when Config.ReadDB is nil), after settling
	rq  *reader        // the same without settling: for reads that settled for what they read
	wc  *stmtCache
	cfg Config
	b   batch // group commit

	inval atomic.Pointer[Invalidator]

	mu       sync.Mutex
	sessions map[string]*sessionState

	chains sync.Map // workspace id -> []chainLevel: where a fork reads data (fork.go)
	layers sync.Map // workspace id -> []mlevel: where it reads metadata (layers.go)
	counts sync.Map // fork point id -> int64: the inodes of its view (Statfs)

	// background compaction of fork points (compact.go); Close cancels
	// and waits for it
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bgMu     sync.Mutex // guards bgClosed and bg.Add (leaf)
	bgClosed bool
	bg       sync.WaitGroup
}

// sessionState is the in-memory state of one session: its chunk size once
// known and the open counts the FUSE mounts hold. Guarded by VFS.mu.
type sessionState struct {
	chunk  int
	open   map[int64]int
	orphan map[int64]bool // open inodes whose last name went (maybe rolled back)
	// inode numbers reserved by ReserveIno: [resNext, resEnd) are already
	// below fs_meta.next_ino and given to no inode yet
	resNext, resEnd int64
	dirs            map[int64]dirLink // directory cache (dircache.go)
	dirGen          uint64            // bumped whenever dirs is cleared by a rename
	writers         map[int64]string  // each inode's last writer, source and node (filemeta.go)
}

// New returns a VFS over db, which must already have migration 0002 applied.
func New(db *sql.DB, cfg Config) *VFS {
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = DefaultMaxFileSize
	}
	if cfg.SessionQuota <= 0 {
		cfg.SessionQuota = DefaultSessionQuota
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BatchDelay == 0 {
		cfg.BatchDelay = DefaultBatchDelay
	}
	if cfg.BatchOps <= 0 {
		cfg.BatchOps = DefaultBatchOps
	}
	rdb := cfg.ReadDB
	if rdb == nil {
		rdb = db
	}
	wc := newStmtCache(db, false)
	rc := wc
	if rdb != db {
		rc = newStmtCache(rdb, true)
	}
	v := &VFS{db: db, pg: pgsql.Is(db), rq: &reader{db: rdb, c: rc}, wc: wc, cfg: cfg, sessions: map[string]*sessionState{}}
	v.r = settlingReader{reader: v.rq, v: v}
	v.bgCtx, v.bgCancel = context.WithCancel(context.Background())
	return v
}

// Config returns the effective configuration.
func (v *VFS) Config() Config { return v.cfg }

// DB returns the underlying database.
func (v *VFS) DB() *sql.DB { return v.db }

// FS is one session's filesystem, optionally restricted to a node's allowed paths.
type FS struct {
	v       *VFS
	sid     string
	nodeID  string
	allowed []string // cleaned prefixes; nil means the whole workspace
	uid     uint32   // owner of new inodes
	gid     uint32
	source  string // what its writes record as their source ("": the default, filemeta.go)
	// pinned: inodes kept when they lose their last name, for the one
	// transaction of a merge that names them again (Merge).
	pinned map[int64]bool
}

// Session returns the filesystem of a session. It is cheap; the root is
// created on first use.
func (v *VFS) Session(sessionID string) *FS { return &FS{v: v, sid: sessionID} }

// ForNode returns a view of fs restricted to the allowed path prefixes for a
// node (nil or empty: the whole workspace). Violations are denied with EACCES,
// logged at WARN and recorded in the audit log.
func (fs *FS) ForNode(nodeID string, allowed []string) (*FS, error) {
	c := *fs
	c.nodeID = nodeID
	c.allowed = nil
	for _, a := range allowed {
		p, err := paths.CleanPath(a)
		if err != nil {
			return nil, fmt.Errorf("allowed path %q: %w", a, err)
		}
		if p == "/" {
			c.allowed = nil
			return &c, nil
		}
		c.allowed = append(c.allowed, p)
	}
	return &c, nil
}

// SessionID returns the session this FS belongs to.
func (fs *FS) SessionID() string { return fs.sid }

func (v *VFS) state(sid string) *sessionState {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := v.sessions[sid]
	if st == nil {
		st = &sessionState{open: map[int64]int{}, orphan: map[int64]bool{}, dirs: map[int64]dirLink{}}
		v.sessions[sid] = st
	}
	return st
}

// init makes sure the session's meta row and root inode exist and returns the chunk size.
func (fs *FS) init(ctx context.Context) (int, error) {
	st := fs.v.state(fs.sid)
	fs.v.mu.Lock()
	chunk := st.chunk
	fs.v.mu.Unlock()
	if chunk > 0 {
		return chunk, nil
	}
	var cs int
	err := fs.v.r.QueryRowContext(ctx, `SELECT chunk_size FROM fs_meta WHERE session_id=?`, fs.sid).Scan(&cs)
	if errors.Is(err, sql.ErrNoRows) {
		err = fs.v.tx(ctx, func(tx *txn) error {
			return initSession(ctx, tx, fs.sid, fs.v.cfg.ChunkSize, fs.v.cfg.Now())
		})
		if err != nil {
			return 0, err
		}
		err = fs.v.db.QueryRowContext(ctx, `SELECT chunk_size FROM fs_meta WHERE session_id=?`, fs.sid).Scan(&cs)
	}
	if err != nil {
		return 0, fmt.Errorf("read session meta: %w", err)
	}
	fs.v.mu.Lock()
	st.chunk = cs
	fs.v.mu.Unlock()
	return cs, nil
}

func initSession(ctx context.Context, tx *txn, sid string, chunk int, now time.Time) error {
	var exists int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM agent_session WHERE id=?`, sid).Scan(&exists); err != nil {
		return fmt.Errorf("look up session: %w", err)
	}
	if exists == 0 {
		return errorf(syscall.ENOENT, "", "session %s not found", sid)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO fs_meta(session_id, next_ino, used_bytes, chunk_size) VALUES(?,2,0,?) ON CONFLICT DO NOTHING`, sid, chunk); err != nil {
		return fmt.Errorf("init session meta: %w", err)
	}
	s, ns := splitTime(now)
	if _, err := tx.ExecContext(ctx, `INSERT INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns, created_ns)
		VALUES(?,1,?,0,0,0,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING`, sid, ModeDir|0o755, s, s, s, ns, ns, ns, now.UnixNano()); err != nil {
		return fmt.Errorf("init root inode: %w", err)
	}
	return nil
}

// tx runs f as one change: in the open batch (group commit, batch.go), or
// in a transaction of its own when Config.BatchDelay is negative.
func (v *VFS) tx(ctx context.Context, f func(*txn) error) error {
	if v.cfg.BatchDelay >= 0 {
		return v.batched(ctx, f)
	}
	sqlTx, err := v.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	t := &txn{tx: sqlTx, c: v.wc}
	if err := f(t); err != nil {
		_ = sqlTx.Rollback()
		v.wc.prepareWanted(ctx)
		v.recordDenial(ctx, err)
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	for _, f := range t.after {
		f()
	}
	v.invalidate(ctx, t)
	v.wc.prepareWanted(ctx)
	return nil
}

// Close commits the open batch and releases the prepared statements; the
// databases stay open.
func (v *VFS) Close() {
	v.bgMu.Lock()
	v.bgClosed = true
	v.bgMu.Unlock()
	v.bgCancel()
	v.bg.Wait()
	if err := v.Sync(context.Background(), false); err != nil {
		v.cfg.Logger.Error("vfs: close", "err", err)
	}
	v.wc.close()
	v.r.c.close()
}

// querier is *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}
