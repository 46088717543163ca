package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/protocol"
)

// Amp and Cursor cannot run without their vendors' services: the real
// adapter runs in a real container (hardened, no network) against
// filepath-fake-cli installed as the CLI. Amp runs in its real image
// (filepath/agent-amp, made by images/build.sh) with the fake mounted over
// /usr/local/bin/amp; Cursor's image cannot be built here, so it runs in a
// stand-in built from the Debian base the same way.

const standIn = "filepath/test-cli-adapter:e2e"

var buildOnce sync.Once

// e2eImages builds the static adapter and fake and the stand-in image; it
// returns the directory holding the two binaries.
func e2eImages(t *testing.T) string {
	t.Helper()
	testkit.RequireImage(t, "filepath/base:bookworm")
	dir := filepath.Join(os.TempDir(), "filepath-cli-e2e")
	var err error
	buildOnce.Do(func() {
		os.MkdirAll(dir, 0o755)
		for _, b := range []struct{ out, pkg string }{{"filepath-cli-adapter", "."}, {"filepath-fake-cli", "./fakecli"}} {
			cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, b.out), b.pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, e := cmd.CombinedOutput(); e != nil {
				err = fmt.Errorf("build %s: %v\n%s", b.pkg, e, out)
				return
			}
		}
		dockerfile := `FROM filepath/base:bookworm
COPY filepath-cli-adapter /usr/local/bin/filepath-cli-adapter
COPY filepath-fake-cli /usr/local/bin/cursor-agent
RUN git config --system user.name "Cursor (filepath)" && git config --system user.email cursor@agents.filepath.invalid \
    && git config --system --add safe.directory '*' && mkdir -p /home/agent/.state /workspace
ENV FILEPATH_AGENT_TYPE=cursor FILEPATH_STATE_DIR=/home/agent/.state
WORKDIR /workspace
ENTRYPOINT ["/usr/local/bin/filepath-cli-adapter"]
`
		if e := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); e != nil {
			err = e
			return
		}
		cmd := exec.Command("docker", "build", "-q", "-t", standIn, dir)
		cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
		if out, e := cmd.CombinedOutput(); e != nil {
			err = fmt.Errorf("docker build: %v\n%s", e, out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

type container struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	mu     sync.Mutex
	events []protocol.Event
	stderr strings.Builder
	read   chan struct{}
}

// runContainer starts the agent's image on ws and state with the transcript.
func runContainer(t *testing.T, agent, ws, state, transcript, task string) *container {
	t.Helper()
	bins := e2eImages(t)
	tr, _ := filepath.Abs(filepath.Join("testdata", agent, transcript, "stream.jsonl"))
	args := []string{"run", "-i", "--rm", "--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--pids-limit", "512", "--init",
		"-v", ws + ":/workspace", "-v", state + ":/home/agent/.state", "-v", tr + ":/opt/fake/stream.jsonl:ro",
		"-e", "FILEPATH_FAKE_TRANSCRIPT=/opt/fake/stream.jsonl", "-e", "FILEPATH_TASK=" + task,
		"-e", "FILEPATH_AGENT_ID=n1", "-e", "FILEPATH_API_KEY=fp_test"}
	image := standIn
	if agent == "amp" {
		image = "filepath/agent-amp:latest"
		testkit.RequireImage(t, image)
		args = append(args, "-v", filepath.Join(bins, "filepath-fake-cli")+":/usr/local/bin/amp:ro")
	}
	args = append(args, image)
	c := &container{t: t, read: make(chan struct{})}
	c.cmd = exec.Command("docker", args...)
	c.cmd.Stderr = &lockedWriter{mu: &c.mu, w: &c.stderr}
	var err error
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.read)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			ev, err := protocol.DecodeEvent(sc.Bytes())
			if err != nil {
				t.Errorf("invalid FAP from the container: %s: %v", sc.Text(), err)
				continue
			}
			c.mu.Lock()
			c.events = append(c.events, ev)
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		c.in.Close()
		done := make(chan struct{})
		go func() { c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			c.cmd.Process.Kill()
		}
		if t.Failed() {
			c.mu.Lock()
			t.Logf("container stderr:\n%s", c.stderr.String())
			c.mu.Unlock()
		}
	})
	return c
}

