package collab_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
)

func TestNormalizeRepo(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"https", "https://github.com/o/r.git", "github.com/o/r"},
		{"https user and case", "https://Git@GitHub.com/o/r/", "github.com/o/r"},
		{"ssh", "ssh://git@github.com/o/r.git", "github.com/o/r"},
		{"scp-like", "git@github.com:o/r.git", "github.com/o/r"},
		{"default port", "https://example.com:443/o/r", "example.com/o/r"},
		{"other port", "http://127.0.0.1:8080/o/r.git", "127.0.0.1:8080/o/r"},
		{"double slash", "https://example.com//o//r", "example.com/o/r"},
		{"path case kept", "https://example.com/O/R", "example.com/O/R"},
		{"empty", "  ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := collab.NormalizeRepo(tt.in); got != tt.want {
				t.Fatalf("NormalizeRepo(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestMemories: kv_store semantics per user and repository: a key is set
// once and updated in place; search ranks by words in the key and text;
// another user and another repository see nothing; delete is the owner's.
func TestMemories(t *testing.T) {
	e := storetest.New(t)
	ctx := context.Background()
	alice, bob := e.User(t, "alice"), e.User(t, "bob")
	const repo = "github.com/o/r"

	m1, err := e.Collab.SetMemory(ctx, alice.ID, repo, "tests", "run go test with -race", "s1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(time.Second)
	if _, err := e.Collab.SetMemory(ctx, alice.ID, repo, "build", "make build; the race tests need cgo", "s1", "n1"); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(time.Second)
	if _, err := e.Collab.SetMemory(ctx, alice.ID, repo, "style", "gofmt before every commit", "s1", "n1"); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(time.Second)
	// The same key again: updated in place, created_at kept.
	up, err := e.Collab.SetMemory(ctx, alice.ID, repo, "tests", "run go test -race -count=1 on the packages you touch", "s2", "n2")
	if err != nil {
		t.Fatal(err)
	}
	if up.ID != m1.ID || !up.CreatedAt.Equal(m1.CreatedAt) || !up.UpdatedAt.After(m1.UpdatedAt) || up.NodeID != "n2" {
		t.Fatalf("upsert: %+v after %+v", up, m1)
	}
	all, err := e.Collab.Memories(ctx, alice.ID, storetest.Ptr(repo), 0)
	if err != nil || len(all) != 3 || all[0].Key != "tests" {
		t.Fatalf("list (newest first): %+v, %v", all, err)
	}

	// "race" is in two texts; "tests" is a key: the key counts more.
	found, err := e.Collab.SearchMemories(ctx, alice.ID, repo, "Race TESTS?", 10)
	if err != nil || len(found) != 2 || found[0].Key != "tests" || found[1].Key != "build" || found[0].Score <= found[1].Score {
		t.Fatalf("search: %+v, %v", found, err)
	}
	if found, _ := e.Collab.SearchMemories(ctx, alice.ID, repo, "the a", 10); len(found) != 3 {
		t.Fatalf("a query of stop words only lists: %+v", found)
	}
	if found, _ := e.Collab.SearchMemories(ctx, alice.ID, repo, "kubernetes", 10); len(found) != 0 {
		t.Fatalf("no match: %+v", found)
	}
	// Other scopes see nothing.
	if found, _ := e.Collab.SearchMemories(ctx, bob.ID, repo, "race", 10); len(found) != 0 {
		t.Fatalf("another user found %+v", found)
	}
	if found, _ := e.Collab.SearchMemories(ctx, alice.ID, "", "race", 10); len(found) != 0 {
		t.Fatalf("the no-repository scope found %+v", found)
	}
	if err := e.Collab.DeleteMemory(ctx, bob.ID, m1.ID); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("bob deletes alice's memory: %v", err)
	}
	if err := e.Collab.DeleteMemory(ctx, alice.ID, m1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Collab.GetMemory(ctx, alice.ID, m1.ID); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("deleted memory: %v", err)
	}

	for _, tt := range []struct{ key, text, field string }{
		{"", "x", "key"},
		{strings.Repeat("k", collab.MaxMemoryKeyLen+1), "x", "key"},
		{"a\nb", "x", "key"},
		{"k", " ", "text"},
		{"k", strings.Repeat("x", collab.MaxMemoryTextLen+1), "text"},
	} {
		_, err := e.Collab.SetMemory(ctx, alice.ID, repo, tt.key, tt.text, "", "")
		storetest.WantCode(t, err, orchestrator.EInvalid, tt.field)
	}
}

// TestApprovals: a request is stored with its pending record; a repeated
// request_id returns it; the answer appends its record; always allows the
// kind in the node's config; a second answer conflicts; the node's policy
// answers at once; expired requests are denied by the timeout.
func TestApprovals(t *testing.T) {
	e := storetest.New(t)
	ctx := context.Background()
	u, other := e.User(t, "alice"), e.User(t, "bob")
	s := e.Session(t, u.ID, "s")
	root := e.Node(t, u.ID, s.ID, nil, "root")
	n := e.Node(t, u.ID, s.ID, &root, "worker")

	in := collab.NewApproval{RequestID: "r1", Action: "bash: curl https://example.com", Detail: "network", Kind: "bash", Timeout: time.Minute}
	a, created, err := e.Collab.RequestApproval(ctx, s.ID, n.ID, in)
	if err != nil || !created || a.Status != protocol.ApprovalPending || a.NodeName != "worker" || !a.ExpiresAt.Equal(a.CreatedAt.Add(time.Minute)) {
		t.Fatalf("request: %+v %v %v", a, created, err)
	}
	again, created, err := e.Collab.RequestApproval(ctx, s.ID, n.ID, in)
	if err != nil || created || again.ID != a.ID {
		t.Fatalf("same request_id again: %+v %v %v", again, created, err)
	}
	sys := systemApprovals(t, e, s.ID, n.ID)
	if len(sys) != 1 || sys[0].Approval.ID != a.ID || sys[0].Approval.Status != protocol.ApprovalPending || !strings.Contains(sys[0].Text, "worker asks") {
		t.Fatalf("records after the request: %+v", sys)
	}
	if list, err := e.Collab.Approvals(ctx, u.ID, s.ID, protocol.ApprovalPending, 0); err != nil || len(list) != 1 || list[0].ID != a.ID {
		t.Fatalf("pending list: %+v, %v", list, err)
	}
	if _, err := e.Collab.Approvals(ctx, other.ID, s.ID, "", 0); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("another user lists: %v", err)
	}
	if _, err := e.Collab.AnswerApproval(ctx, other.ID, s.ID, a.ID, collab.Decision{Approve: true}, "bob"); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("another user answers: %v", err)
	}

	got, err := e.Collab.AnswerApproval(ctx, u.ID, s.ID, a.ID, collab.Decision{Always: true}, "alice")
	if err != nil || got.Status != protocol.ApprovalApproved || !got.Always || got.AnsweredBy != "alice" || got.AnsweredAt == nil {
		t.Fatalf("answer: %+v, %v", got, err)
	}
	_, err = e.Collab.AnswerApproval(ctx, u.ID, s.ID, a.ID, collab.Decision{}, "alice")
	if orchestrator.ErrorCode(err) != orchestrator.EConflict || !strings.Contains(err.Error(), "already approved by alice") {
		t.Fatalf("second answer: %v", err)
	}
	sys = systemApprovals(t, e, s.ID, n.ID)
	if len(sys) != 2 || sys[1].Approval.Status != protocol.ApprovalApproved || !sys[1].Approval.Always || sys[1].Approval.AnsweredBy != "alice" {
		t.Fatalf("records after the answer: %+v", sys)
	}
	node, _ := e.Sessions.GetNode(ctx, u.ID, s.ID, n.ID)
	pol, err := sessions.ApprovalPolicies(node.Config)
	if err != nil || pol["bash"] != sessions.PolicyAllow {
		t.Fatalf("config after always: %s %v", node.Config, err)
	}

	// The policy answers: allow (just set) and deny.
	auto, created, err := e.Collab.RequestApproval(ctx, s.ID, n.ID, collab.NewApproval{Action: "bash: wget x", Kind: "bash", Timeout: time.Minute})
	if err != nil || !created || auto.Status != protocol.ApprovalApproved || auto.AnsweredBy != protocol.AnsweredByPolicy {
		t.Fatalf("allowed kind: %+v %v", auto, err)
	}
	if _, err := e.Sessions.UpdateNode(ctx, u.ID, s.ID, n.ID, sessions.NodePatch{Config: storetest.Ptr(json.RawMessage(`{"approvals":{"network":"deny"}}`))}); err != nil {
		t.Fatal(err)
	}
	denied, _, err := e.Collab.RequestApproval(ctx, s.ID, n.ID, collab.NewApproval{Action: "fetch", Kind: "network", Timeout: time.Minute})
	if err != nil || denied.Status != protocol.ApprovalDenied || denied.AnsweredBy != protocol.AnsweredByPolicy {
		t.Fatalf("denied kind: %+v %v", denied, err)
	}
	if _, err := e.Sessions.UpdateNode(ctx, u.ID, s.ID, n.ID, sessions.NodePatch{Config: storetest.Ptr(json.RawMessage(`{"approvals":{"bash":"sometimes"}}`))}); orchestrator.ErrorCode(err) != orchestrator.EInvalid {
		t.Fatalf("a bad policy in config: %v", err)
	}

	// Timeouts: only what is due is denied, once.
	late, _, err := e.Collab.RequestApproval(ctx, s.ID, root.ID, collab.NewApproval{Action: "push", Kind: "git", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	later, _, _ := e.Collab.RequestApproval(ctx, s.ID, root.ID, collab.NewApproval{Action: "push 2", Kind: "git", Timeout: time.Hour})
	if next, ok, err := e.Collab.NextApprovalExpiry(ctx); err != nil || !ok || !next.Equal(late.ExpiresAt) {
		t.Fatalf("next expiry %v %v %v, want %v", next, ok, err, late.ExpiresAt)
	}
	if n, err := e.Collab.ExpireApprovals(ctx, e.Clock.Now()); err != nil || n != 0 {
		t.Fatalf("expire before due: %d %v", n, err)
	}
	e.Clock.Advance(time.Minute)
	if n, err := e.Collab.ExpireApprovals(ctx, e.Clock.Now()); err != nil || n != 1 {
		t.Fatalf("expire when due: %d %v", n, err)
	}
	if n, _ := e.Collab.ExpireApprovals(ctx, e.Clock.Now()); n != 0 {
		t.Fatalf("expired twice: %d", n)
	}
	got, _ = e.Collab.GetApproval(ctx, s.ID, late.ID)
	if got.Status != protocol.ApprovalDenied || got.AnsweredBy != protocol.AnsweredByTimeout {
		t.Fatalf("timed out: %+v", got)
	}
	sys = systemApprovals(t, e, s.ID, root.ID)
	if last := sys[len(sys)-1]; last.Approval.ID != late.ID || !strings.Contains(last.Text, "nobody answered within 1m0s") {
		t.Fatalf("timeout record: %+v", last)
	}
	if got, _ := e.Collab.GetApproval(ctx, s.ID, later.ID); got.Status != protocol.ApprovalPending {
		t.Fatalf("the later request: %+v", got)
	}

	// The agent withdraws its own pending request (denied, by "agent", with
	// its record); another node cannot, and an answered one conflicts.
	if _, err := e.Collab.WithdrawApproval(ctx, s.ID, n.ID, later.ID); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("another node withdraws: %v", err)
	}
	w, err := e.Collab.WithdrawApproval(ctx, s.ID, root.ID, later.ID)
	if err != nil || w.Status != protocol.ApprovalDenied || w.AnsweredBy != protocol.AnsweredByAgent || w.AnsweredAt == nil {
		t.Fatalf("withdraw: %+v %v", w, err)
	}
	sys = systemApprovals(t, e, s.ID, root.ID)
	if last := sys[len(sys)-1]; last.Approval.ID != later.ID || last.Approval.AnsweredBy != protocol.AnsweredByAgent || !strings.Contains(last.Text, "withdrawn") {
		t.Fatalf("withdraw record: %+v", last)
	}
	if _, err := e.Collab.WithdrawApproval(ctx, s.ID, root.ID, later.ID); orchestrator.ErrorCode(err) != orchestrator.EConflict {
		t.Fatalf("withdrawn twice: %v", err)
	}
	if _, err := e.Collab.AnswerApproval(ctx, u.ID, s.ID, later.ID, collab.Decision{Approve: true}, "alice"); orchestrator.ErrorCode(err) != orchestrator.EConflict {
		t.Fatalf("approving a withdrawn request: %v", err)
	}

	for _, tt := range []struct {
		in    collab.NewApproval
		field string
	}{
		{collab.NewApproval{Action: " ", Timeout: time.Minute}, "action"},
		{collab.NewApproval{Action: "x", Kind: "two words", Timeout: time.Minute}, "kind"},
		{collab.NewApproval{Action: strings.Repeat("x", collab.MaxApprovalAction+1), Timeout: time.Minute}, "action"},
	} {
		_, _, err := e.Collab.RequestApproval(ctx, s.ID, n.ID, tt.in)
		storetest.WantCode(t, err, orchestrator.EInvalid, tt.field)
	}
	if _, _, err := e.Collab.RequestApproval(ctx, s.ID, "nope", collab.NewApproval{Action: "x", Timeout: time.Minute}); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("unknown node: %v", err)
	}
}

func systemApprovals(t *testing.T, e *storetest.Env, sessionID, nodeID string) []protocol.SystemData {
	t.Helper()
	recs, err := e.St.Records(context.Background(), sessionID, 0, 1000, nodeID)
	if err != nil {
		t.Fatal(err)
	}
	var out []protocol.SystemData
	for _, r := range recs {
		if r.Kind != protocol.KindSystem {
			continue
		}
		var d protocol.SystemData
		if err := json.Unmarshal(r.Data, &d); err != nil || d.Type != protocol.SystemApproval || d.Approval == nil {
			t.Fatalf("system record %s: %v", r.Data, err)
		}
		out = append(out, d)
	}
	return out
}
