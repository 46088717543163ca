package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// e2eImages builds the static adapter and fake and the stand-in image; it
// returns the path of the fake.
func e2eImages(t *testing.T) string {
	t.Helper()
	testkit.RequireImage(t, "filepath/base:bookworm")
	fake := testkit.Program(t, "./fakecli")
	testkit.Image(t, standIn, `FROM filepath/base:bookworm
COPY filepath-cli-adapter /usr/local/bin/filepath-cli-adapter
COPY filepath-fake-cli /usr/local/bin/cursor-agent
RUN git config --system user.name "Cursor (filepath)" && git config --system user.email cursor@agents.filepath.invalid \
    && git config --system --add safe.directory '*' && mkdir -p /home/agent/.state /workspace
ENV FILEPATH_AGENT_TYPE=cursor FILEPATH_STATE_DIR=/home/agent/.state
WORKDIR /workspace
ENTRYPOINT ["/usr/local/bin/filepath-cli-adapter"]
`, map[string]string{"filepath-cli-adapter": testkit.Program(t, "."), "filepath-fake-cli": fake})
	return fake
}

type container struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *testkit.Decoded[protocol.Event] // its stdout
	stderr testkit.Buffer
}

// runContainer starts the agent's image on ws and state with the transcript.
func runContainer(t *testing.T, agent, ws, state, transcript, task string) *container {
	t.Helper()
	fake := e2eImages(t)
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
		args = append(args, "-v", fake+":/usr/local/bin/amp:ro")
	}
	args = append(args, image)
	c := &container{t: t}
	c.cmd = exec.Command("docker", args...)
	c.cmd.Stderr = &c.stderr
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
	c.out = testkit.Decode(t, out, protocol.DecodeEvent)
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
			t.Logf("container stderr:\n%s", c.stderr.String())
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
	return c.out.Wait(c.t, 60*time.Second, what, func(evs []protocol.Event) bool { return index(evs, match) >= 0 })
}

// end closes stdin (or not) and waits for the container's exit.
func (c *container) wait(closeStdin bool) (int, []protocol.Event) {
	c.t.Helper()
	if closeStdin {
		c.in.Close()
	}
	done := make(chan error, 1)
	go func() { <-c.out.Done(); done <- c.cmd.Wait() }()
	code := 0
	if ee, ok := testkit.Recv(c.t, done, 60*time.Second, "the container to exit").(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return code, c.out.All()
}

// eachAgent runs f, in a subtest, for each agent whose fake CLI the image
// carries, on a fresh node's workspace and state directories.
func eachAgent(t *testing.T, f func(t *testing.T, agent, ws, state string)) {
	testkit.RequireDocker(t)
	for _, agent := range []string{"amp", "cursor"} {
		t.Run(agent, func(t *testing.T) {
			ws, state := e2eNode(t)
			f(t, agent, ws, state)
		})
	}
}

func e2eNode(t *testing.T) (ws, state string) {
	t.Helper()
	n := newNode(t, "amp")
	return n.ws, n.state
}

func TestContainerFileEditCommitsInTheWorkspace(t *testing.T) {
	eachAgent(t, func(t *testing.T, agent, ws, state string) {
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

func TestContainerRestartResumesFromTheStateVolume(t *testing.T) {
	eachAgent(t, func(t *testing.T, agent, ws, state string) {
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

func TestContainerStopEndsWithinTheGrace(t *testing.T) {
	eachAgent(t, func(t *testing.T, agent, ws, state string) {
		c := runContainer(t, agent, ws, state, "interrupt", "wait")
		c.waitFor("a command start", commandStarted)
		at := time.Now()
		c.send(protocol.SignalInput{Type: "signal", Action: "stop"})
		code, evs := c.wait(false)
		wantStopped(t, at, 5*time.Second, code, evs)
	})
}
