package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit/githttp"
	"github.com/filepath-dev/filepath/internal/testkit/gitssh"
	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/ship"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// lender lends each node the test's work tree, counting the loans given
// back.
type lender struct {
	dir      string
	mu       sync.Mutex
	out, ret int
}

func (l *lender) Workspace(_ context.Context, _ string) (string, func(), error) {
	l.mu.Lock()
	l.out++
	l.mu.Unlock()
	return l.dir, func() { l.mu.Lock(); l.ret++; l.mu.Unlock() }, nil
}

// TestPushRoute: the user pushes a node's commits to the session's remote
// with a credential of theirs: the branch defaults to filepath/<node name>
// and lands on the server; the answer names the commit, the credential and
// never its value; the workspace is given back; a node key cannot push.
func TestPushRoute(t *testing.T) {
	root, ws := t.TempDir(), t.TempDir()
	l := &lender{dir: ws}
	var e *testEnv
	e = newEnv(t, envOpts{secrets: bytes.Repeat([]byte{4}, secrets.KeySize), cfg: func(c *api.Config) {
		c.Ship = ship.NewNodes(ship.New(ship.Config{Secrets: c.Secrets, AllowPrivate: true}), c.Sessions, l)
	}})
	ctx := context.Background()
	alice := e.account("alice")
	const pass = "route-PASS-123"
	srv := githttp.Serve(t, root, "alice", pass)
	server := githttp.BareRepo(t, root, "repo.git")
	url := srv.URL + "/repo.git"
	s, err := e.sessions.CreateSession(ctx, alice.user.ID, sessions.NewSession{Name: "s", GitRepoURL: &url})
	if err != nil {
		t.Fatal(err)
	}
	n, err := e.sessions.CreateNode(ctx, alice.user.ID, s.ID, sessions.NewNode{AgentType: "shelley", Name: "fixer"})
	if err != nil {
		t.Fatal(err)
	}
	githttp.Git(t, ws, "init", "-q")
	head := githttp.Commit(t, ws, "fix.go", "package fix\n")
	path := "/api/v1/sessions/" + s.ID + "/nodes/" + n.ID + "/push"

	r := e.do("POST", path, alice.key, `{}`)
	if _, _, field := r.errorOf(t); r.status != 422 || field != "credential" {
		t.Fatalf("push without a credential: %d %s", r.status, r.body)
	}
	if r = e.do("PUT", "/api/v1/secrets/corp", alice.key, `{"kind":"git_https","host":"127.0.0.1","username":"alice","value":"`+pass+`"}`); r.status != 200 {
		t.Fatalf("PUT secret: %d %s", r.status, r.body)
	}
	if r = e.do("POST", path, e.nodeKey(alice, s.ID, n.ID), `{}`); r.status != 403 {
		t.Fatalf("push with the node's key: %d %s", r.status, r.body)
	}
	r = e.do("POST", path, alice.key, `{}`)
	var res ship.PushResult
	if r.status != 200 || json.Unmarshal(r.body, &res) != nil {
		t.Fatalf("push: %d %s", r.status, r.body)
	}
	if res.Branch != "filepath/fixer" || res.Commit != head || res.Status != "created" || res.Credential != "corp" || bytes.Contains(r.body, []byte(pass)) {
		t.Fatalf("push answered %s", r.body)
	}
	if got := githttp.Git(t, server, "rev-parse", "refs/heads/filepath/fixer"); got != head {
		t.Fatalf("the server's branch is at %s", got)
	}
	r = e.do("POST", path, alice.key, `{"branch":"other name"}`)
	if _, _, field := r.errorOf(t); r.status != 422 || field != "branch" {
		t.Fatalf("a bad branch: %d %s", r.status, r.body)
	}
	// The pull request, its title and body drafted from the commits.
	var sent map[string]string
	forge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/repos/o/r/pulls" || r.Header.Get("Authorization") != "Bearer ghp_route" {
			w.WriteHeader(404)
			return
		}
		json.NewDecoder(r.Body).Decode(&sent)
		w.WriteHeader(201)
		w.Write([]byte(`{"number":7,"html_url":"https://github.com/o/r/pull/7"}`))
	}))
	defer forge.Close()
	if r = e.do("PUT", "/api/v1/secrets/gh", alice.key, `{"kind":"github_token","host":"github.com","value":"ghp_route"}`); r.status != 200 {
		t.Fatalf("PUT token: %d %s", r.status, r.body)
	}
	prPath := "/api/v1/sessions/" + s.ID + "/nodes/" + n.ID + "/pull-request"
	if r = e.do("POST", prPath, e.nodeKey(alice, s.ID, n.ID), `{}`); r.status != 403 {
		t.Fatalf("a pull request with the node's key: %d", r.status)
	}
	r = e.do("POST", prPath, alice.key, `{"remote_url":"https://github.com/o/r.git","base":"main","api_base":"`+forge.URL+`"}`)
	var pr ship.PullRequest
	if r.status != 200 || json.Unmarshal(r.body, &pr) != nil || pr.URL != "https://github.com/o/r/pull/7" {
		t.Fatalf("pull request: %d %s", r.status, r.body)
	}
	if sent["head"] != "filepath/fixer" || sent["title"] != "write fix.go" || !strings.Contains(sent["body"], "write fix.go") || sent["base"] != "main" {
		t.Fatalf("the forge got %v", sent)
	}
	// The node carries it: the tree links to it.
	r = e.do("GET", "/api/v1/sessions/"+s.ID+"/tree", alice.key, "")
	var tree struct{ Data []protocol.Node }
	if r.status != 200 || json.Unmarshal(r.body, &tree) != nil || len(tree.Data) != 1 || tree.Data[0].PullRequest == nil ||
		*tree.Data[0].PullRequest != (protocol.PullRequestLink{Forge: "github", URL: pr.URL, Number: 7, Branch: "filepath/fixer", Base: "main"}) {
		t.Fatalf("the tree after the pull request: %d %s", r.status, r.body)
	}

	// An SSH remote's host key, shown before the first push there.
	sshSrv := gitssh.Serve(t, root)
	r = e.do("GET", "/api/v1/sessions/"+s.ID+"/remote-host-key?remote_url="+sshSrv.URL("repo.git"), alice.key, "")
	var hk ship.HostKey
	if r.status != 200 || json.Unmarshal(r.body, &hk) != nil || hk.Pinned || !strings.HasPrefix(hk.Fingerprint, "SHA256:") {
		t.Fatalf("remote host key: %d %s", r.status, r.body)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.out == 0 || l.out != l.ret {
		t.Fatalf("%d workspace loans, %d given back", l.out, l.ret)
	}
	if strings.Contains(e.stdout.String(), pass) {
		t.Fatal("the log holds the password")
	}
}
