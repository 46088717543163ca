package containers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/filepath-dev/filepath/internal/testkit"
)

const testImage = "filepath/testagent:latest"

// harness runs the test agent on one runtime.
type harness struct {
	name string
	rt   Runtime
	// spec returns a spec that runs the test agent with FILEPATH_TASK=task.
	spec func(task string) Spec
}

// testAgent is adapters/testagent built for the process runtime.
func testAgent(t testing.TB) string { return testkit.Program(t, "../adapters/testagent") }

func newID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// harnesses returns the runtimes to test: process always, docker when an
// engine and the test image exist (required with CI=true).
func harnesses(t *testing.T) []harness {
	t.Helper()
	session := "test-" + newID()
	var hs []harness

	agent := testAgent(t)
	pr, err := NewProcess(ProcessConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close() })
	hs = append(hs, harness{name: "process", rt: pr, spec: func(task string) Spec {
		return Spec{SessionID: session, NodeID: "n-" + newID(), Cmd: []string{agent},
			Env: map[string]string{"FILEPATH_TASK": task}, WorkspaceDir: t.TempDir()}
	}})

	if d := dockerRuntime(t); d != nil {
		t.Cleanup(func() { cleanup(t, d, session) })
		hs = append(hs, harness{name: "docker", rt: d, spec: func(task string) Spec {
			return Spec{SessionID: session, NodeID: "n-" + newID(), Image: testImage,
				Env: map[string]string{"FILEPATH_TASK": task}, Network: "none"}
		}})
	}
	return hs
}

