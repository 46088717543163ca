package ship_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/internal/testkit/githttp"
	"github.com/filepath-dev/filepath/orchestrator/ship"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/workspace"
)

// BenchmarkPush measures a push of a node's branch from its workspace on
// the session filesystem (FUSE-mounted, where the agent's git made the
// commits), beside `git push` of the same branch from a copy of the
// repository on ext4, in the same run, to the same git http-backend on
// loopback. The repository is shaped as the Changes benchmark's: 2,000
// files (100 directories of 20 Go files, each its own blob), then a commit
// changing 200 of them.
//
//   - first: the branch to an empty remote (the whole history);
//   - again: the branch to a remote that has its parent (the one commit
//     of 200 changed files).
//
// Each reports the median of its runs (ms-median).
//
//	go test -run '^$' -bench Push -benchtime 15x -count 1 ./orchestrator/ship/
func BenchmarkPush(b *testing.B) {
	testkit.RequireFUSE(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	st := storetest.New(b)
	u := st.User(b, "alice")
	sess, err := st.Sessions.CreateSession(ctx, u.ID, sessions.NewSession{Name: "push"})
	if err != nil {
		b.Fatal(err)
	}
	rdb, err := st.St.ReadDB().DB()
	if err != nil {
		b.Fatal(err)
	}
	v := vfs.New(st.St.SQL(), vfs.Config{ReadDB: rdb})
	b.Cleanup(v.Close)
	fan := &workspace.Fanout{}
	v.SetInvalidator(fan)
	mount := b.TempDir()
	m, err := workspace.Mount(ctx, mount, v.Session(sess.ID), workspace.Options{Fanout: fan})
	if err != nil {
		b.Fatalf("mount: %v", err)
	}
	b.Cleanup(func() { _ = m.Close() })

	ext4 := b.TempDir()
	// Each file its own blob (its path in it), as in a real repository.
	source := func(path string, changed bool) []byte {
		var s strings.Builder
		fmt.Fprintf(&s, "// %s\n\npackage p\n\n", path)
		for i := range 8 {
			line := "\tx++\n"
			if changed && i == 4 {
				line = "\tx += 2\n"
			}
			fmt.Fprintf(&s, "func F%d(x int) int {\n%s\treturn x\n}\n\n", i, line)
		}
		return []byte(s.String())
	}
	// The same commits on both sides.
	b.Setenv("GIT_AUTHOR_DATE", "2026-11-28T12:00:00Z")
	b.Setenv("GIT_COMMITTER_DATE", "2026-11-28T12:00:00Z")
	for _, dir := range []string{mount, ext4} {
		githttp.Git(b, dir, "init", "-q")
		for d := range 100 {
			for f := range 20 {
				name := fmt.Sprintf("pkg%03d/file%02d.go", d, f)
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(p, source(name, false), 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
		githttp.Git(b, dir, "add", "-A")
		githttp.Git(b, dir, "commit", "-qm", "base")
		for d := range 100 {
			for f := range 2 {
				name := fmt.Sprintf("pkg%03d/file%02d.go", d, f)
				if err := os.WriteFile(filepath.Join(dir, name), source(name, true), 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
		githttp.Git(b, dir, "commit", "-qam", "change 200 files")
	}

	root := b.TempDir()
	srv := githttp.Serve(b, root, "alice", "pw")
	sec := secrets.New(st.St, secrets.Config{Key: bytes.Repeat([]byte{5}, secrets.KeySize)})
	if _, err := sec.Set(ctx, u.ID, "", "corp", secrets.NewSecret{Kind: secrets.KindGitHTTPS, Host: "127.0.0.1", Username: "alice", Value: "pw"}); err != nil {
		b.Fatal(err)
	}
	pusher := ship.New(ship.Config{Secrets: sec, AllowPrivate: true})
	head := githttp.Git(b, mount, "rev-parse", "HEAD")
	if got := githttp.Git(b, ext4, "rev-parse", "HEAD"); got != head {
		b.Fatalf("the two repositories differ: %s, %s", head, got)
	}
	base := githttp.Git(b, ext4, "rev-parse", "HEAD~1")

	// Each push goes to a remote of its own: empty, or with base on the
	// branch (pushed outside the timing).
	n := 0
	remote := func(withBase bool) (string, string) {
		n++
		name := fmt.Sprintf("r%d.git", n)
		bare := githttp.BareRepo(b, root, name)
		if withBase {
			githttp.Git(b, ext4, "push", "-q", bare, base+":refs/heads/filepath/node")
		}
		return srv.URL + "/" + name, bare
	}
	filepathPush := func(withBase bool) func() time.Duration {
		return func() time.Duration {
			url, bare := remote(withBase)
			t0 := time.Now()
			res, err := pusher.Push(ctx, ship.PushRequest{UserID: u.ID, Dir: mount, RemoteURL: url, Branch: "filepath/node"})
			d := time.Since(t0)
			if err != nil || res.Commit != head || githttp.Git(b, bare, "rev-parse", "refs/heads/filepath/node") != head {
				b.Fatalf("push: %+v, %v", res, err)
			}
			return d
		}
	}
	gitPush := func(withBase bool) func() time.Duration {
		return func() time.Duration {
			url, bare := remote(withBase)
			cmd := exec.Command("git", "-c", "http.extraHeader=Authorization: Basic YWxpY2U6cHc=", "push", "-q", url, "HEAD:refs/heads/filepath/node")
			cmd.Dir, cmd.Env = ext4, append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
			t0 := time.Now()
			out, err := cmd.CombinedOutput()
			d := time.Since(t0)
			if err != nil || githttp.Git(b, bare, "rev-parse", "refs/heads/filepath/node") != head {
				b.Fatalf("git push: %v\n%s", err, out)
			}
			return d
		}
	}
	run := func(name string, f func() time.Duration) {
		b.Run(name, func(b *testing.B) {
			var ds []time.Duration
			for b.Loop() {
				ds = append(ds, f())
			}
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "ms-median")
		})
	}
	run("first", filepathPush(false))
	run("first-baseline-git-push-ext4", gitPush(false))
	run("again", filepathPush(true))
	run("again-baseline-git-push-ext4", gitPush(true))
}
