package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/adapters/cli/codex"
	"github.com/filepath-dev/filepath/adapters/cli/run"
	"github.com/filepath-dev/filepath/adapters/cli/streamjson"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/protocol"
)

// The adapter end to end against filepath-fake-cli, which replays the golden
// transcripts as each CLI would (stdin in the CLI's input mode, its
// arguments checked). Real processes, no network.

// node is one container's worth of adapter: a workspace (a git repository)
// and a state directory that survive restarts.
type node struct {
	t     *testing.T
	agent string
	ws    string
	state string
}

var cliName = map[string]string{"claude-code": "claude", "codex": "codex", "amp": "amp", "cursor": "cursor-agent"}

func newNode(t *testing.T, agent string) *node {
	t.Helper()
	n := &node{t: t, agent: agent, ws: t.TempDir(), state: t.TempDir()}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-qm", "init"}} {
		if args[0] == "add" {
			os.WriteFile(filepath.Join(n.ws, "README.md"), []byte("hello\n"), 0o644)
		}
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = n.ws, gitEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return n
}

func gitEnv() []string {
	return append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
}

// adapter is one run of the adapter process (in-process Main, real CLI
// child processes).
type adapter struct {
	t      *testing.T
	in     *io.PipeWriter
	out    *testkit.Decoded[protocol.Event] // its stdout
	stderr testkit.Buffer
	exit   chan int
}

// start runs the adapter for n with the transcript of testdata/<cli>/<name>.
func (n *node) start(transcript, task string, extraEnv ...string) *adapter {
	t := n.t
	t.Helper()
	cli := map[string]string{"claude-code": "claude", "codex": "codex", "amp": "amp", "cursor": "cursor"}[n.agent]
	tr, _ := filepath.Abs(filepath.Join("testdata", cli, transcript, "stream.jsonl"))
	env := append(gitEnv(), "FILEPATH_FAKE_TRANSCRIPT="+tr, "FILEPATH_FAKE_CLI="+cliName[n.agent],
		"FILEPATH_FAKE_STATE="+filepath.Join(n.state, "fake"), "FILEPATH_TASK="+task,
		"FILEPATH_API_URL=http://127.0.0.1:9", "FILEPATH_API_KEY=fp_test")
	env = append(env, extraEnv...)
	a := &adapter{t: t, exit: make(chan int, 1)}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a.in = inW
	a.out = testkit.Decode(t, outR, protocol.DecodeEvent)
	args := []string{"--agent", n.agent, "--bin", testkit.Program(t, "./fakecli"), "--workspace", n.ws, "--state", n.state, "--grace", "2s", "--log-level", "debug"}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		code := Main(ctx, args, env, inR, outW, &a.stderr)
		outW.Close()
		a.exit <- code
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		<-a.out.Done()
		if t.Failed() {
			t.Logf("adapter stdout:\n%s\nadapter stderr:\n%s", strings.Join(a.out.Lines(), "\n"), a.stderr.String())
		}
	})
	return a
}

func (a *adapter) send(v any) {
	a.t.Helper()
	b, _ := json.Marshal(v)
	if _, err := a.in.Write(append(b, '\n')); err != nil {
		a.t.Fatalf("write stdin: %v", err)
	}
}

func (a *adapter) message(text string) {
	a.send(protocol.MessageInput{Type: "message", From: "user", Content: text})
}

func (a *adapter) stop() { a.send(protocol.SignalInput{Type: "signal", Action: "stop"}) }

// waitFor waits until an event matches, and returns the events so far.
func (a *adapter) waitFor(what string, match func(protocol.Event) bool) []protocol.Event {
	a.t.Helper()
	return a.out.Wait(a.t, 20*time.Second, what, func(evs []protocol.Event) bool { return index(evs, match) >= 0 })
}

// finish closes stdin and waits for the adapter's exit.
func (a *adapter) finish() (int, []protocol.Event) {
	a.in.Close()
	return a.wait()
}

func (a *adapter) wait() (int, []protocol.Event) {
	a.t.Helper()
	code := testkit.Recv(a.t, a.exit, 20*time.Second, "the adapter to exit")
	<-a.out.Done()
	return code, a.out.All()
}

