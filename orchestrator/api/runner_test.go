package api_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// fakeRunner is an api.Runner built from function fields.
// Nil function fields do nothing.
type fakeRunner struct {
	start, stop func(ctx context.Context, userID, sessionID string) error
	deliver     func(ctx context.Context, sessionID, nodeID string, in protocol.Input) (protocol.Record, error)
	logs        func(ctx context.Context, sessionID, nodeID string, tail int) ([]byte, error)
	st          *store.Store
	sessions    *sessions.Store
	calls       []string
	running     map[string]bool
}

func (f *fakeRunner) Running(nodeID string) bool { return f.running[nodeID] }

// StartNode records the call.
func (f *fakeRunner) StartNode(ctx context.Context, u, s, n string) error {
	f.calls = append(f.calls, "start node")
	return nil
}

func (f *fakeRunner) NodeLog(ctx context.Context, s, n string, tail int) ([]byte, error) {
	if f.logs == nil {
		return nil, nil
	}
	return f.logs(ctx, s, n, tail)
}

func (f *fakeRunner) StartSession(ctx context.Context, u, s string) error { return f.start(ctx, u, s) }
func (f *fakeRunner) StopSession(ctx context.Context, u, s string) error  { return f.stop(ctx, u, s) }
func (f *fakeRunner) Deliver(ctx context.Context, s, n string, in protocol.Input) (protocol.Record, error) {
	return f.deliver(ctx, s, n, in)
}

// DeleteNode and DeleteSession record whether the node/session still
// existed in the store when called.
func (f *fakeRunner) DeleteNode(ctx context.Context, u, s, n string) error {
	_, err := f.sessions.GetNode(ctx, u, s, n)
	f.calls = append(f.calls, "remove node, exists="+strconv.FormatBool(err == nil))
	return nil
}

func (f *fakeRunner) DeleteSession(ctx context.Context, u, s string) error {
	_, err := f.sessions.GetSession(ctx, u, s)
	f.calls = append(f.calls, "remove session, exists="+strconv.FormatBool(err == nil))
	return nil
}

var _ api.Runner = (*fakeRunner)(nil)

// stoppedNode serves the API with a fakeRunner on which no agent runs yet
// (set r.running[n.ID]) and returns alice and her session's root node n.
func stoppedNode(t *testing.T) (e *testEnv, r *fakeRunner, a account, n sessions.Node) {
	t.Helper()
	r = &fakeRunner{running: map[string]bool{}}
	e = newEnv(t, envOpts{cfg: func(c *api.Config) { c.Runner = r }})
	a = e.account("alice")
	_, n = e.session(a)
	return e, r, a, n
}

// TestStatusRunningNeedsARunningAgent: PATCH cannot mark a node whose agent
// does not run as running or thinking (invariant 6); other statuses can be set.
func TestStatusRunningNeedsARunningAgent(t *testing.T) {
	e, r, a, n := stoppedNode(t)
	p := "/api/v1/sessions/" + n.SessionID + "/nodes/" + n.ID
	for _, status := range []string{"running", "thinking"} {
		rep := e.do("PATCH", p, a.key, `{"status":"`+status+`"}`)
		if rep.status != 409 || !contains(rep.body, "is not running") {
			t.Fatalf("PATCH %s on a stopped node: %d %s", status, rep.status, rep.body)
		}
	}
	if rep := e.do("PATCH", p, a.key, `{"status":"done"}`); rep.status != 200 || !contains(rep.body, `"status":"done"`) {
		t.Fatalf("PATCH done: %d %s", rep.status, rep.body)
	}
	r.running[n.ID] = true
	if rep := e.do("PATCH", p, a.key, `{"status":"running"}`); rep.status != 200 || !contains(rep.body, `"status":"running"`) {
		t.Fatalf("PATCH running on a running node: %d %s", rep.status, rep.body)
	}
}

