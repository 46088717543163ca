// Package githttp serves git repositories over smart HTTP on loopback for
// tests (git http-backend behind basic auth), and runs git for a test's own
// setup. It is apart from testkit, which imports only the standard
// library's non-network parts.
package githttp

import (
	"bytes"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Git runs git in dir with a fixed identity and none of the host's
// configuration, and returns its trimmed output; it fails the test on an
// error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=agent", "-c", "user.email=agent@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Commit writes name in the work tree dir and commits it; it returns the
// commit.
func Commit(t testing.TB, dir, name, text string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	Git(t, dir, "add", name)
	Git(t, dir, "commit", "-qm", "write "+name)
	return Git(t, dir, "rev-parse", "HEAD")
}

// BareRepo makes root/name, a bare repository that accepts pushes over
// HTTP.
func BareRepo(t testing.TB, root, name string) string {
	t.Helper()
	dir := filepath.Join(root, name)
	Git(t, root, "init", "-q", "--bare", dir)
	Git(t, dir, "config", "http.receivepack", "true")
	return dir
}

// Server serves the bare repositories under a root over git's smart HTTP
// to one user and password.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	user     string
	password string
	received int64 // bytes of git-receive-pack request bodies
}

// Serve serves root until the test ends: URL/NAME.git is root/NAME.git.
func Serve(t testing.TB, root, user, password string) *Server {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{user: user, password: password}
	backend := &cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		s.mu.Lock()
		good := ok && u == s.user && p == s.password
		s.mu.Unlock()
		if !good {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			r.Body = &countingBody{ReadCloser: r.Body, s: s}
		}
		if r.ContentLength < 0 || len(r.TransferEncoding) > 0 {
			// git sends a pack past its http.postBuffer chunked; CGI
			// wants the length, as a real server's front gives it.
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body, r.ContentLength, r.TransferEncoding = io.NopCloser(bytes.NewReader(body)), int64(len(body)), nil
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// ReceivedBytes is how many bytes pushes sent the server so far: the
// bodies of its git-receive-pack requests (the commands and the packs).
func (s *Server) ReceivedBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received
}

type countingBody struct {
	io.ReadCloser
	s *Server
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.s.mu.Lock()
	b.s.received += int64(n)
	b.s.mu.Unlock()
	return n, err
}

// SetPassword changes the password the server accepts (a rotation).
func (s *Server) SetPassword(p string) {
	s.mu.Lock()
	s.password = p
	s.mu.Unlock()
}
