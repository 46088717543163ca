package agenttools_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/agenttools"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// TestSpawnIsLoggedFirst: spawn appends the spawn event to the caller's log
// before the child exists, as a spawn line on stdout would, and answers the
// child's id; the child gets the task from its parent.
func TestSpawnIsLoggedFirst(t *testing.T) {
	f := newFixture(t)
	a := f.call("parent", "POST", "/api/v1/children", map[string]any{"name": "w1", "agent": "pi", "task": "count the files"})
	if a.status != 201 || a.body["name"] != "w1" || a.body["agent"] != "pi" || a.body["running"] != true {
		t.Fatalf("spawn: %d %s", a.status, a.raw)
	}
	id := a.body["id"].(string)
	recs, err := f.st.Records(f.ctx, f.sid, 0, 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	var spawnSeq, createdSeq int64
	for _, r := range recs {
		if r.Kind == protocol.KindEvent && r.NodeID == f.nodes["parent"].ID && strings.Contains(string(r.Data), `"type":"spawn"`) {
			spawnSeq = r.Seq
			if !strings.Contains(string(r.Data), `"task":"count the files"`) {
				t.Errorf("spawn event %s", r.Data)
			}
		}
		if r.Kind == protocol.KindNode && r.NodeID == id && createdSeq == 0 {
			createdSeq = r.Seq
		}
	}
	if spawnSeq == 0 || createdSeq == 0 || spawnSeq > createdSeq {
		t.Fatalf("spawn event seq %d, child created seq %d: the event must come first", spawnSeq, createdSeq)
	}
	var task protocol.MessageInput
	for _, r := range f.records(id) {
		if r.Kind == protocol.KindInput {
			json.Unmarshal(r.Data, &task)
		}
	}
	if task.From != protocol.FromParent || task.Content != "count the files" {
		t.Fatalf("child's task: %+v", task)
	}
	// The default agent is the caller's own; a bad agent type is refused
	// (the event was logged, and an error record says why).
	if a := f.call("parent", "POST", "/api/v1/children", map[string]any{"name": "w2"}); a.status != 201 || a.body["agent"] != "shelley" {
		t.Fatalf("spawn with the default agent: %d %s", a.status, a.raw)
	}
	if a := f.call("parent", "POST", "/api/v1/children", map[string]any{"name": "w3", "agent": "nope"}); a.status != 422 || !strings.Contains(a.errMessage(), "agent_type") {
		t.Fatalf("spawn of an unknown agent: %d %s", a.status, a.raw)
	}
	found := false
	for _, r := range f.records(f.nodes["parent"].ID) {
		found = found || r.Kind == protocol.KindError && strings.Contains(string(r.Data), `spawn \"w3\"`)
	}
	if !found {
		t.Fatal("no error record for the refused spawn")
	}
}

// TestSendMessage: to a descendant from parent, to the parent from system
// as a report; from_node names the sender; a stopped descendant is started,
// a stopped parent is a conflict; names work as well as ids.
func TestSendMessage(t *testing.T) {
	f := newFixture(t)
	if a := f.call("parent", "POST", "/api/v1/nodes/child/messages", map[string]any{"content": "focus on the parser"}); a.status != 202 || a.body["from"] != "parent" {
		t.Fatalf("to the child by name: %d %s", a.status, a.raw)
	}
	if a := f.call("child", "POST", "/api/v1/nodes/parent/messages", map[string]any{"content": "parser done"}); a.status != 202 || a.body["from"] != "system" {
		t.Fatalf("to the parent: %d %s", a.status, a.raw)
	}
	last := func(nodeID string) protocol.MessageInput {
		var m protocol.MessageInput
		for _, r := range f.records(nodeID) {
			if r.Kind == protocol.KindInput {
				m = protocol.MessageInput{}
				json.Unmarshal(r.Data, &m)
			}
		}
		return m
	}
	parent, child := f.nodes["parent"], f.nodes["child"]
	if m := last(child.ID); m.From != "parent" || m.Content != "focus on the parser" || m.FromNode == nil || m.FromNode.ID != parent.ID || m.FromNode.Name != "parent" {
		t.Fatalf("the child read %+v", m)
	}
	if m := last(parent.ID); m.From != "system" || m.Content != "child reports: parser done" || m.FromNode == nil || m.FromNode.ID != child.ID {
		t.Fatalf("the parent read %+v", m)
	}
	f.run.stop(child.ID)
	if a := f.call("parent", "POST", "/api/v1/nodes/"+child.ID+"/messages", map[string]any{"content": "wake up"}); a.status != 202 || !f.run.Running(child.ID) {
		t.Fatalf("to a stopped child: %d %s", a.status, a.raw)
	}
	f.run.stop(parent.ID)
	if a := f.call("child", "POST", "/api/v1/nodes/parent/messages", map[string]any{"content": "x"}); a.status != 409 || !strings.Contains(a.errMessage(), "not running") {
		t.Fatalf("to a stopped parent: %d %s", a.status, a.raw)
	}
	for _, tt := range []struct {
		body   any
		status int
		msg    string
	}{
		{map[string]any{}, 422, `"content" is required`},
		{map[string]any{"content": "  "}, 422, "content is required"},
		{map[string]any{"content": "x", "contents": "y"}, 422, `unknown field "contents"`},
		{map[string]any{"content": strings.Repeat("x", agenttools.MaxMessageBytes+1)}, 422, "larger than"},
	} {
		if a := f.call("root", "POST", "/api/v1/nodes/parent/messages", tt.body); a.status != tt.status || !strings.Contains(a.errMessage(), tt.msg) {
			t.Errorf("body %.60v: %d %s", tt.body, a.status, a.raw)
		}
	}
	if a := f.call("parent", "GET", "/api/v1/nope", nil); a.status != 404 || !strings.Contains(a.errMessage(), "no route GET /api/v1/nope") {
		t.Errorf("unknown route: %d %s", a.status, a.raw)
	}
	if a := f.call("parent", "DELETE", "/api/v1/children", nil); a.status != 405 {
		t.Errorf("wrong method: %d %s", a.status, a.raw)
	}
}

// TestWaitForChildren: the wait returns when the last child finishes (a
// node record, no polling), or when its timeout passes.
func TestWaitForChildren(t *testing.T) {
	f := newFixture(t)
	second := f.spawn("parent", "second")
	got := make(chan answer, 1)
	go func() { got <- f.call("parent", "GET", "/api/v1/children/wait?timeout=10m", nil) }()
	testkit.Eventually(t, 10*time.Second, "the wait to arm its deadline", func() bool { return f.clock.Armed(10 * time.Minute) })
	done := protocol.StateDone
	if _, err := f.sessions.PatchNode(f.ctx, f.sid, f.nodes["child"].ID, sessions.NodePatch{Status: &done}); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-got:
		t.Fatalf("returned with a child still running: %d %s", a.status, a.raw)
	case <-time.After(50 * time.Millisecond):
	}
	code := 0
	if _, err := f.sessions.PatchNode(f.ctx, f.sid, second.body["id"].(string), sessions.NodePatch{ExitCode: &code}); err != nil { // exited, status idle
		t.Fatal(err)
	}
	a := <-got
	if a.status != 200 || a.body["all_finished"] != true || a.body["timed_out"] != false || len(a.body["children"].([]any)) != 2 {
		t.Fatalf("wait: %d %s", a.status, a.raw)
	}
	// A wait that times out returns the states it has.
	if _, err := f.sessions.PatchNode(f.ctx, f.sid, f.nodes["child"].ID, sessions.NodePatch{Status: ptr(protocol.StateRunning)}); err != nil {
		t.Fatal(err)
	}
	go func() { got <- f.call("parent", "GET", "/api/v1/children/wait?timeout=30s", nil) }()
	testkit.Eventually(t, 10*time.Second, "the wait to arm its deadline", func() bool { return f.clock.Armed(30 * time.Second) })
	f.clock.Advance(30 * time.Second)
	a = <-got
	if a.status != 200 || a.body["all_finished"] != false || a.body["timed_out"] != true {
		t.Fatalf("timed-out wait: %d %s", a.status, a.raw)
	}
	// A node without children has nothing to wait for.
	if a := f.call("sibling", "GET", "/api/v1/children/wait", nil); a.status != 200 || a.body["all_finished"] != true {
		t.Fatalf("no children: %d %s", a.status, a.raw)
	}
}

