package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// stateDirSpecs gives every agent container a FILEPATH_STATE_DIR (the test
// image has none), so that starting a node makes its state volume as it does
// with the CLI agents' images.
type stateDirSpecs struct{ containers.Runtime }

func (s stateDirSpecs) Create(ctx context.Context, spec containers.Spec) (string, error) {
	if spec.Labels[LabelRole] != RoleCheck {
		spec.Env = maps.Clone(spec.Env)
		spec.Env[containers.EnvStateDir] = "/home/agent/.state"
	}
	return s.Runtime.Create(ctx, spec)
}

func randomID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// logged reports whether a line of out holds every one of parts.
func logged(out string, parts ...string) bool {
	for line := range strings.Lines(out) {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			return true
		}
	}
	return false
}

func volumeExists(name string) bool {
	return exec.Command("docker", "volume", "inspect", name).Run() == nil
}

// TestReconcileRemovesOrphanStateVolumes: the orchestrator stopped after a
// node's rows were deleted but before its container and state volume were
// removed. The next Reconcile removes that volume (and logs it), and keeps
// the volume of a node that exists (stopped), one labelled with another
// instance, an unlabelled filepath-state-* volume, and one a container still
// uses (with a warning).
func TestReconcileRemovesOrphanStateVolumes(t *testing.T) {
	logs := &testkit.Buffer{}
	e := newEnv(t, func(c *Config) {
		c.Runtime = stateDirSpecs{c.Runtime}
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	root := e.startRoot("echo ready")
	kid, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: "kid", AgentType: AgentCustom, Image: testImage, ParentID: &root.ID, Task: "echo kid ready"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.r.StartNode(e.ctx, e.uid, e.sid, kid.ID); err != nil {
		t.Fatal(err)
	}
	e.waitFor("ready", func() bool { return hasText(e.records(root.ID), "ready") && hasText(e.records(kid.ID), "kid ready") })

	// Another instance's volume of a node this store never had, an
	// unlabelled one named like a state volume, and a volume of this
	// instance, of a node that is not in the store, that a container of
	// another instance (which this runner does not remove) uses.
	other := "other-" + randomID()
	foreign, unlabelled, inUse := StateVolume("n-"+randomID()), StateVolume("x"+randomID()), StateVolume("gone-"+randomID())
	blocker := "filepath-test-blocker-" + randomID()
	vols := []string{StateVolume(root.ID), StateVolume(kid.ID), foreign, unlabelled, inUse}
	t.Cleanup(func() {
		ctx := context.Background()
		infos, _ := e.rt.List(ctx, map[string]string{containers.LabelSession: e.sid})
		for _, in := range infos {
			e.rt.Remove(ctx, in.ID)
		}
		exec.Command("docker", "rm", "-f", blocker).Run()
		for _, v := range vols {
			exec.Command("docker", "volume", "rm", "-f", v).Run()
		}
	})
	labels := func(instance, node string) []string {
		return []string{"--label", containers.LabelManaged + "=true", "--label", containers.LabelSession + "=" + e.sid,
			"--label", containers.LabelNode + "=" + node, "--label", LabelInstance + "=" + instance}
	}
	docker(t, append(append([]string{"volume", "create"}, labels(other, strings.TrimPrefix(foreign, StateVolume("")))...), foreign)...)
	docker(t, "volume", "create", unlabelled)
	docker(t, append(append([]string{"volume", "create"}, labels(e.r.instance, strings.TrimPrefix(inUse, StateVolume("")))...), inUse)...)
	docker(t, append(append([]string{"create", "--name", blocker}, labels(other, "blocker")...),
		"-v", inUse+":/s", "--network", "none", "--entrypoint", "true", testImage)...)

	// The runner made both nodes' volumes, labelled with its instance.
	mine, err := e.rt.ListVolumes(e.ctx, map[string]string{LabelInstance: e.r.instance})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, v := range mine {
		names[v.Name] = v.NodeID
	}
	if names[StateVolume(root.ID)] != root.ID || names[StateVolume(kid.ID)] != kid.ID {
		t.Fatalf("volumes of this instance %v, want the root's and the kid's", names)
	}

	if err := e.r.StopSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, protocol.NodeStopped)
	e.waitStatus(kid.ID, protocol.NodeStopped)
	e.r.Close()
	// The crash: the kid's rows are gone, its container and volume are not.
	if _, err := e.sessions.DeleteNode(e.ctx, e.uid, e.sid, kid.ID); err != nil {
		t.Fatal(err)
	}
	if !volumeExists(StateVolume(kid.ID)) {
		t.Fatal("the kid's volume went with its rows")
	}

	e.r = e.newRunner() // reconciles

	if volumeExists(StateVolume(kid.ID)) {
		t.Errorf("Reconcile kept %s, the volume of a deleted node", StateVolume(kid.ID))
	}
	for _, v := range []struct{ name, what string }{
		{StateVolume(root.ID), "of a stopped node"},
		{foreign, "of another instance"},
		{unlabelled, "without labels"},
		{inUse, "in use by a container"},
	} {
		if !volumeExists(v.name) {
			t.Errorf("Reconcile removed the volume %s", v.what)
		}
	}
	out := logs.String()
	if !logged(out, "level=INFO", "removed the state volume of a deleted node", "volume="+StateVolume(kid.ID)) {
		t.Errorf("the removal is not logged:\n%s", out)
	}
	if !logged(out, "level=WARN", "a container uses it", "volume="+inUse) {
		t.Errorf("the volume in use is not warned about:\n%s", out)
	}
	if strings.Contains(out, "volume="+StateVolume(root.ID)) || strings.Contains(out, "volume="+foreign) {
		t.Errorf("Reconcile logged about a volume it must leave alone:\n%s", out)
	}

	// Once the container is gone, the next start-up removes that volume too.
	docker(t, "rm", "-f", blocker)
	e.r.Close()
	e.r = e.newRunner()
	if volumeExists(inUse) {
		t.Errorf("the volume of a deleted node stays once no container uses it")
	}
	if !volumeExists(StateVolume(root.ID)) {
		t.Error("a second Reconcile removed the stopped node's volume")
	}
}
