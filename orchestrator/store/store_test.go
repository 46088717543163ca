package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/protocol"
)

// recorder is a Publisher that keeps everything it is given.
type recorder struct {
	mu   sync.Mutex
	recs []published
}

// published is a record as the store published it, with its session.
type published struct {
	SessionID string
	protocol.Record
}

func (r *recorder) Publish(sessionID string, rec protocol.Record) {
	r.mu.Lock()
	r.recs = append(r.recs, published{sessionID, rec})
	r.mu.Unlock()
}

func (r *recorder) all() []published {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]published(nil), r.recs...)
}

// clock is an injectable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	s     *store.Store
	pub   *recorder
	clock *clock
	path  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{pub: &recorder{}, clock: &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		path: filepath.Join(t.TempDir(), "filepath.db")}
	s, err := store.Open(context.Background(), store.Config{Path: e.path, Publisher: e.pub, Now: e.clock.Now})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	e.s = s
	return e
}

func (e *env) user(t *testing.T, name string) store.User {
	t.Helper()
	u, err := e.s.CreateUser(context.Background(), name, false)
	if err != nil {
		t.Fatalf("create user %s: %v", name, err)
	}
	return u
}

func (e *env) session(t *testing.T, userID, name string) store.Session {
	t.Helper()
	s, err := e.s.CreateSession(context.Background(), userID, store.NewSession{Name: name})
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	return s
}

func (e *env) node(t *testing.T, userID, sessionID string, parent *store.Node, name string) store.Node {
	t.Helper()
	in := store.NewNode{Name: name, AgentType: "shelley"}
	if parent != nil {
		in.ParentID = &parent.ID
	}
	n, err := e.s.CreateNode(context.Background(), userID, sessionID, in)
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	return n
}

func wantCode(t *testing.T, err error, code, field string) {
	t.Helper()
	if got := orchestrator.ErrorCode(err); got != code {
		t.Fatalf("error %v: code %q, want %q", err, got, code)
	}
	if field != "" && orchestrator.ErrorField(err) != field {
		t.Fatalf("error %v: field %q, want %q", err, orchestrator.ErrorField(err), field)
	}
}

func ptr[T any](v T) *T { return &v }

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSessionCRUD(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	u := e.user(t, "alice")

	s, err := e.s.CreateSession(ctx, u.ID, store.NewSession{Name: "  demo  ", GitRepoURL: ptr("https://github.com/a/b.git")})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "demo" || s.Status != store.SessionDraft || s.UserID != u.ID || s.RootNodeID != nil ||
		s.GitRepoURL == nil || *s.GitRepoURL != "https://github.com/a/b.git" || !s.CreatedAt.Equal(e.clock.Now()) {
		t.Fatalf("created session = %+v", s)
	}
	got, err := e.s.GetSession(ctx, u.ID, s.ID)
	if err != nil || got.ID != s.ID || got.NodeCount != 0 {
		t.Fatalf("get = %+v, %v", got, err)
	}
	e.clock.Add(time.Second)
	s2 := e.session(t, u.ID, "second")
	list, err := e.s.ListSessions(ctx, u.ID)
	if err != nil || len(list) != 2 || list[0].ID != s2.ID || list[1].ID != s.ID {
		t.Fatalf("list = %+v, %v", list, err)
	}
	root := e.node(t, u.ID, s.ID, nil, "root")
	got, _ = e.s.GetSession(ctx, u.ID, s.ID)
	if got.NodeCount != 1 || got.RootNodeID == nil || *got.RootNodeID != root.ID {
		t.Fatalf("after root: %+v", got)
	}
	e.clock.Add(time.Minute)
	if err := e.s.UpdateSessionStatus(ctx, s.ID, store.SessionRunning); err != nil {
		t.Fatal(err)
	}
	got, _ = e.s.GetSession(ctx, u.ID, s.ID)
	if got.Status != store.SessionRunning || got.StartedAt == nil || !got.StartedAt.Equal(e.clock.Now()) ||
		!got.LastActivity.Equal(e.clock.Now()) {
		t.Fatalf("after running: %+v", got)
	}
	wantCode(t, e.s.UpdateSessionStatus(ctx, s.ID, "flying"), orchestrator.EInvalid, "status")

	if err := e.s.DeleteSession(ctx, u.ID, s.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.GetSession(ctx, u.ID, s.ID)
	wantCode(t, err, orchestrator.ENotFound, "")
	wantCode(t, e.s.DeleteSession(ctx, u.ID, s.ID), orchestrator.ENotFound, "")
}

func TestSessionValidation(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	u := e.user(t, "alice")
	tests := []struct {
		name  string
		in    store.NewSession
		field string
	}{
		{"empty name", store.NewSession{Name: "  "}, "name"},
		{"control char", store.NewSession{Name: "a\x00b"}, "name"},
		{"file url", store.NewSession{Name: "x", GitRepoURL: ptr("file:///etc")}, "git_repo_url"},
		{"local path", store.NewSession{Name: "x", GitRepoURL: ptr("/etc/passwd")}, "git_repo_url"},
		{"option", store.NewSession{Name: "x", GitRepoURL: ptr("--upload-pack=evil")}, "git_repo_url"},
		{"space", store.NewSession{Name: "x", GitRepoURL: ptr("https://a b")}, "git_repo_url"},
		{"option host", store.NewSession{Name: "x", GitRepoURL: ptr("ssh://-oProxyCommand=x/y")}, "git_repo_url"},
		{"option scp host", store.NewSession{Name: "x", GitRepoURL: ptr("git@-oProxyCommand=x:y")}, "git_repo_url"},
		{"ext transport", store.NewSession{Name: "x", GitRepoURL: ptr("ext::sh%20-c%20touch")}, "git_repo_url"},
		{"empty check", store.NewSession{Name: "x", Checks: []store.Check{{Command: " "}}}, "checks"},
		{"two-line check", store.NewSession{Name: "x", Checks: []store.Check{{Command: "go vet\nrm -rf /"}}}, "checks"},
		{"long timeout", store.NewSession{Name: "x", Checks: []store.Check{{Command: "make", Timeout: 3601}}}, "checks"},
		{"negative timeout", store.NewSession{Name: "x", Checks: []store.Check{{Command: "make", Timeout: -1}}}, "checks"},
		{"too many checks", store.NewSession{Name: "x", Checks: make([]store.Check, store.MaxChecks+1)}, "checks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.s.CreateSession(ctx, u.ID, tt.in)
			wantCode(t, err, orchestrator.EInvalid, tt.field)
		})
	}
	for _, ok := range []string{"git@github.com:a/b.git", "ssh://git@host/x", "http://host/x"} {
		if _, err := e.s.CreateSession(ctx, u.ID, store.NewSession{Name: "ok", GitRepoURL: &ok}); err != nil {
			t.Errorf("git url %q: %v", ok, err)
		}
	}
	list, _ := e.s.ListSessions(ctx, u.ID)
	if len(list) != 3 {
		t.Fatalf("want only the 3 valid sessions, got %d", len(list))
	}
	_, err := e.s.CreateSession(ctx, "nobody", store.NewSession{Name: "x"})
	wantCode(t, err, orchestrator.ENotFound, "")
}

