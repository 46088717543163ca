package workspace

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// gitEnv runs git with a fixed identity and no user config.
func gitCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	return cmd
}

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitCmd(dir, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	e := newEnv(t, vfs.Config{})
	m := e.mount(t, Options{})
	dir := filepath.Join(m.Dir(), "repo")
	os.Mkdir(dir, 0o755)

	git(t, dir, "init", "-q", "-b", "main")
	for i := 0; i < 20; i++ {
		mustWrite(t, filepath.Join(dir, fmt.Sprintf("f%02d.txt", i)), strings.Repeat(fmt.Sprintf("line %d\n", i), i+1))
	}
	os.MkdirAll(filepath.Join(dir, "src", "pkg"), 0o755)
	mustWrite(t, filepath.Join(dir, "src", "pkg", "main.go"), "package main\n")
	os.Symlink("f01.txt", filepath.Join(dir, "link"))
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "first")
	if s := git(t, dir, "status", "--porcelain"); s != "" {
		t.Fatalf("status after commit = %q", s)
	}
	git(t, dir, "checkout", "-q", "-b", "feature")
	mustWrite(t, filepath.Join(dir, "f00.txt"), "changed\n")
	os.Remove(filepath.Join(dir, "f01.txt"))
	if s := git(t, dir, "status", "--porcelain"); s != " M f00.txt\n D f01.txt\n" {
		t.Fatalf("status = %q", s)
	}
	git(t, dir, "commit", "-q", "-am", "second")
	git(t, dir, "checkout", "-q", "main")
	wantContent(t, filepath.Join(dir, "f01.txt"), "line 1\nline 1\n")
	wantContent(t, filepath.Join(dir, "f00.txt"), "line 0\n")
	git(t, dir, "gc", "-q") // packs: written with rename, read with mmap
	git(t, dir, "checkout", "-q", "feature")
	wantContent(t, filepath.Join(dir, "f00.txt"), "changed\n")
	if s := git(t, dir, "status", "--porcelain"); s != "" {
		t.Fatalf("status after checkout = %q", s)
	}
	git(t, dir, "fsck", "--strict")
	if out := git(t, dir, "log", "--oneline"); strings.Count(out, "\n") != 2 {
		t.Fatalf("log = %q", out)
	}
	e.check(t)
}

func TestManySmallFiles(t *testing.T) {
	e := newEnv(t, vfs.Config{})
	m := e.mount(t, Options{})
	const n = 2000
	dir := filepath.Join(m.Dir(), "many")
	os.Mkdir(dir, 0o755)
	for i := 0; i < n; i++ {
		mustWrite(t, filepath.Join(dir, fmt.Sprintf("file-%04d", i)), "content "+strconv.Itoa(i))
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != n {
		t.Fatalf("readdir: %d entries, want %d", len(ents), n)
	}
	for i := 0; i < n; i += 97 {
		wantContent(t, filepath.Join(dir, fmt.Sprintf("file-%04d", i)), "content "+strconv.Itoa(i))
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	e.check(t)
}

// TestLargeFileStreams writes and reads a 200 MiB file through the mount and
// checks that neither the Go heap nor the process RSS grows anywhere near the
// file size.
func TestLargeFileStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	const size = 200 << 20
	e := newEnv(t, vfs.Config{MaxFileSize: 1 << 30, SessionQuota: 1 << 30})
	m := e.mount(t, Options{})
	p := filepath.Join(m.Dir(), "big.bin")

	runtime.GC()
	baseRSS := rss(t)
	var peakHeap, peakRSS atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peakHeap.Load() {
					peakHeap.Store(ms.HeapInuse)
				}
				if r := rss(t); r > peakRSS.Load() {
					peakRSS.Store(r)
				}
			}
		}
	}()

	src := &patternReader{n: size}
	hw := sha256.New()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyBuffer(io.MultiWriter(f, hw), src, make([]byte, 128<<10)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	hr := sha256.New()
	got, err := io.CopyBuffer(hr, f, make([]byte, 128<<10))
	f.Close()
	close(stop)
	wg.Wait()
	if err != nil || got != size {
		t.Fatalf("read back %d bytes, %v", got, err)
	}
	if !bytes.Equal(hw.Sum(nil), hr.Sum(nil)) {
		t.Fatal("content read back differs")
	}
	t.Logf("peak Go heap in use %d MiB, RSS %d MiB -> peak %d MiB", peakHeap.Load()>>20, baseRSS>>20, peakRSS.Load()>>20)
	if peakHeap.Load() > 64<<20 {
		t.Errorf("peak Go heap %d MiB: the file is being held in memory", peakHeap.Load()>>20)
	}
	if peakRSS.Load() > baseRSS+100<<20 {
		t.Errorf("RSS grew from %d to %d MiB for a %d MiB file", baseRSS>>20, peakRSS.Load()>>20, size>>20)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

// patternReader yields n bytes of a non-repeating-looking pattern.
type patternReader struct{ off, n int64 }

func (r *patternReader) Read(p []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n-r.off)]
	for i := range p {
		x := uint64(r.off) + uint64(i)
		p[i] = byte(x*2654435761>>13) ^ byte(x>>20)
	}
	r.off += int64(len(p))
	return len(p), nil
}

// rss returns the process's resident set size in bytes.
func rss(t testing.TB) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseUint(strings.Fields(l)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
