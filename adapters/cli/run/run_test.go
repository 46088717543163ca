package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/protocol"
)

func commitMessages(evs []protocol.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.(protocol.CommitEvent).Message)
	}
	return out
}

func TestHeadWatcherReportsNewCommitsOldestFirst(t *testing.T) {
	dir := t.TempDir()
	testkit.Git(t, dir, "init", "-q")
	w := newHeadWatcher(dir)
	if evs := w.check(); evs != nil {
		t.Fatalf("no commits yet, got %v", evs)
	}
	testkit.Git(t, dir, "commit", "-q", "--allow-empty", "-m", "first")
	if got := commitMessages(w.check()); !slices.Equal(got, []string{"first"}) {
		t.Errorf("after the first commit of the repository: %q", got)
	}
	testkit.Git(t, dir, "commit", "-q", "--allow-empty", "-m", "second")
	testkit.Git(t, dir, "commit", "-q", "--allow-empty", "-m", "third")
	evs := w.check()
	if got := commitMessages(evs); !slices.Equal(got, []string{"second", "third"}) {
		t.Errorf("two commits in one step: %q, want oldest first", got)
	}
	if h := evs[1].(protocol.CommitEvent).Hash; len(h) < 7 || strings.ContainsAny(h, " \n") {
		t.Errorf("hash %q, want an abbreviated hash", h)
	}
	if evs := w.check(); evs != nil {
		t.Errorf("HEAD did not move, got %v", evs)
	}
	testkit.Git(t, dir, "commit", "-q", "--amend", "--allow-empty", "-m", "third, amended")
	if got := commitMessages(w.check()); !slices.Equal(got, []string{"third, amended"}) {
		t.Errorf("after an amend: %q, want the commit HEAD names now", got)
	}
	for i := range maxCommits + 5 {
		testkit.Git(t, dir, "commit", "-q", "--allow-empty", "-m", "bulk "+string(rune('a'+i)))
	}
	if got := w.check(); len(got) != maxCommits {
		t.Errorf("%d commits reported for %d new, want at most %d", len(got), maxCommits+5, maxCommits)
	}
}

func TestHeadWatcherOutsideARepositoryReportsNothing(t *testing.T) {
	w := newHeadWatcher(t.TempDir())
	if evs := w.check(); evs != nil {
		t.Errorf("got %v", evs)
	}
}

func TestStateSurvivesAReopenAndIgnoresAnotherAgent(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenState(dir, "codex")
	if err != nil {
		t.Fatal(err)
	}
	if s.Session() != "" || s.TaskSent() {
		t.Fatalf("a new state has %q, %v", s.Session(), s.TaskSent())
	}
	if err := s.SetSession("thread-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTaskSent(); err != nil {
		t.Fatal(err)
	}
	again, err := OpenState(dir, "codex")
	if err != nil {
		t.Fatal(err)
	}
	if again.Session() != "thread-1" || !again.TaskSent() {
		t.Errorf("reopened: %q, %v", again.Session(), again.TaskSent())
	}
	other, err := OpenState(dir, "claude-code")
	if err != nil {
		t.Fatal(err)
	}
	if other.Session() != "" || other.TaskSent() {
		t.Errorf("another agent's state was taken: %q, %v", other.Session(), other.TaskSent())
	}
	if _, err := os.Stat(filepath.Join(dir, StateFile+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a temporary file was left: %v", err)
	}
}

func TestStateRefusesACorruptFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, StateFile), []byte("{not json"), 0o600)
	if _, err := OpenState(dir, "amp"); err == nil || !strings.Contains(err.Error(), StateFile) {
		t.Errorf("err %v, want one naming the file", err)
	}
}

