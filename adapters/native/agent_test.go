package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/fakellm"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/protocol"
)

// harness runs an agent in-process: stdin and stdout are pipes, every line
// it prints is checked against FAP and kept.
type harness struct {
	t     *testing.T
	a     *Agent
	dir   string
	stdin *io.PipeWriter
	done  chan error
	out   *testkit.Decoded[protocol.Event] // its stdout
}

// gitEnv gives git an identity of its own for the test (the agent's images
// set one in their system config).
func gitEnv(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "gitconfig")
	os.WriteFile(cfg, []byte("[user]\n\tname = test\n\temail = test@example.invalid\n[init]\n\tdefaultBranch = main\n"), 0o644)
	t.Setenv("GIT_CONFIG_GLOBAL", cfg)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
}

func testConfig(url, dir string) Config {
	return Config{
		APIURL: url, APIKey: "fp_test", Model: "fake/coder", AgentType: "shelley", Workspace: dir,
		MaxSteps: 50, BashTimeout: 2 * time.Minute, BashMaxTimeout: 10 * time.Minute,
		IdleTimeout: 10 * time.Second, ConnectRetry: 2 * time.Second, HandoffAt: 0.85,
	}
}

// fakeModels is a model list where fake/coder has a 100k context.
var fakeModels = []byte(`{"data":[{"id":"fake/coder","context_length":100000},{"id":"fake/tiny","context_length":1000}]}`)

func startAgent(t *testing.T, cfg Config) *harness {
	t.Helper()
	outR, outW := io.Pipe()
	logs := &testkit.Buffer{}
	a, err := New(cfg, outW, logs)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	h := &harness{t: t, a: a, dir: cfg.Workspace, stdin: inW, done: make(chan error, 1), out: testkit.Decode(t, outR, protocol.DecodeEvent)}
	go func() { h.done <- a.Run(context.Background(), inR) }()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			t.Error("the agent did not end after stdin closed")
		}
		outW.Close()
		<-h.out.Done()
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	return h
}

func (h *harness) send(in any) {
	h.t.Helper()
	b, _ := json.Marshal(in)
	if _, err := h.stdin.Write(append(b, '\n')); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) message(from, content string) {
	h.send(protocol.MessageInput{Type: "message", From: from, Content: content})
}

func (h *harness) stop() {
	h.send(protocol.SignalInput{Type: "signal", Action: protocol.ActionStop})
}

func (h *harness) snapshot() []protocol.Event { return h.out.All() }

// waitFor waits until n events match pred and returns the events so far.
func (h *harness) waitFor(what string, n int, pred func(protocol.Event) bool) []protocol.Event {
	h.t.Helper()
	return h.out.Wait(h.t, 60*time.Second, what, func(evs []protocol.Event) bool {
		k := 0
		for _, e := range evs {
			if pred(e) {
				k++
			}
		}
		return k >= n
	})
}

// ended waits for the agent's Run to return, within d, and returns its
// error (and leaves the end for the cleanup).
func (h *harness) ended(d time.Duration, what string) error {
	h.t.Helper()
	err := testkit.Recv(h.t, h.done, d, what)
	h.done <- nil
	return err
}

func isType(typ string) func(protocol.Event) bool {
	return func(e protocol.Event) bool { return e.EventType() == typ }
}

func isStatus(state string) func(protocol.Event) bool {
	return func(e protocol.Event) bool { s, ok := e.(protocol.StatusEvent); return ok && s.State == state }
}

// transcriptOf renders events as short lines for comparing sequences.
func transcriptOf(evs []protocol.Event) []string {
	var out []string
	for _, e := range evs {
		switch e := e.(type) {
		case protocol.TextEvent:
			out = append(out, "text "+e.Content)
		case protocol.ToolEvent:
			p := ""
			if e.Path != nil {
				p = " " + *e.Path
			}
			out = append(out, "tool "+e.Name+" "+e.Status+p)
		case protocol.CommandEvent:
			s := "command " + e.Status + " " + e.Cmd
			if e.Exit != nil {
				s += fmt.Sprintf(" exit %v", *e.Exit)
			}
			out = append(out, s)
		case protocol.CommitEvent:
			out = append(out, "commit "+e.Message)
		case protocol.StatusEvent:
			out = append(out, "status "+e.State)
		case protocol.SpawnEvent:
			out = append(out, "spawn "+e.Name+" "+e.Agent)
		default:
			out = append(out, e.EventType())
		}
	}
	return out
}

