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
	"github.com/filepath-dev/filepath/protocol"
)

// fakeRunner is an api.Runner built from function fields.
type fakeRunner struct {
	start, stop func(ctx context.Context, userID, sessionID string) error
	deliver     func(ctx context.Context, sessionID, nodeID string, in protocol.Input) (store.Record, error)
	st          *store.Store
	calls       []string
	running     map[string]bool
}

// Running makes fakeRunner an api.Liveness.
func (f *fakeRunner) Running(nodeID string) bool { return f.running[nodeID] }

func (f *fakeRunner) StartSession(ctx context.Context, u, s string) error { return f.start(ctx, u, s) }
func (f *fakeRunner) StopSession(ctx context.Context, u, s string) error  { return f.stop(ctx, u, s) }
func (f *fakeRunner) Deliver(ctx context.Context, s, n string, in protocol.Input) (store.Record, error) {
	return f.deliver(ctx, s, n, in)
}

// DeleteNode and DeleteSession make fakeRunner a Remover; they record whether
// the node/session still existed in the store when called.
func (f *fakeRunner) DeleteNode(ctx context.Context, u, s, n string) error {
	_, err := f.st.GetNode(ctx, u, s, n)
	f.calls = append(f.calls, "remove node, exists="+strconv.FormatBool(err == nil))
	return nil
}

func (f *fakeRunner) DeleteSession(ctx context.Context, u, s string) error {
	_, err := f.st.GetSession(ctx, u, s)
	f.calls = append(f.calls, "remove session, exists="+strconv.FormatBool(err == nil))
	return nil
}

var (
	_ api.Runner   = (*fakeRunner)(nil)
	_ api.Remover  = (*fakeRunner)(nil)
	_ api.Liveness = (*fakeRunner)(nil)
)

// TestStatusRunningNeedsARunningAgent: PATCH cannot mark a node whose agent
// does not run as running or thinking (invariant 6); other statuses can be set.
func TestStatusRunningNeedsARunningAgent(t *testing.T) {
	r := &fakeRunner{running: map[string]bool{}}
	e := newEnv(t, envOpts{cfg: func(c *api.Config) { c.Runner = r }})
	a := e.account("alice")
	s, n := e.session(a)
	p := "/api/v1/sessions/" + s.ID + "/nodes/" + n.ID
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
	var st *store.Store
	var calls []string
	r := &fakeRunner{
		start: func(ctx context.Context, u, s string) error {
			calls = append(calls, "start")
			return st.UpdateSessionStatus(ctx, s, store.SessionRunning)
		},
		stop: func(ctx context.Context, u, s string) error {
			calls = append(calls, "stop")
			return orchestrator.Errorf(orchestrator.EConflict, "session is not running")
		},
		deliver: func(ctx context.Context, s, n string, in protocol.Input) (store.Record, error) {
			calls = append(calls, "deliver "+in.InputType())
			b, _ := json.Marshal(in)
			recs, err := st.Append(ctx, s, store.NewRecord{NodeID: n, Kind: store.KindInput, Data: b})
			if err != nil {
				return store.Record{}, err
			}
			return recs[0], nil
		},
	}
	e := newEnv(t, envOpts{cfg: func(c *api.Config) { c.Runner = r }})
	st = e.st
	r.st = e.st
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
		{name: "message", method: "POST", path: sp + "/nodes/" + n.ID + "/messages", body: `{"content":"go"}`, status: 202, contains: `"kind":"input"`},
		{name: "signal", method: "POST", path: sp + "/nodes/" + n.ID + "/signal", body: `{"action":"resume"}`, status: 202, contains: `"action":"resume"`},
		{name: "delete node", method: "DELETE", path: sp + "/nodes/" + n.ID, status: 204},
		{name: "delete session", method: "DELETE", path: sp, status: 204},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := e.do(tt.method, tt.path, a.key, tt.body)
			if rep.status != tt.status || !contains(rep.body, tt.contains) {
				t.Fatalf("got %d %s, want %d with %q", rep.status, rep.body, tt.status, tt.contains)
			}
		})
	}
	calls = append(calls, r.calls...)
	want := []string{"start", "stop", "deliver message", "deliver signal", "remove node, exists=true", "remove session, exists=true"}
	if len(calls) != len(want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("calls %v, want %v", calls, want)
		}
	}
}

func contains(b []byte, s string) bool {
	return s == "" || (json.Valid(b) && strings.Contains(string(b), s))
}
