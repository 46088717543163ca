package containers

import (
	"context"
	"testing"
	"time"
)

// TestProcessClose checks that processes end with the runtime and that the
// process runtime insists on a command.
func TestProcessClose(t *testing.T) {
	agent := testAgent(t)
	p, err := NewProcess(ProcessConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.Create(ctx, Spec{SessionID: "s", NodeID: "n"}); FieldOf(err) != "cmd" {
		t.Fatalf("create without cmd: %v", err)
	}
	if _, err := p.Create(ctx, Spec{SessionID: "s", NodeID: "n", Cmd: []string{agent}, WorkspaceDir: "/no/such/dir"}); FieldOf(err) != "workspace_dir" {
		t.Fatalf("create with a missing workspace: %v", err)
	}
	id, err := p.Create(ctx, Spec{SessionID: "s", NodeID: "n", Cmd: []string{agent}, Env: map[string]string{"FILEPATH_TASK": "ignore-stop"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	unstarted, err := p.Create(ctx, Spec{SessionID: "s", NodeID: "n2", Cmd: []string{agent}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	info, err := p.Inspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != StateExited || info.ExitCode != 137 {
		t.Fatalf("after close: %s exit %d, want exited 137", info.State, info.ExitCode)
	}
	if err := p.Start(ctx, unstarted); CodeOf(err) != CodeUnavailable {
		t.Fatalf("start after close: %v", err)
	}
}
