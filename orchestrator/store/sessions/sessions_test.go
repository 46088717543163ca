package sessions_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
)

func TestSessionCRUD(t *testing.T) {
	ctx := context.Background()
	e, u := storetest.NewUser(t)

	s, err := e.Sessions.CreateSession(ctx, u.ID, sessions.NewSession{Name: "  demo  ", GitRepoURL: storetest.Ptr("https://github.com/a/b.git")})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "demo" || s.Status != protocol.SessionDraft || s.UserID != u.ID || s.RootNodeID != nil ||
		s.GitRepoURL == nil || *s.GitRepoURL != "https://github.com/a/b.git" || !s.CreatedAt.Equal(e.Clock.Now()) {
		t.Fatalf("created session = %+v", s)
	}
	got, err := e.Sessions.GetSession(ctx, u.ID, s.ID)
	if err != nil || got.ID != s.ID || got.NodeCount != 0 {
		t.Fatalf("get = %+v, %v", got, err)
	}
	e.Clock.Advance(time.Second)
	s2 := e.Session(t, u.ID, "second")
	list, err := e.Sessions.ListSessions(ctx, u.ID)
	if err != nil || len(list) != 2 || list[0].ID != s2.ID || list[1].ID != s.ID {
		t.Fatalf("list = %+v, %v", list, err)
	}
	root := e.Node(t, u.ID, s.ID, nil, "root")
	got, _ = e.Sessions.GetSession(ctx, u.ID, s.ID)
	if got.NodeCount != 1 || got.RootNodeID == nil || *got.RootNodeID != root.ID {
		t.Fatalf("after root: %+v", got)
	}
	e.Clock.Advance(time.Minute)
	if err := e.Sessions.UpdateSessionStatus(ctx, s.ID, protocol.SessionRunning); err != nil {
		t.Fatal(err)
	}
	got, _ = e.Sessions.GetSession(ctx, u.ID, s.ID)
	if got.Status != protocol.SessionRunning || got.StartedAt == nil || !got.StartedAt.Equal(e.Clock.Now()) ||
		!got.LastActivity.Equal(e.Clock.Now()) {
		t.Fatalf("after running: %+v", got)
	}
	storetest.WantCode(t, e.Sessions.UpdateSessionStatus(ctx, s.ID, "flying"), orchestrator.EInvalid, "status")

	if err := e.Sessions.DeleteSession(ctx, u.ID, s.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.Sessions.GetSession(ctx, u.ID, s.ID)
	storetest.WantCode(t, err, orchestrator.ENotFound, "")
	storetest.WantCode(t, e.Sessions.DeleteSession(ctx, u.ID, s.ID), orchestrator.ENotFound, "")
}

func TestSessionValidation(t *testing.T) {
	ctx := context.Background()
	e, u := storetest.NewUser(t)
	tests := []struct {
		name  string
		in    sessions.NewSession
		field string
	}{
		{"empty name", sessions.NewSession{Name: "  "}, "name"},
		{"control char", sessions.NewSession{Name: "a\x00b"}, "name"},
		{"file url", sessions.NewSession{Name: "x", GitRepoURL: storetest.Ptr("file:///etc")}, "git_repo_url"},
		{"local path", sessions.NewSession{Name: "x", GitRepoURL: storetest.Ptr("/etc/passwd")}, "git_repo_url"},
		{"option", sessions.NewSession{Name: "x", GitRepoURL: storetest.Ptr("--upload-pack=evil")}, "git_repo_url"},
		{"space", sessions.NewSession{Name: "x", GitRepoURL: storetest.Ptr("https://a b")}, "git_repo_url"},
		{"option host", sessions.NewSession{Name: "x", GitRepoURL: storetest.Ptr("ssh://-oProxyCommand=x/y")}, "git_repo_url"},
		{"option scp host", sessions.NewSession{Name: "x", GitRepoURL: storetest.Ptr("git@-oProxyCommand=x:y")}, "git_repo_url"},
		{"ext transport", sessions.NewSession{Name: "x", GitRepoURL: storetest.Ptr("ext::sh%20-c%20touch")}, "git_repo_url"},
		{"empty check", sessions.NewSession{Name: "x", Checks: []protocol.Check{{Command: " "}}}, "checks"},
		{"two-line check", sessions.NewSession{Name: "x", Checks: []protocol.Check{{Command: "go vet\nrm -rf /"}}}, "checks"},
		{"long timeout", sessions.NewSession{Name: "x", Checks: []protocol.Check{{Command: "make", Timeout: 3601}}}, "checks"},
		{"negative timeout", sessions.NewSession{Name: "x", Checks: []protocol.Check{{Command: "make", Timeout: -1}}}, "checks"},
		{"too many checks", sessions.NewSession{Name: "x", Checks: make([]protocol.Check, sessions.MaxChecks+1)}, "checks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Sessions.CreateSession(ctx, u.ID, tt.in)
			storetest.WantCode(t, err, orchestrator.EInvalid, tt.field)
		})
	}
	for _, ok := range []string{"git@github.com:a/b.git", "ssh://git@host/x", "http://host/x"} {
		if _, err := e.Sessions.CreateSession(ctx, u.ID, sessions.NewSession{Name: "ok", GitRepoURL: &ok}); err != nil {
			t.Errorf("git url %q: %v", ok, err)
		}
	}
	list, _ := e.Sessions.ListSessions(ctx, u.ID)
	if len(list) != 3 {
		t.Fatalf("want only the 3 valid sessions, got %d", len(list))
	}
	_, err := e.Sessions.CreateSession(ctx, "nobody", sessions.NewSession{Name: "x"})
	storetest.WantCode(t, err, orchestrator.ENotFound, "")
}

