package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-sqlite3"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/filepath-dev/filepath/internal/pgsql"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/protocol"
)

// Publisher receives every committed log record of a session, after its
// transaction committed, in seq order per session. hub.Hub satisfies it.
// Publish must not block: it runs while the session's log lock is held.
type Publisher interface {
	Publish(sessionID string, rec protocol.Record)
}

// Synchronous settings for Config.Synchronous.
const (
	// SyncNormal (the default): in WAL mode a commit is written to the WAL
	// (the OS page cache) before it returns, and the WAL is fsynced only at
	// checkpoints. Every committed transaction survives a crash or kill -9 of
	// the process. A power loss or kernel crash may lose the transactions
	// committed since the last checkpoint (the database stays consistent: it
	// rolls back to a transaction boundary, never corrupts).
	SyncNormal = "NORMAL"
	// SyncFull fsyncs the WAL on every commit: committed transactions survive
	// power loss too, at the price of one fsync per transaction (batch with
	// Append(ctx, sid, recs...) to amortize it).
	SyncFull = "FULL"
)

// Config configures Open.
type Config struct {
	// Path is the SQLite database file (e.g. <data>/filepath.db). Required
	// unless URL is set.
	Path string
	// URL, when set, is a PostgreSQL database (postgres://…,
	// FILEPATH_DATABASE_URL) used instead of the SQLite file at Path. Its
	// collation must be C (pgsql.CheckCollation).
	URL string
	// Publisher gets each record after commit (nil: records are only stored).
	Publisher Publisher
	// Now is the clock (default time.Now). Tests inject it.
	Now func() time.Time
	// Synchronous is SyncNormal (default) or SyncFull.
	Synchronous string
	// BusyTimeout bounds how long a statement waits for a lock held by
	// another connection or process (default 5s).
	BusyTimeout time.Duration
	// ReadConns is the size of the read-only connection pool (default
	// max(4, GOMAXPROCS)). Writes always go through one connection.
	ReadConns int
	// GroupAppends is the most appends (AppendWith: a relay's batch with its
	// cursor) committed in one transaction when they queue for the write
	// connection (group commit, group.go; default DefaultGroupAppends; 1:
	// each append its own transaction).
	GroupAppends int
	// Migrations replaces the embedded migrations (tests only; nil: the
	// embedded list).
	Migrations []Migration
}