func sameLines(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\n\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// chatRequests are the chat completions the fake received, decoded.
func chatRequests(t *testing.T, f *fakellm.Server) []chatRequest {
	t.Helper()
	var out []chatRequest
	for _, r := range f.Requests() {
		if r.Format != "chat" {
			continue
		}
		var req chatRequest
		if err := r.JSON(&req); err != nil {
			t.Fatal(err)
		}
		out = append(out, req)
	}
	return out
}

// toolNames returns the names of the tools req offers the model, in order.
func toolNames(req chatRequest) []string {
	var names []string
	for _, s := range req.Tools {
		names = append(names, s.Function.Name)
	}
	return names
}

func content(m message) string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

func call(id, name, args string) fakellm.ToolCall {
	return fakellm.ToolCall{ID: id, Name: name, Arguments: args}
}

func jsonArgs(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func run(t *testing.T, dir string, argv ...string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, out)
	}
	return string(out)
}

// goModule writes a tiny Go module with a bug the tests do not catch yet,
// committed in a fresh git repository.
func goModule(t *testing.T, dir string) {
	t.Helper()
	testkit.WriteFile(t, filepath.Join(dir, "go.mod"), "module calc\n\ngo 1.21\n")
	testkit.WriteFile(t, filepath.Join(dir, "calc.go"), "package calc\n\n// Abs returns the absolute value of n.\nfunc Abs(n int) int {\n\treturn n\n}\n")
	testkit.WriteFile(t, filepath.Join(dir, "calc_test.go"), "package calc\n\nimport \"testing\"\n\nfunc TestAbsPositive(t *testing.T) {\n\tif Abs(3) != 3 {\n\t\tt.Fatal(\"Abs(3) != 3\")\n\t}\n}\n")
	run(t, dir, "git", "init", "-q")
	run(t, dir, "git", "add", "-A")
	run(t, dir, "git", "commit", "-q", "-m", "initial")
}

const testTail = "\t\tt.Fatal(\"Abs(3) != 3\")\n\t}\n}\n"

const failingTest = "\nfunc TestAbsNegative(t *testing.T) {\n\tif got := Abs(-2); got != 2 {\n\t\tt.Fatalf(\"Abs(-2) = %d, want 2\", got)\n\t}\n}\n"

// fixScript is the fake model's side of "add a failing test and fix it".
func fixScript() []fakellm.Turn {
	u := func(in int) fakellm.Usage { return fakellm.Usage{Input: in, Output: 50} }
	return []fakellm.Turn{
		{Text: "Let me look at the code first.", ToolCalls: []fakellm.ToolCall{
			call("c1", "read_file", `{"path":"calc.go"}`), call("c2", "read_file", `{"path":"/workspace/calc_test.go"}`)}, Usage: u(1000)},
		{ToolCalls: []fakellm.ToolCall{call("c3", "edit_file", jsonArgs(map[string]string{
			"path": "calc_test.go", "old_string": testTail, "new_string": testTail + failingTest}))}, Usage: u(2000)},
		{ToolCalls: []fakellm.ToolCall{call("c4", "bash", `{"command":"go test ./..."}`)}, Usage: u(3000)},
		{Text: "The new test fails: Abs does not handle negative numbers.", ToolCalls: []fakellm.ToolCall{call("c5", "edit_file", jsonArgs(map[string]string{
			"path": "calc.go", "old_string": "\treturn n\n", "new_string": "\tif n < 0 {\n\t\treturn -n\n\t}\n\treturn n\n"}))}, Usage: u(4000)},
		{ToolCalls: []fakellm.ToolCall{call("c6", "bash", `{"command":"go test ./..."}`)}, Usage: u(5000)},
		{ToolCalls: []fakellm.ToolCall{call("c7", "git", `{"args":["add","-A"]}`), call("c8", "git", `{"args":["commit","-m","Abs: return the absolute value of negative numbers"]}`)}, Usage: u(6000)},
		{Text: "Added TestAbsNegative, which failed, and fixed Abs; go test passes and the change is committed.", Usage: u(7150)},
	}
}