func ptr[T any](v T) *T { return &v }

// TestApprovalLongPoll: a request is pending with its record; a repeated
// request_id gives the same request; a long poll returns as soon as the
// user answers; the MCP tool blocks until the answer; the sweeper denies a
// request nobody answers at its deadline.
func TestApprovalLongPoll(t *testing.T) {
	f := newFixture(t)
	body := map[string]any{"action": "bash: curl https://example.com", "detail": "network", "kind": "bash", "request_id": "req-1"}
	a := f.call("child", "POST", "/api/v1/approvals", body)
	if a.status != 201 || a.body["status"] != "pending" {
		t.Fatalf("request: %d %s", a.status, a.raw)
	}
	id := a.body["id"].(string)
	if again := f.call("child", "POST", "/api/v1/approvals", body); again.status != 200 || again.body["id"] != id {
		t.Fatalf("the same request again: %d %s", again.status, again.raw)
	}
	if p := f.call("child", "GET", "/api/v1/approvals/"+id, nil); p.status != 200 || p.body["status"] != "pending" {
		t.Fatalf("poll without wait: %d %s", p.status, p.raw)
	}
	got := make(chan answer, 1)
	go func() { got <- f.call("child", "GET", "/api/v1/approvals/"+id+"?wait=60s", nil) }()
	testkit.Eventually(t, 10*time.Second, "the poll to wait", func() bool { return f.clock.Armed(time.Minute) })
	if _, err := f.collab.AnswerApproval(f.ctx, f.alice.ID, f.sid, id, collab.Decision{Approve: true}, "alice"); err != nil {
		t.Fatal(err)
	}
	if p := <-got; p.status != 200 || p.body["status"] != "approved" || p.body["answered_by"] != "alice" {
		t.Fatalf("long poll: %d %s", p.status, p.raw)
	}

	// Over MCP the tool waits for the answer.
	cs, err := f.mcpSession("child")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	type mcpResult struct {
		out map[string]any
		err string
	}
	res := make(chan mcpResult, 1)
	go func() {
		out, e := f.mcpCall(cs, "request_approval", map[string]any{"action": "bash: git push", "kind": "bash"})
		res <- mcpResult{out, e}
	}()
	var pending []collab.Approval
	testkit.Eventually(t, 10*time.Second, "the MCP request", func() bool {
		pending, _ = f.collab.Approvals(f.ctx, f.alice.ID, f.sid, protocol.ApprovalPending, 0)
		return len(pending) == 1
	})
	if _, err := f.collab.AnswerApproval(f.ctx, f.alice.ID, f.sid, pending[0].ID, collab.Decision{}, "alice"); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != "" || r.out["status"] != "denied" {
		t.Fatalf("MCP request_approval: %v %q", r.out, r.err)
	}

	// The agent withdraws a request it no longer asks: a poll waiting on it
	// ends denied by "agent"; the user can no longer approve it.
	gone := f.call("child", "POST", "/api/v1/approvals", map[string]any{"action": "bash: npm install", "kind": "bash"})
	goneID := gone.body["id"].(string)
	go func() { got <- f.call("child", "GET", "/api/v1/approvals/"+goneID+"?wait=90s", nil) }()
	testkit.Eventually(t, 10*time.Second, "the poll to wait", func() bool { return f.clock.Armed(90 * time.Second) })
	if w := f.call("child", "DELETE", "/api/v1/approvals/"+goneID, nil); w.status != 200 || w.body["status"] != "denied" || w.body["answered_by"] != "agent" {
		t.Fatalf("withdraw: %d %s", w.status, w.raw)
	}
	if p := <-got; p.status != 200 || p.body["status"] != "denied" || p.body["answered_by"] != "agent" {
		t.Fatalf("the poll of a withdrawn request: %d %s", p.status, p.raw)
	}
	if _, err := f.collab.AnswerApproval(f.ctx, f.alice.ID, f.sid, goneID, collab.Decision{Approve: true}, "alice"); orchestrator.ErrorCode(err) != orchestrator.EConflict {
		t.Fatalf("approving a withdrawn request: %v", err)
	}

	// Nobody answers: denied at the deadline (one minute here).
	late := f.call("child", "POST", "/api/v1/approvals", map[string]any{"action": "rm -rf /tmp/x", "kind": "bash"})
	lateID := late.body["id"].(string)
	go func() { got <- f.call("child", "GET", "/api/v1/approvals/"+lateID+"?wait=2m", nil) }()
	testkit.Eventually(t, 10*time.Second, "the poll and the sweeper to wait", func() bool { return f.clock.Armed(2*time.Minute) && f.clock.Armed(time.Minute) })
	f.clock.Advance(time.Minute)
	p := <-got
	if p.status != 200 || p.body["status"] != "denied" || p.body["answered_by"] != "timeout" {
		t.Fatalf("after the deadline: %d %s", p.status, p.raw)
	}
}

