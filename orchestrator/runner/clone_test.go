package runner

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

func (e *env) sessionWithRepo(url string) (protocol.Session, sessions.Node) {
	e.t.Helper()
	s, err := e.sessions.CreateSession(e.ctx, e.uid, sessions.NewSession{Name: "with repo", GitRepoURL: &url})
	if err != nil {
		e.t.Fatal(err)
	}
	n, err := e.sessions.CreateNode(e.ctx, e.uid, s.ID, sessions.NewNode{Name: "root", AgentType: AgentCustom, Image: testImage, Task: "echo cloned"})
	if err != nil {
		e.t.Fatal(err)
	}
	e.sid = s.ID // records() and the cleanup look at this session
	return s, n
}

func commandEvents(recs []protocol.Record) []protocol.CommandEvent {
	return decodedAs(recs, protocol.KindEvent, func(ev protocol.CommandEvent) bool { return ev.Type == protocol.TypeCommand })
}

// decodedAs returns the data of the records of kind that decode as T and
// that keep accepts, in order.
func decodedAs[T any](recs []protocol.Record, kind string, keep func(T) bool) []T {
	var out []T
	for _, r := range recs {
		if r.Kind != kind {
			continue
		}
		var v T
		if json.Unmarshal(r.Data, &v) == nil && keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// allowPrivate lets the runner clone from the loopback fixtures.
func allowPrivate(c *Config) { c.GitAllowPrivate = true }

func TestCloneBeforeAgentStarts(t *testing.T) {
	e := newEnv(t, allowPrivate)
	url := testkit.GitRepo(t, map[string]string{"README.md": "# fixture\n"})
	s, n := e.sessionWithRepo(url)
	if err := e.r.StartSession(e.ctx, e.uid, s.ID); err != nil {
		t.Fatalf("start: %v", err)
	}
	e.waitFor("the agent's first text", func() bool { return hasText(e.records(n.ID), "cloned") })

	b, err := os.ReadFile(filepath.Join(e.dir, "nodes", n.ID, "README.md"))
	if err != nil || string(b) != "# fixture\n" {
		t.Fatalf("README.md in the workspace: %q, %v", b, err)
	}
	// The commit the clone checked out is the session's base commit (the
	// Changes view's default base).
	head, err := exec.Command("git", "-C", filepath.Join(e.dir, "nodes", n.ID), "-c", "safe.directory=*", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("rev-parse: %v", err)
	}
	if base, err := e.sessions.BaseCommit(e.ctx, s.ID); err != nil || base != strings.TrimSpace(string(head)) {
		t.Fatalf("base commit %q (%v), want HEAD %s", base, err, head)
	}
	cmds := commandEvents(e.records(n.ID))
	if len(cmds) != 2 || cmds[0].Status != protocol.StepStart || cmds[1].Status != protocol.StepDone ||
		!strings.Contains(cmds[0].Cmd, "git clone "+url) || cmds[1].Exit == nil || *cmds[1].Exit != 0 {
		t.Fatalf("clone progress in the chat: %+v", cmds)
	}
	// The clone comes before anything the agent printed.
	recs := e.records(n.ID)
	for _, r := range recs {
		if r.Kind == protocol.KindEvent && strings.Contains(string(r.Data), `"text"`) {
			t.Fatalf("agent text before the clone finished:\n%s", dump(recs))
		}
		if strings.Contains(string(r.Data), `"status":"done"`) && strings.Contains(string(r.Data), "git clone") {
			break
		}
	}
}

func TestCloneFailureIsAClearNodeError(t *testing.T) {
	e := newEnv(t, allowPrivate)
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL + "/missing.git"
	s, n := e.sessionWithRepo(url)
	err := e.r.StartSession(e.ctx, e.uid, s.ID)
	if err == nil || !strings.Contains(err.Error(), "git clone "+url+" failed") {
		t.Fatalf("start: %v, want a git clone failure", err)
	}
	got := e.node(n.ID)
	if got.Status != protocol.StateError || got.ContainerID != "" || e.r.Running(n.ID) {
		t.Fatalf("node after a failed clone: status %s container %q running %v", got.Status, got.ContainerID, e.r.Running(n.ID))
	}
	recs := e.records(n.ID)
	cmds := commandEvents(recs)
	if len(cmds) != 2 || cmds[1].Status != protocol.StepError || cmds[1].Exit == nil || *cmds[1].Exit == 0 {
		t.Fatalf("clone progress: %+v", cmds)
	}
	var sawError bool
	for _, r := range recs {
		sawError = sawError || (r.Kind == protocol.KindError && strings.Contains(string(r.Data), "git clone"))
	}
	if !sawError {
		t.Fatalf("no error record naming the clone:\n%s", dump(recs))
	}
}

// A session cannot have the server clone from its own loopback (or any
// private address) unless the server allows it: the check runs at clone
// time, whatever the host resolved to when the session was made.
func TestCloneRefusesPrivateHosts(t *testing.T) {
	fixture := testkit.GitRepo(t, map[string]string{"README.md": "# fixture\n"}) // http://127.0.0.1:PORT/repo.git
	rebound := resolverFunc(func(string) []netip.Addr { return []netip.Addr{netip.MustParseAddr("127.0.0.1")} })
	for _, tt := range []struct{ name, url string }{
		{"loopback address", fixture},
		{"a name resolving to loopback now", strings.Replace(fixture, "127.0.0.1", "rebound.test", 1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.Resolver = rebound })
			s, n := e.sessionWithRepo(tt.url)
			err := e.r.StartSession(e.ctx, e.uid, s.ID)
			if err == nil || !strings.Contains(err.Error(), "--git-allow-private") || !strings.Contains(err.Error(), "loopback") {
				t.Fatalf("start: %v, want a refusal naming the flag", err)
			}
			host := "127.0.0.1"
			if strings.Contains(tt.url, "rebound.test") {
				host = "rebound.test"
			}
			if !strings.Contains(err.Error(), host) {
				t.Fatalf("the refusal does not name the host %s: %v", host, err)
			}
			if entries, _ := os.ReadDir(filepath.Join(e.dir, "nodes", n.ID)); len(entries) != 0 {
				t.Fatalf("the workspace has %d entries after a refused clone", len(entries))
			}
			if got := e.node(n.ID); got.Status != protocol.StateError || e.r.Running(n.ID) {
				t.Fatalf("node after a refused clone: %s running %v", got.Status, e.r.Running(n.ID))
			}
			cmds := commandEvents(e.records(n.ID))
			if len(cmds) != 2 || cmds[1].Status != protocol.StepError || cmds[1].Stderr == nil || !strings.Contains(*cmds[1].Stderr, "--git-allow-private") {
				t.Fatalf("the chat does not show the refusal: %+v", cmds)
			}
		})
	}
}

