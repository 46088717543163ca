package runner

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
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
	root := e.startedRoot("ready")
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("done")); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, protocol.StateDone)
	if err := e.r.StartNode(e.ctx, e.uid, e.sid, root.ID); err != nil {
		t.Fatal(err)
	}
	child, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: "kid", AgentType: AgentCustom, Image: testImage, ParentID: &root.ID, Task: "echo hi"})
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

var testSecretsKey = bytes.Repeat([]byte{3}, secrets.KeySize)

// imageSwap runs every agent in the test image, remembering each agent
// container's environment: the catalog's amp image is not built here, and
// what is tested is what the runner gives it.
type imageSwap struct{ envRecorder }

func (s *imageSwap) Create(ctx context.Context, spec containers.Spec) (string, error) {
	if spec.Labels[LabelRole] != RoleCheck {
		spec.Image = testImage
	}
	return s.envRecorder.Create(ctx, spec)
}

// TestVendorKeyGoesToTheContainerOnly: an amp node of a session without
// AMP_API_KEY does not start, its error naming the key (and not a
// container made); with the key set as the user's it starts, told the
// key's name (its adapter reads the value from the agent API: VendorKey),
// with the value nowhere in its configuration or a record; a key set on the session
// overrides the user's at the next start.
func TestVendorKeyGoesToTheContainerOnly(t *testing.T) {
	rec := &imageSwap{}
	e := newEnv(t, func(c *Config) { rec.Runtime = c.Runtime; c.Runtime = rec })
	root := e.startedRoot("ready")
	amp, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: "amp", AgentType: "amp", ParentID: &root.ID, Task: "echo amp ready"})
	if err != nil {
		t.Fatal(err)
	}
	err = e.r.StartNode(e.ctx, e.uid, e.sid, amp.ID)
	if err == nil || !strings.Contains(err.Error(), "AMP_API_KEY") {
		t.Fatalf("start without the key: %v", err)
	}
	if n := e.node(amp.ID); n.Status != protocol.StateError || !strings.Contains(dump(e.records(amp.ID)), "needs AMP_API_KEY") {
		t.Fatalf("node %s, records:\n%s", n.Status, dump(e.records(amp.ID)))
	}
	rec.mu.Lock()
	made := len(rec.envs)
	rec.mu.Unlock()
	if made != 1 {
		t.Fatalf("%d agent containers made, want the root's only", made)
	}
	const key = "sgamp_runner-test-KEY-77"
	if _, err := e.secrets.Set(e.ctx, e.uid, "", "AMP_API_KEY", secrets.NewSecret{Value: key}); err != nil {
		t.Fatal(err)
	}
	if err := e.r.StartNode(e.ctx, e.uid, e.sid, amp.ID); err != nil {
		t.Fatal(err)
	}
	e.waitFor("amp ready", func() bool { return hasText(e.records(amp.ID), "amp ready") })
	// The container is told the key's name; its value is read from the
	// agent API (VendorKey), never put in the container's configuration.
	env := rec.env(t, 1)
	if env[EnvVendorKey] != "AMP_API_KEY" {
		t.Fatalf("the amp container's %s is %q", EnvVendorKey, env[EnvVendorKey])
	}
	for k, v := range env {
		if strings.Contains(v, key) {
			t.Fatalf("the amp container's configuration holds the key in %s", k)
		}
	}
	if name, v, err := e.r.VendorKey(e.ctx, e.sid, amp.ID); err != nil || name != "AMP_API_KEY" || v != key {
		t.Fatalf("VendorKey(amp) = %q, %q, %v", name, v, err)
	}
	if env := rec.env(t, 0); env[EnvVendorKey] != "" {
		t.Fatal("the root (not amp) was told of a key")
	}
	if _, _, err := e.r.VendorKey(e.ctx, e.sid, root.ID); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("VendorKey(root) = %v, want ENotFound: its agent needs none", err)
	}
	if _, _, err := e.r.VendorKey(e.ctx, "another-session", amp.ID); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("VendorKey of a node named with another session = %v, want ENotFound", err)
	}
	const sessionKey = "sgamp_session-KEY-88"
	if _, err := e.secrets.Set(e.ctx, e.uid, e.sid, "AMP_API_KEY", secrets.NewSecret{Value: sessionKey}); err != nil {
		t.Fatal(err)
	}
	amp2, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: "amp2", AgentType: "amp", ParentID: &root.ID, Task: "echo amp2 ready"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.r.StartNode(e.ctx, e.uid, e.sid, amp2.ID); err != nil {
		t.Fatal(err)
	}
	e.waitFor("amp2 ready", func() bool { return hasText(e.records(amp2.ID), "amp2 ready") })
	if _, v, err := e.r.VendorKey(e.ctx, e.sid, amp2.ID); err != nil || v != sessionKey {
		t.Fatalf("with the session's own key set, the amp node's key is %q (%v)", v, err)
	}
	recs, _ := e.st.Records(e.ctx, e.sid, 0, 10000, "")
	for _, r := range recs {
		if strings.Contains(string(r.Data), key) || strings.Contains(string(r.Data), sessionKey) {
			t.Errorf("record %d holds the key: %s", r.Seq, r.Data)
		}
	}
}