// TestAuditOfAPICalls: every call, failed ones too, is a row of the
// caller's audit.
func TestAuditOfAPICalls(t *testing.T) {
	f := newFixture(t)
	f.call("parent", "GET", "/api/v1/children", nil)
	f.call("parent", "GET", "/api/v1/nodes/nobody/messages", nil)
	f.call("parent", "POST", "/api/v1/memories", map[string]any{"key": "k", "text": strings.Repeat("long ", 200)})
	calls, err := f.audit.ToolCalls(f.ctx, f.sid, f.nodes["parent"].ID, 0, 10)
	if err != nil || len(calls) != 3 {
		t.Fatalf("audit: %+v %v", calls, err)
	}
	mem, read, list := calls[0], calls[1], calls[2]
	if list.Name != "list_children" || list.Source != audit.SourceAPI || string(list.Result) != `{"children":1}` {
		t.Errorf("list row: %+v", list)
	}
	if read.Name != "read_child_messages" || !strings.Contains(read.Error, `no node "nobody"`) || !strings.Contains(string(read.Parameters), `"child":"nobody"`) {
		t.Errorf("failed read row: %+v", read)
	}
	if mem.Name != "memory_store" || len(mem.Parameters) > 700 {
		t.Errorf("memory row (text cut): %s", mem.Parameters)
	}
}