type resolverFunc func(host string) []netip.Addr

func (f resolverFunc) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return f(host), nil
}

// git runs without the host's configuration: a credential helper in the
// server user's ~/.gitconfig does not log a session into a repository.
func TestCloneDoesNotUseTheHostsCredentials(t *testing.T) {
	fixture := testkit.GitRepo(t, map[string]string{"README.md": "# fixture\n"})
	// The same repository behind basic auth (user u, password secret).
	base := strings.TrimSuffix(fixture, "/repo.git")
	guarded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "u" || p != "secret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		resp, err := http.Get(base + r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(guarded.Close)
	home := t.TempDir()
	helper := "[credential]\n\thelper = \"!f() { echo username=u; echo password=secret; }; f\"\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(helper), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	// The host's git does use the helper.
	if out, err := exec.Command("git", "ls-remote", guarded.URL+"/repo.git").CombinedOutput(); err != nil {
		t.Fatalf("the host's git with its credential helper: %v\n%s", err, out)
	}

	e := newEnv(t, allowPrivate)
	s, n := e.sessionWithRepo(guarded.URL + "/repo.git")
	err := e.r.StartSession(e.ctx, e.uid, s.ID)
	if err == nil || !strings.Contains(err.Error(), "git clone") {
		t.Fatalf("start: %v, want the clone to fail without credentials", err)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "nodes", n.ID, "README.md")); err == nil {
		t.Fatal("the repository was cloned with the host's credentials")
	}
}