func (a *adapter) stderrText() string { return a.stderr.String() }

func isIdle(ev protocol.Event) bool {
	s, ok := ev.(protocol.StatusEvent)
	return ok && s.State == protocol.StateIdle
}

func isDone(ev protocol.Event) bool { _, ok := ev.(protocol.DoneEvent); return ok }

func commandStarted(ev protocol.Event) bool {
	c, ok := ev.(protocol.CommandEvent)
	return ok && c.Status == protocol.StepStart
}

func isCommit(ev protocol.Event) bool { _, ok := ev.(protocol.CommitEvent); return ok }

func index(evs []protocol.Event, match func(protocol.Event) bool) int {
	for i, ev := range evs {
		if match(ev) {
			return i
		}
	}
	return -1
}

func count(evs []protocol.Event, match func(protocol.Event) bool) int {
	n := 0
	for _, ev := range evs {
		if match(ev) {
			n++
		}
	}
	return n
}

// fieldOf returns f of each event of type E in evs, in order.
func fieldOf[E protocol.Event](evs []protocol.Event, f func(E) string) []string {
	var out []string
	for _, ev := range evs {
		if e, ok := ev.(E); ok {
			out = append(out, f(e))
		}
	}
	return out
}

func texts(evs []protocol.Event) []string {
	return fieldOf(evs, func(t protocol.TextEvent) string { return t.Content })
}

func commits(evs []protocol.Event) []string {
	return fieldOf(evs, func(c protocol.CommitEvent) string { return c.Message })
}

// wantStopped checks an adapter told to stop at the time given: it exited
// 0 within limit, its last event a done that says "stopped".
func wantStopped(t *testing.T, at time.Time, limit time.Duration, code int, evs []protocol.Event) {
	t.Helper()
	if took := time.Since(at); took > limit {
		t.Errorf("stop took %v, want under %v", took, limit)
	}
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	if s := doneSummary(t, evs); s != "stopped" {
		t.Errorf("done summary %q, want stopped", s)
	}
}

func doneSummary(t *testing.T, evs []protocol.Event) string {
	t.Helper()
	if len(evs) == 0 || !isDone(evs[len(evs)-1]) {
		t.Fatalf("the last event is not done: %v", evs)
	}
	d := evs[len(evs)-1].(protocol.DoneEvent)
	if d.Summary == nil {
		return ""
	}
	return *d.Summary
}

func TestFileEditReportsToolsCommandsAndTheCommit(t *testing.T) {
	for _, agent := range Agents {
		t.Run(agent, func(t *testing.T) {
			n := newNode(t, agent)
			a := n.start("file-edit", "Change hello to hello world in README.md and commit.")
			evs := a.waitFor("idle", isIdle)
			if s, ok := evs[0].(protocol.StatusEvent); !ok || s.State != protocol.StateThinking {
				t.Errorf("first event %#v, want status thinking", evs[0])
			}
			if got := commits(evs); len(got) != 1 || got[0] != "Say hello world" {
				t.Errorf("commits %q, want one \"Say hello world\" (HEAD moved during the turn)", got)
			}
			// The commit shows in the turn that made it (the adapter looks
			// at HEAD after each command and at the turn's end).
			if c, i := index(evs, isCommit), index(evs, isIdle); c < 0 || c > i {
				t.Errorf("commit at event %d, idle at %d: want the commit within the turn", c, i)
			}
			var paths []string
			for _, ev := range evs {
				if tl, ok := ev.(protocol.ToolEvent); ok && tl.Status == protocol.StepDone && tl.Path != nil {
					paths = append(paths, *tl.Path)
				}
			}
			// (The transcripts name /workspace, which this workspace is not:
			// the golden parser tests check the paths made relative.)
			if !endsWithAll(paths, "README.md", "notes/todo.txt") {
				t.Errorf("tool paths %q, want README.md and notes/todo.txt", paths)
			}
			code, evs := a.finish()
			if code != 0 {
				t.Fatalf("exit %d, want 0", code)
			}
			if s := doneSummary(t, evs); !strings.Contains(s, "hello world") {
				t.Errorf("done summary %q, want the last answer", s)
			}
			b, _ := os.ReadFile(filepath.Join(n.state, run.StateFile))
			var st struct {
				Session  string `json:"session"`
				TaskSent bool   `json:"task_sent"`
			}
			json.Unmarshal(b, &st)
			if st.Session == "" || !st.TaskSent {
				t.Errorf("state %s, want the session id and task_sent", b)
			}
		})
	}
}

func endsWithAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || strings.HasSuffix(h, w)
		}
		if !found {
			return false
		}
	}
	return true
}

func TestStopDuringACommandEndsWithinTheGrace(t *testing.T) {
	cases := map[string]string{"claude-code": "interrupt-tool", "codex": "interrupt", "amp": "interrupt", "cursor": "interrupt"}
	for _, agent := range Agents {
		t.Run(agent, func(t *testing.T) {
			n := newNode(t, agent)
			a := n.start(cases[agent], "")
			a.message("wait for a long time")
			a.waitFor("a command start", commandStarted)
			at := time.Now()
			a.stop()
			code, evs := a.wait()
			wantStopped(t, at, 3*time.Second, code, evs)
			ended := count(evs, func(ev protocol.Event) bool {
				c, ok := ev.(protocol.CommandEvent)
				return ok && c.Status == protocol.StepError
			})
			if ended != 1 {
				t.Errorf("%d failed command events, want the started command to end in error: %v", ended, evs)
			}
		})
	}
}

func TestASecondContainerResumesTheConversation(t *testing.T) {
	for _, agent := range Agents {
		t.Run(agent, func(t *testing.T) {
			n := newNode(t, agent)
			task := "first question"
			a := n.start("multi-turn", task)
			a.waitFor("idle", isIdle)
			if code, _ := a.finish(); code != 0 {
				t.Fatalf("first run: exit %d", code)
			}
			// The orchestrator sets FILEPATH_TASK again on the new container:
			// it must not reach the CLI twice (the fake would answer it with
			// turn 2 and have nothing for the message).
			b := n.start("multi-turn", task)
			b.message("second question")
			evs := b.waitFor("idle", isIdle)
			if got := texts(evs); len(got) != 1 || !strings.Contains(got[0], "I remember the first") {
				t.Errorf("texts %q, want the second turn of the same conversation", got)
			}
			if code, _ := b.finish(); code != 0 {
				t.Fatalf("second run: exit %d", code)
			}
			if got := n.inputs(); !slices.Equal(got, []string{"first question", "second question"}) {
				t.Errorf("the CLI was given %q, want the task once, then the message", got)
			}
		})
	}
}

// inputs are the messages the fake CLI was given, in order.
func (n *node) inputs() []string {
	b, _ := os.ReadFile(filepath.Join(n.state, "fake", "inputs.jsonl"))
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var s string
		if json.Unmarshal([]byte(l), &s) == nil {
			out = append(out, s)
		}
	}
	return out
}

func TestALostSessionStartsANewOneWithTheMessage(t *testing.T) {
	for _, agent := range []string{"claude-code", "codex"} {
		t.Run(agent, func(t *testing.T) {
			n := newNode(t, agent)
			os.WriteFile(filepath.Join(n.state, run.StateFile), []byte(`{"agent":"`+agent+`","session":"gone-0000","task_sent":true}`), 0o600)
			a := n.start("plain", "")
			a.message("what is 2+2?")
			evs := a.waitFor("idle", isIdle)
			if got := texts(evs); len(got) != 1 || !strings.Contains(got[0], "4") {
				t.Errorf("texts %q, want the answer from a new session", got)
			}
			a.finish()
			b, _ := os.ReadFile(filepath.Join(n.state, run.StateFile))
			if bytes.Contains(b, []byte("gone-0000")) {
				t.Errorf("state %s still names the lost session", b)
			}
		})
	}
}

