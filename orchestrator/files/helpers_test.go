package files

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// openDB opens a fresh database the way the store does and applies the
// store's migrations (read from its directory: this package does not
// import the store).
func openDB(t *testing.T) (w, r *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "filepath.db")
	dsn := func(ro bool) string {
		v := url.Values{"_journal_mode": {"WAL"}, "_foreign_keys": {"on"}, "_busy_timeout": {"5000"}, "_synchronous": {"NORMAL"}}
		if ro {
			v.Set("_query_only", "true")
		} else {
			v.Set("_txlock", "immediate")
		}
		return path + "?" + v.Encode()
	}
	w, err := sql.Open("sqlite3", dsn(false))
	if err != nil {
		t.Fatal(err)
	}
	w.SetMaxOpenConns(1)
	files, _ := filepath.Glob("../store/migrations/*.sql")
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Exec(string(b)); err != nil {
			t.Fatalf("apply %s: %v", f, err)
		}
	}
	if r, err = sql.Open("sqlite3", dsn(true)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return w, r
}

// audits is a Recorder that keeps the rows.
type audits struct {
	mu   sync.Mutex
	rows []Audit
}

func (a *audits) RecordFileOp(_ context.Context, op Audit) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rows = append(a.rows, op)
	return nil
}

func (a *audits) last() Audit {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.rows) == 0 {
		return Audit{}
	}
	return a.rows[len(a.rows)-1]
}

type fixture struct {
	s     *Service
	v     *vfs.VFS
	sid   string
	fs    *vfs.FS
	audit *audits
	ctx   context.Context
}

func newFixture(t *testing.T, cfg Config, vcfg vfs.Config) *fixture {
	t.Helper()
	w, r := openDB(t)
	now := time.Now().UnixMilli()
	if _, err := w.Exec(`INSERT INTO users(id, name, is_admin, created_at) VALUES('u1','alice',0,?)`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Exec(`INSERT INTO agent_session(id, user_id, name, created_at, updated_at) VALUES('s1','u1','s',?,?)`, now, now); err != nil {
		t.Fatal(err)
	}
	vcfg.ReadDB, vcfg.Logger = r, slog.New(slog.DiscardHandler)
	v := vfs.New(w, vcfg)
	t.Cleanup(v.Close)
	a := &audits{}
	cfg.VFS, cfg.Recorder = v, a
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &fixture{s: s, v: v, sid: "s1", fs: v.Session("s1"), audit: a, ctx: ctx}
}

func (f *fixture) write(t *testing.T, p, content string) vfs.FileInfo {
	t.Helper()
	info, _, err := f.fs.WriteFile(f.ctx, p, []byte(content), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func (f *fixture) read(t *testing.T, p string) string {
	t.Helper()
	_, b, err := f.fs.ReadAll(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// call runs a tool as the user of the session (or c) and returns its
// answer as JSON.
func (f *fixture) call(t *testing.T, c Caller, name string, args any) (map[string]any, error) {
	t.Helper()
	if c.SessionID == "" {
		c.SessionID, c.FS = f.sid, f.fs
	}
	raw, _ := json.Marshal(args)
	out, err := f.s.Call(f.ctx, c, name, raw)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(out)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}
