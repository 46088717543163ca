package containers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/filepath-dev/filepath/internal/testkit"
)

// probeScript connects to 127.0.0.1:$1 from inside the container, retrying
// refused connections every millisecond, GETs $2 and prints how many
// attempts were refused, how long that took and the response's last line.
const probeScript = `#!/bin/bash
port=$1; path=$2; t0=$(date +%s%N); n=0
until { exec 3<>/dev/tcp/127.0.0.1/$port; } 2>/dev/null; do
	n=$((n+1))
	if [ $n -gt 5000 ]; then echo "refused=$n gave up"; exit 1; fi
	sleep 0.001
done
t1=$(date +%s%N)
printf 'GET %s HTTP/1.0\r\nHost: agent\r\n\r\n' "$path" >&3
body=$(tail -n1 <&3)
echo "refused=$n waited_us=$(( (t1-t0)/1000 )) body=$body"
`

// probeWorkspace is a workspace holding probeScript as probe.sh.
func probeWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "probe.sh"), []byte(probeScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}

// TestListenIn opens a listener in the network namespace of a running
// container, with no network and with the default bridge: the agent reaches
// it on its own loopback, nothing listens on the host, and once the listener
// is closed the agent's connections are refused. It logs how long after the
// container started the listener was up.
func TestListenIn(t *testing.T) {
	testkit.RequireImage(t, byoEchoImage)
	for _, network := range []string{"none", "bridge"} {
		t.Run(network, func(t *testing.T) {
			d, session, ctx := dockerSession(t)
			ws := probeWorkspace(t)
			const probe = "bash probe.sh 7428 /hello"
			id, err := d.Create(ctx, Spec{SessionID: session, NodeID: "root", Image: byoEchoImage, WorkspaceDir: ws,
				Network: network, Env: map[string]string{"FILEPATH_TASK": "/cmd " + probe}})
			if err != nil {
				t.Fatal(err)
			}
			begin := time.Now()
			if err := d.Start(ctx, id); err != nil {
				t.Fatal(err)
			}
			started := time.Now()
			ln, err := d.ListenIn(ctx, id, "127.0.0.1:7428")
			if err != nil {
				t.Fatalf("listen in the container: %v", err)
			}
			up := time.Now()
			t.Logf("listener up %v after ContainerStart returned (%v after it was called)", up.Sub(started), up.Sub(begin))
			defer ln.Close()
			go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "hello from the orchestrator, you asked for %s", r.URL.Path)
			}))
			testkit.NoHostListener(t, 7428)

			r := follow(t, ctx, d, id)
			defer r.Close()
			out := commandOutput(t, r, probe)
			if !strings.Contains(out, "body=hello from the orchestrator, you asked for /hello") {
				t.Fatalf("the agent's probe printed %q", out)
			}
			t.Logf("inside the container: %s", out)

			ln.Close()
			in, err := d.AttachStdin(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			const again = `bash -c '{ exec 3<>/dev/tcp/127.0.0.1/7428; } 2>/dev/null && echo open || echo refused'`
			if _, err := in.Write(message("/cmd " + again)); err != nil {
				t.Fatal(err)
			}
			if out := commandOutput(t, r, again); out != "refused" {
				t.Fatalf("after the listener closed, a connection from the container is %q", out)
			}
		})
	}
}