func TestFixATest(t *testing.T) {
	gitEnv(t)
	dir := t.TempDir()
	goModule(t, dir)
	f := fakellm.New()
	defer f.Close()
	f.SetModels(fakeModels)
	f.Script(fixScript()...)
	cfg := testConfig(f.URL, dir)
	cfg.Task = "add a failing test and fix it"
	h := startAgent(t, cfg)

	h.waitFor("done", 1, isType(protocol.TypeDone))
	evs := h.snapshot()
	const commitMsg = "Abs: return the absolute value of negative numbers"
	sameLines(t, transcriptOf(evs), testkit.Lines(t, "testdata/fix-a-test/events.txt"))

	// The files, the commit and its event.
	if got := testkit.ReadFile(t, filepath.Join(dir, "calc.go")); !strings.Contains(got, "if n < 0 {\n\t\treturn -n\n\t}") {
		t.Fatalf("calc.go:\n%s", got)
	}
	if got := testkit.ReadFile(t, filepath.Join(dir, "calc_test.go")); !strings.Contains(got, "func TestAbsNegative") {
		t.Fatalf("calc_test.go:\n%s", got)
	}
	log := run(t, dir, "git", "log", "--format=%H %s")
	head := strings.TrimSpace(run(t, dir, "git", "rev-parse", "HEAD"))
	if !strings.HasPrefix(log, head+" "+commitMsg+"\n") || !strings.Contains(log, " initial\n") {
		t.Fatalf("git log:\n%s", log)
	}
	if st := run(t, dir, "git", "status", "--porcelain"); st != "" {
		t.Fatalf("uncommitted changes:\n%s", st)
	}
	for _, e := range evs {
		switch e := e.(type) {
		case protocol.CommitEvent:
			if e.Hash != head {
				t.Fatalf("commit event %s, HEAD %s", e.Hash, head)
			}
		case protocol.CommandEvent:
			if e.Cmd == "go test ./..." && e.Status == protocol.StepDone && *e.Exit == 1 && (e.Stdout == nil || !strings.Contains(*e.Stdout, "Abs(-2) = -2, want 2")) {
				t.Fatalf("the failing go test's event lacks its output: %+v", e)
			}
		case protocol.DoneEvent:
			if e.Summary == nil || !strings.HasPrefix(*e.Summary, "Added TestAbsNegative") {
				t.Fatalf("done %+v", e)
			}
		}
	}
	// context_pct: the last answer's 7150+50 tokens of fake/coder's 100k.
	last := evs[len(evs)-2].(protocol.StatusEvent)
	if last.ContextPct == nil || *last.ContextPct != 0.072 {
		t.Fatalf("context_pct %v, want 0.072", last.ContextPct)
	}

	// What the model was told: the tools' results, in order, each call answered.
	reqs := chatRequests(t, f)
	if len(reqs) != 7 {
		t.Fatalf("%d chat requests, want 7", len(reqs))
	}
	if reqs[0].Model != "fake/coder" || reqs[0].Messages[0].Role != "system" || !strings.Contains(content(reqs[0].Messages[0]), "Shelley") ||
		content(reqs[0].Messages[1]) != "add a failing test and fix it" || len(reqs[0].Tools) != 15 {
		t.Fatalf("first request: %+v", reqs[0])
	}
	toolResult := func(req chatRequest, id string) string {
		for _, m := range req.Messages {
			if m.Role == "tool" && m.ToolCallID == id {
				return content(m)
			}
		}
		t.Fatalf("no result for %s", id)
		return ""
	}
	final := reqs[6]
	for id, want := range map[string]string{
		"c1": "     5\t\treturn n\n",
		"c2": "     5\tfunc TestAbsPositive",
		"c3": "edited calc_test.go: 1 replacement",
		"c4": "exit code: 1",
		"c5": "edited calc.go",
		"c6": "exit code: 0\nstdout:\nok",
		"c7": "exit code: 0",
		"c8": commitMsg,
	} {
		if got := toolResult(final, id); !strings.Contains(got, want) {
			t.Errorf("result of %s lacks %q:\n%s", id, want, got)
		}
	}
	if got := toolResult(final, "c4"); !strings.Contains(got, "Abs(-2) = -2, want 2") {
		t.Errorf("the model did not see why go test failed:\n%s", got)
	}

	// done does not end the agent: a follow-up is a new turn in the same conversation.
	f.Script(fakellm.Turn{Text: "You're welcome.", Usage: fakellm.Usage{Input: 7100, Output: 5}})
	h.message(protocol.FromUser, "thanks")
	h.waitFor("a second done", 2, isType(protocol.TypeDone))
	reqs = chatRequests(t, f)
	msgs := reqs[len(reqs)-1].Messages
	if n := len(msgs); content(msgs[n-1]) != "thanks" || msgs[n-1].Role != "user" || !strings.HasPrefix(content(msgs[n-2]), "Added TestAbsNegative") {
		t.Fatalf("follow-up conversation ends with %+v", msgs[max(0, n-3):])
	}
	start := time.Now()
	h.stop()
	if err := <-h.done; err != nil {
		t.Fatal(err)
	}
	h.done <- nil // for the cleanup
	if el := time.Since(start); el > time.Second {
		t.Fatalf("stop took %s", el)
	}
}

