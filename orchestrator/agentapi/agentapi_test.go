package agentapi

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
)

// fixture is a store with one user, one session, two nodes and their keys.
type fixture struct {
	st                *store.Store
	users             *identity.Store
	user              identity.User
	sid               string
	nodeA, nodeB      sessions.Node
	keyA, keyB, uiKey string
	keyAID            string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(t.TempDir(), "filepath.db")})
	if err != nil {
		t.Fatal(err)
	}
	ident, ss := identity.New(st), sessions.New(st, sessions.Config{})
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, users: ident}
	if f.user, err = ident.CreateUser(ctx, "alice", false); err != nil {
		t.Fatal(err)
	}
	sess, err := ss.CreateSession(ctx, f.user.ID, sessions.NewSession{Name: "agentapi"})
	if err != nil {
		t.Fatal(err)
	}
	f.sid = sess.ID
	if f.nodeA, err = ss.CreateNode(ctx, f.user.ID, sess.ID, sessions.NewNode{Name: "a", AgentType: "custom", Image: "x"}); err != nil {
		t.Fatal(err)
	}
	if f.nodeB, err = ss.CreateNode(ctx, f.user.ID, sess.ID, sessions.NewNode{Name: "b", AgentType: "custom", Image: "x", ParentID: &f.nodeA.ID}); err != nil {
		t.Fatal(err)
	}
	var k identity.APIKey
	if f.keyA, k, err = ident.CreateNodeAPIKey(ctx, f.user.ID, sess.ID, f.nodeA.ID); err != nil {
		t.Fatal(err)
	}
	f.keyAID = k.ID
	if f.keyB, _, err = ident.CreateNodeAPIKey(ctx, f.user.ID, sess.ID, f.nodeB.ID); err != nil {
		t.Fatal(err)
	}
	if f.uiKey, _, err = ident.CreateAPIKey(ctx, f.user.ID, "scripts"); err != nil {
		t.Fatal(err)
	}
	return f
}

// whoami answers the Caller of the request and the auth headers it saw.
func whoami() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := orchestrator.CallerFrom(r.Context())
		json.NewEncoder(w).Encode(map[string]any{"ok": ok, "user": c.UserID, "session": c.SessionID, "node": c.NodeID,
			"authorization": r.Header.Get("Authorization") + r.Header.Get("X-Api-Key")})
	})
}

type answer struct {
	status int
	body   map[string]any
}

func get(t *testing.T, url string, header ...string) answer {
	t.Helper()
	r := testkit.Request(t, nil, "GET", url, "", nil, header...)
	a := answer{status: r.Status}
	if err := json.Unmarshal(r.Body, &a.body); err != nil {
		t.Fatalf("GET %s: %d, not JSON: %q", url, r.Status, r.Body)
	}
	return a
}

// server is a Server (cfg, its Auth the fixture's users) with whoami
// mounted at /test/, shut down when the test ends.
func (f *fixture) server(t *testing.T, cfg Config) *Server {
	t.Helper()
	cfg.Auth = f.users
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	s.Mount("/test/", whoami())
	return s
}