// dump returns every row of every table as text: a snapshot to compare.
func dump(t *testing.T, s *store.Store) string {
	t.Helper()
	db := s.SQL()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
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

// TestSessionChecks: checks given at create and replaced later are stored
// trimmed, in order, with their time limits; no checks is an empty list.
func TestSessionChecks(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	u := e.user(t, "alice")
	other := e.user(t, "bob")
	s, err := e.s.CreateSession(ctx, u.ID, store.NewSession{Name: "s", Checks: []store.Check{{Command: " go vet ./... "}, {Command: "make test", Timeout: 60}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Check{{Command: "go vet ./..."}, {Command: "make test", Timeout: 60}}
	if got, _ := e.s.GetSession(ctx, u.ID, s.ID); !reflect.DeepEqual(got.Checks, want) {
		t.Fatalf("checks %+v, want %+v", got.Checks, want)
	}
	got, err := e.s.SetSessionChecks(ctx, u.ID, s.ID, nil)
	if err != nil || got.Checks == nil || len(got.Checks) != 0 {
		t.Fatalf("cleared checks %+v, %v", got.Checks, err)
	}
	b, _ := json.Marshal(got)
	if !strings.Contains(string(b), `"checks":[]`) {
		t.Fatalf("session JSON without checks: %s", b)
	}
	_, err = e.s.SetSessionChecks(ctx, other.ID, s.ID, want)
	wantCode(t, err, orchestrator.ENotFound, "")
	_, err = e.s.SetSessionChecks(ctx, u.ID, s.ID, []store.Check{{Command: "x", Timeout: 99999}})
	wantCode(t, err, orchestrator.EInvalid, "checks")
	if got, _ := e.s.GetSession(ctx, u.ID, s.ID); len(got.Checks) != 0 {
		t.Fatalf("a refused change left %+v", got.Checks)
	}
}

func TestScopedToUser(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	alice, bob := e.user(t, "alice"), e.user(t, "bob")
	s := e.session(t, alice.ID, "mine")
	root := e.node(t, alice.ID, s.ID, nil, "root")
	child := e.node(t, alice.ID, s.ID, &root, "child")
	before := dump(t, e.s)

	ops := []struct {
		name string
		op   func() error
	}{
		{"GetSession", func() error { _, err := e.s.GetSession(ctx, bob.ID, s.ID); return err }},
		{"DeleteSession", func() error { return e.s.DeleteSession(ctx, bob.ID, s.ID) }},
		{"CreateNode", func() error {
			_, err := e.s.CreateNode(ctx, bob.ID, s.ID, store.NewNode{AgentType: "pi", ParentID: &root.ID})
			return err
		}},
		{"GetNode", func() error { _, err := e.s.GetNode(ctx, bob.ID, s.ID, root.ID); return err }},
		{"Tree", func() error { _, err := e.s.Tree(ctx, bob.ID, s.ID); return err }},
		{"UpdateNode", func() error {
			_, err := e.s.UpdateNode(ctx, bob.ID, s.ID, root.ID, store.NodePatch{Name: ptr("x")})
			return err
		}},
		{"MoveNode", func() error { _, err := e.s.MoveNode(ctx, bob.ID, s.ID, child.ID, nil, 0); return err }},
		{"DeleteNode", func() error { _, err := e.s.DeleteNode(ctx, bob.ID, s.ID, child.ID); return err }},
		{"CreateNodeAPIKey", func() error { _, _, err := e.s.CreateNodeAPIKey(ctx, bob.ID, s.ID, root.ID); return err }},
		{"empty user", func() error { _, err := e.s.GetSession(ctx, "", s.ID); return err }},
		{"empty user tree", func() error { _, err := e.s.Tree(ctx, "", s.ID); return err }},
	}
	for _, tt := range ops {
		t.Run(tt.name, func(t *testing.T) { wantCode(t, tt.op(), orchestrator.ENotFound, "") })
	}
	list, err := e.s.ListSessions(ctx, bob.ID)
	if err != nil || len(list) != 0 {
		t.Fatalf("bob lists %v, %v", list, err)
	}
	if after := dump(t, e.s); after != before {
		t.Fatalf("another user's calls changed the database:\n%s\n---\n%s", before, after)
	}
}

func TestDeleteSessionCascades(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	u := e.user(t, "alice")
	keep := e.session(t, u.ID, "keep")
	keepRoot := e.node(t, u.ID, keep.ID, nil, "root")
	s := e.session(t, u.ID, "doomed")
	root := e.node(t, u.ID, s.ID, nil, "root")
	e.node(t, u.ID, s.ID, &root, "child")
	if _, _, err := e.s.CreateNodeAPIKey(ctx, u.ID, s.ID, root.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Append(ctx, s.ID, protocol.Record{Kind: protocol.KindEvent, NodeID: root.ID, Data: json.RawMessage(`{"type":"text","content":"hi"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := e.s.DeleteSession(ctx, u.ID, s.ID); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT COUNT(*) FROM agent_node WHERE session_id = '` + s.ID + `'`,
		`SELECT COUNT(*) FROM session_log WHERE session_id = '` + s.ID + `'`,
		`SELECT COUNT(*) FROM api_keys WHERE session_id = '` + s.ID + `'`,
	} {
		var n int
		if err := e.s.SQL().QueryRow(q).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s = %d, %v; want 0", q, n, err)
		}
	}
	if _, err := e.s.GetNode(ctx, u.ID, keep.ID, keepRoot.ID); err != nil {
		t.Fatalf("other session damaged: %v", err)
	}
	_, err := e.s.Append(ctx, s.ID, protocol.Record{Kind: protocol.KindEvent, Data: json.RawMessage(`{}`)})
	wantCode(t, err, orchestrator.ENotFound, "")
}

// The hub is the Publisher the server wires in.
var _ store.Publisher = (*hub.Hub[protocol.Record])(nil)

func TestCloseTwice(t *testing.T) {
	s, err := store.Open(context.Background(), store.Config{Path: filepath.Join(t.TempDir(), "c.db")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestPublishesToHub(t *testing.T) {
	ctx := context.Background()
	h := hub.New[protocol.Record](hub.Config{})
	defer h.Close()
	s, err := store.Open(ctx, store.Config{Path: filepath.Join(t.TempDir(), "h.db"), Publisher: h})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	u, _ := s.CreateUser(ctx, "alice", false)
	sess, _ := s.CreateSession(ctx, u.ID, store.NewSession{Name: "s"})
	sub := h.Subscribe(sess.ID)
	if _, err := s.Append(ctx, sess.ID, protocol.Record{Kind: protocol.KindEvent, Data: json.RawMessage(`{"type":"text","content":"hi"}`)}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-sub.C():
		if r.Seq != 1 || string(r.Data) != `{"type":"text","content":"hi"}` {
			t.Fatalf("got %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no record published")
	}
}