// hangingUpstream answers the model list and holds every chat request open
// until the client goes away, reporting both moments.
func hangingUpstream(t *testing.T) (url string, inFlight, canceled chan struct{}) {
	inFlight, canceled = make(chan struct{}, 8), make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/models") {
			w.Write(fakeModels)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		inFlight <- struct{}{}
		<-r.Context().Done()
		canceled <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, inFlight, canceled
}

func TestStopDuringModelCall(t *testing.T) {
	url, inFlight, canceled := hangingUpstream(t)
	cfg := testConfig(url, t.TempDir())
	cfg.Task = "think hard"
	h := startAgent(t, cfg)
	<-inFlight
	start := time.Now()
	h.stop()
	if err := h.ended(time.Second, "the agent to end within 1 s of signal stop"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-canceled:
	case <-time.After(time.Second - time.Since(start)):
		t.Fatal("the request in flight was not canceled")
	}
	sameLines(t, transcriptOf(h.waitFor("status idle", 1, isStatus(protocol.StateIdle))), []string{"status thinking", "status idle"})
}

func TestStopDuringCommand(t *testing.T) {
	f := fakellm.New()
	defer f.Close()
	f.SetModels(fakeModels)
	f.Script(fakellm.Turn{ToolCalls: []fakellm.ToolCall{call("c1", "bash", `{"command":"sleep 60 & echo $! > pid; wait"}`), call("c2", "read_file", `{"path":"pid"}`)}})
	dir := t.TempDir()
	cfg := testConfig(f.URL, dir)
	cfg.Task = "wait a minute"
	h := startAgent(t, cfg)
	pid := readPid(t, filepath.Join(dir, "pid"))
	start := time.Now()
	h.stop()
	h.ended(time.Second, "the agent to end within 1 s of signal stop")
	if el := time.Since(start); el > time.Second {
		t.Fatalf("stop took %s", el)
	}
	testkit.Eventually(t, 5*time.Second, "the command's process group to end with the stop", func() bool { return !alive(pid) })
	sameLines(t, transcriptOf(h.waitFor("status idle", 1, isStatus(protocol.StateIdle))), []string{
		"status thinking", "status running",
		"command start sleep 60 & echo $! > pid; wait", "command error sleep 60 & echo $! > pid; wait exit -1",
		"status idle",
	})
}