// TestListenBeforeStart: a listener opened in a created container's
// namespace, before Start, accepts the agent's first connection. The probe
// is the container's first process; it connects once and reports whether
// it was refused (20 starts, never once).
func TestListenBeforeStart(t *testing.T) {
	testkit.RequireImage(t, byoEchoImage)
	d, session, _ := dockerSession(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a failure bound for 20 starts (40 containers) on a loaded machine
	defer cancel()
	ws := probeWorkspace(t)
	for i := range 20 {
		id, err := d.Create(ctx, Spec{SessionID: session, NodeID: fmt.Sprintf("n%d", i), Image: byoEchoImage, WorkspaceDir: ws,
			Entrypoint: []string{"bash", "/workspace/probe.sh", "7428", "/"}})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := d.ListenIn(ctx, id, "127.0.0.1:7428")
		if err != nil {
			t.Fatalf("run %d: listen in the created container: %v", i, err)
		}
		go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
		if err := d.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
		if code := wait(t, ctx, d, id); code != 0 {
			t.Fatalf("run %d: probe exit code %d", i, code)
		}
		ln.Close()
		r, err := d.Logs(ctx, id, LogOptions{Stdout: true})
		if err != nil {
			t.Fatal(err)
		}
		l, err := r.Next()
		r.Close()
		if err != nil || !strings.HasPrefix(string(l.Line), "refused=0 ") || !strings.HasSuffix(string(l.Line), "body=ok") {
			t.Fatalf("run %d: the agent, connecting from its first instruction: %q (%v)", i, l.Line, err)
		}
		if err := d.Remove(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSandboxLifecycle: a container's sandbox stops once the container has
// exited (Wait), starts again with the container, and goes with Remove; a
// sandbox that no container joins any more is pruned.
func TestSandboxLifecycle(t *testing.T) {
	d, session, _ := dockerSession(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id, err := d.Create(ctx, Spec{SessionID: session, NodeID: "n1", Image: testImage, Env: map[string]string{"FILEPATH_TASK": "echo hi; done"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	sb := c.Config.Labels[LabelNetns]
	running := func() bool {
		s, err := d.cli.ContainerInspect(ctx, sb)
		if err != nil {
			t.Fatalf("inspect the sandbox: %v", err)
		}
		return s.State.Running
	}
	if sb == "" || !running() {
		t.Fatalf("a created container's sandbox %q does not run", sb)
	}
	for round := range 2 { // the second start finds its sandbox stopped
		if err := d.Start(ctx, id); err != nil {
			t.Fatalf("start %d: %v", round, err)
		}
		if code := wait(t, ctx, d, id); code != 0 {
			t.Fatalf("exit code %d", code)
		}
		if running() {
			t.Fatalf("round %d: the sandbox still runs after its container exited", round)
		}
	}
	if infos, err := d.List(ctx, map[string]string{LabelSession: session}); err != nil || len(infos) != 1 {
		t.Fatalf("List returns %d containers (%v): the sandbox is not one", len(infos), err)
	}
	if err := d.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.ContainerInspect(ctx, sb); !cerrdefs.IsNotFound(err) {
		t.Fatalf("the sandbox outlived Remove of its container: %v", err)
	}

	orphan, err := d.createSandbox(ctx, Spec{SessionID: session, NodeID: "n2"}, "none")
	if err != nil {
		t.Fatal(err)
	}
	joined, err := d.Create(ctx, Spec{SessionID: session, NodeID: "n3", Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.pruneSandboxes(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("pruned %d sandboxes younger than the grace (%v)", n, err)
	}
	if _, err := d.pruneSandboxes(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.ContainerInspect(ctx, orphan); !cerrdefs.IsNotFound(err) {
		t.Fatalf("an orphan sandbox was not pruned: %v", err)
	}
	c, err = d.cli.ContainerInspect(ctx, joined)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := d.cli.ContainerInspect(ctx, c.Config.Labels[LabelNetns]); err != nil || !s.State.Running {
		t.Fatalf("the sandbox of a created container was pruned: %v", err)
	}
}

// TestJoinNetwork: a container made with JoinNetwork shares the namespace
// another container's listener serves, before that one starts (what a
// health check of a node does).
func TestJoinNetwork(t *testing.T) {
	testkit.RequireImage(t, byoEchoImage)
	d, session, ctx := dockerSession(t)
	ws := probeWorkspace(t)
	agent, err := d.Create(ctx, Spec{SessionID: session, NodeID: "n1", Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := d.ListenIn(ctx, agent, "127.0.0.1:7428")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "node's") }))
	res, err := Run(ctx, d, Spec{SessionID: session, NodeID: "n1", Image: byoEchoImage, WorkspaceDir: ws, JoinNetwork: agent,
		Entrypoint: []string{"bash", "/workspace/probe.sh", "7428", "/"}}, RunOptions{})
	if err != nil || res.ExitCode != 0 || !strings.HasSuffix(res.Output, "body=node's") {
		t.Fatalf("a run joining the node's namespace: %+v %v", res, err)
	}
}

// commandOutput waits for the byo-echo command event of cmd and returns
// its stdout.
func commandOutput(t *testing.T, r *LogReader, cmd string) string {
	t.Helper()
	l := until(t, r, "command "+cmd, func(l LogLine) bool {
		var e map[string]any
		return json.Unmarshal(l.Line, &e) == nil && e["type"] == "command" && e["cmd"] == cmd && e["status"] != "start"
	})
	var e struct{ Stdout, Stderr string }
	json.Unmarshal(l.Line, &e)
	if e.Stderr != "" {
		t.Logf("%s: stderr %s", cmd, e.Stderr)
	}
	return e.Stdout
}