// TestMemoryAcrossSessions: a learning one node stores is found by a node
// of a later session of the same user on the same repository (its URL in
// another form), and not by a session on another repository, nor by
// another user's node.
func TestMemoryAcrossSessions(t *testing.T) {
	f := newFixture(t)
	if a := f.call("parent", "POST", "/api/v1/memories", map[string]any{"key": "build", "text": "use make build, not go build"}); a.status != 200 || a.body["repo"] != "github.com/o/r" {
		t.Fatalf("store: %d %s", a.status, a.raw)
	}
	later := func(url string) string {
		s := must(f.sessions.CreateSession(f.ctx, f.alice.ID, sessions.NewSession{Name: "later", GitRepoURL: &url}))
		n := must(f.sessions.CreateNode(f.ctx, f.alice.ID, s.ID, sessions.NewNode{AgentType: "pi"}))
		key, _, err := f.users.CreateNodeAPIKey(f.ctx, f.alice.ID, s.ID, n.ID)
		if err != nil {
			t.Fatal(err)
		}
		f.keys[url] = key
		return url
	}
	same, other := later("git@github.com:o/r"), later("https://github.com/o/elsewhere")
	if a := f.call(same, "GET", "/api/v1/memories?q=build", nil); a.status != 200 || !strings.Contains(string(a.raw), "use make build") {
		t.Fatalf("a later session of the same repository: %d %s", a.status, a.raw)
	}
	if a := f.call(other, "GET", "/api/v1/memories?q=build", nil); a.status != 200 || strings.Contains(string(a.raw), "use make build") {
		t.Fatalf("another repository: %d %s", a.status, a.raw)
	}
	if a := f.call("bobs", "GET", "/api/v1/memories?q=build", nil); a.status != 200 || strings.Contains(string(a.raw), "use make build") {
		t.Fatalf("another user: %d %s", a.status, a.raw)
	}
}