func TestUpstreamErrorThenRecovery(t *testing.T) {
	f := fakellm.New()
	defer f.Close()
	f.SetModels(fakeModels)
	f.Script(fakellm.Turn{Status: 500, ErrorMessage: "upstream exploded"}, fakellm.Turn{Text: "Fine now."})
	cfg := testConfig(f.URL, t.TempDir())
	cfg.Task = "first try"
	h := startAgent(t, cfg)
	evs := h.waitFor("status error", 1, isStatus(protocol.StateError))
	sameLines(t, transcriptOf(evs), []string{
		"status thinking",
		"text LLM error: HTTP 500 Internal Server Error: upstream exploded. Send a message to try again.",
		"status error",
	})
	// The agent waits; the next message is a new turn with the whole conversation.
	h.message(protocol.FromUser, "again")
	h.waitFor("done", 1, isType(protocol.TypeDone))
	reqs := chatRequests(t, f)
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	var users []string
	for _, m := range reqs[1].Messages {
		if m.Role == "user" {
			users = append(users, content(m))
		}
	}
	if strings.Join(users, "|") != "first try|again" {
		t.Fatalf("user messages %q", users)
	}
}

func TestUpstreamHangs(t *testing.T) {
	f := fakellm.New()
	defer f.Close()
	f.SetModels(fakeModels)
	f.Script(fakellm.Turn{Text: "never sent", Hang: true}, fakellm.Turn{Text: "Back."})
	cfg := testConfig(f.URL, t.TempDir())
	cfg.IdleTimeout = 300 * time.Millisecond
	cfg.Task = "hello"
	h := startAgent(t, cfg)
	evs := h.waitFor("status error", 1, isStatus(protocol.StateError))
	if txt := evs[1].(protocol.TextEvent).Content; txt != "LLM error: no answer from the model for 300ms; the request was canceled. Send a message to try again." {
		t.Fatalf("text %q", txt)
	}
	h.message(protocol.FromUser, "are you there?")
	evs = h.waitFor("done", 1, isType(protocol.TypeDone))
	sameLines(t, transcriptOf(evs)[3:], []string{"status thinking", "text Back.", "status idle", "done"})
}

func TestMessageDuringTurn(t *testing.T) {
	f := fakellm.New()
	defer f.Close()
	f.SetModels(fakeModels)
	f.Script(fakellm.Turn{ToolCalls: []fakellm.ToolCall{call("c1", "bash", `{"command":"until [ -f go-on ]; do sleep 0.01; done; echo waited"}`)}},
		fakellm.Turn{Text: "Noted, also the README."})
	dir := t.TempDir()
	cfg := testConfig(f.URL, dir)
	cfg.Task = "work"
	h := startAgent(t, cfg)
	h.waitFor("command start", 1, isType(protocol.TypeCommand))
	h.message(protocol.FromUser, "also update the README")
	testkit.Eventually(t, 5*time.Second, "the message to reach the inbox", func() bool { return h.a.inbox.len() == 1 })
	testkit.WriteFile(t, filepath.Join(dir, "go-on"), "")
	h.waitFor("done", 1, isType(protocol.TypeDone))
	reqs := chatRequests(t, f)
	if len(reqs) != 2 {
		t.Fatalf("%d requests: the message started a turn of its own", len(reqs))
	}
	var roles []string
	for _, m := range reqs[1].Messages {
		roles = append(roles, m.Role+":"+cut(content(m), 40))
	}
	want := []string{"user:work", "assistant:", "tool:exit code: 0\nstdout:\nwaited\n", "user:also update the README"}
	if got := roles[1:]; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("conversation %q, want %q", got, want)
	}
}

func TestInputsFromParentSystemAndSignals(t *testing.T) {
	f := fakellm.New()
	defer f.Close()
	f.SetModels(fakeModels)
	f.Fallback(func(fakellm.Request) fakellm.Turn { return fakellm.Turn{Text: "ok"} })
	cfg := testConfig(f.URL, t.TempDir())
	h := startAgent(t, cfg)
	h.waitFor("status idle at start", 1, isStatus(protocol.StateIdle))
	// pause and resume need nothing from the agent (docker freezes it in between).
	h.send(protocol.SignalInput{Type: "signal", Action: protocol.ActionPause})
	h.send(protocol.SignalInput{Type: "signal", Action: protocol.ActionResume})
	h.message(protocol.FromParent, "check the tests")
	h.waitFor("done", 1, isType(protocol.TypeDone))
	h.message(protocol.FromSystem, "child-1 finished: all good")
	h.waitFor("done", 2, isType(protocol.TypeDone))
	reqs := chatRequests(t, f)
	msgs := reqs[len(reqs)-1].Messages
	got := []string{}
	for _, m := range msgs[1:] {
		got = append(got, m.Role+":"+content(m))
	}
	want := []string{"user:Message from your parent agent:\n\ncheck the tests", "assistant:ok", "system:child-1 finished: all good"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("conversation %q, want %q", got, want)
	}
}

