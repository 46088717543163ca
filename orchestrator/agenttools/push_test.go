package agenttools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit/githttp"
	"github.com/filepath-dev/filepath/internal/testkit/gitssh"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/agenttools"
	"github.com/filepath-dev/filepath/orchestrator/ship"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
)

// oneDir lends every node the same work tree.
type oneDir string

func (d oneDir) Workspace(context.Context, string) (string, func(), error) {
	return string(d), func() {}, nil
}

// TestRequestPush: an agent's request_push waits in the inbox showing the
// branch and the commits; denied, nothing is pushed and the agent is told;
// approved, the orchestrator pushes the commit the request showed (not one
// the agent made after) with the user's credential and the agent gets the
// result.
func TestRequestPush(t *testing.T) {
	root, ws := t.TempDir(), t.TempDir()
	var sec *secrets.Store
	f := newFixture(t, func(c *agenttools.Config) {
		sec = secrets.New(c.Store, secrets.Config{Key: bytes.Repeat([]byte{6}, secrets.KeySize)})
		c.Ship = ship.NewNodes(ship.New(ship.Config{Secrets: sec, AllowPrivate: true}), c.Sessions, oneDir(ws))
	})
	const pass = "tools-PASS-9"
	srv := githttp.Serve(t, root, "alice", pass)
	server := githttp.BareRepo(t, root, "repo.git")
	if _, err := sec.Set(f.ctx, f.alice.ID, "", "corp", secrets.NewSecret{Kind: secrets.KindGitHTTPS, Host: "127.0.0.1", Username: "alice", Value: pass}); err != nil {
		t.Fatal(err)
	}
	githttp.Git(t, ws, "init", "-q")
	shown := githttp.Commit(t, ws, "fix.go", "package fix\n")
	branchAt := func(b string) string {
		out, err := exec.Command("git", "--git-dir", server, "rev-parse", "--verify", "-q", "refs/heads/"+b).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	ask := func() string {
		t.Helper()
		a := f.call("child", "POST", "/api/v1/push", map[string]any{"remote_url": srv.URL + "/repo.git", "branch": "feature", "reason": "fixes the bug"})
		if a.status != 201 || a.body["status"] != "pending" || a.body["kind"] != agenttools.KindPush {
			t.Fatalf("request_push: %d %s", a.status, a.raw)
		}
		if d, _ := a.body["detail"].(string); !strings.Contains(d, "write fix.go") || !strings.Contains(d, "feature") || !strings.Contains(d, "fixes the bug") {
			t.Fatalf("the inbox shows %q", d)
		}
		return a.body["id"].(string)
	}

	id := ask()
	if p := f.call("child", "POST", "/api/v1/push/"+id, nil); p.status != 202 {
		t.Fatalf("before the answer: %d %s", p.status, p.raw)
	}
	if _, err := f.collab.AnswerApproval(f.ctx, f.alice.ID, f.sid, id, collab.Decision{}, "alice"); err != nil {
		t.Fatal(err)
	}
	if p := f.call("child", "POST", "/api/v1/push/"+id, nil); p.status != 403 || !strings.Contains(string(p.raw), "nothing was pushed") {
		t.Fatalf("denied: %d %s", p.status, p.raw)
	}
	if at := branchAt("feature"); at != "" {
		t.Fatalf("a denied push landed at %s", at)
	}

	id = ask()
	githttp.Commit(t, ws, "later.go", "package fix // not shown\n")
	if _, err := f.collab.AnswerApproval(f.ctx, f.alice.ID, f.sid, id, collab.Decision{Approve: true}, "alice"); err != nil {
		t.Fatal(err)
	}
	p := f.call("child", "POST", "/api/v1/push/"+id+"?wait=30s", nil)
	res, _ := p.body["result"].(map[string]any)
	if p.status != 200 || res == nil || res["commit"] != shown || res["status"] != "created" {
		t.Fatalf("approved: %d %s", p.status, p.raw)
	}
	if at := branchAt("feature"); at != shown {
		t.Fatalf("the server's branch is at %q, want the commit shown %s", at, shown)
	}
	if bytes.Contains(p.raw, []byte(pass)) {
		t.Fatal("the answer holds the password")
	}
	// Another agent cannot collect it.
	if o := f.call("sibling", "POST", "/api/v1/push/"+id, nil); o.status != 404 {
		t.Fatalf("another node collects the push: %d %s", o.status, o.raw)
	}
}

// TestRequestPullRequest: an agent's request_pull_request shows its title
// and body in the inbox; approved, the orchestrator opens it with the
// user's token and the agent gets its URL.
func TestRequestPullRequest(t *testing.T) {
	var sec *secrets.Store
	f := newFixture(t, func(c *agenttools.Config) {
		sec = secrets.New(c.Store, secrets.Config{Key: bytes.Repeat([]byte{6}, secrets.KeySize)})
		c.Ship = ship.NewNodes(ship.New(ship.Config{Secrets: sec, AllowPrivate: true}), c.Sessions, oneDir(t.TempDir()))
	})
	var sent map[string]string
	forge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/repos/o/r/pulls" || r.Header.Get("Authorization") != "Bearer ghp_tools" {
			w.WriteHeader(404)
			return
		}
		json.NewDecoder(r.Body).Decode(&sent)
		w.WriteHeader(201)
		w.Write([]byte(`{"number":3,"html_url":"https://github.com/o/r/pull/3"}`))
	}))
	defer forge.Close()
	if _, err := sec.Set(f.ctx, f.alice.ID, "", "gh", secrets.NewSecret{Kind: secrets.KindGitHubToken, Host: "github.com", Value: "ghp_tools"}); err != nil {
		t.Fatal(err)
	}
	a := f.call("child", "POST", "/api/v1/pull-request", map[string]any{"branch": "feature", "base": "main", "title": "Fix it", "body": "Tested with go test."})
	if a.status != 201 || a.body["kind"] != agenttools.KindPullRequest || !strings.Contains(a.body["detail"].(string), "Tested with go test.") {
		t.Fatalf("request_pull_request: %d %s", a.status, a.raw)
	}
	id := a.body["id"].(string)
	// The API base is the user's choice in the UI; the fake forge stands in
	// for api.github.com here through the approval's stored request.
	if _, err := f.st.SQL().ExecContext(f.ctx, `UPDATE approvals SET payload = json_set(payload, '$.api_base', ?) WHERE id = ?`, forge.URL, id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.collab.AnswerApproval(f.ctx, f.alice.ID, f.sid, id, collab.Decision{Approve: true}, "alice"); err != nil {
		t.Fatal(err)
	}
	p := f.call("child", "POST", "/api/v1/pull-request/"+id+"?wait=30s", nil)
	pr, _ := p.body["pull_request"].(map[string]any)
	if p.status != 200 || pr == nil || pr["url"] != "https://github.com/o/r/pull/3" {
		t.Fatalf("approved: %d %s", p.status, p.raw)
	}
	if sent["head"] != "feature" || sent["title"] != "Fix it" || sent["body"] != "Tested with go test." || sent["base"] != "main" {
		t.Fatalf("the forge got %v", sent)
	}
}

