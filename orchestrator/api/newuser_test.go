package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/protocol"
)

// TestNodeFiles: below /nodes/{node}/fs the user reads and writes that
// node's workspace: a forked child's own copy (issue 27: the Files tab of a
// forked agent showed the shared workspace), the session's for a node on
// the shared one. A node key reaches only its own.
func TestNodeFiles(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	alice, bob := e.account("alice"), e.account("bob")
	s, root := e.session(alice)
	if _, _, err := e.files.Session(s.ID).WriteFile(ctx, "/shared.txt", []byte("both\n"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	r := e.do(http.MethodPost, "/api/v1/sessions/"+s.ID+"/nodes", alice.key, `{"agent_type":"shelley","parent_id":"`+root.ID+`","workspace":"fork"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create forked child: %d %s", r.status, r.body)
	}
	var child sessions.Node
	if err := json.Unmarshal(r.body, &child); err != nil {
		t.Fatal(err)
	}
	if child.Workspace != protocol.WorkspaceFork || root.Workspace != protocol.WorkspaceShared {
		t.Fatalf("workspaces: child %q root %q", child.Workspace, root.Workspace)
	}
	nodeFS := "/api/v1/sessions/" + s.ID + "/nodes/" + child.ID + "/fs"
	if r := e.do(http.MethodPost, nodeFS+"/only-in-fork.txt", alice.key, `{"content":"mine\n"}`); r.status != http.StatusCreated {
		t.Fatalf("write to the fork: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, nodeFS+"/only-in-fork.txt", alice.key, ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"content":"mine\n"`) {
		t.Fatalf("read from the fork: %d %s", r.status, r.body)
	}
	r = e.do(http.MethodGet, nodeFS+"/shared.txt", alice.key, "")
	if r.status != http.StatusOK {
		t.Fatalf("the fork has its parent's files: %d %s", r.status, r.body)
	}
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		if r := e.do(m, nodeFS+"/shared.txt", alice.key, "", "If-None-Match", r.header.Get("ETag")); r.status != http.StatusNotModified {
			t.Fatalf("%s If-None-Match: %d", m, r.status)
		}
	}
	if r := e.do(http.MethodGet, "/api/v1/sessions/"+s.ID+"/fs/only-in-fork.txt", alice.key, ""); r.status != http.StatusNotFound {
		t.Fatalf("the fork's file is in the session's workspace: %d", r.status)
	}
	// an upload into the fork lands there, and a range of it comes back
	body, ct := multipartBody(t, [2]string{"up.txt", "0123456789"})
	if r := e.do(http.MethodPost, nodeFS+"/_/upload?dir=/in", alice.key, body, "Content-Type", ct); r.status != http.StatusCreated {
		t.Fatalf("upload into the fork: %d %s", r.status, r.body)
	}
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		r := e.do(m, nodeFS+"/in/up.txt?download=true", alice.key, "", "Range", "bytes=2-4")
		if r.status != http.StatusPartialContent || r.header.Get("Content-Range") != "bytes 2-4/10" || (m == http.MethodGet && string(r.body) != "234") {
			t.Fatalf("%s a range of the fork's upload: %d %q %q", m, r.status, r.header.Get("Content-Range"), r.body)
		}
	}
	if r := e.do(http.MethodGet, "/api/v1/sessions/"+s.ID+"/fs/in/up.txt", alice.key, ""); r.status != http.StatusNotFound {
		t.Fatalf("the fork's upload is in the session's workspace: %d", r.status)
	}
	// the root works on the session's workspace
	if r := e.do(http.MethodGet, "/api/v1/sessions/"+s.ID+"/nodes/"+root.ID+"/fs/shared.txt", alice.key, ""); r.status != http.StatusOK {
		t.Fatalf("the root's workspace: %d %s", r.status, r.body)
	}
	// another user: not found; the root's key: not the child's workspace
	if r := e.do(http.MethodGet, nodeFS+"/only-in-fork.txt", bob.key, ""); r.status != http.StatusNotFound {
		t.Fatalf("bob: %d", r.status)
	}
	rootKey, _, err := e.users.CreateNodeAPIKey(ctx, alice.user.ID, s.ID, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.do(http.MethodGet, nodeFS+"/only-in-fork.txt", rootKey, ""); r.status != http.StatusForbidden {
		t.Fatalf("the root's key read its child's workspace: %d %s", r.status, r.body)
	}
	childKey, _, err := e.users.CreateNodeAPIKey(ctx, alice.user.ID, s.ID, child.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.do(http.MethodGet, nodeFS+"/only-in-fork.txt", childKey, ""); r.status != http.StatusOK {
		t.Fatalf("the child's own key: %d %s", r.status, r.body)
	}
}

// agentRunner is a fakeRunner that also says which agents can run.
type agentRunner struct {
	fakeRunner
	status func(a orchestrator.Agent) (string, string)
}

func (r *agentRunner) AgentStatus(_ context.Context, a orchestrator.Agent) (string, string) {
	return r.status(a)
}

// TestAgentsAvailability: GET /agents says per agent whether it can run on
// this server, and if not why and what fixes it (issue 27: the picker
// offered agents without their provider's key or image).
func TestAgentsAvailability(t *testing.T) {
	run := &agentRunner{status: func(a orchestrator.Agent) (string, string) {
		switch a.Type {
		case "codex":
			return "this server has no openai key", "set FILEPATH_OPENAI_API_KEY"
		case "cursor":
			return "its image filepath/agent-cursor:latest is not on this machine", "build it with `make images`"
		}
		return "", ""
	}}
	e := newEnv(t, envOpts{cfg: func(c *api.Config) { c.Runner = run }})
	alice := e.account("alice")
	r := e.do(http.MethodGet, "/api/v1/agents", alice.key, "")
	if r.status != http.StatusOK {
		t.Fatalf("agents: %d %s", r.status, r.body)
	}
	var list []api.AgentInfo
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]api.AgentInfo{}
	for _, a := range list {
		got[a.Type] = a
	}
	if a := got["codex"]; a.Available || a.Reason != "this server has no openai key" || a.Fix != "set FILEPATH_OPENAI_API_KEY" {
		t.Fatalf("codex: %+v", a)
	}
	if a := got["cursor"]; a.Available || !strings.Contains(a.Reason, "not on this machine") {
		t.Fatalf("cursor: %+v", a)
	}
	if a := got["custom"]; !a.Available || a.Reason != "" || a.DefaultModel != "" {
		t.Fatalf("custom: %+v", a)
	}
	if a := got["claude-code"]; !a.Available || a.DefaultModel != "claude-sonnet-4-5" {
		t.Fatalf("claude-code: %+v", a)
	}
	// without a runner every agent is offered
	bare := newEnv(t, envOpts{})
	r = bare.do(http.MethodGet, "/api/v1/agents", bare.account("bob").key, "")
	if err := json.Unmarshal(r.body, &list); err != nil || len(list) != len(orchestrator.Catalog()) {
		t.Fatalf("agents without a runner: %s", r.body)
	}
	for _, a := range list {
		if !a.Available {
			t.Fatalf("%s unavailable without a runner", a.Type)
		}
	}
}

// TestLoginPageNamesDataDir: the page of a used login link suggests the
// command with the server's --data (issue 27).
func TestLoginPageNamesDataDir(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *api.Config) { c.DataDir = "/srv/filepath data" }})
	r := e.do(http.MethodGet, "/login?token=used", "", "")
	if r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), "filepath user login NAME --data &#39;/srv/filepath data&#39;") {
		t.Fatalf("login page: %d %s", r.status, r.body)
	}
}
