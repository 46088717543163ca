package runner

import (
	"context"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
	"github.com/filepath-dev/filepath/relay"
)

// noRuntime is a containers.Runtime for tests that must not reach one.
type noRuntime struct{ containers.Runtime }

// rootNode opens a store (the real clock, no publisher) in a temporary
// directory with one user's session and its root node nn.
func rootNode(tb testing.TB, nn sessions.NewNode) (*storetest.Env, identity.User, sessions.Node) {
	tb.Helper()
	e := storetest.NewWith(tb, storetest.Options{Store: func(c *store.Config) { c.Now, c.Publisher = nil, nil }})
	u := e.User(tb, "bob")
	s := e.Session(tb, u.ID, "unit")
	n, err := e.Sessions.CreateNode(context.Background(), u.ID, s.ID, nn)
	if err != nil {
		tb.Fatal(err)
	}
	return e, u, n
}

func newUnitRunner(t *testing.T) (*Runner, *store.Store, relay.Node) {
	t.Helper()
	dir := t.TempDir()
	e, _, n := rootNode(t, sessions.NewNode{Name: "root", AgentType: AgentCustom, Image: "x"})
	r, err := New(withNouns(Config{Store: e.St, Runtime: noRuntime{}, DataDir: dir}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, e.St, relay.Node{SessionID: n.SessionID, ID: n.ID, Name: n.Name, ContainerID: "c"}
}

func TestExitedStatus(t *testing.T) {
	tests := []struct {
		name   string
		exit   relay.Exit
		status string
		code   *int
	}{
		{name: "clean", exit: relay.Exit{Code: 0, Done: true}, status: protocol.StateDone, code: ptr(0)},
		{name: "no done", exit: relay.Exit{Code: 0}, status: protocol.StateError, code: ptr(0)},
		{name: "crash", exit: relay.Exit{Code: 3}, status: protocol.StateError, code: ptr(3)},
		{name: "stopped politely", exit: relay.Exit{Code: 0, Done: true, Stopped: true}, status: protocol.StateDone, code: ptr(0)},
		{name: "stopped by kill", exit: relay.Exit{Code: 137, Stopped: true}, status: protocol.StateIdle, code: ptr(137)},
		{name: "container lost", exit: relay.Exit{Code: -1, Err: context.Canceled}, status: protocol.StateError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _, node := newUnitRunner(t)
			if err := r.Exited(context.Background(), node, tt.exit); err != nil {
				t.Fatal(err)
			}
			n, err := r.sessions.NodeByID(context.Background(), node.ID)
			if err != nil {
				t.Fatal(err)
			}
			if n.Status != tt.status || (tt.code == nil) != (n.ExitCode == nil) || (tt.code != nil && *tt.code != *n.ExitCode) {
				t.Fatalf("status %s exit %v, want %s %v", n.Status, n.ExitCode, tt.status, tt.code)
			}
		})
	}
}

func TestStatusAndDone(t *testing.T) {
	r, _, node := newUnitRunner(t)
	ctx := context.Background()
	pct := 0.25
	if err := r.StatusChanged(ctx, node, protocol.StatusEvent{Type: "status", State: protocol.StateThinking, ContextPct: &pct}); err != nil {
		t.Fatal(err)
	}
	n, _ := r.sessions.NodeByID(ctx, node.ID)
	if n.Status != protocol.StateThinking || n.ContextPct == nil || *n.ContextPct != pct {
		t.Fatalf("after status: %s %v", n.Status, n.ContextPct)
	}
	node.ParentID = "not-running" // the parent has no relay: nothing to deliver, no error
	if err := r.Done(ctx, node, protocol.DoneEvent{Type: "done"}); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.sessions.NodeByID(ctx, node.ID); n.Status != protocol.StateDone {
		t.Fatalf("after done: %s", n.Status)
	}
}

func TestDeliverToStoppedNode(t *testing.T) {
	r, _, node := newUnitRunner(t)
	_, err := r.Deliver(context.Background(), node.SessionID, node.ID, protocol.MessageInput{Type: "message", From: "user", Content: "hi"})
	if orchestrator.ErrorCode(err) != orchestrator.EConflict {
		t.Fatalf("err = %v (%s), want conflict", err, orchestrator.ErrorCode(err))
	}
}

func ptr[T any](v T) *T { return &v }

// TestSpawnNameClashIsAnError: a FAP spawn event naming a child the node
// already has fails with a 409 naming the clash (the relay turns it into an
// error record in the node's chat), before any container is started.
func TestSpawnNameClashIsAnError(t *testing.T) {
	r, _, node := newUnitRunner(t)
	ctx := context.Background()
	root, err := r.sessions.NodeByID(ctx, node.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.sessions.CreateNode(ctx, mustOwner(t, r.sessions, node.SessionID), node.SessionID, sessions.NewNode{Name: "w1", AgentType: AgentCustom, Image: "x", ParentID: &root.ID}); err != nil {
		t.Fatal(err)
	}
	err = r.Spawn(ctx, node, protocol.SpawnEvent{Type: "spawn", Name: "w1"})
	if orchestrator.ErrorCode(err) != orchestrator.EConflict || !strings.Contains(err.Error(), `"w1"`) {
		t.Fatalf("spawn of a second w1: %v, want a conflict naming it", err)
	}
}

func mustOwner(t *testing.T, ss *sessions.Store, sid string) string {
	t.Helper()
	s, err := ss.SessionByID(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	return s.UserID
}