func (c *container) send(v any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		c.t.Fatal(err)
	}
}

func (c *container) waitFor(what string, match func(protocol.Event) bool) []protocol.Event {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		evs := append([]protocol.Event(nil), c.events...)
		c.mu.Unlock()
		if index(evs, match) >= 0 {
			return evs
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no %s within 60 s", what)
	return nil
}

// end closes stdin (or not) and waits for the container's exit.
func (c *container) wait(closeStdin bool) (int, []protocol.Event) {
	c.t.Helper()
	if closeStdin {
		c.in.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { <-c.read; done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return code, append([]protocol.Event(nil), c.events...)
	case <-ctx.Done():
		c.t.Fatal("the container did not exit within 60 s")
	}
	return 0, nil
}

func e2eNode(t *testing.T) (ws, state string) {
	t.Helper()
	n := newNode(t, "amp")
	return n.ws, n.state
}

func TestContainerFileEditCommitsInTheWorkspace(t *testing.T) {
	testkit.RequireDocker(t)
	for _, agent := range []string{"amp", "cursor"} {
		t.Run(agent, func(t *testing.T) {
			ws, state := e2eNode(t)
			c := runContainer(t, agent, ws, state, "file-edit", "Change hello to hello world and commit.")
			evs := c.waitFor("idle", isIdle)
			if got := commits(evs); len(got) != 1 || got[0] != "Say hello world" {
				t.Errorf("commits %q", got)
			}
			code, evs := c.wait(true)
			if code != 0 || !isDone(evs[len(evs)-1]) {
				t.Errorf("exit %d, last %#v: want 0 after done", code, evs[len(evs)-1])
			}
			b, _ := os.ReadFile(filepath.Join(ws, "README.md"))
			if string(b) != "hello world\n" {
				t.Errorf("README.md in the workspace is %q", b)
			}
		})
	}
}

func TestContainerRestartResumesFromTheStateVolume(t *testing.T) {
	testkit.RequireDocker(t)
	for _, agent := range []string{"amp", "cursor"} {
		t.Run(agent, func(t *testing.T) {
			ws, state := e2eNode(t)
			c := runContainer(t, agent, ws, state, "multi-turn", "first question")
			c.waitFor("idle", isIdle)
			if code, _ := c.wait(true); code != 0 {
				t.Fatalf("first container: exit %d", code)
			}
			d := runContainer(t, agent, ws, state, "multi-turn", "first question")
			d.send(protocol.MessageInput{Type: "message", From: "user", Content: "second question"})
			evs := d.waitFor("idle", isIdle)
			if got := texts(evs); len(got) != 1 || !strings.Contains(got[0], "I remember the first") {
				t.Errorf("texts %q, want the second turn of the same thread", got)
			}
			d.wait(true)
		})
	}
}

func TestContainerStopEndsWithinTheGrace(t *testing.T) {
	testkit.RequireDocker(t)
	for _, agent := range []string{"amp", "cursor"} {
		t.Run(agent, func(t *testing.T) {
			ws, state := e2eNode(t)
			c := runContainer(t, agent, ws, state, "interrupt", "wait")
			c.waitFor("a command start", commandStarted)
			at := time.Now()
			c.send(protocol.SignalInput{Type: "signal", Action: "stop"})
			code, evs := c.wait(false)
			if took := time.Since(at); took > 5*time.Second {
				t.Errorf("stop took %v", took)
			}
			if code != 0 {
				t.Errorf("exit %d", code)
			}
			if s := doneSummary(t, evs); s != "stopped" {
				t.Errorf("done %q", s)
			}
		})
	}
}