func TestRepeatedCallIsRefused(t *testing.T) {
	f := fakellm.New()
	defer f.Close()
	f.SetModels(fakeModels)
	f.Script(
		fakellm.Turn{ToolCalls: []fakellm.ToolCall{call("c1", "read_file", `{"path":"a.txt"}`)}},
		fakellm.Turn{ToolCalls: []fakellm.ToolCall{call("c2", "read_file", `{"path":"a.txt"}`)}},
		// The same arguments, spelled differently.
		fakellm.Turn{ToolCalls: []fakellm.ToolCall{call("c3", "read_file", `{ "path" : "a.txt" }`)}},
		fakellm.Turn{ToolCalls: []fakellm.ToolCall{call("c4", "read_file", `{"path":"b.txt"}`)}},
		fakellm.Turn{Text: "done reading"},
	)
	dir := t.TempDir()
	testkit.WriteFile(t, filepath.Join(dir, "a.txt"), "a\n")
	testkit.WriteFile(t, filepath.Join(dir, "b.txt"), "b\n")
	cfg := testConfig(f.URL, dir)
	cfg.Task = "read"
	h := startAgent(t, cfg)
	evs := h.waitFor("done", 1, isType(protocol.TypeDone))
	var tools []string
	for _, l := range transcriptOf(evs) {
		if strings.HasPrefix(l, "tool ") {
			tools = append(tools, l)
		}
	}
	sameLines(t, tools, []string{
		"tool read_file start a.txt", "tool read_file done a.txt",
		"tool read_file start a.txt", "tool read_file done a.txt",
		"tool read_file error",
		"tool read_file start b.txt", "tool read_file done b.txt",
	})
	reqs := chatRequests(t, f)
	msgs := reqs[3].Messages
	if last := msgs[len(msgs)-1]; last.ToolCallID != "c3" || !strings.HasPrefix(content(last), "refused: this is call 3 in a row of read_file") {
		t.Fatalf("last message %+v", last)
	}
}

func TestMaxSteps(t *testing.T) {
	f := fakellm.New()
	defer f.Close()
	f.SetModels(fakeModels)
	var mu sync.Mutex
	n := 0
	f.Fallback(func(fakellm.Request) fakellm.Turn {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fakellm.Turn{ToolCalls: []fakellm.ToolCall{call("", "glob", fmt.Sprintf(`{"pattern":"*.%d"}`, n))}}
	})
	cfg := testConfig(f.URL, t.TempDir())
	cfg.MaxSteps = 3
	cfg.Task = "loop forever"
	h := startAgent(t, cfg)
	isLimit := func(e protocol.Event) bool {
		x, ok := e.(protocol.TextEvent)
		return ok && strings.HasPrefix(x.Content, "I stopped this turn after 3 model calls, the limit per turn")
	}
	evs := h.waitFor("the step limit", 1, isLimit)
	if got := len(chatRequests(t, f)); got != 3 {
		t.Fatalf("%d model calls, want 3", got)
	}
	if tr := transcriptOf(evs); tr[len(tr)-1] != "status idle" {
		h.waitFor("status idle", 1, isStatus(protocol.StateIdle))
	}
	// Each turn has its own budget.
	h.message(protocol.FromUser, "go on")
	h.waitFor("the step limit again", 2, isLimit)
	if got := len(chatRequests(t, f)); got != 6 {
		t.Fatalf("%d model calls, want 6", got)
	}
	for _, e := range h.snapshot() {
		if e.EventType() == protocol.TypeDone {
			t.Fatal("a turn cut by the step limit emitted done")
		}
	}
}

