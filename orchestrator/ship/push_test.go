package ship_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit/githttp"
	"github.com/filepath-dev/filepath/internal/testkit/gitssh"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/ship"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
)

type env struct {
	ctx     context.Context
	secrets *secrets.Store
	push    *ship.Pusher
	uid     string
	sid     string
	ws      string // the workspace
	root    string // the servers' repositories
}

func newEnv(t *testing.T) *env {
	st := storetest.New(t)
	e := &env{ctx: context.Background(), secrets: secrets.New(st.St, secrets.Config{Key: bytes.Repeat([]byte{5}, secrets.KeySize)}),
		ws: t.TempDir(), root: t.TempDir()}
	u := st.User(t, "alice")
	e.uid, e.sid = u.ID, st.Session(t, u.ID, "s").ID
	e.push = ship.New(ship.Config{Secrets: e.secrets, AllowPrivate: true})
	githttp.Git(t, e.ws, "init", "-q")
	return e
}

func (e *env) set(t *testing.T, name string, in secrets.NewSecret) {
	t.Helper()
	if _, err := e.secrets.Set(e.ctx, e.uid, "", name, in); err != nil {
		t.Fatal(err)
	}
}

// TestPushHTTPS: a node's commits pushed over HTTPS with a credential from
// the secret store land on the server's branch; the credential is found by
// the remote's host; a wrong password, a non-fast-forward and a hook's
// refusal fail with what the remote said; a rotated password is used at the
// next push; and the workspace's own hooks never run.
func TestPushHTTPS(t *testing.T) {
	e := newEnv(t)
	const pass = "s3cret-PASS-1"
	srv := githttp.Serve(t, e.root, "alice", pass)
	server := githttp.BareRepo(t, e.root, "repo.git")
	remote := srv.URL + "/repo.git"
	e.set(t, "corp", secrets.NewSecret{Kind: secrets.KindGitHTTPS, Host: "127.0.0.1", Username: "alice", Value: pass})

	// A hook the agent planted must not run on the host.
	hook := filepath.Join(e.ws, ".git", "hooks", "pre-push")
	marker := filepath.Join(t.TempDir(), "ran")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	first := githttp.Commit(t, e.ws, "a.txt", "one\n")
	res, err := e.push.Push(e.ctx, ship.PushRequest{UserID: e.uid, SessionID: e.sid, Dir: e.ws, RemoteURL: remote, Branch: "filepath/root"})
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	if res.Status != "created" || res.Commit != first || res.Credential != "corp" {
		t.Fatalf("result %+v", res)
	}
	if got := githttp.Git(t, server, "rev-parse", "refs/heads/filepath/root"); got != first {
		t.Fatalf("the server's branch is at %s, want %s", got, first)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the workspace's pre-push hook ran on the host")
	}

	second := githttp.Commit(t, e.ws, "b.txt", "two\n")
	if res, err = e.push.Push(e.ctx, ship.PushRequest{UserID: e.uid, Dir: e.ws, RemoteURL: remote, Branch: "filepath/root"}); err != nil || res.Status != "updated" {
		t.Fatalf("second push: %+v, %v", res, err)
	}
	if got := githttp.Git(t, server, "rev-parse", "refs/heads/filepath/root"); got != second {
		t.Fatalf("after the second push the branch is at %s", got)
	}

	// Rotated on the server: the old password fails, naming the credential.
	srv.SetPassword("s3cret-PASS-2")
	_, err = e.push.Push(e.ctx, ship.PushRequest{UserID: e.uid, Dir: e.ws, RemoteURL: remote, Branch: "other"})
	if orchestrator.ErrorField(err) != "credential" || !strings.Contains(err.Error(), "corp") {
		t.Fatalf("wrong password: %v", err)
	}
	if strings.Contains(err.Error(), pass) {
		t.Fatal("the error holds the password")
	}
	e.set(t, "corp", secrets.NewSecret{Kind: secrets.KindGitHTTPS, Host: "127.0.0.1", Username: "alice", Value: "s3cret-PASS-2"})
	if _, err = e.push.Push(e.ctx, ship.PushRequest{UserID: e.uid, Dir: e.ws, RemoteURL: remote, Branch: "other"}); err != nil {
		t.Fatalf("push with the rotated password: %v", err)
	}

	// Non-fast-forward: the workspace rewrote what the server has.
	githttp.Git(t, e.ws, "reset", "-q", "--hard", first)
	githttp.Commit(t, e.ws, "c.txt", "diverged\n")
	_, err = e.push.Push(e.ctx, ship.PushRequest{UserID: e.uid, Dir: e.ws, RemoteURL: remote, Branch: "filepath/root"})
	if orchestrator.ErrorCode(err) != orchestrator.EConflict || !strings.Contains(err.Error(), "non-fast-forward") ||
		!strings.Contains(err.Error(), second[:12]) || strings.Contains(err.Error(), "already exists") {
		t.Fatalf("non-fast-forward: %v", err)
	}
	if got := githttp.Git(t, server, "rev-parse", "refs/heads/filepath/root"); got != second {
		t.Fatalf("a refused push moved the branch to %s", got)
	}

	// A hook on the server refuses: its message is shown.
	if err := os.WriteFile(filepath.Join(server, "hooks", "pre-receive"), []byte("#!/bin/sh\necho 'branch protected-x is protected by policy' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = e.push.Push(e.ctx, ship.PushRequest{UserID: e.uid, Dir: e.ws, RemoteURL: remote, Branch: "protected-x"})
	if orchestrator.ErrorCode(err) != orchestrator.EConflict || !strings.Contains(err.Error(), "protected by policy") {
		t.Fatalf("hook refusal: %v", err)
	}
}

// TestPushRefusals: bad input is refused before anything is sent.
func TestPushRefusals(t *testing.T) {
	e := newEnv(t)
	githttp.Commit(t, e.ws, "a.txt", "one\n")
	for _, tt := range []struct {
		name, url, branch, cred, field string
	}{
		{"bad branch", "https://example.com/r.git", "-x", "", "branch"},
		{"dotdot branch", "https://example.com/r.git", "a..b", "", "branch"},
		{"password in URL", "https://u:p@example.com/r.git", "b", "", "remote_url"},
		{"file URL", "file:///tmp/r.git", "b", "", "remote_url"},
		{"no credential", "https://example.com/r.git", "b", "", "credential"},
		{"unknown credential", "https://example.com/r.git", "b", "nope", "credential"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.push.Push(e.ctx, ship.PushRequest{UserID: e.uid, Dir: e.ws, RemoteURL: tt.url, Branch: tt.branch, Credential: tt.cred})
			if orchestrator.ErrorField(err) != tt.field {
				t.Fatalf("%v, want an error about %s", err, tt.field)
			}
		})
	}
	strict := ship.New(ship.Config{Secrets: e.secrets})
	_, err := strict.Push(e.ctx, ship.PushRequest{UserID: e.uid, Dir: e.ws, RemoteURL: "https://127.0.0.1:1/r.git", Branch: "b"})
	if orchestrator.ErrorField(err) != "remote_url" || !strings.Contains(err.Error(), "--git-allow-private") {
		t.Fatalf("a loopback remote without --git-allow-private: %v", err)
	}
}

// TestPushSSH: over SSH with a key from the secret store, the first push to
// a host is refused naming the key it presents until the user trusts that
// fingerprint; then it lands; a host that presents another key later is
// refused.
func TestPushSSH(t *testing.T) {
	e := newEnv(t)
	key := gitssh.NewKey(t)
	srv := gitssh.Serve(t, e.root, key.Signer.PublicKey())
	server := githttp.BareRepo(t, e.root, "repo.git")
	e.set(t, "deploy", secrets.NewSecret{Kind: secrets.KindGitSSH, Host: "127.0.0.1", Value: key.Private})
	head := githttp.Commit(t, e.ws, "a.txt", "one\n")
	req := ship.PushRequest{UserID: e.uid, Dir: e.ws, RemoteURL: srv.URL("repo.git"), Branch: "feature"}

	hk, err := e.push.ProbeHostKey(e.ctx, e.uid, req.RemoteURL)
	if err != nil || hk.Pinned {
		t.Fatalf("probe: %+v, %v", hk, err)
	}
	_, err = e.push.Push(e.ctx, req)
	if orchestrator.ErrorCode(err) != orchestrator.EPreconditionFailed || !strings.Contains(err.Error(), hk.Fingerprint) {
		t.Fatalf("first push to a new host: %v", err)
	}
	req.TrustHostKey = hk.Fingerprint
	res, err := e.push.Push(e.ctx, req)
	if err != nil || res.Status != "created" || res.Credential != "deploy" {
		t.Fatalf("push trusting the key: %+v, %v", res, err)
	}
	if got := githttp.Git(t, server, "rev-parse", "refs/heads/feature"); got != head {
		t.Fatalf("the server's branch is at %s", got)
	}
	if hk, _ = e.push.ProbeHostKey(e.ctx, e.uid, req.RemoteURL); !hk.Pinned {
		t.Fatalf("after the push the key is not pinned: %+v", hk)
	}

	githttp.Commit(t, e.ws, "b.txt", "two\n")
	srv.ChangeHostKey()
	req.TrustHostKey = ""
	_, err = e.push.Push(e.ctx, req)
	if orchestrator.ErrorCode(err) != orchestrator.EConflict || !strings.Contains(err.Error(), "host key") {
		t.Fatalf("a changed host key: %v", err)
	}
	if got := githttp.Git(t, server, "rev-parse", "refs/heads/feature"); got != head {
		t.Fatalf("a push to a host with another key moved the branch to %s", got)
	}
	if hk, _ = e.push.ProbeHostKey(e.ctx, e.uid, req.RemoteURL); hk.Pinned || !hk.PinnedOther {
		t.Fatalf("probe after the key changed: %+v", hk)
	}
}

// bulk commits n files of incompressible bytes (size each) in dir.
func bulk(t *testing.T, dir string, n, size int) string {
	t.Helper()
	buf := make([]byte, size)
	for i := range n {
		if _, err := rand.Read(buf); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("blob-%03d.bin", i)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	githttp.Git(t, dir, "add", "-A")
	githttp.Git(t, dir, "commit", "-qm", "bulk")
	return githttp.Git(t, dir, "rev-parse", "HEAD")
}

// TestPushSendsOnlyWhatTheRemoteLacks: a push sends the objects the
// remote's branches do not reach, not the whole history again: a second
// push of one more commit, and a node's first push of a branch made on top
// of the remote's main, are small packs.
func TestPushSendsOnlyWhatTheRemoteLacks(t *testing.T) {
	e := newEnv(t)
	srv := githttp.Serve(t, e.root, "alice", "pw")
	githttp.BareRepo(t, e.root, "repo.git")
	remote := srv.URL + "/repo.git"
	e.set(t, "corp", secrets.NewSecret{Kind: secrets.KindGitHTTPS, Host: "127.0.0.1", Username: "alice", Value: "pw"})
	push := func(branch string) int64 {
		t.Helper()
		before := srv.ReceivedBytes()
		if _, err := e.push.Push(e.ctx, ship.PushRequest{UserID: e.uid, Dir: e.ws, RemoteURL: remote, Branch: branch}); err != nil {
			t.Fatalf("push %s: %v", branch, err)
		}
		n := srv.ReceivedBytes() - before
		t.Logf("push %s sent %d bytes", branch, n)
		return n
	}
	const history = 64 * 16 << 10 // 1 MiB of incompressible files
	bulk(t, e.ws, 64, 16<<10)
	if n := push("main"); n < history {
		t.Fatalf("the first push sent %d bytes, less than the history's %d: is the counter counting?", n, history)
	}
	githttp.Commit(t, e.ws, "a.txt", "one more line\n")
	if n := push("filepath/node"); n > 16<<10 {
		t.Fatalf("a new branch one commit past the remote's main sent %d bytes", n)
	}
	githttp.Commit(t, e.ws, "b.txt", "another line\n")
	if n := push("filepath/node"); n > 16<<10 {
		t.Fatalf("the second push of a branch sent %d bytes", n)
	}
}

// TestPushBranchExists: pushing a new branch name that the remote already
// has with other history (another clone's branch of that name) says the
// branch exists, at which commit, and names a free one to push to instead;
// it is not reported as a non-fast-forward of the workspace's own push.
func TestPushBranchExists(t *testing.T) {
	e := newEnv(t)
	srv := githttp.Serve(t, e.root, "alice", "pw")
	server := githttp.BareRepo(t, e.root, "repo.git")
	remote := srv.URL + "/repo.git"
	e.set(t, "corp", secrets.NewSecret{Kind: secrets.KindGitHTTPS, Host: "127.0.0.1", Username: "alice", Value: "pw"})

	// Someone else's work under the default name, and its "-2".
	other := t.TempDir()
	githttp.Git(t, other, "init", "-q")
	theirs := githttp.Commit(t, other, "theirs.txt", "not yours\n")
	githttp.Git(t, other, "push", "-q", server, "HEAD:refs/heads/filepath/root", "HEAD:refs/heads/filepath/root-2")

	githttp.Commit(t, e.ws, "a.txt", "one\n")
	_, err := e.push.Push(e.ctx, ship.PushRequest{UserID: e.uid, Dir: e.ws, RemoteURL: remote, Branch: "filepath/root"})
	msg := fmt.Sprint(err)
	if orchestrator.ErrorCode(err) != orchestrator.EConflict || orchestrator.ErrorField(err) != "branch" ||
		!strings.Contains(msg, "already exists") || !strings.Contains(msg, theirs[:12]) || !strings.Contains(msg, "filepath/root-3") ||
		strings.Contains(msg, "non-fast-forward") {
		t.Fatalf("a branch that exists: %v", err)
	}
	if got := githttp.Git(t, server, "rev-parse", "refs/heads/filepath/root"); got != theirs {
		t.Fatalf("the refused push moved the branch to %s", got)
	}
	if _, err := e.push.Push(e.ctx, ship.PushRequest{UserID: e.uid, Dir: e.ws, RemoteURL: remote, Branch: "filepath/root-3"}); err != nil {
		t.Fatalf("push to the name the error proposed: %v", err)
	}
}