// Store is the orchestrator's SQLite database and each session's log. The
// noun packages below it (identity, sessions, audit, collab) keep their
// tables in it through its handles. It is safe for concurrent use.
type Store struct {
	cfg     Config
	dialect Dialect
	now     func() time.Time
	wsql    *sql.DB  // the one write connection (SQLite has a single writer)
	rsql    *sql.DB  // read-only pool (WAL readers never block the writer)
	db      *gorm.DB // over wsql
	rdb     *gorm.DB // over rsql
	pub     Publisher
	logsMu  sync.Mutex // guards logs; never held while waiting for the database
	logs    map[string]*logState
	group   grouper // appends waiting to commit together (group.go)

	insertOne *sql.Stmt         // insertLogSQL, prepared on the write connection
	insertN   map[int]*sql.Stmt // multi-row INSERTs by row count (insertChunks)

	stmtsMu sync.Mutex            // guards stmts; never held while waiting for the database
	stmts   map[stmtKey]*sql.Stmt // prepared at first use (WriteStmt, ReadStmt), closed by Close

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the database at cfg.Path, applies pending
// migrations and returns the Store.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.URL != "" && !IsPostgresURL(cfg.URL) {
		return nil, fmt.Errorf("open store: database url %q: want postgres://…", cfg.URL)
	}
	if cfg.URL != "" && cfg.Path == "" {
		cfg.Path = cfg.URL
	}
	if cfg.Path == "" {
		return nil, errors.New("open store: database path is empty")
	}
	if cfg.URL == "" && strings.ContainsAny(cfg.Path, "?#") {
		return nil, fmt.Errorf("open store: database path %q must not contain '?' or '#'", cfg.Path)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch strings.ToUpper(cfg.Synchronous) {
	case "":
		cfg.Synchronous = SyncNormal
	case SyncNormal, SyncFull:
		cfg.Synchronous = strings.ToUpper(cfg.Synchronous)
	default:
		return nil, fmt.Errorf("open store: synchronous %q: want NORMAL or FULL", cfg.Synchronous)
	}
	if cfg.BusyTimeout <= 0 {
		cfg.BusyTimeout = 5 * time.Second
	}
	if cfg.ReadConns <= 0 {
		cfg.ReadConns = max(4, runtime.GOMAXPROCS(0))
	}
	if cfg.GroupAppends < 0 {
		return nil, fmt.Errorf("open store: group appends %d: want 0 (default) or more", cfg.GroupAppends)
	}
	if cfg.GroupAppends == 0 {
		cfg.GroupAppends = DefaultGroupAppends
	}
	d := SQLite
	if cfg.URL != "" {
		d = Postgres
	}
	if cfg.Migrations == nil {
		ms, err := EmbeddedMigrationsFor(d)
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		cfg.Migrations = ms
	}
	wsql, rsql, err := openSQL(ctx, cfg, d)
	if err != nil {
		return nil, err
	}

	gcfg := func() *gorm.Config {
		return &gorm.Config{
			SkipDefaultTransaction: true,
			Logger:                 logger.Discard,
			NowFunc:                cfg.Now,
			TranslateError:         false,
		}
	}
	dialector := func(db *sql.DB) gorm.Dialector {
		if d == Postgres {
			return postgres.New(postgres.Config{Conn: db})
		}
		return sqlite.New(sqlite.Config{Conn: db})
	}
	db, err := gorm.Open(dialector(wsql), gcfg())
	if err != nil {
		wsql.Close()
		rsql.Close()
		return nil, fmt.Errorf("open store %s: %w", cfg.Path, err)
	}
	rdb, err := gorm.Open(dialector(rsql), gcfg())
	if err != nil {
		wsql.Close()
		rsql.Close()
		return nil, fmt.Errorf("open store %s: %w", cfg.Path, err)
	}
	insertOne, err := wsql.PrepareContext(ctx, insertLogSQL)
	if err != nil {
		wsql.Close()
		rsql.Close()
		return nil, fmt.Errorf("open store %s: prepare: %w", cfg.Path, err)
	}
	insertN := map[int]*sql.Stmt{}
	for _, n := range insertChunks {
		st, err := wsql.PrepareContext(ctx, insertRowsSQL(n))
		if err != nil {
			for _, st := range insertN {
				st.Close()
			}
			insertOne.Close()
			wsql.Close()
			rsql.Close()
			return nil, fmt.Errorf("open store %s: prepare: %w", cfg.Path, err)
		}
		insertN[n] = st
	}
	pub := cfg.Publisher
	if pub == nil {
		pub = nopPublisher{}
	}
	return &Store{
		cfg: cfg, dialect: d, now: cfg.Now, wsql: wsql, rsql: rsql, db: db, rdb: rdb, pub: pub,
		logs: make(map[string]*logState), insertOne: insertOne, insertN: insertN, stmts: map[stmtKey]*sql.Stmt{},
	}, nil
}

