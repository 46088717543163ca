package containers

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit"
)

const byoEchoImage = "filepath/byo-echo:latest"

// TestBYOEcho runs the tutorial's agent through the Docker runtime, hardened,
// and checks each command's events.
func TestBYOEcho(t *testing.T) {
	testkit.RequireImage(t, byoEchoImage)
	d, session, ctx := dockerSession(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "README.md"), []byte("# hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := run(t, ctx, harness{rt: d}, Spec{SessionID: session, NodeID: "root", Image: byoEchoImage, WorkspaceDir: ws,
		Network: "none", Env: map[string]string{"FILEPATH_TASK": "hello", "FILEPATH_AGENT_TYPE": "custom", "FILEPATH_MODEL": "m1"}})
	in, r := attach(t, ctx, d, id)
	type ev map[string]any
	next := func(typ string) ev {
		t.Helper()
		l := until(t, r, typ, func(l LogLine) bool {
			var e ev
			return json.Unmarshal(l.Line, &e) == nil && e["type"] == typ
		})
		var e ev
		json.Unmarshal(l.Line, &e)
		return e
	}
	if e := next("text"); e["content"] != "hello" {
		t.Fatalf("task echo: %v", e)
	}
	tests := []struct {
		name  string
		input string
		typ   string
		check func(ev) bool
	}{
		{"echo", "hi there", "text", func(e ev) bool { return e["content"] == "hi there" }},
		{"status", "/status", "status", func(e ev) bool { return e["state"] == "running" && e["context_pct"] == 0.1 }},
		{"tool", "/tool", "tool", func(e ev) bool { return e["status"] == "start" && e["path"] == "/workspace" }},
		{"command", "/cmd cat README.md; exit 3", "command", func(e ev) bool { return e["status"] == "start" }},
		{"commit", "/commit", "commit", func(e ev) bool { return len(e["hash"].(string)) == 40 }},
		{"spawn", "/spawn kid", "spawn", func(e ev) bool { return e["name"] == "kid" && e["agent"] == "custom" && e["model"] == "m1" }},
		{"spawn another", "/spawn second kid", "spawn", func(e ev) bool { return e["name"] == "second kid" }},
		{"workers", "/workers", "workers", func(e ev) bool {
			ws, _ := e["workers"].([]any)
			if len(ws) != 2 {
				return false
			}
			w0, _ := ws[0].(map[string]any)
			w1, _ := ws[1].(map[string]any)
			return w0["name"] == "kid" && w0["status"] == "running" && w1["name"] == "second kid" && w1["status"] == "running"
		}},
	}
	for _, tt := range tests {
		if _, err := in.Write(message(tt.input)); err != nil {
			t.Fatal(err)
		}
		// Status events (thinking, idle) come between; wait for the matching one.
		until(t, r, tt.name, func(l LogLine) bool {
			var e ev
			return json.Unmarshal(l.Line, &e) == nil && e["type"] == tt.typ && tt.check(e)
		})
		switch tt.name {
		case "tool":
			if e := next("tool"); e["status"] != "done" || e["output"] != "README.md" {
				t.Fatalf("tool done: %v", e)
			}
		case "command":
			if e := next("command"); e["status"] != "error" || e["exit"] != 3.0 || e["stdout"] != "# hi" {
				t.Fatalf("command done: %v", e)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(ws, ".git")); err != nil {
		t.Fatalf("commit left no repository in the workspace: %v", err)
	}
	if _, err := in.Write(message("/done")); err != nil {
		t.Fatal(err)
	}
	next("done")
	if code := wait(t, ctx, d, id); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestWorkspacePropagation mounts a file system under a running container's
// workspace (as the FUSE workspace will be) and checks the agent sees it.
// It needs root to make a shared bind mount for the workspace.
func TestWorkspacePropagation(t *testing.T) {
	testkit.RequireImage(t, byoEchoImage)
	if os.Geteuid() != 0 {
		testkit.Missing(t, "root (to make a shared mount)")
	}
	d, session, ctx := dockerSession(t)
	ws := t.TempDir()
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", args, err, out)
		}
	}
	sh("mount", "--bind", ws, ws)
	t.Cleanup(func() { exec.Command("umount", "-l", ws).Run() })
	sh("mount", "--make-rshared", ws)

	id := run(t, ctx, harness{rt: d}, Spec{SessionID: session, NodeID: "root", Image: byoEchoImage,
		WorkspaceDir: ws, WorkspacePropagation: "rslave", Network: "none"})
	in, r := attach(t, ctx, d, id)

	sub := filepath.Join(ws, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	sh("mount", "-t", "tmpfs", "tmpfs", sub)
	t.Cleanup(func() { exec.Command("umount", sub).Run() })
	if err := os.WriteFile(filepath.Join(sub, "hello"), []byte("mounted later"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Write(message("/cmd cat sub/hello")); err != nil {
		t.Fatal(err)
	}
	until(t, r, "command done", func(l LogLine) bool {
		var e map[string]any
		if json.Unmarshal(l.Line, &e) != nil || e["type"] != "command" || e["status"] == "start" {
			return false
		}
		if e["stdout"] != "mounted later" {
			t.Fatalf("agent does not see the later mount: %v", e)
		}
		return true
	})
}
