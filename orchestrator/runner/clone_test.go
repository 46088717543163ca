package runner

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/protocol"
)

// gitFixture serves a one-commit repository over git's dumb HTTP protocol on
// 127.0.0.1 and returns its URL.
func gitFixture(t *testing.T) string {
	t.Helper()
	work, served := t.TempDir(), t.TempDir()
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(work, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("# fixture\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(work, "add", "README.md")
	git(work, "commit", "-q", "-m", "first")
	git(served, "clone", "-q", "--bare", work, "repo.git")
	git(filepath.Join(served, "repo.git"), "update-server-info")
	srv := httptest.NewServer(http.FileServer(http.Dir(served)))
	t.Cleanup(srv.Close)
	return srv.URL + "/repo.git"
}

func (e *env) sessionWithRepo(url string) (store.Session, store.Node) {
	e.t.Helper()
	s, err := e.st.CreateSession(e.ctx, e.uid, store.NewSession{Name: "with repo", GitRepoURL: &url})
	if err != nil {
		e.t.Fatal(err)
	}
	n, err := e.st.CreateNode(e.ctx, e.uid, s.ID, store.NewNode{Name: "root", AgentType: AgentCustom, Image: testImage, Task: "echo cloned"})
	if err != nil {
		e.t.Fatal(err)
	}
	e.sid = s.ID // records() and the cleanup look at this session
	return s, n
}

func commandEvents(t *testing.T, recs []store.Record) []protocol.CommandEvent {
	t.Helper()
	var out []protocol.CommandEvent
	for _, r := range recs {
		if r.Kind != store.KindEvent {
			continue
		}
		var ev protocol.CommandEvent
		if err := json.Unmarshal(r.Data, &ev); err == nil && ev.Type == protocol.TypeCommand {
			out = append(out, ev)
		}
	}
	return out
}

func TestCloneBeforeAgentStarts(t *testing.T) {
	e := newEnv(t, nil)
	url := gitFixture(t)
	s, n := e.sessionWithRepo(url)
	if err := e.r.StartSession(e.ctx, e.uid, s.ID); err != nil {
		t.Fatalf("start: %v", err)
	}
	e.waitFor("the agent's first text", func() bool { return hasText(e.records(n.ID), "cloned") })

	b, err := os.ReadFile(filepath.Join(e.dir, "nodes", n.ID, "README.md"))
	if err != nil || string(b) != "# fixture\n" {
		t.Fatalf("README.md in the workspace: %q, %v", b, err)
	}
	cmds := commandEvents(t, e.records(n.ID))
	if len(cmds) != 2 || cmds[0].Status != protocol.StepStart || cmds[1].Status != protocol.StepDone ||
		!strings.Contains(cmds[0].Cmd, "git clone "+url) || cmds[1].Exit == nil || *cmds[1].Exit != 0 {
		t.Fatalf("clone progress in the chat: %+v", cmds)
	}
	// The clone comes before anything the agent printed.
	recs := e.records(n.ID)
	for _, r := range recs {
		if r.Kind == store.KindEvent && strings.Contains(string(r.Data), `"text"`) {
			t.Fatalf("agent text before the clone finished:\n%s", dump(recs))
		}
		if strings.Contains(string(r.Data), `"status":"done"`) && strings.Contains(string(r.Data), "git clone") {
			break
		}
	}
}

func TestCloneFailureIsAClearNodeError(t *testing.T) {
	e := newEnv(t, nil)
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL + "/missing.git"
	s, n := e.sessionWithRepo(url)
	err := e.r.StartSession(e.ctx, e.uid, s.ID)
	if err == nil || !strings.Contains(err.Error(), "git clone "+url+" failed") {
		t.Fatalf("start: %v, want a git clone failure", err)
	}
	got := e.node(n.ID)
	if got.Status != store.NodeError || got.ContainerID != "" || e.r.Running(n.ID) {
		t.Fatalf("node after a failed clone: status %s container %q running %v", got.Status, got.ContainerID, e.r.Running(n.ID))
	}
	recs := e.records(n.ID)
	cmds := commandEvents(t, recs)
	if len(cmds) != 2 || cmds[1].Status != protocol.StepError || cmds[1].Exit == nil || *cmds[1].Exit == 0 {
		t.Fatalf("clone progress: %+v", cmds)
	}
	var sawError bool
	for _, r := range recs {
		sawError = sawError || (r.Kind == store.KindError && strings.Contains(string(r.Data), "git clone"))
	}
	if !sawError {
		t.Fatalf("no error record naming the clone:\n%s", dump(recs))
	}
}
