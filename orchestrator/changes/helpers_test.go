package changes

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/workspace"
)

// env is a real store and session filesystem with one session whose
// workspace is mounted over FUSE, where the git binary makes a real
// repository, as an agent's container would.
type env struct {
	t   testing.TB
	ctx context.Context
	st  *storetest.Env
	v   *vfs.VFS
	sid string
	dir string // the mount
	svc *Service
}

func newEnv(t testing.TB) *env {
	t.Helper()
	testkit.RequireFUSE(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	st, _, s := storetest.NewSession(t)
	rdb, err := st.St.ReadDB().DB()
	if err != nil {
		t.Fatal(err)
	}
	v := vfs.New(st.St.SQL(), vfs.Config{ReadDB: rdb})
	t.Cleanup(v.Close)
	fan := &workspace.Fanout{}
	v.SetInvalidator(fan)
	dir := t.TempDir()
	m, err := workspace.Mount(ctx, dir, v.Session(s.ID), workspace.Options{Fanout: fan})
	if err != nil {
		t.Fatalf("mount: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return &env{t: t, ctx: ctx, st: st, v: v, sid: s.ID, dir: dir, svc: New(v, st.Sessions, st.St)}
}

// git runs git in the mount and returns its output.
func (e *env) git(args ...string) string {
	e.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "safe.directory=*", "-c", "core.quotepath=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com", "GIT_COMMITTER_NAME=Ada",
		"GIT_COMMITTER_EMAIL=ada@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+e.t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (e *env) write(p, content string) {
	e.t.Helper()
	testkit.WriteFile(e.t, filepath.Join(e.dir, p), content)
}

func (e *env) target() Target { return Target{SessionID: e.sid, Workspace: e.sid} }

// gitOut is one file of `git diff`'s output.
type gitOut struct {
	status, path, oldPath string
	similarity            string
	hunks                 string
}

// parseGitDiff reads `git diff -M --name-status` and `git diff -M` output
// (the same range) into files by path.
func parseGitDiff(t testing.TB, nameStatus, patch string) map[string]gitOut {
	t.Helper()
	out := map[string]gitOut{}
	for _, l := range strings.Split(strings.TrimSpace(nameStatus), "\n") {
		if l == "" {
			continue
		}
		f := strings.Split(l, "\t")
		g := gitOut{}
		switch f[0][0] {
		case 'A':
			g.status, g.path = Added, f[1]
		case 'M':
			g.status, g.path = Modified, f[1]
		case 'D':
			g.status, g.path = Deleted, f[1]
		case 'R':
			g.status, g.oldPath, g.path, g.similarity = Renamed, f[1], f[2], strings.TrimLeft(f[0][1:], "0")
		default:
			t.Fatalf("status %q", l)
		}
		out[g.path] = g
	}
	// hunks by the path of their "+++ b/" (or "--- a/" for a deletion)
	for _, part := range strings.Split(patch, "diff --git ")[1:] {
		var path string
		lines := strings.SplitAfter(part, "\n")
		for _, l := range lines {
			if strings.HasPrefix(l, "rename to ") {
				path = strings.TrimSpace(strings.TrimPrefix(l, "rename to "))
			}
			if strings.HasPrefix(l, "+++ b/") {
				path = strings.TrimSpace(strings.TrimPrefix(l, "+++ b/"))
			}
			if strings.HasPrefix(l, "--- a/") && path == "" {
				path = strings.TrimSpace(strings.TrimPrefix(l, "--- a/"))
			}
			if strings.HasPrefix(l, "@@") {
				break
			}
		}
		if path == "" { // a header only (mode change, pure rename, binary)
			first := strings.SplitN(lines[0], " ", 2)
			path = strings.TrimPrefix(strings.TrimSpace(first[1]), "b/")
		}
		g := out[path]
		if i := strings.Index(part, "\n@@"); i >= 0 {
			g.hunks = part[i+1:]
		}
		out[path] = g
	}
	return out
}

// sameAsGit checks our files against git's.
func sameAsGit(t testing.TB, what string, got []FileDiff, want map[string]gitOut) {
	t.Helper()
	var gp, wp []string
	for _, f := range got {
		gp = append(gp, f.Status+" "+f.OldPath+" "+f.Path)
	}
	for _, g := range want {
		wp = append(wp, g.status+" "+g.oldPath+" "+g.path)
	}
	sort.Strings(gp)
	sort.Strings(wp)
	if strings.Join(gp, "\n") != strings.Join(wp, "\n") {
		t.Fatalf("%s: files\n%s\nwant (git)\n%s", what, strings.Join(gp, "\n"), strings.Join(wp, "\n"))
	}
	for _, f := range got {
		g := want[f.Path]
		if f.Status == Renamed && g.similarity != "" && f.Similarity != atoi(g.similarity) {
			t.Errorf("%s: %s similarity %d, git says %s", what, f.Path, f.Similarity, g.similarity)
		}
		if f.Binary || f.TooLarge {
			continue
		}
		if f.Patch != g.hunks {
			t.Errorf("%s: %s hunks\n%s\nwant (git)\n%s", what, f.Path, f.Patch, g.hunks)
		}
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
