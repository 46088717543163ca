package runner

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator/store"
)

// TestProcessRuntime runs the runner on the local-process runtime (no
// Docker): the test agent binary, a message round trip, a spawned child and
// a clean exit.
func TestProcessRuntime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "testagent")
	build := exec.CommandContext(ctx, filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "../../adapters/testagent")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testagent: %v\n%s", err, out)
	}
	rt, err := containers.NewProcess(containers.ProcessConfig{Dir: filepath.Join(dir, "proc")})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(dir, "filepath.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	u, _ := st.CreateUser(ctx, "carol", false)
	s, _ := st.CreateSession(ctx, u.ID, store.NewSession{Name: "process"})
	root, err := st.CreateNode(ctx, u.ID, s.ID, store.NewNode{Name: "root", AgentType: AgentCustom, Image: "local", Task: "spawn 1"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Store: st, Runtime: rt, DataDir: dir, Cmd: func(store.Node) []string { return []string{bin} }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	e := &env{t: t, ctx: ctx, st: st, uid: u.ID, sid: s.ID, r: r}
	if err := r.StartSession(ctx, u.ID, s.ID); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the child to finish", func() bool {
		tree, _ := st.Tree(ctx, u.ID, s.ID)
		return len(tree) == 2 && tree[1].Status == store.NodeDone && !r.Running(tree[1].ID)
	})
	if _, err := r.Deliver(ctx, s.ID, root.ID, msg("echo pong; done")); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, store.NodeDone)
	if !hasText(e.records(root.ID), "pong") {
		t.Fatalf("no pong:\n%s", dump(e.records("")))
	}
}