func TestHandoff(t *testing.T) {
	for _, tt := range []struct {
		name    string
		summary fakellm.Turn
		want    string
	}{
		{name: "the model writes it", summary: fakellm.Turn{Text: "Goal: X. Done: Y. Next: Z."}, want: "Goal: X. Done: Y. Next: Z."},
		{name: "composed when the call fails", summary: fakellm.Turn{Status: 500, ErrorMessage: "boom"},
			want: "Context nearly full (900 of 1000 tokens).\nTask: refactor everything\nLast answer: Looking around.\nFiles changed: notes.md"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := fakellm.New()
			defer f.Close()
			f.SetModels(fakeModels)
			f.Script(
				fakellm.Turn{ToolCalls: []fakellm.ToolCall{call("c1", "write_file", `{"path":"notes.md","content":"n"}`)}, Usage: fakellm.Usage{Input: 500, Output: 10}},
				fakellm.Turn{Text: "Looking around.", ToolCalls: []fakellm.ToolCall{call("c2", "glob", `{"pattern":"*"}`)}, Usage: fakellm.Usage{Input: 880, Output: 20}},
				tt.summary,
			)
			cfg := testConfig(f.URL, t.TempDir())
			cfg.Model = "fake/tiny" // a 1000-token context
			cfg.Task = "refactor everything"
			h := startAgent(t, cfg)
			evs := h.waitFor("handoff", 1, isType(protocol.TypeHandoff))
			evs = h.waitFor("status idle", 1, isStatus(protocol.StateIdle))
			sameLines(t, transcriptOf(evs)[4:], []string{
				"status thinking", "text Looking around.", "status running",
				"tool glob start *", "tool glob done *",
				"status thinking", "handoff", "status idle",
			})
			for _, e := range evs {
				if ho, ok := e.(protocol.HandoffEvent); ok && ho.Summary != tt.want {
					t.Fatalf("summary %q, want %q", ho.Summary, tt.want)
				}
				if st, ok := e.(protocol.StatusEvent); ok && st.State == protocol.StateIdle && (st.ContextPct == nil || *st.ContextPct != 0.9) {
					t.Fatalf("context_pct %v, want 0.9", st.ContextPct)
				}
			}
			reqs := chatRequests(t, f)
			if len(reqs) != 3 {
				t.Fatalf("%d model calls, want 3 (two steps and the summary)", len(reqs))
			}
			last := reqs[2]
			msgs := last.Messages
			if last.ToolChoice != "none" || content(msgs[len(msgs)-1]) != handoffPrompt || msgs[len(msgs)-2].Role != "tool" {
				t.Fatalf("summary request: tool_choice %q, ends with %+v", last.ToolChoice, msgs[len(msgs)-2:])
			}
		})
	}
}

func TestPi(t *testing.T) {
	f := fakellm.New()
	defer f.Close()
	f.SetModels(fakeModels)
	f.Script(
		fakellm.Turn{ToolCalls: []fakellm.ToolCall{call("c1", "write_file", `{"path":"x","content":"y"}`), call("c2", "grep", `{"pattern":"needle"}`)}},
		fakellm.Turn{Text: "The needle is in hay.txt:2."},
	)
	dir := t.TempDir()
	testkit.WriteFile(t, filepath.Join(dir, "hay.txt"), "hay\nneedle\n")
	cfg := testConfig(f.URL, dir)
	cfg.AgentType = "pi"
	cfg.Task = "where is the needle?"
	h := startAgent(t, cfg)
	evs := h.waitFor("done", 1, isType(protocol.TypeDone))
	reqs := chatRequests(t, f)
	names := toolNames(reqs[0])
	if strings.Join(names, ",") != "read_file,glob,grep,bash,git,spawn,list_children,read_child_messages,send_message,wait_for_children,memory_search,memory_list,memory_store" || !strings.Contains(content(reqs[0].Messages[0]), "You are Pi") {
		t.Fatalf("tools %v, prompt %q", names, cut(content(reqs[0].Messages[0]), 80))
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Fatal("pi wrote a file")
	}
	msgs := reqs[1].Messages
	if got := content(msgs[len(msgs)-2]); !strings.HasPrefix(got, `error: there is no tool "write_file"`) {
		t.Fatalf("write_file result %q", got)
	}
	if got := content(msgs[len(msgs)-1]); got != "hay.txt:2: needle\n" {
		t.Fatalf("grep result %q", got)
	}
	sameLines(t, transcriptOf(evs)[2:5], []string{"tool write_file error", "tool grep start", "tool grep done ."})
}

