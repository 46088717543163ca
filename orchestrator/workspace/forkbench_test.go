package workspace

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/gitindex"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// BenchmarkForkGitStatus10k: a repository of 10,000 small files in 100
// directories is imported into a session as the runner imports a clone
// (its index given the stat data the files have in the workspace), then
// each iteration runs the first `git status` through a new mount of the
// session (session-ms, the baseline) and then of a new fork of it
// (fork-ms, what a forked child does first), and fork/session is their
// ratio. A new mount has a cold kernel cache, and a new fork has read
// nothing. Only git status is timed. Run with:
//
//	go test -run '^$' -bench ForkGitStatus10k -benchtime 5x -count 5 ./orchestrator/workspace/
func BenchmarkForkGitStatus10k(b *testing.B) {
	testkit.RequireFUSE(b)
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git not installed")
	}
	ctx := ctxT(b)
	host := b.TempDir()
	git(b, host, "init", "-q", "-b", "main")
	git(b, host, "config", "gc.auto", "0") // no gc left running in the background
	git(b, host, "config", "maintenance.auto", "false")
	for d := range 100 {
		dir := filepath.Join(host, fmt.Sprintf("d%02d", d))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for n := range 100 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.go", n)), []byte(fmt.Sprintf("package d%02d // %d\n", d, n)), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	git(b, host, "add", "-A")
	git(b, host, "commit", "-q", "-m", "10,000 files")
	e := newEnv(b, vfs.Config{})
	attrs, err := e.fs.ImportTree(ctx, "/", host)
	if err != nil {
		b.Fatal(err)
	}
	// what the runner does after an import (runner/clone.go importClone)
	index, err := os.ReadFile(filepath.Join(host, ".git", "index"))
	if err != nil {
		b.Fatal(err)
	}
	var newest time.Time
	index, _, err = gitindex.Restat(index, func(p string) (gitindex.Stat, bool) {
		a, ok := attrs[p]
		if !ok || a.IsDir() {
			return gitindex.Stat{}, false
		}
		if a.Mtime.After(newest) {
			newest = a.Mtime
		}
		return gitindex.Stat{Ctime: a.Ctime, Mtime: a.Mtime, Ino: uint32(a.Ino), UID: a.UID, GID: a.GID, Size: uint32(a.Size)}, true
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := e.fs.WriteFile(ctx, "/.git/index", index, vfs.WriteOptions{Mode: vfs.WriteUpdate, Mtime: time.Unix(newest.Unix()+1, 0)}); err != nil {
		b.Fatal(err)
	}
	// status times the first git status through a new mount of fs
	status := func(b *testing.B, fs *vfs.FS) time.Duration {
		dir := b.TempDir()
		m, err := Mount(ctx, dir, fs, Options{Fanout: e.fanout})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if out := git(b, dir, "status", "--porcelain"); strings.TrimSpace(out) != "" {
			b.Fatalf("git status in a fresh import: %q", out)
		}
		d := time.Since(start)
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		return d
	}
	// the two in turn, so that both see the same load
	var session, fork time.Duration
	for range b.N {
		session += status(b, e.fs)
		fk, err := e.v.Fork(ctx, e.sid, "")
		if err != nil {
			b.Fatal(err)
		}
		fork += status(b, e.v.Session(fk.ID))
	}
	n := float64(b.N)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(session.Milliseconds())/n, "session-ms")
	b.ReportMetric(float64(fork.Milliseconds())/n, "fork-ms")
	b.ReportMetric(float64(fork)/float64(session), "fork/session")
}