// TestRequestPushCredential: the agent may name the credential to push
// with (the inbox shows it; an unknown one is refused at once), and the
// person approving may choose another, which the push uses.
func TestRequestPushCredential(t *testing.T) {
	root, ws := t.TempDir(), t.TempDir()
	var sec *secrets.Store
	f := newFixture(t, func(c *agenttools.Config) {
		sec = secrets.New(c.Store, secrets.Config{Key: bytes.Repeat([]byte{6}, secrets.KeySize)})
		c.Ship = ship.NewNodes(ship.New(ship.Config{Secrets: sec, AllowPrivate: true}), c.Sessions, oneDir(ws))
	})
	srv := githttp.Serve(t, root, "alice", "right")
	githttp.BareRepo(t, root, "repo.git")
	for name, pass := range map[string]string{"stale": "wrong", "fresh": "right"} {
		if _, err := sec.Set(f.ctx, f.alice.ID, "", name, secrets.NewSecret{Kind: secrets.KindGitHTTPS, Host: "example.com", Username: "alice", Value: pass}); err != nil {
			t.Fatal(err)
		}
	}
	githttp.Git(t, ws, "init", "-q")
	githttp.Commit(t, ws, "fix.go", "package fix\n")
	remote := srv.URL + "/repo.git"

	if a := f.call("child", "POST", "/api/v1/push", map[string]any{"remote_url": remote, "credential": "nope"}); a.status != 422 || !strings.Contains(string(a.raw), "nope") {
		t.Fatalf("an unknown credential: %d %s", a.status, a.raw)
	}
	a := f.call("child", "POST", "/api/v1/push", map[string]any{"remote_url": remote, "branch": "feature", "credential": "stale"})
	if a.status != 201 || !strings.Contains(a.body["detail"].(string), "credential stale") {
		t.Fatalf("request_push naming a credential: %d %s", a.status, a.raw)
	}
	id := a.body["id"].(string)
	if _, err := f.collab.AnswerApproval(f.ctx, f.alice.ID, f.sid, id, collab.Decision{Approve: true, Credential: "fresh"}, "alice"); err != nil {
		t.Fatal(err)
	}
	p := f.call("child", "POST", "/api/v1/push/"+id+"?wait=30s", nil)
	res, _ := p.body["result"].(map[string]any)
	if p.status != 200 || res == nil || res["credential"] != "fresh" || res["status"] != "created" {
		t.Fatalf("approved with the person's credential: %d %s", p.status, p.raw)
	}

	// Without the person's choice, the agent's is used (and here refused).
	a = f.call("child", "POST", "/api/v1/push", map[string]any{"remote_url": remote, "branch": "other", "credential": "stale"})
	id = a.body["id"].(string)
	if _, err := f.collab.AnswerApproval(f.ctx, f.alice.ID, f.sid, id, collab.Decision{Approve: true}, "alice"); err != nil {
		t.Fatal(err)
	}
	if p := f.call("child", "POST", "/api/v1/push/"+id+"?wait=30s", nil); p.status != 422 || !strings.Contains(string(p.raw), "stale") {
		t.Fatalf("approved with the agent's credential: %d %s", p.status, p.raw)
	}

	// A credential is only for a request the orchestrator carries out.
	plain := f.call("child", "POST", "/api/v1/approvals", map[string]any{"action": "install a package"})
	if _, err := f.collab.AnswerApproval(f.ctx, f.alice.ID, f.sid, plain.body["id"].(string), collab.Decision{Approve: true, Credential: "fresh"}, "alice"); orchestrator.ErrorField(err) != "credential" {
		t.Fatalf("a credential chosen for a plain approval: %v", err)
	}
}

