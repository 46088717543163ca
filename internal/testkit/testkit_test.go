package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalTB records the first Fatalf and ends its goroutine, as testing does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure runs f with a fatalTB and returns what it failed with ("" if not).
func failure(t *testing.T, f func(tb testing.TB)) string {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(tb)
	}()
	<-done
	return tb.msg
}

func TestClock(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewClock(start)
	now := c.After(0)
	a, b := c.After(time.Minute), c.After(2*time.Minute)
	if got := <-now; !got.Equal(start) {
		t.Fatalf("After(0) gave %v, want %v", got, start)
	}
	if c.Timers() != 2 || !c.Armed(time.Minute) || c.Armed(90*time.Second) {
		t.Fatalf("timers %d, armed(1m) %v, armed(90s) %v", c.Timers(), c.Armed(time.Minute), c.Armed(90*time.Second))
	}
	c.Advance(time.Minute)
	select {
	case got := <-a:
		if !got.Equal(start.Add(time.Minute)) {
			t.Fatalf("fired at %v", got)
		}
	default:
		t.Fatal("the 1m timer did not fire at 1m")
	}
	select {
	case <-b:
		t.Fatal("the 2m timer fired at 1m")
	default:
	}
	if c.Timers() != 1 || !c.Now().Equal(start.Add(time.Minute)) {
		t.Fatalf("timers %d, now %v", c.Timers(), c.Now())
	}
}

func TestEventually(t *testing.T) {
	n := 0
	if msg := failure(t, func(tb testing.TB) { Eventually(tb, time.Second, "three polls", func() bool { n++; return n == 3 }) }); msg != "" {
		t.Fatalf("failed: %s", msg)
	}
	msg := failure(t, func(tb testing.TB) { Eventually(tb, 20*time.Millisecond, "never", func() bool { return false }) })
	if msg != "timed out after 20ms waiting for never" {
		t.Fatalf("failed with %q", msg)
	}
	msg = failure(t, func(tb testing.TB) {
		EventuallyNil(tb, 20*time.Millisecond, "a file", func() error { return fmt.Errorf("saw %d", 7) })
	})
	if msg != "timed out after 20ms waiting for a file: saw 7" {
		t.Fatalf("failed with %q", msg)
	}
}

func TestRecv(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 4
	if v := Recv(t, ch, time.Second, "a value"); v != 4 {
		t.Fatalf("got %d", v)
	}
	msg := failure(t, func(tb testing.TB) { Recv(tb, ch, 10*time.Millisecond, "a second value") })
	if msg != "timed out after 10ms waiting for a second value" {
		t.Fatalf("failed with %q", msg)
	}
}

func TestProgram(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/go.mod", []byte("module hello\n\ngo 1.22\n"), 0o644)
	os.WriteFile(dir+"/main.go", []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n"), 0o644)
	t.Chdir(dir)
	bin := Program(t, "./")
	if again := Program(t, "./"); again != bin {
		t.Fatalf("built twice: %s, %s", bin, again)
	}
	out, err := exec.Command(bin).Output()
	if err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Fatalf("ran %s: %q %v", bin, out, err)
	}
}

func TestDataDirDetachesMounts(t *testing.T) {
	RequireFUSE(t) // root, to mount
	var dir string
	t.Run("server", func(t *testing.T) {
		dir = DataDir(t)
		if err := os.Mkdir(dir+"/mnt", 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "tmpfs", dir+"/mnt").CombinedOutput(); err != nil {
			t.Fatalf("mount: %v %s", err, out)
		}
		if m := Mounts(t, dir); len(m) != 1 || m[0] != dir+"/mnt" {
			t.Fatalf("mounts %v", m)
		}
	})
	if m := Mounts(t, dir); len(m) != 0 {
		t.Fatalf("still mounted after the test: %v", m)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("data dir left: %v", err)
	}
}
