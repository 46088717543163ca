package testkit

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
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

func TestDecode(t *testing.T) {
	r, w := io.Pipe()
	d := Decode(t, r, func(b []byte) (int, error) { return strconv.Atoi(string(b)) })
	go func() { io.WriteString(w, "1\n2\n3\n"); w.Close() }()
	if got := d.Wait(t, 10*time.Second, "three numbers", func(v []int) bool { return len(v) == 3 }); got[0]+got[1]+got[2] != 6 {
		t.Fatalf("decoded %v", got)
	}
	Recv(t, d.Done(), 10*time.Second, "the end of the reader")
	if l := d.Lines(); strings.Join(l, ",") != "1,2,3" {
		t.Fatalf("lines %q", l)
	}
	msg := failure(t, func(tb testing.TB) {
		d.Wait(tb, 10*time.Millisecond, "a fourth", func(v []int) bool { return len(v) == 4 })
	})
	if msg != "timed out after 10ms waiting for a fourth: the lines so far:\n1\n2\n3" {
		t.Fatalf("failed with %q", msg)
	}
}

func TestRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, `{"auth":%q,"type":%q,"x":%q,"body":%q}`, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), r.Header.Get("X"), b)
	}))
	defer srv.Close()
	var got struct{ Auth, Type, X, Body string }
	Request(t, nil, "POST", srv.URL, "k", map[string]int{"a": 1}, "X", "y").JSON(t, &got)
	if got.Auth != "Bearer k" || got.Type != "application/json" || got.X != "y" || got.Body != `{"a":1}` {
		t.Fatalf("the server saw %+v", got)
	}
	Request(t, nil, "GET", srv.URL, "", nil).JSON(t, &got)
	if got.Auth != "" || got.Type != "" || got.Body != "" {
		t.Fatalf("a bare GET: the server saw %+v", got)
	}
	Request(t, nil, "PUT", srv.URL, "", "raw", "Content-Type", "text/plain").JSON(t, &got)
	if got.Type != "text/plain" || got.Body != "raw" {
		t.Fatalf("a raw body: the server saw %+v", got)
	}
}

func TestWantErr(t *testing.T) {
	for _, tt := range []struct {
		name   string
		err    error
		want   string
		wanted bool
		fails  string
	}{
		{name: "none wanted, none came", want: ""},
		{name: "the one wanted", err: errors.New("disk full on /x"), want: "disk full", wanted: true},
		{name: "another one", err: errors.New("permission denied"), want: "disk full", fails: `error permission denied, want one holding "disk full"`},
		{name: "none came", want: "disk full", fails: `error <nil>, want one holding "disk full"`},
		{name: "one came unwanted", err: errors.New("boom"), fails: "error boom, want none"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var wanted bool
			if msg := failure(t, func(tb testing.TB) { wanted = WantErr(tb, tt.err, tt.want) }); msg != tt.fails || wanted != tt.wanted {
				t.Fatalf("failed with %q, reported %v", msg, wanted)
			}
		})
	}
}

func TestGitRepo(t *testing.T) {
	url := GitRepo(t, map[string]string{"a.txt": "A\n", "dir/b.txt": "B\n"})
	dir := t.TempDir()
	Git(t, dir, "clone", "-q", url, "c")
	if got := Git(t, filepath.Join(dir, "c"), "log", "--format=%an %s %D"); got != "test initial HEAD -> main, origin/main, origin/HEAD" {
		t.Fatalf("log %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "c", "dir", "b.txt")); err != nil || string(b) != "B\n" {
		t.Fatalf("dir/b.txt: %q %v", b, err)
	}
}

// TestWriteFiles: the files are written below dir, their directories made;
// ReadFile reads one back, and a missing one fails the test naming it.
func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	WriteFiles(t, dir, map[string]string{"a.txt": "A\n", "dir/deeper/b.txt": "B\n"})
	if got := ReadFile(t, filepath.Join(dir, "dir", "deeper", "b.txt")); got != "B\n" {
		t.Fatalf("dir/deeper/b.txt: %q", got)
	}
	if got := ReadFile(t, filepath.Join(dir, "a.txt")); got != "A\n" {
		t.Fatalf("a.txt: %q", got)
	}
	missing := filepath.Join(dir, "missing")
	if msg := failure(t, func(tb testing.TB) { ReadFile(tb, missing) }); !strings.Contains(msg, "read "+missing) {
		t.Fatalf("reading a missing file failed with %q", msg)
	}
}
