package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/protocol"
)

// A child created with workspace "fork" works on its own copy: the diff
// route shows its changes with text diffs, merge applies them to the
// parent's workspace and lists the conflict; the user and the parent's key
// may merge, the child's own key and other users may not.
func TestForkDiffMergeAPI(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	alice, bob := e.account("alice"), e.account("bob")
	s, root := e.session(alice)
	sfs := e.files.Session(s.ID)
	put := func(fs *vfs.FS, p, content string) {
		t.Helper()
		if _, _, err := fs.WriteFile(ctx, p, []byte(content), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put(sfs, "/a.txt", "one\ntwo\nthree\n")
	put(sfs, "/both.txt", "base\n")

	child, fk := e.forkedChild(alice, s.ID, root.ID, "")
	cfs := e.files.Session(fk.ID)
	put(cfs, "/a.txt", "one\nTWO\nthree\n")
	put(cfs, "/new.txt", "new\n")
	put(cfs, "/both.txt", "child\n")
	put(sfs, "/both.txt", "parent\n")
	// the session's file API still shows the parent's workspace
	if r := e.do(http.MethodGet, "/api/v1/sessions/"+s.ID+"/fs/new.txt", alice.key, ""); r.status != http.StatusNotFound {
		t.Fatalf("the child's new file is in the parent's workspace: %d", r.status)
	}

	r := e.do(http.MethodGet, "/api/v1/sessions/"+s.ID+"/nodes/"+child.ID+"/diff", alice.key, "")
	if r.status != http.StatusOK {
		t.Fatalf("diff: %d %s", r.status, r.body)
	}
	var d vfs.ForkDiff
	if err := json.Unmarshal(r.body, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Changes) != 3 || d.Changes[0].Path != "/a.txt" || !strings.Contains(d.Changes[0].Diff, "-two\n+TWO\n") {
		t.Fatalf("diff: %s", r.body)
	}

	// who may merge
	childKey, rootKey := e.nodeKey(alice, s.ID, child.ID), e.nodeKey(alice, s.ID, root.ID)
	merge := "/api/v1/sessions/" + s.ID + "/nodes/" + child.ID + "/merge"
	if r := e.do(http.MethodPost, merge, childKey, ""); r.status != http.StatusForbidden {
		t.Fatalf("the child merged itself: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodPost, merge, bob.key, ""); r.status != http.StatusNotFound {
		t.Fatalf("another user merged: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/api/v1/sessions/"+s.ID+"/nodes/"+child.ID+"/diff", rootKey, ""); r.status != http.StatusOK {
		t.Fatalf("the parent's key cannot read the diff: %d %s", r.status, r.body)
	}
	r = e.do(http.MethodPost, merge, rootKey, "")
	if r.status != http.StatusOK {
		t.Fatalf("merge by the parent's key: %d %s", r.status, r.body)
	}
	var m vfs.MergeResult
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Applied) != 2 || len(m.Conflicts) != 1 || m.Conflicts[0].Path != "/both.txt" {
		t.Fatalf("merge: %s", r.body)
	}
	for p, want := range map[string]string{"/a.txt": "one\nTWO\nthree\n", "/new.txt": "new\n", "/both.txt": "parent\n"} {
		_, b, err := sfs.ReadAll(ctx, p)
		if err != nil || string(b) != want {
			t.Fatalf("%s after merge: %q %v", p, b, err)
		}
	}
	// the root is not forked; a fork needs a parent; a bad mode is named
	if r := e.do(http.MethodGet, "/api/v1/sessions/"+s.ID+"/nodes/"+root.ID+"/diff", alice.key, ""); r.status != http.StatusNotFound {
		t.Fatalf("diff of the shared root: %d", r.status)
	}
	r = e.do(http.MethodPost, "/api/v1/sessions/"+s.ID+"/nodes", alice.key, `{"agent_type":"shelley","workspace":"fork"}`)
	if code, _, field := r.errorOf(t); r.status != http.StatusUnprocessableEntity || field != "workspace" {
		t.Fatalf("fork without parent: %d %s %s", r.status, code, field)
	}
	r = e.do(http.MethodPost, "/api/v1/sessions/"+s.ID+"/nodes", alice.key, `{"agent_type":"shelley","parent_id":"`+root.ID+`","workspace":"copy"}`)
	if _, msg, field := r.errorOf(t); r.status != http.StatusUnprocessableEntity || field != "workspace" || !strings.Contains(msg, "shared or fork") {
		t.Fatalf("bad workspace: %d %s", r.status, msg)
	}
	// deleting the child deletes its fork
	if r := e.do(http.MethodDelete, "/api/v1/sessions/"+s.ID+"/nodes/"+child.ID, alice.key, ""); r.status != http.StatusNoContent {
		t.Fatalf("delete child: %d %s", r.status, r.body)
	}
	if _, err := e.files.ForkByID(ctx, fk.ID); err == nil {
		t.Fatal("the fork outlived its node")
	}
	// and the session list never shows a fork's workspace
	r = e.do(http.MethodGet, "/api/v1/sessions", alice.key, "")
	var list struct{ Data []protocol.Session }
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Data) != 1 {
		t.Fatalf("sessions: %s", r.body)
	}
}

// A forked child's own key reaches, through /fs, the workspace its
// /workspace shows: its fork. It neither reads the parent's changes made
// after the fork nor writes into the parent's workspace (before the fix
// /fs served the session's workspace to every node key).
func TestForkedNodeKeyFilesAreItsFork(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	alice := e.account("alice")
	s, root := e.session(alice)
	sfs := e.files.Session(s.ID)
	if _, _, err := sfs.WriteFile(ctx, "/a.txt", []byte("base\n"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	child, fk := e.forkedChild(alice, s.ID, root.ID, "")
	if _, _, err := sfs.WriteFile(ctx, "/a.txt", []byte("parent\n"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	childKey := e.nodeKey(alice, s.ID, child.ID)
	fsURL := "/api/v1/sessions/" + s.ID + "/fs/"
	r := e.do(http.MethodGet, fsURL+"a.txt", childKey, "")
	var got struct {
		SessionID string `json:"session_id"`
		Content   string `json:"content"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil || r.status != http.StatusOK {
		t.Fatalf("child reads /a.txt: %d %s", r.status, r.body)
	}
	if got.Content != "base\n" || got.SessionID != s.ID {
		t.Fatalf("child's /fs read %q (session_id %q), want its fork's %q in session %s", got.Content, got.SessionID, "base\n", s.ID)
	}
	if r := e.do(http.MethodPost, fsURL+"mine.txt", childKey, `{"content":"child\n"}`); r.status != http.StatusCreated {
		t.Fatalf("child writes /mine.txt: %d %s", r.status, r.body)
	}
	if _, _, err := sfs.ReadAll(ctx, "/mine.txt"); err == nil {
		t.Fatal("the forked child's /fs write reached the parent's workspace")
	}
	if _, b, err := e.files.Session(fk.ID).ReadAll(ctx, "/mine.txt"); err != nil || string(b) != "child\n" {
		t.Fatalf("the child's write is not in its fork: %q %v", b, err)
	}
	// the parent's key still reaches the session's workspace
	if r := e.do(http.MethodGet, fsURL+"a.txt", e.nodeKey(alice, s.ID, root.ID), ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"content":"parent\n"`) {
		t.Fatalf("root reads /a.txt: %d %s", r.status, r.body)
	}
}

// A node key merges a child's fork only into the workspace the key's node
// works on. A forked child moved under a sibling that works on its own
// fork keeps its origin (the session's workspace): the new parent's key
// may not merge it there, past its own fork.
func TestMergeByMovedParentRefused(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	alice := e.account("alice")
	s, root := e.session(alice)
	sfs := e.files.Session(s.ID)
	a, _ := e.forkedChild(alice, s.ID, root.ID, "a")
	b, fb := e.forkedChild(alice, s.ID, root.ID, "b")
	if _, _, err := e.files.Session(fb.ID).WriteFile(ctx, "/from-b.txt", []byte("b\n"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := e.do(http.MethodPost, "/api/v1/sessions/"+s.ID+"/nodes/"+b.ID+"/move", alice.key, `{"parent_id":"`+a.ID+`","sort_order":0}`); r.status != http.StatusOK {
		t.Fatalf("move b under a: %d %s", r.status, r.body)
	}
	r := e.do(http.MethodPost, "/api/v1/sessions/"+s.ID+"/nodes/"+b.ID+"/merge", e.nodeKey(alice, s.ID, a.ID), "")
	if r.status != http.StatusForbidden {
		t.Fatalf("a merged b (forked from the session's workspace) past its own fork: %d %s", r.status, r.body)
	}
	if _, _, err := sfs.ReadAll(ctx, "/from-b.txt"); err == nil {
		t.Fatal("b's change reached the session's workspace by a's key")
	}
	// the user still merges it where it came from
	if r := e.do(http.MethodPost, "/api/v1/sessions/"+s.ID+"/nodes/"+b.ID+"/merge", alice.key, ""); r.status != http.StatusOK {
		t.Fatalf("the user's merge: %d %s", r.status, r.body)
	}
	if _, got, err := sfs.ReadAll(ctx, "/from-b.txt"); err != nil || string(got) != "b\n" {
		t.Fatalf("after the user's merge: %q %v", got, err)
	}
}
