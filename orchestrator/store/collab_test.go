package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
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
			if got := store.NormalizeRepo(tt.in); got != tt.want {
				t.Fatalf("NormalizeRepo(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestMemories: kv_store semantics per user and repository: a key is set
// once and updated in place; search ranks by words in the key and text;
// another user and another repository see nothing; delete is the owner's.
func TestMemories(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	alice, bob := e.user(t, "alice"), e.user(t, "bob")
	const repo = "github.com/o/r"

	m1, err := e.s.SetMemory(ctx, alice.ID, repo, "tests", "run go test with -race", "s1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Second)
	if _, err := e.s.SetMemory(ctx, alice.ID, repo, "build", "make build; the race tests need cgo", "s1", "n1"); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Second)
	if _, err := e.s.SetMemory(ctx, alice.ID, repo, "style", "gofmt before every commit", "s1", "n1"); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Second)
	// The same key again: updated in place, created_at kept.
	up, err := e.s.SetMemory(ctx, alice.ID, repo, "tests", "run go test -race -count=1 on the packages you touch", "s2", "n2")
	if err != nil {
		t.Fatal(err)
	}
	if up.ID != m1.ID || !up.CreatedAt.Equal(m1.CreatedAt) || !up.UpdatedAt.After(m1.UpdatedAt) || up.NodeID != "n2" {
		t.Fatalf("upsert: %+v after %+v", up, m1)
	}
	all, err := e.s.Memories(ctx, alice.ID, ptr(repo), 0)
	if err != nil || len(all) != 3 || all[0].Key != "tests" {
		t.Fatalf("list (newest first): %+v, %v", all, err)
	}

	// "race" is in two texts; "tests" is a key: the key counts more.
	found, err := e.s.SearchMemories(ctx, alice.ID, repo, "Race TESTS?", 10)
	if err != nil || len(found) != 2 || found[0].Key != "tests" || found[1].Key != "build" || found[0].Score <= found[1].Score {
		t.Fatalf("search: %+v, %v", found, err)
	}
	if found, _ := e.s.SearchMemories(ctx, alice.ID, repo, "the a", 10); len(found) != 3 {
		t.Fatalf("a query of stop words only lists: %+v", found)
	}
	if found, _ := e.s.SearchMemories(ctx, alice.ID, repo, "kubernetes", 10); len(found) != 0 {
		t.Fatalf("no match: %+v", found)
	}
	// Other scopes see nothing.
	if found, _ := e.s.SearchMemories(ctx, bob.ID, repo, "race", 10); len(found) != 0 {
		t.Fatalf("another user found %+v", found)
	}
	if found, _ := e.s.SearchMemories(ctx, alice.ID, "", "race", 10); len(found) != 0 {
		t.Fatalf("the no-repository scope found %+v", found)
	}
	if err := e.s.DeleteMemory(ctx, bob.ID, m1.ID); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("bob deletes alice's memory: %v", err)
	}
	if err := e.s.DeleteMemory(ctx, alice.ID, m1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.GetMemory(ctx, alice.ID, m1.ID); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("deleted memory: %v", err)
	}

	for _, tt := range []struct{ key, text, field string }{
		{"", "x", "key"},
		{strings.Repeat("k", store.MaxMemoryKeyLen+1), "x", "key"},
		{"a\nb", "x", "key"},
		{"k", " ", "text"},
		{"k", strings.Repeat("x", store.MaxMemoryTextLen+1), "text"},
	} {
		_, err := e.s.SetMemory(ctx, alice.ID, repo, tt.key, tt.text, "", "")
		wantCode(t, err, orchestrator.EInvalid, tt.field)
	}
}

// TestApprovals: a request is stored with its pending record; a repeated
// request_id returns it; the answer appends its record; always allows the
// kind in the node's config; a second answer conflicts; the node's policy
// answers at once; expired requests are denied by the timeout.
func TestApprovals(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	u, other := e.user(t, "alice"), e.user(t, "bob")
	s := e.session(t, u.ID, "s")
	root := e.node(t, u.ID, s.ID, nil, "root")
	n := e.node(t, u.ID, s.ID, &root, "worker")

	in := store.NewApproval{RequestID: "r1", Action: "bash: curl https://example.com", Detail: "network", Kind: "bash", Timeout: time.Minute}
	a, created, err := e.s.RequestApproval(ctx, s.ID, n.ID, in)
	if err != nil || !created || a.Status != store.ApprovalPending || a.NodeName != "worker" || !a.ExpiresAt.Equal(a.CreatedAt.Add(time.Minute)) {
		t.Fatalf("request: %+v %v %v", a, created, err)
	}
	again, created, err := e.s.RequestApproval(ctx, s.ID, n.ID, in)
	if err != nil || created || again.ID != a.ID {
		t.Fatalf("same request_id again: %+v %v %v", again, created, err)
	}
	sys := systemApprovals(t, e, s.ID, n.ID)
	if len(sys) != 1 || sys[0].Approval.ID != a.ID || sys[0].Approval.Status != store.ApprovalPending || !strings.Contains(sys[0].Text, "worker asks") {
		t.Fatalf("records after the request: %+v", sys)
	}
	if list, err := e.s.Approvals(ctx, u.ID, s.ID, store.ApprovalPending, 0); err != nil || len(list) != 1 || list[0].ID != a.ID {
		t.Fatalf("pending list: %+v, %v", list, err)
	}
	if _, err := e.s.Approvals(ctx, other.ID, s.ID, "", 0); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("another user lists: %v", err)
	}
	if _, err := e.s.AnswerApproval(ctx, other.ID, s.ID, a.ID, store.Decision{Approve: true}, "bob"); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("another user answers: %v", err)
	}

	got, err := e.s.AnswerApproval(ctx, u.ID, s.ID, a.ID, store.Decision{Always: true}, "alice")
	if err != nil || got.Status != store.ApprovalApproved || !got.Always || got.AnsweredBy != "alice" || got.AnsweredAt == nil {
		t.Fatalf("answer: %+v, %v", got, err)
	}
	_, err = e.s.AnswerApproval(ctx, u.ID, s.ID, a.ID, store.Decision{}, "alice")
	if orchestrator.ErrorCode(err) != orchestrator.EConflict || !strings.Contains(err.Error(), "already approved by alice") {
		t.Fatalf("second answer: %v", err)
	}
	sys = systemApprovals(t, e, s.ID, n.ID)
	if len(sys) != 2 || sys[1].Approval.Status != store.ApprovalApproved || !sys[1].Approval.Always || sys[1].Approval.AnsweredBy != "alice" {
		t.Fatalf("records after the answer: %+v", sys)
	}
	node, _ := e.s.GetNode(ctx, u.ID, s.ID, n.ID)
	pol, err := store.ApprovalPolicies(node.Config)
	if err != nil || pol["bash"] != store.PolicyAllow {
		t.Fatalf("config after always: %s %v", node.Config, err)
	}

	// The policy answers: allow (just set) and deny.
	auto, created, err := e.s.RequestApproval(ctx, s.ID, n.ID, store.NewApproval{Action: "bash: wget x", Kind: "bash", Timeout: time.Minute})
	if err != nil || !created || auto.Status != store.ApprovalApproved || auto.AnsweredBy != protocol.AnsweredByPolicy {
		t.Fatalf("allowed kind: %+v %v", auto, err)
	}
	if _, err := e.s.UpdateNode(ctx, u.ID, s.ID, n.ID, store.NodePatch{Config: ptr(json.RawMessage(`{"approvals":{"network":"deny"}}`))}); err != nil {
		t.Fatal(err)
	}
	denied, _, err := e.s.RequestApproval(ctx, s.ID, n.ID, store.NewApproval{Action: "fetch", Kind: "network", Timeout: time.Minute})
	if err != nil || denied.Status != store.ApprovalDenied || denied.AnsweredBy != protocol.AnsweredByPolicy {
		t.Fatalf("denied kind: %+v %v", denied, err)
	}
	if _, err := e.s.UpdateNode(ctx, u.ID, s.ID, n.ID, store.NodePatch{Config: ptr(json.RawMessage(`{"approvals":{"bash":"sometimes"}}`))}); orchestrator.ErrorCode(err) != orchestrator.EInvalid {
		t.Fatalf("a bad policy in config: %v", err)
	}

	// Timeouts: only what is due is denied, once.
	late, _, err := e.s.RequestApproval(ctx, s.ID, root.ID, store.NewApproval{Action: "push", Kind: "git", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	later, _, _ := e.s.RequestApproval(ctx, s.ID, root.ID, store.NewApproval{Action: "push 2", Kind: "git", Timeout: time.Hour})
	if next, ok, err := e.s.NextApprovalExpiry(ctx); err != nil || !ok || !next.Equal(late.ExpiresAt) {
		t.Fatalf("next expiry %v %v %v, want %v", next, ok, err, late.ExpiresAt)
	}
	if n, err := e.s.ExpireApprovals(ctx, e.clock.Now()); err != nil || n != 0 {
		t.Fatalf("expire before due: %d %v", n, err)
	}
	e.clock.Add(time.Minute)
	if n, err := e.s.ExpireApprovals(ctx, e.clock.Now()); err != nil || n != 1 {
		t.Fatalf("expire when due: %d %v", n, err)
	}
	if n, _ := e.s.ExpireApprovals(ctx, e.clock.Now()); n != 0 {
		t.Fatalf("expired twice: %d", n)
	}
	got, _ = e.s.GetApproval(ctx, s.ID, late.ID)
	if got.Status != store.ApprovalDenied || got.AnsweredBy != protocol.AnsweredByTimeout {
		t.Fatalf("timed out: %+v", got)
	}
	sys = systemApprovals(t, e, s.ID, root.ID)
	if last := sys[len(sys)-1]; last.Approval.ID != late.ID || !strings.Contains(last.Text, "nobody answered within 1m0s") {
		t.Fatalf("timeout record: %+v", last)
	}
	if got, _ := e.s.GetApproval(ctx, s.ID, later.ID); got.Status != store.ApprovalPending {
		t.Fatalf("the later request: %+v", got)
	}

	// The agent withdraws its own pending request (denied, by "agent", with
	// its record); another node cannot, and an answered one conflicts.
	if _, err := e.s.WithdrawApproval(ctx, s.ID, n.ID, later.ID); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("another node withdraws: %v", err)
	}
	w, err := e.s.WithdrawApproval(ctx, s.ID, root.ID, later.ID)
	if err != nil || w.Status != store.ApprovalDenied || w.AnsweredBy != protocol.AnsweredByAgent || w.AnsweredAt == nil {
		t.Fatalf("withdraw: %+v %v", w, err)
	}
	sys = systemApprovals(t, e, s.ID, root.ID)
	if last := sys[len(sys)-1]; last.Approval.ID != later.ID || last.Approval.AnsweredBy != protocol.AnsweredByAgent || !strings.Contains(last.Text, "withdrawn") {
		t.Fatalf("withdraw record: %+v", last)
	}
	if _, err := e.s.WithdrawApproval(ctx, s.ID, root.ID, later.ID); orchestrator.ErrorCode(err) != orchestrator.EConflict {
		t.Fatalf("withdrawn twice: %v", err)
	}
	if _, err := e.s.AnswerApproval(ctx, u.ID, s.ID, later.ID, store.Decision{Approve: true}, "alice"); orchestrator.ErrorCode(err) != orchestrator.EConflict {
		t.Fatalf("approving a withdrawn request: %v", err)
	}

	for _, tt := range []struct {
		in    store.NewApproval
		field string
	}{
		{store.NewApproval{Action: " ", Timeout: time.Minute}, "action"},
		{store.NewApproval{Action: "x", Kind: "two words", Timeout: time.Minute}, "kind"},
		{store.NewApproval{Action: strings.Repeat("x", store.MaxApprovalAction+1), Timeout: time.Minute}, "action"},
	} {
		_, _, err := e.s.RequestApproval(ctx, s.ID, n.ID, tt.in)
		wantCode(t, err, orchestrator.EInvalid, tt.field)
	}
	if _, _, err := e.s.RequestApproval(ctx, s.ID, "nope", store.NewApproval{Action: "x", Timeout: time.Minute}); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("unknown node: %v", err)
	}
}

func systemApprovals(t *testing.T, e *env, sessionID, nodeID string) []protocol.SystemData {
	t.Helper()
	recs, err := e.s.Records(context.Background(), sessionID, 0, 1000, nodeID)
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

// TestAuditFromEvents: every tool and command that ends gets one audit row
// with its start time, found in the same batch or an earlier one, also when
// calls of the same tool nest or an end has no start.
func TestAuditFromEvents(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	u := e.user(t, "alice")
	s := e.session(t, u.ID, "s")
	n := e.node(t, u.ID, s.ID, nil, "root")
	other := e.node(t, u.ID, s.ID, &n, "child")
	t0 := e.clock.Now()
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	rec := func(node string, sec int, ev protocol.Event) protocol.Record {
		b, _ := json.Marshal(ev)
		return protocol.Record{NodeID: node, Kind: protocol.KindEvent, Data: b, At: at(sec)}
	}
	str := func(s string) *string { return &s }
	exit := func(v float64) *float64 { return &v }
	appendRecs := func(recs ...protocol.Record) {
		t.Helper()
		if _, err := e.s.AppendWithCursor(ctx, s.ID, n.ID, "c", recs...); err != nil {
			t.Fatal(err)
		}
	}
	// Batch 1: a read starts; a command runs entirely.
	appendRecs(
		rec(n.ID, 1, protocol.ToolEvent{Type: "tool", Name: "read_file", Path: str("a.go"), Status: "start"}),
		rec(n.ID, 2, protocol.CommandEvent{Type: "command", Cmd: "go test", Status: "start"}),
		rec(n.ID, 5, protocol.CommandEvent{Type: "command", Cmd: "go test", Status: "done", Exit: exit(0), Stdout: str("ok\n")}),
	)
	// Batch 2: a second read starts and ends; the first ends; another
	// node's read with no start; a failing command; text in between.
	appendRecs(
		rec(n.ID, 6, protocol.ToolEvent{Type: "tool", Name: "read_file", Path: str("b.go"), Status: "start"}),
		rec(n.ID, 7, protocol.TextEvent{Type: "text", Content: "hm"}),
		rec(n.ID, 8, protocol.ToolEvent{Type: "tool", Name: "read_file", Path: str("b.go"), Status: "done", Output: str("package b")}),
		rec(n.ID, 9, protocol.ToolEvent{Type: "tool", Name: "read_file", Path: str("a.go"), Status: "error", Output: str("no such file")}),
		rec(other.ID, 10, protocol.ToolEvent{Type: "tool", Name: "grep", Status: "done", Output: str(strings.Repeat("x", 5000))}),
		rec(n.ID, 11, protocol.CommandEvent{Type: "command", Cmd: "false", Status: "start"}),
		rec(n.ID, 12, protocol.CommandEvent{Type: "command", Cmd: "false", Status: "error", Exit: exit(1)}),
	)
	calls, err := e.s.ToolCalls(ctx, s.ID, n.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		source, name, params, result, err string
		start, end                        int
	}
	var got []row
	for _, c := range calls {
		got = append(got, row{c.Source, c.Name, string(c.Parameters), string(c.Result), c.Error,
			int(c.StartedAt.Sub(t0) / time.Second), int(c.CompletedAt.Sub(t0) / time.Second)})
		if c.DurationMS != c.CompletedAt.Sub(c.StartedAt).Milliseconds() || c.Seq == 0 {
			t.Errorf("row %+v: duration %d, seq %d", c, c.DurationMS, c.Seq)
		}
	}
	want := []row{ // newest first
		{"command", "command", `{"cmd":"false"}`, "", "exit 1", 11, 12},
		{"tool", "read_file", `{"path":"a.go"}`, "", "no such file", 1, 9},
		{"tool", "read_file", `{"path":"b.go"}`, `{"output":"package b"}`, "", 6, 8},
		{"command", "command", `{"cmd":"go test"}`, `{"exit":0,"stdout":"ok\n"}`, "", 2, 5},
	}
	if len(got) != len(want) {
		t.Fatalf("audit rows:\n%+v\nwant\n%+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	// The other node's row: no start (starts when it ends), output cut to its end.
	oc, err := e.s.ToolCalls(ctx, s.ID, other.ID, 0, 0)
	if err != nil || len(oc) != 1 || !oc[0].StartedAt.Equal(oc[0].CompletedAt) || len(oc[0].Result) > 2200 || !strings.Contains(string(oc[0].Result), "…x") {
		t.Fatalf("other node's audit: %+v %v", oc, err)
	}
	// Paging: before the newest id.
	page, err := e.s.ToolCalls(ctx, s.ID, n.ID, calls[1].ID, 2)
	if err != nil || len(page) != 2 || page[0].ID != calls[2].ID {
		t.Fatalf("page before %d: %+v %v", calls[1].ID, page, err)
	}
	// An API call row.
	if err := e.s.RecordToolCall(ctx, store.NewToolCall{SessionID: s.ID, NodeID: n.ID, Source: store.AuditAPI, Name: "list_children",
		Result: json.RawMessage(`{"children":2}`), StartedAt: at(20), CompletedAt: at(20).Add(15 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	calls, _ = e.s.ToolCalls(ctx, s.ID, n.ID, 0, 1)
	if len(calls) != 1 || calls[0].Source != store.AuditAPI || calls[0].DurationMS != 15 {
		t.Fatalf("api row: %+v", calls)
	}
	// Insert-only.
	if _, err := e.s.SQL().Exec(`UPDATE tool_calls SET name = 'x'`); err == nil {
		t.Fatal("tool_calls took an update")
	}
}
