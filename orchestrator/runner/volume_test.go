package runner

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator/store"
)

// volumeRecorder remembers the state volume of each agent container created
// and each volume removed.
type volumeRecorder struct {
	containers.Runtime
	mu               sync.Mutex
	mounted, removed []string
}

func (v *volumeRecorder) Create(ctx context.Context, spec containers.Spec) (string, error) {
	if spec.Labels[LabelRole] != RoleCheck {
		v.mu.Lock()
		v.mounted = append(v.mounted, spec.StateVolume)
		v.mu.Unlock()
	}
	return v.Runtime.Create(ctx, spec)
}

func (v *volumeRecorder) RemoveVolume(ctx context.Context, name string) error {
	v.mu.Lock()
	v.removed = append(v.removed, name)
	v.mu.Unlock()
	return v.Runtime.RemoveVolume(ctx, name)
}

// TestStateVolumePerNode: every container of a node, the restart's too,
// gets the node's state volume; deleting a node removes its subtree's
// volumes and deleting the session the rest.
func TestStateVolumePerNode(t *testing.T) {
	rec := &volumeRecorder{}
	e := newEnv(t, func(c *Config) { rec.Runtime = c.Runtime; c.Runtime = rec })
	root := e.startRoot("echo ready")
	e.waitFor("ready", func() bool { return hasText(e.records(root.ID), "ready") })
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("done")); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, store.NodeDone)
	if err := e.r.StartNode(e.ctx, e.uid, e.sid, root.ID); err != nil {
		t.Fatal(err)
	}
	child, err := e.st.CreateNode(e.ctx, e.uid, e.sid, store.NewNode{Name: "kid", AgentType: AgentCustom, Image: testImage, ParentID: &root.ID, Task: "echo hi"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.r.StartNode(e.ctx, e.uid, e.sid, child.ID); err != nil {
		t.Fatal(err)
	}
	want := []string{StateVolume(root.ID), StateVolume(root.ID), StateVolume(child.ID)}
	rec.mu.Lock()
	mounted := slices.Clone(rec.mounted)
	rec.mu.Unlock()
	if !slices.Equal(mounted, want) {
		t.Fatalf("state volumes %q, want %q (the same one for the restart)", mounted, want)
	}
	if err := e.r.DeleteNode(e.ctx, e.uid, e.sid, child.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.r.DeleteSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Contains(rec.removed, StateVolume(child.ID)) || !slices.Contains(rec.removed, StateVolume(root.ID)) ||
		slices.Index(rec.removed, StateVolume(child.ID)) > slices.Index(rec.removed, StateVolume(root.ID)) {
		t.Fatalf("removed %q, want the child's (with its node) then the root's", rec.removed)
	}
}