// TestRequestPushUntrustedHost: a push to an SSH host whose key nobody
// trusted yet says so in the inbox, and once approved fails telling the
// person to trust the host in the Push dialog; nothing is pushed.
func TestRequestPushUntrustedHost(t *testing.T) {
	root, ws := t.TempDir(), t.TempDir()
	var sec *secrets.Store
	f := newFixture(t, func(c *agenttools.Config) {
		sec = secrets.New(c.Store, secrets.Config{Key: bytes.Repeat([]byte{6}, secrets.KeySize)})
		c.Ship = ship.NewNodes(ship.New(ship.Config{Secrets: sec, AllowPrivate: true}), c.Sessions, oneDir(ws))
	})
	key := gitssh.NewKey(t)
	srv := gitssh.Serve(t, root, key.Signer.PublicKey())
	server := githttp.BareRepo(t, root, "repo.git")
	if _, err := sec.Set(f.ctx, f.alice.ID, "", "deploy", secrets.NewSecret{Kind: secrets.KindGitSSH, Host: "127.0.0.1", Value: key.Private}); err != nil {
		t.Fatal(err)
	}
	githttp.Git(t, ws, "init", "-q")
	githttp.Commit(t, ws, "fix.go", "package fix\n")

	a := f.call("child", "POST", "/api/v1/push", map[string]any{"remote_url": srv.URL("repo.git"), "branch": "feature"})
	if a.status != 201 || !strings.Contains(a.body["detail"].(string), "not trusted yet") || !strings.Contains(a.body["detail"].(string), "credential deploy") {
		t.Fatalf("request_push to an untrusted host: %d %s", a.status, a.raw)
	}
	id := a.body["id"].(string)
	if _, err := f.collab.AnswerApproval(f.ctx, f.alice.ID, f.sid, id, collab.Decision{Approve: true}, "alice"); err != nil {
		t.Fatal(err)
	}
	p := f.call("child", "POST", "/api/v1/push/"+id+"?wait=30s", nil)
	if p.status != 412 || !strings.Contains(string(p.raw), "Push dialog") || !strings.Contains(string(p.raw), "nothing was pushed") {
		t.Fatalf("approved push to an untrusted host: %d %s", p.status, p.raw)
	}
	if out, err := exec.Command("git", "--git-dir", server, "rev-parse", "--verify", "-q", "refs/heads/feature").Output(); err == nil {
		t.Fatalf("the branch landed at %s", out)
	}
}
