package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
)

// TestApprovalsInbox: the user lists a session's pending requests and
// answers them (the answer names the user); a node key cannot answer, nor
// can another user; a second answer is a conflict; always allows the kind
// in the node's config.
func TestApprovalsInbox(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	alice, bob := e.account("alice"), e.account("bob")
	s, root := e.session(alice)
	a1, _, err := e.collab.RequestApproval(ctx, s.ID, root.ID, collab.NewApproval{Action: "bash: curl x", Kind: "bash", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The inbox is oldest first, by creation time (milliseconds), then id:
	// the second request is made in a later millisecond.
	testkit.Eventually(t, time.Second, "the next millisecond", func() bool { return time.Now().Truncate(time.Millisecond).After(a1.CreatedAt) })
	a2, _, _ := e.collab.RequestApproval(ctx, s.ID, root.ID, collab.NewApproval{Action: "bash: git push", Kind: "bash", Timeout: time.Minute})
	base := "/api/v1/sessions/" + s.ID + "/approvals"

	var page struct{ Data []collab.Approval }
	r := e.do("GET", base+"?status=pending", alice.key, "")
	if r.status != 200 || json.Unmarshal(r.body, &page) != nil || len(page.Data) != 2 || page.Data[0].ID != a1.ID || page.Data[0].NodeName == "" {
		t.Fatalf("pending: %d %s", r.status, r.body)
	}
	if r := e.do("GET", base+"?status=maybe", alice.key, ""); r.status != 400 {
		t.Fatalf("bad status filter: %d %s", r.status, r.body)
	}
	nodeKey := e.nodeKey(alice, s.ID, root.ID)
	if r := e.do("POST", base+"/"+a1.ID, nodeKey, `{"decision":"approve"}`); r.status != 403 {
		t.Fatalf("a node key answers its own request: %d %s", r.status, r.body)
	}
	if r := e.do("GET", base, nodeKey, ""); r.status != 403 {
		t.Fatalf("a node key reads the inbox: %d %s", r.status, r.body)
	}
	if r := e.do("POST", base+"/"+a1.ID, bob.key, `{"decision":"approve"}`); r.status != 404 {
		t.Fatalf("another user answers: %d %s", r.status, r.body)
	}
	if r := e.do("POST", base+"/"+a1.ID, alice.key, `{"decision":"perhaps"}`); r.status != 422 {
		t.Fatalf("bad decision: %d %s", r.status, r.body)
	}
	var got collab.Approval
	r = e.do("POST", base+"/"+a1.ID, alice.key, `{"decision":"deny"}`)
	if r.status != 200 || json.Unmarshal(r.body, &got) != nil || got.Status != "denied" || got.AnsweredBy != "alice" {
		t.Fatalf("deny: %d %s", r.status, r.body)
	}
	if r := e.do("POST", base+"/"+a1.ID, alice.key, `{"decision":"approve"}`); r.status != 409 {
		t.Fatalf("answered twice: %d %s", r.status, r.body)
	}
	r = e.do("POST", base+"/"+a2.ID, alice.key, `{"decision":"always"}`)
	if r.status != 200 || json.Unmarshal(r.body, &got) != nil || got.Status != "approved" || !got.Always {
		t.Fatalf("always: %d %s", r.status, r.body)
	}
	n, _ := e.sessions.GetNode(ctx, alice.user.ID, s.ID, root.ID)
	if !strings.Contains(string(n.Config), `"bash":"allow"`) {
		t.Fatalf("config after always: %s", n.Config)
	}
	if r := e.do("GET", base+"?status=pending", alice.key, ""); r.status != 200 || !strings.Contains(string(r.body), `"data":[]`) {
		t.Fatalf("pending after the answers: %d %s", r.status, r.body)
	}

	// Approving a push the orchestrator does, the user chooses the
	// credential; a plain request has none to choose.
	a3, _, _ := e.collab.RequestApproval(ctx, s.ID, root.ID, collab.NewApproval{Action: "push", Kind: "push", Timeout: time.Minute, Payload: `{"branch":"b","credential":"agents-pick"}`})
	a4, _, _ := e.collab.RequestApproval(ctx, s.ID, root.ID, collab.NewApproval{Action: "install make", Kind: "install", Timeout: time.Minute})
	if r := e.do("POST", base+"/"+a4.ID, alice.key, `{"decision":"approve","credential":"deploy"}`); r.status != 422 || !strings.Contains(string(r.body), "credential") {
		t.Fatalf("a credential for a plain request: %d %s", r.status, r.body)
	}
	if r := e.do("POST", base+"/"+a3.ID, alice.key, `{"decision":"approve","credential":"deploy"}`); r.status != 200 {
		t.Fatalf("approve with a credential: %d %s", r.status, r.body)
	}
	if a, err := e.collab.GetApproval(ctx, s.ID, a3.ID); err != nil || a.Payload != `{"branch":"b","credential":"deploy"}` {
		t.Fatalf("the push's payload after the answer: %q, %v", a.Payload, err)
	}
}

// TestMemoriesAPI: the user lists every memory, one repository's, or a
// search in it, and deletes; another user sees none of them.
func TestMemoriesAPI(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	alice, bob := e.account("alice"), e.account("bob")
	m, err := e.collab.SetMemory(ctx, alice.user.ID, "github.com/o/r", "tests", "run with -race", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.collab.SetMemory(ctx, alice.user.ID, "", "notes", "scratch work", "", ""); err != nil {
		t.Fatal(err)
	}
	count := func(path, key string) int {
		t.Helper()
		var page struct{ Data []collab.Memory }
		r := e.do("GET", path, key, "")
		if r.status != 200 || json.Unmarshal(r.body, &page) != nil {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		return len(page.Data)
	}
	if n := count("/api/v1/memories", alice.key); n != 2 {
		t.Fatalf("all: %d", n)
	}
	if n := count("/api/v1/memories?repo=git@github.com:o/r.git", alice.key); n != 1 {
		t.Fatalf("one repository (any URL form): %d", n)
	}
	if n := count("/api/v1/memories?repo=", alice.key); n != 1 {
		t.Fatalf("no repository: %d", n)
	}
	if n := count("/api/v1/memories?repo=https://github.com/o/r&q=race", alice.key); n != 1 {
		t.Fatalf("search: %d", n)
	}
	if r := e.do("GET", "/api/v1/memories?q=race", alice.key, ""); r.status != 400 {
		t.Fatalf("search without repo: %d %s", r.status, r.body)
	}
	if n := count("/api/v1/memories", bob.key); n != 0 {
		t.Fatalf("bob sees %d", n)
	}
	if r := e.do("DELETE", "/api/v1/memories/"+m.ID, bob.key, ""); r.status != 404 {
		t.Fatalf("bob deletes: %d", r.status)
	}
	if r := e.do("DELETE", "/api/v1/memories/"+m.ID, alice.key, ""); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if n := count("/api/v1/memories", alice.key); n != 1 {
		t.Fatalf("after delete: %d", n)
	}
}

// TestNodeAudit: a node's audit through the API, newest first, paged.
func TestNodeAudit(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	alice := e.account("alice")
	s, root := e.session(alice)
	for i := range 3 {
		at := time.Unix(1000+int64(i), 0)
		if err := e.audit.RecordToolCall(ctx, audit.NewToolCall{SessionID: s.ID, NodeID: root.ID, Source: audit.SourceAPI,
			Name: "list_children", StartedAt: at, CompletedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	var page struct {
		Data       []audit.ToolCall
		NextBefore int64 `json:"next_before"`
	}
	r := e.do("GET", "/api/v1/sessions/"+s.ID+"/nodes/"+root.ID+"/audit?limit=2", alice.key, "")
	if r.status != 200 || json.Unmarshal(r.body, &page) != nil || len(page.Data) != 2 || page.NextBefore != page.Data[1].ID {
		t.Fatalf("first page: %d %s", r.status, r.body)
	}
	first := page.Data[0].ID
	r = e.do("GET", "/api/v1/sessions/"+s.ID+"/nodes/"+root.ID+"/audit?limit=2&before="+itoa(page.NextBefore), alice.key, "")
	if r.status != 200 || json.Unmarshal(r.body, &page) != nil || len(page.Data) != 1 || page.NextBefore != 0 || page.Data[0].ID >= first {
		t.Fatalf("second page: %d %s", r.status, r.body)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }
