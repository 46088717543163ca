package runner

import (
	"context"
	"errors"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/protocol"
)

type failingForks struct{ calls int }

func (f *failingForks) ForkForNode(ctx context.Context, sessionID, parentID, childID string) error {
	f.calls++
	return errors.New("disk full")
}

// A spawn with workspace "fork" is refused, leaving no child, when the
// runner cannot fork (no session filesystem) or the fork fails: a child
// never runs on a workspace other than the one asked for.
func TestSpawnForkFailsWithoutChild(t *testing.T) {
	ctx := context.Background()
	fork := protocol.WorkspaceFork
	ev := protocol.SpawnEvent{Type: protocol.TypeSpawn, Name: "kid", Agent: AgentCustom, Workspace: &fork}

	r, _, parent := newUnitRunner(t)
	_, err := r.SpawnChild(ctx, parent.SessionID, parent.ID, ev)
	if orchestrator.ErrorCode(err) != orchestrator.EInvalid {
		t.Fatalf("spawn with fork and no Forks: %v", err)
	}
	ff := &failingForks{}
	r.cfg.Forks = ff
	if _, err := r.SpawnChild(ctx, parent.SessionID, parent.ID, ev); err == nil || ff.calls != 1 {
		t.Fatalf("spawn with a failing fork: %v (%d calls)", err, ff.calls)
	}
	sess, err := r.sessions.SessionByID(ctx, parent.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := r.sessions.Tree(ctx, sess.UserID, parent.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 {
		t.Fatalf("%d nodes after failed forked spawns, want the parent only", len(nodes))
	}
}