// TestSpawnInheritsAllowedPaths: a child an agent spawns (REST or MCP)
// under a node limited by config.allowed_paths gets the same limit, so that
// it cannot read what its parent may not and hand it back in its messages.
func TestSpawnInheritsAllowedPaths(t *testing.T) {
	f := newFixture(t)
	cfg := json.RawMessage(`{"allowed_paths":["/src"]}`)
	if _, err := f.sessions.UpdateNode(f.ctx, f.alice.ID, f.sid, f.nodes["parent"].ID, sessions.NodePatch{Config: &cfg}); err != nil {
		t.Fatal(err)
	}
	policy := func(id string) string {
		n, err := f.sessions.NodeByID(f.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			AllowedPaths []string `json:"allowed_paths"`
		}
		if err := json.Unmarshal(n.Config, &c); err != nil {
			t.Fatal(err)
		}
		return strings.Join(c.AllowedPaths, ",")
	}
	a := f.call("parent", "POST", "/api/v1/children", map[string]any{"name": "reader", "task": "cat /workspace/secret/key.txt"})
	if a.status != 201 {
		t.Fatalf("spawn: %d %s", a.status, a.raw)
	}
	if got := policy(a.body["id"].(string)); got != "/src" {
		t.Fatalf("REST-spawned child's allowed_paths %q, want the parent's /src", got)
	}
	cs, err := f.mcpSession("parent")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out, msg := f.mcpCall(cs, "spawn", map[string]any{"name": "reader2", "task": "t"})
	if msg != "" {
		t.Fatalf("mcp spawn: %s", msg)
	}
	if got := policy(out["id"].(string)); got != "/src" {
		t.Fatalf("MCP-spawned child's allowed_paths %q, want the parent's /src", got)
	}
	// And the grandchild a child spawns in turn.
	key, _, err := f.users.CreateNodeAPIKey(f.ctx, f.alice.ID, f.sid, a.body["id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	f.keys["reader"] = key
	g := f.call("reader", "POST", "/api/v1/children", map[string]any{"name": "deeper", "task": "t"})
	if g.status != 201 || policy(g.body["id"].(string)) != "/src" {
		t.Fatalf("grandchild: %d %s", g.status, g.raw)
	}
}

// TestSpawnNameClash: an agent's children have distinct names. Spawning a
// second child of a name is a 409 naming the clash (the spawn event stays
// logged, with an error record); a grandchild of the same name does not
// make the child ambiguous: the caller's own child wins.
func TestSpawnNameClash(t *testing.T) {
	f := newFixture(t)
	first := f.spawn("parent", "w1")
	again := f.call("parent", "POST", "/api/v1/children", map[string]any{"name": "w1", "task": "t"})
	if again.status != 409 || !strings.Contains(again.errMessage(), `"w1"`) {
		t.Fatalf("second child named w1: %d %s, want 409 naming it", again.status, again.raw)
	}
	// "child" (the fixture's) spawns its own "w1": parent's "w1" still
	// names its own child.
	if a := f.call("child", "POST", "/api/v1/children", map[string]any{"name": "w1", "task": "t"}); a.status != 201 {
		t.Fatalf("a grandchild named w1: %d %s", a.status, a.raw)
	}
	a := f.call("parent", "POST", "/api/v1/nodes/w1/messages", map[string]any{"content": "hello"})
	if a.status != 202 || a.body["to"] != first.body["id"] {
		t.Fatalf("message to w1: %d %s, want it to reach %v", a.status, a.raw, first.body["id"])
	}
}
