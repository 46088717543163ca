package vfs

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/filepath-dev/filepath/internal/pgsql"
	"github.com/filepath-dev/filepath/internal/testkit"
)

// openTestDB opens a fresh SQLite file the way the store does (one writer
// connection with BEGIN IMMEDIATE, a read pool) and applies every migration
// file in ../store/migrations; with FILEPATH_TEST_DATABASE=postgres, a
// PostgreSQL database (the same for the same dir) with the migrations of
// ../store/migrations/postgres.
func openTestDB(tb testing.TB, dir string) (w, r *sql.DB) {
	tb.Helper()
	return openTestDBFrom(tb, dir, 0, nil)
}

// openTestDBFrom is openTestDB where seed writes the database when every
// migration below version before is applied (migrateTestDB).
func openTestDBFrom(tb testing.TB, dir string, before int, seed func(w *sql.DB)) (w, r *sql.DB) {
	tb.Helper()
	if testkit.OnPostgres() {
		return openTestPostgres(tb, dir, before, seed)
	}
	path := filepath.Join(dir, "filepath.db")
	dsn := func(ro bool) string {
		v := url.Values{}
		v.Set("_journal_mode", "WAL")
		v.Set("_foreign_keys", "on")
		v.Set("_busy_timeout", "5000")
		v.Set("_synchronous", "NORMAL")
		if ro {
			v.Set("_query_only", "true")
			v.Set("_txlock", "deferred")
		} else {
			v.Set("_txlock", "immediate")
		}
		return path + "?" + v.Encode()
	}
	w, err := sql.Open("sqlite3", dsn(false))
	if err != nil {
		tb.Fatal(err)
	}
	w.SetMaxOpenConns(1)
	migrateTestDB(tb, w, "../store/migrations", before, func() { seed(w) })
	r, err = sql.Open("sqlite3", dsn(true))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close(); w.Close() })
	return w, r
}

// migrateTestDB applies the migrations in dir to w, in order; with before
// > 0 it calls seed once every migration below that version is applied
// (an older binary's database, with its data), then applies the rest.
func migrateTestDB(tb testing.TB, w *sql.DB, dir string, before int, seed func()) {
	tb.Helper()
	files, err := filepath.Glob(dir + "/*.sql")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no migrations found: %v", err)
	}
	sort.Strings(files)
	seeded := before <= 0
	for _, f := range files {
		if v, _ := strconv.Atoi(strings.SplitN(filepath.Base(f), "_", 2)[0]); !seeded && v >= before {
			seed()
			seeded = true
		}
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := w.Exec(string(b)); err != nil {
			tb.Fatalf("apply %s: %v", f, err)
		}
	}
}

// openTestPostgres is openTestDB on PostgreSQL: one write connection and a
// read pool, as the store opens them (pgsql.Open).
func openTestPostgres(tb testing.TB, dir string, before int, seed func(w *sql.DB)) (w, r *sql.DB) {
	tb.Helper()
	ctx := context.Background()
	url := testkit.PostgresURLFor(tb, dir)
	w, err := pgsql.Open(ctx, url, 1, false)
	if err != nil {
		tb.Fatal(err)
	}
	var n int
	if err := w.QueryRow(`SELECT COUNT(*) FROM pg_tables WHERE tablename = 'fs_inode'`).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	if n == 0 {
		migrateTestDB(tb, w, "../store/migrations/postgres", before, func() { seed(w) })
	}
	r, err = pgsql.Open(ctx, url, 4, true)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close(); w.Close() })
	return w, r
}

var sessionSeq struct {
	sync.Mutex
	n int
}

// newSession inserts a user (if needed) and a session row and returns the session id.
func newSession(tb testing.TB, db *sql.DB) string {
	tb.Helper()
	sessionSeq.Lock()
	sessionSeq.n++
	n := sessionSeq.n
	sessionSeq.Unlock()
	now := time.Now().UnixMilli()
	if _, err := db.Exec(`INSERT INTO users(id, name, is_admin, created_at) VALUES('u1','alice',0,?) ON CONFLICT DO NOTHING`, now); err != nil {
		tb.Fatal(err)
	}
	id := fmt.Sprintf("s%04d", n)
	if _, err := db.Exec(`INSERT INTO agent_session(id, user_id, name, created_at, updated_at) VALUES(?, 'u1', ?, ?, ?)`, id, "session "+id, now, now); err != nil {
		tb.Fatal(err)
	}
	return id
}

// recorder is a Notifier that keeps every change.
type recorder struct {
	mu  sync.Mutex
	evs []string
}

func (r *recorder) FileChanged(sid, node, op, path string, size int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, op+" "+path)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.evs
	r.evs = nil
	return out
}

type fixture struct {
	v   *VFS
	fs  *FS
	sid string
	rec *recorder
	db  *sql.DB
}

func newFixture(tb testing.TB, cfg Config) *fixture {
	tb.Helper()
	w, r := openTestDB(tb, tb.TempDir())
	rec := &recorder{}
	if cfg.Notifier == nil {
		cfg.Notifier = rec
	}
	cfg.ReadDB = r
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	v := New(w, cfg)
	sid := newSession(tb, w)
	return &fixture{v: v, fs: v.Session(sid), sid: sid, rec: rec, db: w}
}

func (f *fixture) check(tb testing.TB) {
	tb.Helper()
	if err := f.v.Check(context.Background(), f.sid); err != nil {
		tb.Fatalf("consistency check: %v", err)
	}
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

// isUnder reports whether p is below dir.
func isUnder(p, dir string) bool { return strings.HasPrefix(p, dir+"/") }