// openSQL opens the write connection and the read pool, and migrates.
func openSQL(ctx context.Context, cfg Config, d Dialect) (wsql, rsql *sql.DB, err error) {
	if d == Postgres {
		// One write connection here too: the store's transactions and the
		// vfs group commit are written for a single writer (LOCKS.md).
		if wsql, err = pgsql.Open(ctx, cfg.URL, 1, false); err != nil {
			return nil, nil, fmt.Errorf("open store: %w", err)
		}
		if err := pgsql.CheckCollation(ctx, wsql); err != nil {
			wsql.Close()
			return nil, nil, fmt.Errorf("open store: %w", err)
		}
		if err := migrate(ctx, wsql, d, cfg.Migrations, cfg.Now); err != nil {
			wsql.Close()
			return nil, nil, fmt.Errorf("open store: %w", err)
		}
		if rsql, err = pgsql.Open(ctx, cfg.URL, cfg.ReadConns, true); err != nil {
			wsql.Close()
			return nil, nil, fmt.Errorf("open store: %w", err)
		}
		return wsql, rsql, nil
	}
	wsql, err = sql.Open("sqlite3", dsn(cfg, false))
	if err != nil {
		return nil, nil, fmt.Errorf("open store %s: %w", cfg.Path, err)
	}
	// One writer connection: SQLite serializes writers anyway, and queueing
	// in database/sql is cheaper and fairer than SQLITE_BUSY retries.
	wsql.SetMaxOpenConns(1)
	wsql.SetMaxIdleConns(1)
	wsql.SetConnMaxLifetime(0)
	wsql.SetConnMaxIdleTime(0)
	if err := wsql.PingContext(ctx); err != nil {
		wsql.Close()
		return nil, nil, fmt.Errorf("open store %s: %w", cfg.Path, err)
	}
	// Truncate the WAL back to 64 MiB after checkpoints so a burst does not
	// keep its disk space. Per connection: the writer's lives as long as wsql.
	if _, err := wsql.ExecContext(ctx, `PRAGMA journal_size_limit = 67108864`); err != nil {
		wsql.Close()
		return nil, nil, fmt.Errorf("open store %s: %w", cfg.Path, err)
	}
	if err := migrate(ctx, wsql, d, cfg.Migrations, cfg.Now); err != nil {
		wsql.Close()
		return nil, nil, fmt.Errorf("open store %s: %w", cfg.Path, err)
	}
	rsql, err = sql.Open("sqlite3", dsn(cfg, true))
	if err != nil {
		wsql.Close()
		return nil, nil, fmt.Errorf("open store %s: %w", cfg.Path, err)
	}
	rsql.SetMaxOpenConns(cfg.ReadConns)
	rsql.SetMaxIdleConns(cfg.ReadConns)
	return wsql, rsql, nil
}

// dsn builds the mattn/go-sqlite3 data source name. Every connection gets
// WAL, foreign keys and the busy timeout; writers begin transactions with
// BEGIN IMMEDIATE so that a read-then-write transaction never fails with
// SQLITE_BUSY on lock upgrade.
func dsn(cfg Config, readOnly bool) string {
	v := url.Values{}
	v.Set("_journal_mode", "WAL")
	v.Set("_foreign_keys", "on")
	v.Set("_busy_timeout", fmt.Sprint(cfg.BusyTimeout.Milliseconds()))
	v.Set("_synchronous", cfg.Synchronous)
	v.Set("_cache_size", "-16000") // KiB: 16 MB page cache per connection
	if readOnly {
		v.Set("_query_only", "true")
		v.Set("_txlock", "deferred")
	} else {
		v.Set("_txlock", "immediate")
	}
	return cfg.Path + "?" + v.Encode()
}

type nopPublisher struct{}

func (nopPublisher) Publish(string, protocol.Record) {}

// Close closes the database. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		// Let SQLite refresh its query planner statistics; best effort.
		if s.dialect == SQLite {
			_, _ = s.wsql.Exec(`PRAGMA optimize`)
		}
		errs := []error{s.insertOne.Close()}
		s.stmtsMu.Lock()
		for _, st := range s.stmts {
			errs = append(errs, st.Close())
		}
		s.stmtsMu.Unlock()
		for _, st := range s.insertN {
			errs = append(errs, st.Close())
		}
		s.closeErr = errors.Join(append(errs, s.rsql.Close(), s.wsql.Close())...)
	})
	return s.closeErr
}

// DB returns the gorm handle over the single write connection, for packages
// that keep their own tables in this database (vfs). Because there is one
// write connection, never use DB() (or any Store method) while holding a
// transaction from it: use the transaction's handle, or you deadlock.
func (s *Store) DB() *gorm.DB { return s.db }