func dockerRuntime(t testing.TB) *Docker {
	t.Helper()
	if os.Getenv("FILEPATH_TEST_NO_DOCKER") == "1" && !testkit.InCI() {
		return nil
	}
	testkit.RequireImage(t, testImage)
	if t.Skipped() {
		return nil
	}
	d, err := NewDocker(context.Background(), DockerConfig{Instance: "containers-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// requireDocker is the Docker runtime; the test is skipped where it is
// disabled.
func requireDocker(t testing.TB) *Docker {
	t.Helper()
	d := dockerRuntime(t)
	if d == nil {
		t.Skip("docker tests disabled")
	}
	return d
}

// dockerSession is the Docker runtime (the test is skipped where it is
// disabled), a new session whose containers are removed when the test
// ends, and a context of a minute.
func dockerSession(t testing.TB) (*Docker, string, context.Context) {
	t.Helper()
	d := requireDocker(t)
	session := "test-" + newID()
	t.Cleanup(func() { cleanup(t, d, session) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return d, session, ctx
}

// cleanup removes every container of the test session.
func cleanup(t testing.TB, rt Runtime, session string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	infos, err := rt.List(ctx, map[string]string{LabelSession: session})
	if err != nil {
		t.Errorf("cleanup list: %v", err)
		return
	}
	for _, i := range infos {
		if err := rt.Remove(ctx, i.ID); err != nil {
			t.Errorf("cleanup remove %s: %v", i.ID, err)
		}
	}
	if d, ok := rt.(*Docker); ok {
		// Sandboxes a test left without their container.
		sbs, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("label", LabelSandbox+"=true"), filters.Arg("label", LabelSession+"="+session))})
		if err != nil {
			t.Errorf("cleanup list sandboxes: %v", err)
		}
		for _, sb := range sbs {
			d.removeQuietly(ctx, sb.ID)
		}
	}
}

// finished runs the test agent with task on h until it exits, and returns
// a context of a minute and the container's id.
func finished(t *testing.T, h harness, task string) (context.Context, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	id := run(t, ctx, h, h.spec(task))
	wait(t, ctx, h.rt, id)
	return ctx, id
}

// attach attaches to the agent's stdin and follows its stdout, both closed
// when the test ends.
func attach(t *testing.T, ctx context.Context, rt Runtime, id string) (io.Writer, *LogReader) {
	t.Helper()
	in, err := rt.AttachStdin(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	r := follow(t, ctx, rt, id)
	t.Cleanup(func() { r.Close() })
	return in, r
}

// follow follows the agent's stdout.
func follow(t testing.TB, ctx context.Context, rt Runtime, id string) *LogReader {
	t.Helper()
	r, err := rt.Logs(ctx, id, LogOptions{Stdout: true, Follow: true})
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	return r
}

// run creates and starts an agent.
func run(t testing.TB, ctx context.Context, h harness, spec Spec) string {
	t.Helper()
	id, err := h.rt.Create(ctx, spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := h.rt.Start(ctx, id); err != nil {
		t.Fatalf("start: %v", err)
	}
	return id
}

func wait(t testing.TB, ctx context.Context, rt Runtime, id string) int {
	t.Helper()
	code, err := rt.Wait(ctx, id)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return code
}

func logs(t *testing.T, ctx context.Context, rt Runtime, id string, opts LogOptions) []LogLine {
	t.Helper()
	r, err := rt.Logs(ctx, id, opts)
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	defer r.Close()
	out, err := readAll(t, r)
	if err != nil {
		t.Fatalf("logs next: %v", err)
	}
	return out
}

// text returns the content of a text event line, or the raw line.
func text(l LogLine) string {
	var ev struct{ Type, Content string }
	if json.Unmarshal(l.Line, &ev) == nil && ev.Type == "text" {
		return ev.Content
	}
	return string(l.Line)
}

// until reads r until a line satisfies ok and returns it.
func until(t *testing.T, r *LogReader, what string, ok func(LogLine) bool) LogLine {
	t.Helper()
	for {
		l, err := r.Next()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok(l) {
			return l
		}
	}
}

func message(content string) []byte {
	b, _ := json.Marshal(map[string]string{"type": "message", "from": "user", "content": content})
	return append(b, '\n')
}

func TestRuntimes(t *testing.T) {
	for _, h := range harnesses(t) {
		t.Run(h.name, func(t *testing.T) {
			t.Run("lines", func(t *testing.T) { testLines(t, h) })
			t.Run("long lines", func(t *testing.T) { testLongLines(t, h) })
			t.Run("invalid utf-8", func(t *testing.T) { testInvalidUTF8(t, h) })
			t.Run("since cursor", func(t *testing.T) { testSince(t, h) })
			t.Run("stdin and resume", func(t *testing.T) { testStdinResume(t, h) })
			t.Run("stop", func(t *testing.T) { testStop(t, h) })
			t.Run("pause", func(t *testing.T) { testPause(t, h) })
			t.Run("list and exit codes", func(t *testing.T) { testList(t, h) })
			t.Run("not found", func(t *testing.T) { testNotFound(t, h) })
			t.Run("start again at once", func(t *testing.T) { testStartAgain(t, h) })
		})
	}
}

func testLines(t *testing.T, h harness) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := run(t, ctx, h, h.spec("echo one; stderr oops; echo two; done"))
	if code := wait(t, ctx, h.rt, id); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	tests := []struct {
		name string
		opts LogOptions
		want []string
	}{
		{name: "stdout", opts: LogOptions{Stdout: true}, want: []string{"one", "two", `{"type":"done"}`}},
		{name: "stderr", opts: LogOptions{Stderr: true}, want: []string{"oops"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, l := range logs(t, ctx, h.rt, id, tt.opts) {
				got = append(got, text(l))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	// Both streams; their relative order is not defined (separate pipes).
	all := logs(t, ctx, h.rt, id, LogOptions{})
	nerr := 0
	for _, l := range all {
		if l.Stream == Stderr {
			nerr++
		}
	}
	if len(all) != 4 || nerr != 1 || all[0].Time.IsZero() {
		t.Fatalf("both streams: %+v", all)
	}
}

// testInvalidUTF8: Docker's json-file driver gives back each byte that is
// not valid UTF-8 as U+FFFD (and a real U+FFFD unchanged: the two cannot be
// told apart); the process runtime behaves the same.
func testInvalidUTF8(t *testing.T, h harness) {
	ctx, id := finished(t, h, "utf8; echo real \ufffd here; done")
	ls := logs(t, ctx, h.rt, id, LogOptions{Stdout: true})
	// The raw bytes of each line (decoding the JSON would replace invalid
	// bytes by itself).
	want := []string{"\"bad \ufffd\ufffd utf8\"", "\"real \ufffd here\"", `"done"`}
	if len(ls) != len(want) {
		t.Fatalf("%d lines, want %d: %+v", len(ls), len(want), ls)
	}
	for i, l := range ls {
		if !utf8.Valid(l.Line) || !strings.Contains(string(l.Line), want[i]) {
			t.Fatalf("line %d = %q, want valid UTF-8 holding %q", i, l.Line, want[i])
		}
	}
}

func testLongLines(t *testing.T, h harness) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tests := []struct {
		name      string
		n         int
		truncated bool
	}{
		{name: "100 KiB reassembled", n: 100 << 10},
		{name: "3 MiB truncated", n: 3 << 20, truncated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := run(t, ctx, h, h.spec(fmt.Sprintf("huge %d; echo after; done", tt.n)))
			wait(t, ctx, h.rt, id)
			ls := logs(t, ctx, h.rt, id, LogOptions{Stdout: true})
			if len(ls) != 3 {
				t.Fatalf("got %d lines, want 3", len(ls))
			}
			l := ls[0]
			if l.Size != tt.n || l.Truncated != tt.truncated {
				t.Fatalf("size %d truncated %v, want %d %v", l.Size, l.Truncated, tt.n, tt.truncated)
			}
			wantLen := min(tt.n, DefaultMaxLine)
			if len(l.Line) != wantLen || !strings.HasPrefix(string(l.Line), `{"type":"text","content":"xxx`) {
				t.Fatalf("line len %d, want %d: %.40q", len(l.Line), wantLen, l.Line)
			}
			if !tt.truncated && !json.Valid(l.Line) {
				t.Fatal("reassembled line is not valid JSON")
			}
			if text(ls[1]) != "after" {
				t.Fatalf("line after = %q", ls[1].Line)
			}
		})
	}
}

// testSince checks that resuming from any cursor yields exactly the lines
// after it, and that Since is inclusive.
func testSince(t *testing.T, h harness) {
	ctx, id := finished(t, h, "flood 300; done")
	all := logs(t, ctx, h.rt, id, LogOptions{Stdout: true})
	if len(all) != 301 {
		t.Fatalf("got %d lines, want 301", len(all))
	}
	for _, k := range []int{0, 1, 150, 299, 300} {
		cur := all[k]
		got := logs(t, ctx, h.rt, id, LogOptions{Stdout: true, Since: cur.Time})
		if len(got) == 0 || !got[0].Time.Equal(cur.Time) {
			t.Fatalf("cursor %d: since is not inclusive: first line %+v", k, got)
		}
		var after []string
		for _, l := range got {
			if l.Time.Equal(cur.Time) && l.Ordinal <= cur.Ordinal {
				continue
			}
			after = append(after, string(l.Line))
		}
		var want []string
		for _, l := range all[k+1:] {
			want = append(want, string(l.Line))
		}
		if strings.Join(after, "\n") != strings.Join(want, "\n") {
			t.Fatalf("cursor %d: resumed %d lines, want %d", k, len(after), len(want))
		}
	}
}

// testStdinResume plays an orchestrator restart: follow, detach, let the
// agent print while nobody reads, then re-attach and resume from the cursor.
func testStdinResume(t *testing.T, h harness) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := run(t, ctx, h, h.spec("echo ready"))
	in, err := h.rt.AttachStdin(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.rt.Logs(ctx, id, LogOptions{Stdout: true, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	until(t, r, "ready", func(l LogLine) bool { return text(l) == "ready" })
	if _, err := in.Write(message("echo ping")); err != nil {
		t.Fatal(err)
	}
	cur := until(t, r, "ping", func(l LogLine) bool { return text(l) == "ping" })

	// The orchestrator goes down.
	r.Close()
	in.Close()

	in, err = h.rt.AttachStdin(ctx, id)
	if err != nil {
		t.Fatalf("re-attach: %v", err)
	}
	defer in.Close()
	if _, err := in.Write(message("flood 5")); err != nil {
		t.Fatal(err)
	}
	// Make sure flood ran before resuming (a non-following read).
	testkit.Eventually(t, 20*time.Second, "flood to print", func() bool {
		ls := logs(t, ctx, h.rt, id, LogOptions{Stdout: true})
		return len(ls) > 0 && text(ls[len(ls)-1]) == "flood 5"
	})

	r, err = h.rt.Logs(ctx, id, LogOptions{Stdout: true, Follow: true, Since: cur.Time})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := in.Write([]byte(`{"type":"signal","action":"stop"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	lines, err := readAll(t, r)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines {
		if l.Time.Equal(cur.Time) && l.Ordinal <= cur.Ordinal {
			continue
		}
		got = append(got, text(l))
	}
	want := "flood 1|flood 2|flood 3|flood 4|flood 5|" + `{"summary":"stopped","type":"done"}`
	if strings.Join(got, "|") != want {
		t.Fatalf("resumed %q\nwant %q", strings.Join(got, "|"), want)
	}
	if code := wait(t, ctx, h.rt, id); code != 0 {
		t.Fatalf("exit code %d after signal stop", code)
	}
}

func testStop(t *testing.T, h harness) {
	tests := []struct {
		name     string
		task     string
		grace    time.Duration
		wantCode int
		minTime  time.Duration
		maxTime  time.Duration
	}{
		{name: "SIGTERM honoured", task: "echo ready", grace: 10 * time.Second, wantCode: 143, maxTime: 5 * time.Second},
		{name: "escalates to SIGKILL", task: "ignore-stop; echo ready", grace: 1500 * time.Millisecond, wantCode: 137,
			minTime: 1500 * time.Millisecond, maxTime: 6 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			id := run(t, ctx, h, h.spec(tt.task))
			r, err := h.rt.Logs(ctx, id, LogOptions{Stdout: true, Follow: true})
			if err != nil {
				t.Fatal(err)
			}
			until(t, r, "ready", func(l LogLine) bool { return text(l) == "ready" })
			r.Close()
			start := time.Now()
			if err := h.rt.Stop(ctx, id, tt.grace); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			if took < tt.minTime || took > tt.maxTime {
				t.Fatalf("stop took %v, want between %v and %v", took, tt.minTime, tt.maxTime)
			}
			info, err := h.rt.Inspect(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if info.State != StateExited || info.ExitCode != tt.wantCode {
				t.Fatalf("after stop: state %s exit %d, want exited %d", info.State, info.ExitCode, tt.wantCode)
			}
			if err := h.rt.Stop(ctx, id, time.Second); err != nil {
				t.Fatalf("second stop: %v", err)
			}
		})
	}
}

func testPause(t *testing.T, h harness) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := run(t, ctx, h, h.spec("echo ready"))
	r, err := h.rt.Logs(ctx, id, LogOptions{Stdout: true, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	until(t, r, "ready", func(l LogLine) bool { return text(l) == "ready" })
	in, err := h.rt.AttachStdin(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := h.rt.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if info, _ := h.rt.Inspect(ctx, id); info.State != StatePaused {
		t.Fatalf("state %s, want paused", info.State)
	}
	if _, err := in.Write(message("echo thawed")); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.Unpause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if info, _ := h.rt.Inspect(ctx, id); info.State != StateRunning {
		t.Fatalf("state %s, want running", info.State)
	}
	until(t, r, "thawed", func(l LogLine) bool { return text(l) == "thawed" })
	// Stop unpauses first.
	if err := h.rt.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.Stop(ctx, id, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if info, _ := h.rt.Inspect(ctx, id); info.State != StateExited {
		t.Fatalf("state %s after stopping a paused container", info.State)
	}
}

func testList(t *testing.T, h harness) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crash := h.spec("stderr dying; crash 3")
	crash.Labels = map[string]string{"filepath.test": "list"}
	idle := h.spec("echo idle")
	idle.Labels = map[string]string{"filepath.test": "list"}
	crashID, idleID := run(t, ctx, h, crash), run(t, ctx, h, idle)
	if code := wait(t, ctx, h.rt, crashID); code != 3 {
		t.Fatalf("exit code %d, want 3", code)
	}
	if ls := logs(t, ctx, h.rt, crashID, LogOptions{Stderr: true}); len(ls) == 0 || string(ls[0].Line) != "dying" {
		t.Fatalf("stderr %+v", ls)
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   map[string]State
	}{
		{name: "by session", labels: map[string]string{LabelSession: crash.SessionID, "filepath.test": "list"},
			want: map[string]State{crashID: StateExited, idleID: StateRunning}},
		{name: "by node", labels: map[string]string{LabelNode: crash.NodeID}, want: map[string]State{crashID: StateExited}},
		{name: "none", labels: map[string]string{LabelNode: "no-such-node"}, want: map[string]State{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			infos, err := h.rt.List(ctx, tt.labels)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]State{}
			for _, i := range infos {
				got[i.ID] = i.State
				// Docker may record FinishedAt before StartedAt for a quick exit.
				if i.ID == crashID && (i.ExitCode != 3 || i.NodeID != crash.NodeID || i.SessionID != crash.SessionID ||
					i.StartedAt.IsZero() || i.FinishedAt.IsZero() || i.Labels[LabelManaged] != "true") {
					t.Fatalf("crashed info %+v", i)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	if err := h.rt.Remove(ctx, idleID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.Inspect(ctx, idleID); CodeOf(err) != CodeNotFound {
		t.Fatalf("inspect after remove: %v", err)
	}
}

func testNotFound(t *testing.T, h harness) {
	ctx := context.Background()
	if _, err := h.rt.Inspect(ctx, "no-such-container"); CodeOf(err) != CodeNotFound {
		t.Fatalf("inspect: %v", err)
	}
	if err := h.rt.Remove(ctx, "no-such-container"); err != nil {
		t.Fatalf("remove of a missing container: %v", err)
	}
	if _, err := h.rt.Create(ctx, Spec{NodeID: "n"}); FieldOf(err) != "session_id" {
		t.Fatalf("create without session: %v", err)
	}
}

// TestCharacterCutAtPieceBoundary: a line longer than 16 KiB reaches the log
// in 16 KiB pieces, each stored on its own; a character whose bytes straddle
// a boundary comes back as one U+FFFD per byte. Docker's json-file driver
// does this and the process runtime does the same (docs/protocol.md).
func TestCharacterCutAtPieceBoundary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// 16,383 'a', then "é" (2 bytes) across the 16,384-byte boundary.
	script := []string{"sh", "-c", `head -c 16383 /dev/zero | tr '\0' a; printf '\303\251z\n'`}
	type runtimeCase struct {
		name string
		rt   Runtime
		spec Spec
	}
	session := "test-" + newID()
	pr, err := NewProcess(ProcessConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	rts := []runtimeCase{{"process", pr, Spec{SessionID: session, NodeID: "n-" + newID(), Cmd: script, WorkspaceDir: t.TempDir()}}}
	const base = "filepath/base:bookworm"
	if d := dockerRuntime(t); d != nil {
		testkit.RequireImage(t, base)
		t.Cleanup(func() { cleanup(t, d, session) })
		rts = append(rts, runtimeCase{"docker", d, Spec{SessionID: session, NodeID: "n-" + newID(), Image: base, Cmd: script, Network: "none"}})
	}
	for _, r := range rts {
		t.Run(r.name, func(t *testing.T) {
			id := run(t, ctx, harness{rt: r.rt}, r.spec)
			if code := wait(t, ctx, r.rt, id); code != 0 {
				t.Fatalf("exit code %d", code)
			}
			ls := logs(t, ctx, r.rt, id, LogOptions{Stdout: true})
			if len(ls) != 1 {
				t.Fatalf("%d lines, want 1", len(ls))
			}
			want := strings.Repeat("a", 16383) + "\ufffd\ufffdz"
			if got := string(ls[0].Line); got != want {
				t.Fatalf("line ends %q, want %q", got[max(len(got)-12, 0):], want[len(want)-12:])
			}
		})
	}
}

// testStartAgain: a container started again right after its Wait returned
// (a message to a node that just stopped) runs: with Docker, its network
// sandbox is down by then and is started again, not found still dying.
func testStartAgain(t *testing.T, h harness) {
	if h.name != "docker" {
		return // a process runs once
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := run(t, ctx, h, h.spec("echo once; done"))
	for i := range 8 {
		if code := wait(t, ctx, h.rt, id); code != 0 {
			t.Fatalf("run %d: exit code %d", i+1, code)
		}
		if err := h.rt.Start(ctx, id); err != nil {
			t.Fatalf("start %d right after the exit: %v", i+2, err)
		}
	}
	if code := wait(t, ctx, h.rt, id); code != 0 {
		t.Fatalf("last run: exit code %d", code)
	}
}
