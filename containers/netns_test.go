package containers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

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

// TestListenInDelay measures the window in which an agent that connects
// the moment its process starts is refused: the probe is the container's
// first process and retries every millisecond.
func TestListenInDelay(t *testing.T) {
	testkit.RequireImage(t, byoEchoImage)
	d, session, ctx := dockerSession(t)
	ws := probeWorkspace(t)
	for i := range 3 {
		spec := Spec{SessionID: session, NodeID: fmt.Sprintf("n%d", i)}
		resp, err := d.cli.ContainerCreate(ctx, &container.Config{Image: byoEchoImage, Labels: d.labels(spec),
			Entrypoint: []string{"bash", "/workspace/probe.sh", "7428", "/"}},
			&container.HostConfig{NetworkMode: "none", Binds: []string{ws + ":/workspace"}}, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Start(ctx, resp.ID); err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		ln, err := d.ListenIn(ctx, resp.ID, "127.0.0.1:7428")
		if err != nil {
			t.Fatal(err)
		}
		up := time.Since(started)
		go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
		if code := wait(t, ctx, d, resp.ID); code != 0 {
			t.Fatalf("probe exit code %d", code)
		}
		ln.Close()
		r, err := d.Logs(ctx, resp.ID, LogOptions{Stdout: true})
		if err != nil {
			t.Fatal(err)
		}
		l, err := r.Next()
		r.Close()
		if err != nil || !strings.HasSuffix(string(l.Line), "body=ok") {
			t.Fatalf("probe printed %q (%v)", l.Line, err)
		}
		t.Logf("run %d: listener up %v after ContainerStart returned; the agent, probing from its first instruction: %s", i, up, l.Line)
	}
}

// TestListenInRefuses: a container that does not run, and one on the host's
// network, get no listener.
func TestListenInRefuses(t *testing.T) {
	d, session, ctx := dockerSession(t)
	created, err := d.Create(ctx, Spec{SessionID: session, NodeID: "n1", Image: testImage, Network: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ListenIn(ctx, created, "127.0.0.1:7428"); CodeOf(err) != CodeConflict || !strings.Contains(err.Error(), "is not running") {
		t.Fatalf("listen in a created container: %v", err)
	}
	if _, err := d.ListenIn(ctx, "no-such-container", "127.0.0.1:7428"); CodeOf(err) != CodeNotFound {
		t.Fatalf("listen in a missing container: %v", err)
	}
	host, err := d.Create(ctx, Spec{SessionID: session, NodeID: "n2", Image: testImage, Network: "host",
		Env: map[string]string{"FILEPATH_TASK": "sleep 60000"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	if ln, err := d.ListenIn(ctx, host, "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "network mode host") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("listen in a container on the host's network: %v", err)
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
