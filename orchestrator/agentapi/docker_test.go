package agentapi

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
)

const byoEcho = "filepath/byo-echo:latest"

// agent is a byo-echo container whose /workspace holds testkit's probe.sh.
type agent struct {
	t   *testing.T
	ctx context.Context
	id  string
	ws  string // the host directory at /workspace
	in  io.Writer
	out *containers.LogReader
}

// dockerFixture is newFixture for a test with containers: the byo-echo
// image required, a Docker runtime of the tests' own instance with cfg
// (closed when the test ends) and a context that ends within the time
// given.
func dockerFixture(t *testing.T, cfg containers.DockerConfig, within time.Duration) (*fixture, context.Context, *containers.Docker) {
	t.Helper()
	testkit.RequireImage(t, byoEcho)
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	cfg.Instance = "agentapi-test"
	d, err := containers.NewDocker(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return f, ctx, d
}

func startAgent(t *testing.T, ctx context.Context, d *containers.Docker, session, nodeID string, env map[string]string) *agent {
	t.Helper()
	ws := t.TempDir()
	testkit.WriteProbe(t, ws)
	id, err := d.Create(ctx, containers.Spec{SessionID: session, NodeID: nodeID, Image: byoEcho, WorkspaceDir: ws, Network: "none", Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Remove(context.Background(), id) })
	if err := d.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	in, err := d.AttachStdin(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	out, err := d.Logs(ctx, id, containers.LogOptions{Stdout: true, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	return &agent{t: t, ctx: ctx, id: id, ws: ws, in: in, out: out}
}

// run runs a shell command in the agent (byo-echo's /cmd) and returns its stdout.
func (a *agent) run(cmd string) string {
	a.t.Helper()
	b, _ := json.Marshal(map[string]string{"type": "message", "from": "user", "content": "/cmd " + cmd})
	if _, err := a.in.Write(append(b, '\n')); err != nil {
		a.t.Fatal(err)
	}
	for {
		l, err := a.out.Next()
		if err != nil {
			a.t.Fatalf("waiting for %q: %v", cmd, err)
		}
		var ev struct{ Type, Cmd, Status, Stdout, Stderr string }
		if json.Unmarshal(l.Line, &ev) == nil && ev.Type == "command" && ev.Cmd == cmd && ev.Status != "start" {
			if ev.Stderr != "" {
				a.t.Logf("%s: stderr %s", cmd, ev.Stderr)
			}
			return ev.Stdout
		}
	}
}

// TestContainerListener serves a node inside its container (no network):
// the agent reaches /healthz and, with its own token, a mounted route that
// sees it as its node; another node's token and a user key are refused;
// after Close its connections are refused.
func TestContainerListener(t *testing.T) {
	f, ctx, d := dockerFixture(t, containers.DockerConfig{Network: "none"}, 2*time.Minute)
	s := f.server(t, Config{Netns: d})
	if s.URL() != "http://127.0.0.1:7428" {
		t.Fatalf("URL %q", s.URL())
	}
	a := startAgent(t, ctx, d, f.sid, f.nodeA.ID, map[string]string{"FILEPATH_API_URL": s.URL(), "FILEPATH_API_KEY": f.keyA})
	if err := s.Open(ctx, f.nodeA.ID, a.id); err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, f.nodeA.ID, a.id); err != nil || !s.Serving(f.nodeA.ID) {
		t.Fatalf("open the same container again: %v", err)
	}

	if got := a.run("bash probe.sh /healthz"); got != `200 {"ok":true}` {
		t.Fatalf("healthz from the container: %q", got)
	}
	status, body, _ := strings.Cut(a.run(`bash probe.sh /test/whoami "$FILEPATH_API_KEY"`), " ")
	var who map[string]any
	if status != "200" || json.Unmarshal([]byte(body), &who) != nil || who["node"] != f.nodeA.ID || who["session"] != f.sid {
		t.Fatalf("own token from the container: %s %s", status, body)
	}
	for name, key := range map[string]string{"another node's token": f.keyB, "a user key": f.uiKey} {
		if got := a.run("bash probe.sh /test/whoami " + key); !strings.HasPrefix(got, "403 ") {
			t.Fatalf("%s from the container: %q", name, got)
		}
	}

	s.Close(f.nodeA.ID)
	if s.Serving(f.nodeA.ID) {
		t.Fatal("still serving after Close")
	}
	if got := a.run("bash probe.sh /healthz '' once"); got != "refused" {
		t.Fatalf("after Close, the container's connection: %q", got)
	}
	if err := d.Stop(ctx, a.id, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, f.nodeA.ID, a.id); err == nil || s.Serving(f.nodeA.ID) {
		t.Fatal("opened a listener in a stopped container")
	}
	s.Shutdown()
	if err := s.Open(ctx, f.nodeA.ID, a.id); err == nil {
		t.Fatal("open after Shutdown")
	}
}