func TestRunnerIsCalled(t *testing.T) {
	r := &fakeRunner{}
	r.start = func(ctx context.Context, u, s string) error {
		r.calls = append(r.calls, "start")
		return r.sessions.UpdateSessionStatus(ctx, s, protocol.SessionRunning)
	}
	stops := 0
	r.stop = func(ctx context.Context, u, s string) error {
		r.calls = append(r.calls, "stop")
		if stops++; stops == 1 {
			return orchestrator.Errorf(orchestrator.EConflict, "session is not running")
		}
		return r.sessions.UpdateSessionStatus(ctx, s, protocol.SessionStopped)
	}
	r.deliver = func(ctx context.Context, s, n string, in protocol.Input) (protocol.Record, error) {
		r.calls = append(r.calls, "deliver "+in.InputType())
		b, _ := json.Marshal(in)
		recs, err := r.st.Append(ctx, s, protocol.Record{NodeID: n, Kind: protocol.KindInput, Data: b})
		if err != nil {
			return protocol.Record{}, err
		}
		return recs[0], nil
	}
	r.logs = func(ctx context.Context, s, n string, tail int) ([]byte, error) {
		r.calls = append(r.calls, "logs tail="+strconv.Itoa(tail))
		return []byte("agent stderr\n"), nil
	}
	e := newEnv(t, envOpts{cfg: func(c *api.Config) { c.Runner = r }})
	r.st, r.sessions = e.st, e.sessions
	a := e.account("alice")
	s, n := e.session(a)
	sp := "/api/v1/sessions/" + s.ID
	tests := []struct {
		name, method, path, body string
		status                   int
		contains                 string
	}{
		{name: "start", method: "POST", path: sp + "/start", status: 202, contains: `"status":"running"`},
		{name: "stop error passes through", method: "POST", path: sp + "/stop", status: 409, contains: "not running"},
		{name: "new node is started", method: "POST", path: sp + "/nodes", body: `{"agent_type":"pi","parent_id":"` + n.ID + `"}`, status: 201, contains: `"agent_type":"pi"`},
		{name: "message", method: "POST", path: sp + "/nodes/" + n.ID + "/messages", body: `{"content":"go"}`, status: 202, contains: `"kind":"input"`},
		{name: "signal", method: "POST", path: sp + "/nodes/" + n.ID + "/signal", body: `{"action":"resume"}`, status: 202, contains: `"action":"resume"`},
		{name: "logs", method: "GET", path: sp + "/nodes/" + n.ID + "/logs?tail=7", status: 200},
		{name: "stop", method: "POST", path: sp + "/stop", status: 202, contains: `"status":"stopped"`},
		{name: "delete node", method: "DELETE", path: sp + "/nodes/" + n.ID, status: 204},
		{name: "delete session", method: "DELETE", path: sp, status: 204},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := e.do(tt.method, tt.path, a.key, tt.body)
			if rep.status != tt.status || !contains(rep.body, tt.contains) {
				t.Fatalf("got %d %s, want %d with %q", rep.status, rep.body, tt.status, tt.contains)
			}
			if tt.name == "logs" && string(rep.body) != "agent stderr\n" {
				t.Fatalf("logs: %q", rep.body)
			}
		})
	}
	want := []string{"start", "stop", "start node", "start node", "deliver message", "deliver signal", "logs tail=7", "stop", "remove node, exists=true", "remove session, exists=true"}
	if strings.Join(r.calls, "; ") != strings.Join(want, "; ") {
		t.Fatalf("calls\n%v\nwant\n%v", r.calls, want)
	}
}

func contains(b []byte, s string) bool {
	return s == "" || (json.Valid(b) && strings.Contains(string(b), s))
}

// TestAllowedPathsOfARunningNode: a running node's /workspace mount keeps
// the allowed_paths it started with, so a PATCH changing them while it runs
// is a 409 (nothing changes) instead of a change that would hold for the
// API only; other config changes, and the same paths, go through; stopped,
// the node takes new paths (mounted at its next start).
func TestAllowedPathsOfARunningNode(t *testing.T) {
	e, r, a, n := stoppedNode(t)
	p := "/api/v1/sessions/" + n.SessionID + "/nodes/" + n.ID
	if rep := e.do("PATCH", p, a.key, `{"config":{"allowed_paths":["/src","/secret"]}}`); rep.status != 200 {
		t.Fatalf("PATCH a stopped node: %d %s", rep.status, rep.body)
	}
	r.running[n.ID] = true
	for _, cfg := range []string{`{"allowed_paths":["/src"]}`, `{}`, `{"allowed_paths":["/"]}`} {
		rep := e.do("PATCH", p, a.key, `{"config":`+cfg+`}`)
		if rep.status != 409 || !contains(rep.body, "is running") || !contains(rep.body, "allowed_paths") {
			t.Fatalf("PATCH %s on a running node: %d %s, want 409", cfg, rep.status, rep.body)
		}
	}
	if rep := e.do("PATCH", p, a.key, `{"config":{"allowed_paths":["/src","/secret"],"approvals":{"bash":"allow"}}}`); rep.status != 200 {
		t.Fatalf("PATCH of other config on a running node: %d %s", rep.status, rep.body)
	}
	got, err := e.sessions.NodeByID(context.Background(), n.ID)
	if err != nil || !contains(got.Config, `"allowed_paths":["/src","/secret"]`) {
		t.Fatalf("config: %s %v", got.Config, err)
	}
	r.running[n.ID] = false
	if rep := e.do("PATCH", p, a.key, `{"config":{"allowed_paths":["/src"]}}`); rep.status != 200 {
		t.Fatalf("PATCH a stopped node again: %d %s", rep.status, rep.body)
	}
}