func TestEnvSetsAndDefaults(t *testing.T) {
	got := Env([]string{"A=1", "B=2", "HOME=/root"}, map[string]string{"B": "set"}, map[string]string{"HOME": "/x", "C": "3"})
	slices.Sort(got)
	want := []string{"A=1", "B=set", "C=3", "HOME=/root"}
	if !slices.Equal(got, want) {
		t.Errorf("Env = %q, want %q", got, want)
	}
	if v, ok := Lookup([]string{"K=a", "K=b"}, "K"); !ok || v != "b" {
		t.Errorf("Lookup = %q %v, want the last value", v, ok)
	}
}

func sh(t *testing.T, script string) *Child {
	t.Helper()
	c, err := StartChild(ChildSpec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", script}, Env: os.Environ(), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func readAll(t *testing.T, c *Child) []string {
	t.Helper()
	var out []string
	timeout := time.After(60 * time.Second) // 64 MiB through tr under -race on a loaded CI machine takes a while
	for {
		select {
		case l, ok := <-c.Lines():
			if !ok {
				return out
			}
			out = append(out, string(l))
		case <-timeout:
			t.Fatal("the child's output did not end")
		}
	}
}

func TestChildDeliversLinesAndItsExitWithStderrTail(t *testing.T) {
	c := sh(t, `read x; echo "got $x"; echo second; echo oops >&2; exit 7`)
	if err := c.Send([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, c); !slices.Equal(got, []string{"got hello", "second"}) {
		t.Errorf("lines %q", got)
	}
	<-c.Done()
	exit := c.Exit()
	if exit == nil || exit.Code != 7 || !strings.Contains(exit.Tail, "oops") {
		t.Errorf("exit %+v, want code 7 and the stderr tail", exit)
	}
	if !strings.Contains(exit.Error(), "sh exited with code 7") {
		t.Errorf("error %q", exit.Error())
	}
}

func TestChildExitZeroIsNil(t *testing.T) {
	c := sh(t, `echo hi`)
	readAll(t, c)
	if exit := c.Exit(); exit != nil {
		t.Errorf("exit %v, want nil", exit)
	}
}

func TestChildKillEndsTheWholeProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	// The grandchild ignores nothing special; it would outlive a kill of
	// the shell alone and keep stdout open.
	c := sh(t, `sleep 300 & echo $! > `+pidFile+`; echo started; wait`)
	select {
	case l := <-c.Lines():
		if string(l) != "started" {
			t.Fatalf("line %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no output")
	}
	b, _ := os.ReadFile(pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file: %q", b)
	}
	start := time.Now()
	c.Kill(5 * time.Second)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("kill took %v", took)
	}
	testkit.Eventually(t, 5*time.Second, fmt.Sprintf("the grandchild %d to end with the kill", pid), func() bool { return syscall.Kill(pid, 0) != nil })
}

func TestChildThatLeavesAProcessHoldingStdoutStillEnds(t *testing.T) {
	// The shell exits at once; its background child keeps stdout open.
	c := sh(t, `sleep 300 & echo bye`)
	if got := readAll(t, c); !slices.Equal(got, []string{"bye"}) {
		t.Errorf("lines %q", got)
	}
	testkit.Recv(t, c.Done(), drainWait+5*time.Second, "Done to close")
}

func TestChildDropsAnOverlongLineAndGoesOn(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 64 MiB")
	}
	c := sh(t, `head -c 67108865 /dev/zero | tr '\0' x; echo; echo after`)
	if got := readAll(t, c); !slices.Equal(got, []string{"after"}) {
		t.Errorf("got %d lines (first %.20q), want only the line after the long one", len(got), got)
	}
}

// fakeDriver is a Driver built from a function.
type fakeDriver struct {
	run func(ctx context.Context, cmds <-chan Command, emit func(protocol.Event)) error
}

func (f fakeDriver) Run(ctx context.Context, cmds <-chan Command, emit func(protocol.Event)) error {
	return f.run(ctx, cmds, emit)
}

type result struct {
	code   int
	events []protocol.Event
	cmds   []Command
	stderr string
}