func TestACrashingCLIIsAnErrorWithItsStderr(t *testing.T) {
	n := newNode(t, "amp")
	// A transcript whose first turn ends the CLI with code 3.
	dir := t.TempDir()
	tr := filepath.Join(dir, "stream.jsonl")
	os.WriteFile(tr, []byte(`{"type":"system","subtype":"init","session_id":"T-1","cwd":"/w","tools":[],"mcp_servers":[]}`+"\n#! exit 3 amp: lost the connection to ampcode.com\n"), 0o644)
	a := n.start("plain", "", "FILEPATH_FAKE_TRANSCRIPT="+tr)
	a.message("hi")
	code, evs := a.wait()
	if code != 3 {
		t.Errorf("exit %d, want the CLI's 3", code)
	}
	if last, ok := evs[len(evs)-1].(protocol.StatusEvent); !ok || last.State != protocol.StateError {
		t.Errorf("last event %#v, want status error", evs[len(evs)-1])
	}
	if s := a.stderrText(); !strings.Contains(s, "amp exited with code 3") || !strings.Contains(s, "lost the connection") {
		t.Errorf("stderr does not say the exit and the CLI's last words:\n%s", s)
	}
}

func TestCursorRunFailureIsReportedAndTheNextMessageWorks(t *testing.T) {
	n := newNode(t, "cursor")
	a := n.start("api-error", "")
	a.message("hello?")
	evs := a.waitFor("idle", isIdle)
	if got := texts(evs); len(got) != 1 || !strings.Contains(got[0], "exited with code 1: Error: You've hit your usage limit") {
		t.Errorf("texts %q, want the run's failure with its stderr", got)
	}
	code, evs := a.finish()
	if code != 0 || !isDone(evs[len(evs)-1]) {
		t.Errorf("exit %d, last %#v: a failed run must not end the adapter", code, evs[len(evs)-1])
	}
}

func TestAParentsMessageIsMarkedForTheCLI(t *testing.T) {
	for _, agent := range Agents {
		t.Run(agent, func(t *testing.T) {
			n := newNode(t, agent)
			a := n.start("plain", "")
			a.send(protocol.MessageInput{Type: "message", From: "parent", Content: "what is 2+2?"})
			a.waitFor("idle", isIdle)
			a.finish()
			if got := n.inputs(); len(got) != 1 || got[0] != "[message from your parent agent]\nwhat is 2+2?" {
				t.Errorf("the CLI was given %q", got)
			}
		})
	}
}

