// Package storetest opens the store and its noun packages on a database in
// a test's temporary directory, with a fake clock and a publisher that keeps
// what it is given: the test support of the store's packages and of the
// tests that need users, sessions and nodes.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// Start is the fake clock's first reading.
var Start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Env is an open store with its noun packages. Close runs at the test's end.
type Env struct {
	St       *store.Store
	Users    *identity.Store
	Sessions *sessions.Store
	Collab   *collab.Store
	Audit    *audit.Store
	Pub      *Recorder      // every record published
	Clock    *testkit.Clock // the store's clock, from Start
	Path     string         // the database file (on SQLite)
}

// Options change what New opens.
type Options struct {
	Sessions sessions.Config
	Collab   collab.Config
	// Store changes the store's config before it is opened (its Path,
	// Publisher and Now are set already).
	Store func(*store.Config)
}

// New opens a store in t's temporary directory with default limits, or in
// a new PostgreSQL database when FILEPATH_TEST_DATABASE=postgres
// (testkit.PostgresURL).
func New(t testing.TB) *Env { return NewWith(t, Options{}) }

// NewWith is New with options.
func NewWith(t testing.TB, o Options) *Env {
	t.Helper()
	e := &Env{Pub: &Recorder{}, Clock: testkit.NewClock(Start), Path: filepath.Join(t.TempDir(), "filepath.db")}
	cfg := store.Config{Path: e.Path, Publisher: e.Pub, Now: e.Clock.Now}
	if o.Store != nil {
		o.Store(&cfg)
	}
	UsePostgres(t, &cfg)
	st, err := store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	e.Use(st, o)
	return e
}

// UsePostgres points cfg at a PostgreSQL database when the suites run on
// PostgreSQL (FILEPATH_TEST_DATABASE=postgres): the same one for the same
// cfg.Path in this test process, so that reopening a path reopens its
// database (testkit.PostgresURLFor).
func UsePostgres(t testing.TB, cfg *store.Config) {
	t.Helper()
	if testkit.OnPostgres() && cfg.URL == "" {
		cfg.URL = testkit.PostgresURLFor(t, cfg.Path)
	}
}

// On returns an Env over st, a store the test opened itself (its Pub,
// Clock and Path are unset): for its User, Session and Node.
func On(st *store.Store) *Env {
	e := &Env{}
	e.Use(st, Options{})
	return e
}

// Use sets e's noun packages to those of st, with o's limits.
func (e *Env) Use(st *store.Store, o Options) {
	e.St = st
	e.Users = identity.New(st)
	e.Sessions = sessions.New(st, o.Sessions)
	e.Collab = collab.New(st, e.Sessions, o.Collab)
	e.Audit = audit.New(st)
}

// User creates a user (not an administrator).
func (e *Env) User(t testing.TB, name string) identity.User {
	t.Helper()
	u, err := e.Users.CreateUser(context.Background(), name, false)
	if err != nil {
		t.Fatalf("create user %s: %v", name, err)
	}
	return u
}

// NewUser returns a new Env with one user, alice.
func NewUser(t testing.TB) (*Env, identity.User) {
	t.Helper()
	e := New(t)
	return e, e.User(t, "alice")
}

// NewSession returns a new Env with one user, alice, and her session "s":
// the start of most store tests.
func NewSession(t testing.TB) (*Env, identity.User, protocol.Session) {
	t.Helper()
	e, u := NewUser(t)
	return e, u, e.Session(t, u.ID, "s")
}

// Session creates a session of userID.
func (e *Env) Session(t testing.TB, userID, name string) protocol.Session {
	t.Helper()
	s, err := e.Sessions.CreateSession(context.Background(), userID, sessions.NewSession{Name: name})
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	return s
}

// Node creates a shelley node under parent (nil: the root).
func (e *Env) Node(t testing.TB, userID, sessionID string, parent *sessions.Node, name string) sessions.Node {
	t.Helper()
	in := sessions.NewNode{Name: name, AgentType: "shelley"}
	if parent != nil {
		in.ParentID = &parent.ID
	}
	n, err := e.Sessions.CreateNode(context.Background(), userID, sessionID, in)
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	return n
}

// Recorder is a store.Publisher that keeps everything it is given.
type Recorder struct {
	mu   sync.Mutex
	recs []Published
}

// Published is a record as the store published it, with its session.
type Published struct {
	SessionID string
	protocol.Record
}

// Publish keeps rec.
func (r *Recorder) Publish(sessionID string, rec protocol.Record) {
	r.mu.Lock()
	r.recs = append(r.recs, Published{sessionID, rec})
	r.mu.Unlock()
}

// All returns what was published, in order.
func (r *Recorder) All() []Published {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Published(nil), r.recs...)
}

// WantCode fails t unless err has the coded error's code and, when field is
// not "", its field.
func WantCode(t testing.TB, err error, code, field string) {
	t.Helper()
	if got := orchestrator.ErrorCode(err); got != code {
		t.Fatalf("error %v: code %q, want %q", err, got, code)
	}
	if field != "" && orchestrator.ErrorField(err) != field {
		t.Fatalf("error %v: field %q, want %q", err, orchestrator.ErrorField(err), field)
	}
}

// MustJSON is v as JSON.
func MustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Ptr returns a pointer to v.
func Ptr[T any](v T) *T { return &v }

// Snapshot dumps st now; the function it returns fails the test, naming
// what did it and showing both dumps, when st's dump then differs.
func Snapshot(t testing.TB, st *store.Store) func(what string) {
	t.Helper()
	before := Dump(t, st)
	return func(what string) {
		t.Helper()
		if after := Dump(t, st); after != before {
			t.Fatalf("%s changed the database:\n%s\n---\n%s", what, before, after)
		}
	}
}

// Dump returns every row of every table of s as text: a snapshot to
// compare.
func Dump(t testing.TB, s *store.Store) string {
	t.Helper()
	db := s.SQL()
	tablesSQL := `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`
	if s.Dialect() == store.Postgres {
		tablesSQL = `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`
	}
	rows, err := db.Query(tablesSQL)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	var out strings.Builder
	for _, tb := range tables {
		rows, err := db.Query(`SELECT * FROM "` + tb + `" ORDER BY 1, 2`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "%s %v\n", tb, vals)
		}
		rows.Close()
	}
	return out.String()
}
