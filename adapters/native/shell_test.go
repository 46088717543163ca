package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

func TestHeadTail(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		head   int
		tail   int
		want   string
	}{
		{name: "fits", writes: []string{"abc", "def"}, head: 4, tail: 4, want: "abcdef"},
		{name: "exactly", writes: []string{"abcdefgh"}, head: 4, tail: 4, want: "abcdefgh"},
		{name: "cut in the middle", writes: []string{"0123456789"}, head: 3, tail: 3, want: "012\n[… 4 bytes cut …]\n789"},
		{name: "many small writes", writes: []string{"01", "23", "45", "67", "89"}, head: 3, tail: 3, want: "012\n[… 4 bytes cut …]\n789"},
		{name: "ring wraps", writes: []string{"abc", "defg", "h", "ij", "klm"}, head: 2, tail: 4, want: "ab\n[… 7 bytes cut …]\njklm"},
		{name: "big write after full", writes: []string{"abcdef", "0123456789"}, head: 2, tail: 3, want: "ab\n[… 11 bytes cut …]\n789"},
		{name: "no tail", writes: []string{"abcdef"}, head: 2, tail: 0, want: "ab\n[… 4 bytes cut …]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHeadTail(tt.head, tt.tail)
			for _, w := range tt.writes {
				h.Write([]byte(w))
			}
			if got := h.String(); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSplitArgs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{in: "status", want: []string{"status"}},
		{in: `commit -m "fix the parser"`, want: []string{"commit", "-m", "fix the parser"}},
		{in: `commit -m 'it''s'`, want: []string{"commit", "-m", "its"}},
		{in: `log --format=%H\ %s  -n 3`, want: []string{"log", "--format=%H %s", "-n", "3"}},
		{in: `commit -m ""`, want: []string{"commit", "-m", ""}},
		{in: `commit -m "open`, err: true},
	}
	for _, tt := range tests {
		got, err := splitArgs(tt.in)
		if tt.err != (err != nil) || strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("splitArgs(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func testShell(t *testing.T) *shell {
	return &shell{dir: t.TempDir(), env: commandEnv(), clock: realClock(), keepHead: 1 << 10, keepTail: 1 << 10}
}

func TestShellRun(t *testing.T) {
	sh := testShell(t)
	ctx := context.Background()
	r := sh.run(ctx, []string{"bash", "-c", "pwd; echo err >&2; exit 3"}, time.Minute)
	if r.Exit != 3 || strings.TrimSpace(r.Stdout) != sh.dir || r.Stderr != "err\n" || r.Err != nil || r.TimedOut {
		t.Fatalf("%+v", r)
	}
	if got := r.report(time.Minute); got != "exit code: 3\nstdout:\n"+sh.dir+"\nstderr:\nerr\n" {
		t.Fatalf("report %q", got)
	}
	// stdin is empty: a command reading it does not wait for the agent's stdin.
	r = sh.run(ctx, []string{"bash", "-c", "cat; echo read-done"}, time.Minute)
	if r.Exit != 0 || r.Stdout != "read-done\n" {
		t.Fatalf("%+v", r)
	}
	// No pager or editor waits for a terminal.
	r = sh.run(ctx, []string{"bash", "-c", "echo $GIT_PAGER $GIT_EDITOR $GIT_TERMINAL_PROMPT"}, time.Minute)
	if r.Stdout != "cat true 0\n" {
		t.Fatalf("%+v", r)
	}
	// Output is bounded, head and tail kept.
	r = sh.run(ctx, []string{"bash", "-c", "echo START; head -c 100000 /dev/zero | tr '\\0' x; echo; echo END"}, time.Minute)
	if !strings.HasPrefix(r.Stdout, "START\n") || !strings.HasSuffix(r.Stdout, "x\nEND\n") || !strings.Contains(r.Stdout, "bytes cut …]") || len(r.Stdout) > 2200 {
		t.Fatalf("stdout %d bytes: %q…", len(r.Stdout), cut(r.Stdout, 100))
	}
	r = sh.run(ctx, []string{"/nonexistent/binary"}, time.Minute)
	if r.Err == nil || !strings.HasPrefix(r.report(time.Minute), "error: ") {
		t.Fatalf("%+v", r)
	}
}

// alive reports whether pid exists (a zombie counts as gone).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// readPid waits for a command to write its background child's pid to file.
func readPid(t *testing.T, file string) int {
	t.Helper()
	var pid int
	testkit.Eventually(t, 5*time.Second, "a pid in "+file, func() bool {
		b, _ := os.ReadFile(file)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	return pid
}

func TestShellTimeoutKillsTheGroup(t *testing.T) {
	sh := testShell(t)
	pidFile := filepath.Join(sh.dir, "pid")
	start := time.Now()
	r := sh.run(context.Background(), []string{"bash", "-c", "sleep 60 & echo $! > pid; echo started; wait"}, 300*time.Millisecond)
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("took %s", el)
	}
	if !r.TimedOut || r.Stdout != "started\n" {
		t.Fatalf("%+v", r)
	}
	if rep := r.report(300 * time.Millisecond); !strings.HasPrefix(rep, "timed out after 300ms") {
		t.Fatalf("report %q", rep)
	}
	pid := readPid(t, pidFile)
	testkit.Eventually(t, 5*time.Second, "the background sleep to end with the timeout", func() bool { return !alive(pid) })
}

func TestShellStop(t *testing.T) {
	sh := testShell(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan cmdResult)
	go func() { done <- sh.run(ctx, []string{"bash", "-c", "sleep 60 & echo $! > pid; wait"}, time.Minute) }()
	pid := readPid(t, filepath.Join(sh.dir, "pid"))
	start := time.Now()
	cancel(errStopped)
	r := <-done
	if el := time.Since(start); el > time.Second {
		t.Fatalf("stop took %s", el)
	}
	if !r.Stopped || r.TimedOut {
		t.Fatalf("%+v", r)
	}
	testkit.Eventually(t, 5*time.Second, "the background sleep to end with the stop", func() bool { return !alive(pid) })
}

func TestShellBackgroundDoesNotHold(t *testing.T) {
	sh := testShell(t)
	start := time.Now()
	// A daemon that keeps stdout open must not keep the command running.
	r := sh.run(context.Background(), []string{"bash", "-c", "sleep 30 & echo $! > pid; echo bye"}, time.Minute)
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("took %s", el)
	}
	if r.Exit != 0 || r.Err != nil || r.Stdout != "bye\n" {
		t.Fatalf("%+v", r)
	}
	pid := readPid(t, filepath.Join(sh.dir, "pid"))
	syscall.Kill(pid, syscall.SIGKILL)
}

func TestWatchdog(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	tick := make(chan time.Time)
	c := clock{
		now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return now
		},
		ticker: func(time.Duration) (<-chan time.Time, func()) { return tick, func() {} },
	}
	fired := make(chan struct{})
	w := startWatchdog(context.Background(), c, 3*time.Second, func() { close(fired) })
	defer w.Stop()
	// step advances the clock by d and ticks; true when the watchdog fired
	// instead (it takes no more ticks then). A tick is taken only after the
	// one before it was counted.
	step := func(d time.Duration) bool {
		mu.Lock()
		now = now.Add(d)
		at := now
		mu.Unlock()
		select {
		case tick <- at:
			return false
		case <-fired:
			return true
		}
	}
	for i, d := range []time.Duration{time.Second, time.Second} {
		if step(d) {
			t.Fatalf("fired at step %d", i)
		}
	}
	w.Kick() // activity: the count starts over
	// A frozen hour (docker pause) counts as one gap of maxGap: 2 s so far.
	for i, d := range []time.Duration{time.Second, time.Hour, 0} {
		if step(d) {
			t.Fatalf("fired at step %d after the kick", i)
		}
	}
	step(time.Second) // 3 s of running time since the kick
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog did not fire after 3 s of running time")
	}
}