// TestSessionChecks: checks given at create and replaced later are stored
// trimmed, in order, with their time limits; no checks is an empty list.
func TestSessionChecks(t *testing.T) {
	ctx := context.Background()
	e, u := storetest.NewUser(t)
	other := e.User(t, "bob")
	s, err := e.Sessions.CreateSession(ctx, u.ID, sessions.NewSession{Name: "s", Checks: []protocol.Check{{Command: " go vet ./... "}, {Command: "make test", Timeout: 60}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.Check{{Command: "go vet ./..."}, {Command: "make test", Timeout: 60}}
	if got, _ := e.Sessions.GetSession(ctx, u.ID, s.ID); !reflect.DeepEqual(got.Checks, want) {
		t.Fatalf("checks %+v, want %+v", got.Checks, want)
	}
	got, err := e.Sessions.SetSessionChecks(ctx, u.ID, s.ID, nil)
	if err != nil || got.Checks == nil || len(got.Checks) != 0 {
		t.Fatalf("cleared checks %+v, %v", got.Checks, err)
	}
	b, _ := json.Marshal(got)
	if !strings.Contains(string(b), `"checks":[]`) {
		t.Fatalf("session JSON without checks: %s", b)
	}
	_, err = e.Sessions.SetSessionChecks(ctx, other.ID, s.ID, want)
	storetest.WantCode(t, err, orchestrator.ENotFound, "")
	_, err = e.Sessions.SetSessionChecks(ctx, u.ID, s.ID, []protocol.Check{{Command: "x", Timeout: 99999}})
	storetest.WantCode(t, err, orchestrator.EInvalid, "checks")
	if got, _ := e.Sessions.GetSession(ctx, u.ID, s.ID); len(got.Checks) != 0 {
		t.Fatalf("a refused change left %+v", got.Checks)
	}
}

func TestScopedToUser(t *testing.T) {
	ctx := context.Background()
	e := storetest.New(t)
	alice, bob := e.User(t, "alice"), e.User(t, "bob")
	s := e.Session(t, alice.ID, "mine")
	root := e.Node(t, alice.ID, s.ID, nil, "root")
	child := e.Node(t, alice.ID, s.ID, &root, "child")
	unchanged := storetest.Snapshot(t, e.St)

	ops := []struct {
		name string
		op   func() error
	}{
		{"GetSession", func() error { _, err := e.Sessions.GetSession(ctx, bob.ID, s.ID); return err }},
		{"DeleteSession", func() error { return e.Sessions.DeleteSession(ctx, bob.ID, s.ID) }},
		{"CreateNode", func() error {
			_, err := e.Sessions.CreateNode(ctx, bob.ID, s.ID, sessions.NewNode{AgentType: "pi", ParentID: &root.ID})
			return err
		}},
		{"GetNode", func() error { _, err := e.Sessions.GetNode(ctx, bob.ID, s.ID, root.ID); return err }},
		{"Tree", func() error { _, err := e.Sessions.Tree(ctx, bob.ID, s.ID); return err }},
		{"UpdateNode", func() error {
			_, err := e.Sessions.UpdateNode(ctx, bob.ID, s.ID, root.ID, sessions.NodePatch{Name: storetest.Ptr("x")})
			return err
		}},
		{"MoveNode", func() error { _, err := e.Sessions.MoveNode(ctx, bob.ID, s.ID, child.ID, nil, 0); return err }},
		{"DeleteNode", func() error { _, err := e.Sessions.DeleteNode(ctx, bob.ID, s.ID, child.ID); return err }},
		{"CreateNodeAPIKey", func() error { _, _, err := e.Users.CreateNodeAPIKey(ctx, bob.ID, s.ID, root.ID); return err }},
		{"empty user", func() error { _, err := e.Sessions.GetSession(ctx, "", s.ID); return err }},
		{"empty user tree", func() error { _, err := e.Sessions.Tree(ctx, "", s.ID); return err }},
	}
	for _, tt := range ops {
		t.Run(tt.name, func(t *testing.T) { storetest.WantCode(t, tt.op(), orchestrator.ENotFound, "") })
	}
	list, err := e.Sessions.ListSessions(ctx, bob.ID)
	if err != nil || len(list) != 0 {
		t.Fatalf("bob lists %v, %v", list, err)
	}
	unchanged("another user's calls")
}

func TestDeleteSessionCascades(t *testing.T) {
	ctx := context.Background()
	e, u := storetest.NewUser(t)
	keep := e.Session(t, u.ID, "keep")
	keepRoot := e.Node(t, u.ID, keep.ID, nil, "root")
	s := e.Session(t, u.ID, "doomed")
	root := e.Node(t, u.ID, s.ID, nil, "root")
	e.Node(t, u.ID, s.ID, &root, "child")
	if _, _, err := e.Users.CreateNodeAPIKey(ctx, u.ID, s.ID, root.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.St.Append(ctx, s.ID, protocol.Record{Kind: protocol.KindEvent, NodeID: root.ID, Data: json.RawMessage(`{"type":"text","content":"hi"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := e.Sessions.DeleteSession(ctx, u.ID, s.ID); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT COUNT(*) FROM agent_node WHERE session_id = '` + s.ID + `'`,
		`SELECT COUNT(*) FROM session_log WHERE session_id = '` + s.ID + `'`,
		`SELECT COUNT(*) FROM api_keys WHERE session_id = '` + s.ID + `'`,
	} {
		var n int
		if err := e.St.SQL().QueryRow(q).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s = %d, %v; want 0", q, n, err)
		}
	}
	if _, err := e.Sessions.GetNode(ctx, u.ID, keep.ID, keepRoot.ID); err != nil {
		t.Fatalf("other session damaged: %v", err)
	}
	_, err := e.St.Append(ctx, s.ID, protocol.Record{Kind: protocol.KindEvent, Data: json.RawMessage(`{}`)})
	storetest.WantCode(t, err, orchestrator.ENotFound, "")
}