// SQL returns the database/sql handle of the write connection (see DB).
func (s *Store) SQL() *sql.DB { return s.wsql }

// ReadDB returns a gorm handle over the read-only connection pool. Reads there
// run concurrently with the writer and see every committed transaction.
func (s *Store) ReadDB() *gorm.DB { return s.rdb }

// ReadSQL returns the database/sql handle of the read-only pool (see ReadDB).
func (s *Store) ReadSQL() *sql.DB { return s.rsql }

// Dialect is the database the store runs on.
func (s *Store) Dialect() Dialect { return s.dialect }

// Now returns the store's clock reading.
func (s *Store) Now() time.Time { return s.now() }

// stmtKey names a statement of WriteStmt or ReadStmt.
type stmtKey struct {
	query string
	write bool
}

// WriteStmt returns query prepared on the write connection, once: later
// calls return the same statement, which Close closes. Call it before a
// transaction, never inside one (the one write connection is busy there);
// inside, use it through the transaction's StmtContext.
func (s *Store) WriteStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	return s.stmt(ctx, stmtKey{query, true})
}

// ReadStmt returns query prepared on the read pool, once (see WriteStmt).
func (s *Store) ReadStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	return s.stmt(ctx, stmtKey{query, false})
}

func (s *Store) stmt(ctx context.Context, k stmtKey) (*sql.Stmt, error) {
	s.stmtsMu.Lock()
	defer s.stmtsMu.Unlock()
	if st := s.stmts[k]; st != nil {
		return st, nil
	}
	db := s.rsql
	if k.write {
		db = s.wsql
	}
	st, err := db.PrepareContext(ctx, k.query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	s.stmts[k] = st
	return st, nil
}

// NewID returns a random UUID (version 4) string: the id of a new row.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Millis is t as the store keeps times: Unix milliseconds.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// FromMillis is the time of a stored Unix millisecond value, in UTC.
func FromMillis(v int64) time.Time { return time.UnixMilli(v).UTC() }

// FromMillisPtr is FromMillis of a nullable column (nil stays nil).
func FromMillisPtr(v *int64) *time.Time {
	if v == nil {
		return nil
	}
	t := FromMillis(*v)
	return &t
}

// Unavailable turns an error of a database another program holds locked
// (SQLITE_BUSY or SQLITE_LOCKED past the busy timeout: a backup, an
// sqlite3 shell in a transaction) into EUnavailable, which says so and is
// worth retrying; any other error is returned as it is.
func Unavailable(err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked) {
		return orchestrator.Errorf(orchestrator.EUnavailable, "the database is locked by another program (a backup, or an sqlite3 shell in a transaction): nothing was written; try again in a few seconds")
	}
	return err
}

// IsConstraint reports whether err is a constraint violation of the given
// SQLite extended code (e.g. sqlite3.ErrConstraintUnique), or the same
// violation reported by PostgreSQL (its SQLSTATE).
func IsConstraint(err error, code sqlite3.ErrNoExtended) bool {
	var se sqlite3.Error
	if errors.As(err, &se) {
		return se.ExtendedCode == code
	}
	switch c := pgsql.Code(err); code {
	case sqlite3.ErrConstraintUnique, sqlite3.ErrConstraintPrimaryKey:
		return c == "23505"
	case sqlite3.ErrConstraintForeignKey:
		return c == "23503"
	case sqlite3.ErrConstraintNotNull:
		return c == "23502"
	case sqlite3.ErrConstraintCheck:
		return c == "23514"
	}
	return false
}

// NotFound is the not_found error of a missing (or another user's) row.
func NotFound(what, id string) error {
	return orchestrator.Errorf(orchestrator.ENotFound, "%s %q not found", what, id)
}

// RequireUser maps an empty user id, which would disable a query's scoping
// to one user, to one that matches nothing (DESIGN invariant 9).
func RequireUser(userID string) string {
	if userID == "" {
		return "(no user)" // never an id; PostgreSQL text holds no NUL
	}
	return userID
}