// runMain runs Main with inputs (closed at their end unless hold) and a
// driver that records the commands it gets and answers each Send with a
// text and an idle status.
func runMain(t *testing.T, cfg Config, inputs string, hold bool, drv func(ctx context.Context, cmds <-chan Command, emit func(protocol.Event), got func(Command)) error) result {
	t.Helper()
	var mu sync.Mutex
	var got []Command
	record := func(c Command) { mu.Lock(); got = append(got, c); mu.Unlock() }
	var stderr bytes.Buffer
	cfg.Stderr = &stderr
	cfg.Log = slog.New(slog.NewTextHandler(&stderr, nil))
	if cfg.Grace == 0 {
		cfg.Grace = time.Second
	}
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	state, err := OpenState(cfg.StateDir, "test")
	if err != nil {
		t.Fatal(err)
	}
	var stdin io.Reader = strings.NewReader(inputs)
	if hold {
		r, w := io.Pipe()
		go func() { io.WriteString(w, inputs) }()
		t.Cleanup(func() { w.Close() })
		stdin = r
	}
	var stdout bytes.Buffer
	d := fakeDriver{run: func(ctx context.Context, cmds <-chan Command, emit func(protocol.Event)) error {
		return drv(ctx, cmds, emit, record)
	}}
	code := Main(context.Background(), cfg, d, state, stdin, &stdout)
	var evs []protocol.Event
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if l == "" {
			continue
		}
		ev, err := protocol.DecodeEvent([]byte(l))
		if err != nil {
			t.Fatalf("invalid FAP %s: %v", l, err)
		}
		evs = append(evs, ev)
	}
	mu.Lock()
	defer mu.Unlock()
	return result{code: code, events: evs, cmds: got, stderr: stderr.String()}
}

// echo answers each message until Finish or Stop.
func echo(ctx context.Context, cmds <-chan Command, emit func(protocol.Event), got func(Command)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case c := <-cmds:
			got(c)
			switch c.Op {
			case Send:
				emit(protocol.TextEvent{Content: "re: " + c.Text})
				emit(protocol.StatusEvent{State: protocol.StateIdle})
			case Stop, Finish:
				return nil
			}
		}
	}
}

func line(v any) string {
	b, _ := json.Marshal(v)
	return string(b) + "\n"
}

func TestMainGivesTheTaskOnceThenMessagesAndEndsWithDone(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Task: "the task", StateDir: dir}
	in := line(protocol.MessageInput{Type: "message", From: "user", Content: "more"}) +
		line(protocol.SignalInput{Type: "signal", Action: "pause"})
	r := runMain(t, cfg, in, false, echo)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var sends []string
	for _, c := range r.cmds {
		if c.Op == Send {
			sends = append(sends, c.Text)
		}
	}
	if !slices.Equal(sends, []string{"the task", "more"}) || r.cmds[len(r.cmds)-1].Op != Finish {
		t.Errorf("commands %+v, want the task, the message, then Finish at the end of stdin", r.cmds)
	}
	first := r.events[0].(protocol.StatusEvent)
	if first.State != protocol.StateThinking {
		t.Errorf("first event %+v, want thinking", first)
	}
	last := r.events[len(r.events)-1].(protocol.DoneEvent)
	if last.Summary == nil || *last.Summary != "re: more" {
		t.Errorf("done %+v, want the last text as its summary", last)
	}
	// A second start (the container restarted) does not give the task again.
	r = runMain(t, cfg, "", false, echo)
	if len(r.cmds) != 1 || r.cmds[0].Op != Finish {
		t.Errorf("second start got %+v, want only Finish", r.cmds)
	}
}

func TestMainStopEndsWithDoneStopped(t *testing.T) {
	in := line(protocol.MessageInput{Type: "message", From: "user", Content: "hi"}) +
		line(protocol.SignalInput{Type: "signal", Action: "stop"})
	r := runMain(t, Config{}, in, true, echo)
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	last := r.events[len(r.events)-1].(protocol.DoneEvent)
	if last.Summary == nil || *last.Summary != "stopped" {
		t.Errorf("last %+v, want done stopped", last)
	}
}