func TestSpawn(t *testing.T) {
	f := fakellm.New()
	defer f.Close()
	f.SetModels(fakeModels)
	f.Script(
		fakellm.Turn{ToolCalls: []fakellm.ToolCall{
			call("c1", "spawn", `{"name":"tests","task":"write the tests"}`),
			call("c2", "spawn", `{"name":"research","agent":"pi","model":"openai/gpt-4.1","task":"survey the API"}`),
			call("c3", "spawn", `{"name":"nothing","task":" "}`)}},
		fakellm.Turn{Text: "Two children are on it."},
	)
	cfg := testConfig(f.URL, t.TempDir())
	cfg.Task = "split the work"
	h := startAgent(t, cfg)
	evs := h.waitFor("done", 1, isType(protocol.TypeDone))
	var spawns []protocol.SpawnEvent
	for _, e := range evs {
		if s, ok := e.(protocol.SpawnEvent); ok {
			spawns = append(spawns, s)
		}
	}
	if len(spawns) != 2 ||
		spawns[0].Name != "tests" || spawns[0].Agent != "shelley" || spawns[0].Model != "" || *spawns[0].Task != "write the tests" ||
		spawns[1].Name != "research" || spawns[1].Agent != "pi" || spawns[1].Model != "openai/gpt-4.1" || *spawns[1].Task != "survey the API" {
		t.Fatalf("spawns %+v", spawns)
	}
	msgs := chatRequests(t, f)[1].Messages
	if got := content(msgs[len(msgs)-1]); !strings.Contains(got, "task is required") {
		t.Fatalf("empty task: %q", got)
	}
}

func TestStdinEndFinishesTheWork(t *testing.T) {
	f := fakellm.New()
	defer f.Close()
	f.SetModels(fakeModels)
	f.Fallback(func(r fakellm.Request) fakellm.Turn { return fakellm.Turn{Text: "heard " + fakellm.LastUserText(r)} })
	cfg := testConfig(f.URL, t.TempDir())
	cfg.Task = "one"
	h := startAgent(t, cfg)
	h.message(protocol.FromUser, "two")
	h.stdin.Close()
	if err := h.ended(10*time.Second, "the agent to exit after stdin ended"); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, e := range h.snapshot() {
		if x, ok := e.(protocol.TextEvent); ok {
			texts = append(texts, x.Content)
		}
	}
	if j := strings.Join(texts, "|"); j != "heard one|heard two" && j != "heard two" {
		t.Fatalf("texts %q", texts)
	}
}

// A start with FILEPATH_START_MESSAGE=1 (a continuation, a restart, a start
// after health checks) reads its task and the start's report in one first
// turn, even when the report reaches stdin after the agent is ready.
func TestStartMessageJoinsTheTask(t *testing.T) {
	f := fakellm.New()
	defer f.Close()
	f.SetModels(fakeModels)
	f.Script(fakellm.Turn{Text: "Picking up from the summary."})
	cfg := testConfig(f.URL, t.TempDir())
	cfg.Task, cfg.StartMessage = "HANDOFF: finish the parser", true
	h := startAgent(t, cfg)
	// The report comes late: give an agent that does not wait the time to
	// call its model with the task alone.
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) && len(chatRequests(t, f)) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	h.message(protocol.FromSystem, "Health checks: go test passed.")
	h.waitFor("the answer", 1, isType(protocol.TypeText))
	reqs := chatRequests(t, f)
	if len(reqs) != 1 {
		t.Fatalf("%d model calls, want 1 with the task and the report", len(reqs))
	}
	var got []string
	for _, m := range reqs[0].Messages[1:] {
		got = append(got, m.Role+":"+content(m))
	}
	want := []string{"user:HANDOFF: finish the parser", "system:Health checks: go test passed."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("first request %q, want %q", got, want)
	}
}
