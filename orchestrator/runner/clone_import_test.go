package runner

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/workspace"
)

// sessionFiles is the runner's TreeImporter over one session filesystem
// (cmd/filepath's opens the node's workspace the same way).
type sessionFiles struct {
	v   *vfs.VFS
	sid func() string
}

func (s sessionFiles) ImportTree(ctx context.Context, nodeID, hostDir string) (map[string]vfs.Attr, error) {
	return s.v.Session(s.sid()).ImportTree(ctx, "/", hostDir)
}

func (s sessionFiles) WriteFile(ctx context.Context, nodeID, p string, data []byte, mtime time.Time) error {
	_, _, err := s.v.Session(s.sid()).WriteFile(ctx, p, data, vfs.WriteOptions{Mode: vfs.WriteUpdate, Mtime: mtime})
	return err
}

// gitImage has git (built by `make images`), as the workspace tests use.
const gitImage = "filepath/base:bookworm"

// TestCloneImportedGitClean: with the session filesystem the runner clones
// on the host and imports the checkout in bulk, and the agent's first git
// in its container finds the work tree clean from the index's stat data
// alone: git diff-files (which reads no file and refreshes nothing) lists
// nothing, and git status leaves the index as it was.
func TestCloneImportedGitClean(t *testing.T) {
	testkit.RequireFUSE(t)
	testkit.RequireImage(t, gitImage)
	e := newEnv(t, allowPrivate)
	url := gitFixtureFiles(t, 60)
	rdb, err := e.st.ReadDB().DB()
	if err != nil {
		t.Fatal(err)
	}
	v := vfs.New(e.st.SQL(), vfs.Config{ReadDB: rdb})
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Chmod(filepath.Dir(mnt), 0o755)
	var sid string
	mgr, err := workspace.NewManager(workspace.ManagerConfig{Dir: mnt, Open: func(ctx context.Context, nodeID string) (workspace.FS, error) {
		return v.Session(sid), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	v.SetInvalidator(mgr.Fanout())
	t.Cleanup(func() { mgr.Close(); workspace.ClearMounts(mnt) })
	e.r.Close()
	e.cfg.Workspaces, e.cfg.WorkspacePropagation = mgr, workspace.Propagation
	e.cfg.Import = sessionFiles{v: v, sid: func() string { return sid }}
	e.r = e.newRunner()

	s, n := e.sessionWithRepo(url)
	sid = s.ID
	if err := e.r.StartSession(e.ctx, e.uid, s.ID); err != nil {
		t.Fatalf("start: %v", err)
	}
	e.waitFor("the agent's first text", func() bool { return hasText(e.records(n.ID), "cloned") })
	cmds := commandEvents(e.records(n.ID))
	if len(cmds) != 2 || cmds[1].Exit == nil || *cmds[1].Exit != 0 {
		t.Fatalf("clone progress in the chat: %+v", cmds)
	}
	e.waitFor("the host clone removed", func() bool {
		entries, _ := os.ReadDir(filepath.Join(e.dir, clonesDir))
		return len(entries) == 0
	})
	name := fmt.Sprintf("filepath-test-clone-%d", time.Now().UnixNano())
	if out, err := exec.Command("docker", "run", "-d", "--name", name, "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"-v", mgr.Bind(n.ID), gitImage, "sleep", "infinity").CombinedOutput(); err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	out, err := exec.Command("docker", "exec", "-w", "/workspace", name, "sh", "-ec", `
		export HOME=/tmp
		git config --global --add safe.directory '*'
		before=$(stat -c '%Y %Z %s' .git/index; sha1sum < .git/index)
		git diff-files --name-only | sed 's/^/stat-dirty: /'
		git status --porcelain
		after=$(stat -c '%Y %Z %s' .git/index; sha1sum < .git/index)
		test "$before" = "$after" || echo "git status rewrote the index"
		test -x bin/tool.sh && test -L link && echo modes and links kept
	`).CombinedOutput()
	if err != nil || string(out) != "modes and links kept\n" {
		t.Fatalf("git in the container: %v\n%s", err, out)
	}
	if err := v.Check(e.ctx, s.ID); err != nil {
		t.Fatal(err)
	}
}

// gitFixtureFiles serves over git's dumb HTTP protocol a repository with
// files in nested directories, an executable and a symlink (GitRepo's
// files are plain).
func gitFixtureFiles(t *testing.T, files int) string {
	t.Helper()
	work, served := t.TempDir(), t.TempDir()
	for i := range files {
		p := filepath.Join(work, fmt.Sprintf("src/pkg%d/file%d.go", i%7, i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(fmt.Sprintf("package pkg%d\n\nconst N%d = %d\n%s", i%7, i, i, strings.Repeat("// filler\n", i%13))), 0o644)
	}
	os.MkdirAll(filepath.Join(work, "bin"), 0o755)
	os.WriteFile(filepath.Join(work, "bin", "tool.sh"), []byte("#!/bin/sh\necho tool\n"), 0o755)
	os.Symlink("bin/tool.sh", filepath.Join(work, "link"))
	testkit.Git(t, work, "init", "-q")
	testkit.Git(t, work, "add", "-A")
	testkit.Git(t, work, "commit", "-q", "-m", "initial")
	testkit.Git(t, served, "clone", "-q", "--bare", work, "repo.git")
	testkit.Git(t, filepath.Join(served, "repo.git"), "update-server-info")
	srv := httptest.NewServer(http.FileServer(http.Dir(served)))
	t.Cleanup(srv.Close)
	return srv.URL + "/repo.git"
}