func errMessage(a answer) string {
	e, _ := a.body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

// TestSharedListener: the process runtime's one listener on the host's
// loopback, where the token alone tells the node.
func TestSharedListener(t *testing.T) {
	f := newFixture(t)
	s := f.server(t, Config{})
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %q is not on the host's loopback", s.URL())
	}
	if err := s.Open(context.Background(), f.nodeA.ID, "c1"); err != nil || s.Serving(f.nodeA.ID) {
		t.Fatalf("open without namespaces: %v, serving %v", err, s.Serving(f.nodeA.ID))
	}
	u := s.URL()
	tests := []struct {
		name     string
		path     string
		header   []string
		status   int
		node     string // want the Caller's node
		inErrMsg string
	}{
		{name: "healthz without a token", path: "/healthz", status: 200},
		{name: "no token", path: "/test/x", status: 401, inErrMsg: "missing token"},
		{name: "unknown token", path: "/test/x", header: []string{"Authorization", "Bearer fp_nope"}, status: 401, inErrMsg: "invalid token"},
		{name: "not bearer", path: "/test/x", header: []string{"Authorization", "Basic " + f.keyA}, status: 401, inErrMsg: "missing token"},
		{name: "user key", path: "/test/x", header: []string{"Authorization", "Bearer " + f.uiKey}, status: 403, inErrMsg: "user API key"},
		{name: "node A bearer", path: "/test/x", header: []string{"Authorization", "Bearer " + f.keyA}, status: 200, node: f.nodeA.ID},
		{name: "node B x-api-key", path: "/test/y", header: []string{"x-api-key", f.keyB}, status: 200, node: f.nodeB.ID},
		{name: "unknown route", path: "/nope", header: []string{"Authorization", "Bearer " + f.keyA}, status: 404, inErrMsg: "no route GET /nope"},
		{name: "unknown route without a token", path: "/nope", status: 401, inErrMsg: "missing token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := get(t, u+tt.path, tt.header...)
			if a.status != tt.status {
				t.Fatalf("status %d, want %d: %v", a.status, tt.status, a.body)
			}
			switch {
			case tt.path == "/healthz":
				if a.body["ok"] != true {
					t.Fatalf("healthz: %v", a.body)
				}
			case tt.status == 200:
				if a.body["node"] != tt.node || a.body["session"] != f.sid || a.body["user"] != f.user.ID {
					t.Fatalf("caller %v, want node %s", a.body, tt.node)
				}
				if a.body["authorization"] != "" {
					t.Fatalf("the mounted handler saw the token: %v", a.body)
				}
			default:
				if !strings.Contains(errMessage(a), tt.inErrMsg) || a.body["type"] != "error" {
					t.Fatalf("error body %v, want a message with %q", a.body, tt.inErrMsg)
				}
			}
		})
	}
	t.Run("expired user key", func(t *testing.T) {
		if _, err := f.st.SQL().Exec(`UPDATE api_keys SET expires_at = 1000 WHERE name = 'scripts'`); err != nil {
			t.Fatal(err)
		}
		a := get(t, u+"/test/x", "Authorization", "Bearer "+f.uiKey)
		if a.status != 401 || !strings.Contains(errMessage(a), "expired at 1970-01-01T00:00:01Z") {
			t.Fatalf("expired user key: %d %v", a.status, a.body)
		}
	})
	t.Run("revoked token", func(t *testing.T) {
		if err := f.users.DeleteAPIKey(context.Background(), f.user.ID, f.keyAID); err != nil {
			t.Fatal(err)
		}
		if a := get(t, u+"/test/x", "Authorization", "Bearer "+f.keyA); a.status != 401 {
			t.Fatalf("revoked token: %d %v", a.status, a.body)
		}
	})
	t.Run("shut down", func(t *testing.T) {
		s.Shutdown()
		s.Shutdown()
		if _, err := net.Dial("tcp", strings.TrimPrefix(u, "http://")); err == nil {
			t.Fatal("the shared listener still accepts after Shutdown")
		}
	})
}

// TestNodeListenerRefusesOtherNodes: a container's listener takes only its
// own node's token.
func TestNodeListenerRefusesOtherNodes(t *testing.T) {
	f := newFixture(t)
	s := f.server(t, Config{})
	srv := httptest.NewServer(s.Handler(f.nodeA.ID))
	defer srv.Close()
	if a := get(t, srv.URL+"/test/x", "Authorization", "Bearer "+f.keyB); a.status != 403 || !strings.Contains(errMessage(a), "another agent") {
		t.Fatalf("node B's token on node A's listener: %d %v", a.status, a.body)
	}
	if a := get(t, srv.URL+"/test/x", "x-api-key", f.keyA); a.status != 200 || a.body["node"] != f.nodeA.ID {
		t.Fatalf("node A's token on its listener: %d %v", a.status, a.body)
	}
}

// TestLimitListener: past its bound, a connection waits until another one
// closes.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(inner, 1)
	defer ln.Close()
	for range 2 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			second <- c
		}
	}()
	select { // time is the point: nothing is accepted within 100 ms
	case <-second:
		t.Fatal("a second connection was accepted while the bound (1) was reached")
	case <-time.After(100 * time.Millisecond):
	}
	first.Close()
	first.Close() // gives its slot back once
	testkit.Recv(t, second, 10*time.Second, "the waiting connection to be accepted after the first closed").Close()
	ln.Close()
	if _, err := ln.Accept(); err == nil {
		t.Fatal("accept after close")
	}
}

func TestMountRefusesHealthz(t *testing.T) {
	f := newFixture(t)
	s := f.server(t, Config{})
	defer func() {
		if recover() == nil {
			t.Fatal("mounting /healthz did not panic")
		}
	}()
	s.Mount("/healthz", whoami())
}
