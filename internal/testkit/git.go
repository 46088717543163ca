package testkit

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Git runs git in dir as the user "test" <test@example.invalid>, with
// neither the machine's nor the user's git configuration and main as the
// default branch, and returns its output, trimmed; a failure fails the test.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.invalid",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.invalid", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// GitRepo serves, over git's dumb HTTP protocol on 127.0.0.1 until the
// test ends, a repository holding files (path → content) in one commit,
// "initial", on main; it returns the repository's URL.
func GitRepo(t testing.TB, files map[string]string) string {
	t.Helper()
	work, served := t.TempDir(), t.TempDir()
	Git(t, work, "init", "-q")
	WriteFiles(t, work, files)
	Git(t, work, "add", "-A")
	Git(t, work, "commit", "-q", "-m", "initial")
	Git(t, served, "clone", "-q", "--bare", work, "repo.git")
	Git(t, filepath.Join(served, "repo.git"), "update-server-info")
	srv := httptest.NewServer(http.FileServer(http.Dir(served)))
	t.Cleanup(srv.Close)
	return srv.URL + "/repo.git"
}