func TestMainKillsADriverThatDoesNotStop(t *testing.T) {
	in := line(protocol.SignalInput{Type: "signal", Action: "stop"})
	start := time.Now()
	r := runMain(t, Config{Grace: 200 * time.Millisecond}, in, true, func(ctx context.Context, cmds <-chan Command, emit func(protocol.Event), got func(Command)) error {
		<-ctx.Done() // ignores Stop
		return ctx.Err()
	})
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %v", took)
	}
	if r.code != 0 || !strings.Contains(r.stderr, "did not stop in time") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestMainCLICrashIsAnErrorExit(t *testing.T) {
	r := runMain(t, Config{}, "", true, func(ctx context.Context, cmds <-chan Command, emit func(protocol.Event), got func(Command)) error {
		return &ExitError{CLI: "claude", Code: 4, Tail: "something broke"}
	})
	if r.code != 4 {
		t.Errorf("exit %d, want the CLI's 4", r.code)
	}
	if st := r.events[len(r.events)-1].(protocol.StatusEvent); st.State != protocol.StateError {
		t.Errorf("last %+v, want status error", st)
	}
	if !strings.HasSuffix(strings.TrimSpace(r.stderr), "something broke") || !strings.Contains(r.stderr, "claude exited with code 4") {
		t.Errorf("stderr must end with the CLI's exit and its stderr tail:\n%s", r.stderr)
	}
}

func TestMainCLIExitZeroIsDone(t *testing.T) {
	r := runMain(t, Config{}, "", true, func(ctx context.Context, cmds <-chan Command, emit func(protocol.Event), got func(Command)) error {
		emit(protocol.TextEvent{Content: "all finished"})
		return &ExitError{CLI: "amp", Code: 0}
	})
	d, ok := r.events[len(r.events)-1].(protocol.DoneEvent)
	if r.code != 0 || !ok || d.Summary == nil || *d.Summary != "all finished" {
		t.Errorf("exit %d, last %+v", r.code, r.events[len(r.events)-1])
	}
}

func TestMainReportsTheCommitAfterACommand(t *testing.T) {
	dir := t.TempDir()
	testkit.Git(t, dir, "init", "-q")
	testkit.Git(t, dir, "commit", "-q", "--allow-empty", "-m", "init")
	in := line(protocol.MessageInput{Type: "message", From: "user", Content: "commit"})
	r := runMain(t, Config{Workspace: dir}, in, false, func(ctx context.Context, cmds <-chan Command, emit func(protocol.Event), got func(Command)) error {
		for c := range cmds {
			if c.Op != Send {
				return nil
			}
			emit(protocol.CommandEvent{Cmd: "git commit", Status: protocol.StepStart})
			testkit.Git(t, dir, "commit", "-q", "--allow-empty", "-m", "made by the agent")
			emit(protocol.ToolEvent{Name: "Edit", Path: new(string), Status: protocol.StepDone}) // a file tool: not looked after
			emit(protocol.CommandEvent{Cmd: "git commit", Status: protocol.StepDone})
			emit(protocol.StatusEvent{State: protocol.StateIdle})
		}
		return nil
	})
	var types []string
	for _, ev := range r.events {
		types = append(types, ev.EventType())
	}
	want := []string{"status", "command", "tool", "command", "commit", "status", "done"}
	if !slices.Equal(types, want) {
		t.Fatalf("events %q, want %q", types, want)
	}
	if c := r.events[4].(protocol.CommitEvent); c.Message != "made by the agent" {
		t.Errorf("commit %+v", c)
	}
}

func TestMessageTextMarksWhoSpoke(t *testing.T) {
	for _, c := range []struct{ from, want string }{
		{"user", "hi"},
		{"parent", "[message from your parent agent]\nhi"},
		{"system", "[message from filepath]\nhi"},
	} {
		if got := messageText(protocol.MessageInput{From: c.from, Content: "hi"}); got != c.want {
			t.Errorf("from %s: %q, want %q", c.from, got, c.want)
		}
	}
}