func TestAMissingCLIIsAnErrorNamingIt(t *testing.T) {
	n := newNode(t, "claude-code")
	var stderr bytes.Buffer
	args := []string{"--agent", "claude-code", "--bin", "/nonexistent/claude", "--workspace", n.ws, "--state", n.state}
	var stdout bytes.Buffer
	code := Main(context.Background(), args, []string{"FILEPATH_TASK=hi"}, strings.NewReader(""), &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "/nonexistent/claude") {
		t.Errorf("exit %d, stderr %q: want 1 and the missing program named", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"state":"error"`) {
		t.Errorf("stdout %q, want status error", stdout.String())
	}
}

// The recorded transcripts must come from the CLI versions the images pin:
// bumping a pin without recording them again fails here.
func TestGoldenTranscriptsAreFromThePinnedCLIs(t *testing.T) {
	for _, c := range []struct{ image, pkg, dir, field string }{
		{"agent-claude-code", "@anthropic-ai/claude-code", "claude", `"claude_code_version":"%s"`},
		{"agent-codex", "@openai/codex", "codex", `"cliVersion":"%s"`},
	} {
		b, err := os.ReadFile(filepath.Join("..", "..", "images", c.image, "package.json"))
		if err != nil {
			t.Fatal(err)
		}
		var pkg struct {
			Dependencies map[string]string `json:"dependencies"`
		}
		json.Unmarshal(b, &pkg)
		version := pkg.Dependencies[c.pkg]
		want := fmt.Sprintf(c.field, version)
		field, _, _ := strings.Cut(c.field, "%s")
		cases, _ := filepath.Glob(filepath.Join("testdata", c.dir, "*", "stream.jsonl"))
		recorded := 0
		for _, f := range cases {
			b, _ := os.ReadFile(f)
			if !strings.Contains(string(b), field) { // a transcript without a version line
				continue
			}
			recorded++
			if !strings.Contains(string(b), want) {
				t.Errorf("%s was not recorded from %s@%s (the pin in images/%s): record it again", f, c.pkg, version, c.image)
			}
		}
		if version == "" || recorded == 0 {
			t.Errorf("%s: pin %q, %d recorded transcripts", c.image, version, recorded)
		}
	}
}

func TestUnknownAgentIsAUsageError(t *testing.T) {
	var stderr bytes.Buffer
	code := Main(context.Background(), []string{"--agent", "gemini"}, nil, strings.NewReader(""), io.Discard, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "claude-code, codex, amp, cursor") {
		t.Errorf("exit %d, stderr %q: want 2 and the known agents", code, stderr.String())
	}
}

// Interrupt (a driver command no FAP input makes yet; stop uses it) ends the
// turn and keeps the CLI for the next message.
func TestInterruptEndsTheTurnAndTheCLIStays(t *testing.T) {
	cases := map[string]string{"claude-code": "interrupt-tool", "codex": "interrupt", "amp": "interrupt", "cursor": "interrupt"}
	for _, agent := range Agents {
		t.Run(agent, func(t *testing.T) {
			n := newNode(t, agent)
			cli := map[string]string{"claude-code": "claude", "codex": "codex", "amp": "amp", "cursor": "cursor"}[agent]
			tr, _ := filepath.Abs(filepath.Join("testdata", cli, cases[agent], "stream.jsonl"))
			env := append(gitEnv(), "FILEPATH_FAKE_TRANSCRIPT="+tr, "FILEPATH_FAKE_CLI="+cliName[agent],
				"FILEPATH_FAKE_STATE="+filepath.Join(n.state, "fake"))
			cfg, err := parseConfig([]string{"--agent", agent, "--bin", testkit.Program(t, "./fakecli"), "--workspace", n.ws, "--state", n.state}, env, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			state, err := run.OpenState(n.state, agent)
			if err != nil {
				t.Fatal(err)
			}
			var drv run.Driver
			switch agent {
			case "claude-code":
				drv = streamjson.NewClaude(cfg, state)
			case "codex":
				drv = codex.New(cfg, state)
			case "amp":
				drv = streamjson.NewAmp(cfg, state)
			case "cursor":
				drv = streamjson.NewCursor(cfg, state)
			}
			var mu sync.Mutex
			var evs []protocol.Event
			emit := func(ev protocol.Event) { mu.Lock(); evs = append(evs, ev); mu.Unlock() }
			seen := func(match func(protocol.Event) bool) bool {
				mu.Lock()
				defer mu.Unlock()
				return index(evs, match) >= 0
			}
			cmds := make(chan run.Command, 8)
			done := make(chan error, 1)
			go func() { done <- drv.Run(context.Background(), cmds, emit) }()
			cmds <- run.Command{Op: run.Send, Text: "wait for a long time"}
			testkit.Eventually(t, 20*time.Second, "a command start", func() bool { return seen(commandStarted) })
			cmds <- run.Command{Op: run.Interrupt}
			testkit.Eventually(t, 20*time.Second, "the turn's end", func() bool { return seen(isIdle) })
			if !seen(func(ev protocol.Event) bool {
				c, ok := ev.(protocol.CommandEvent)
				return ok && c.Status == protocol.StepError
			}) {
				t.Errorf("the interrupted command did not end in error: %v", evs)
			}
			if agent == "claude-code" || agent == "codex" {
				// The same process answers the next message (turn 2 of the transcript).
				cmds <- run.Command{Op: run.Send, Text: "are you there?"}
				testkit.Eventually(t, 20*time.Second, "the answer after the interrupt", func() bool {
					return seen(func(ev protocol.Event) bool {
						t, ok := ev.(protocol.TextEvent)
						return ok && t.Content == "After the interrupt."
					})
				})
			}
			cmds <- run.Command{Op: run.Finish}
			if err := testkit.Recv(t, done, 20*time.Second, "the driver to finish"); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}
