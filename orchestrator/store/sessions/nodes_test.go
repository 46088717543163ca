package sessions_test

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
)

func names(nodes []sessions.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

func byName(t *testing.T, nodes []sessions.Node) map[string]sessions.Node {
	t.Helper()
	m := map[string]sessions.Node{}
	for _, n := range nodes {
		m[n.Name] = n
	}
	return m
}

func TestCreateNode(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)

	root, err := e.Sessions.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{AgentType: "codex", Task: "build it"})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[a-z]+-[0-9]+$`).MatchString(root.Name) {
		t.Errorf("generated name %q, want adjective-number", root.Name)
	}
	if root.Model != "gpt-5.5" || root.Image != "filepath/agent-codex:latest" || root.Status != protocol.StateIdle ||
		root.ParentID != nil || string(root.Config) != "{}" || root.Total != 1 || root.Done != 0 {
		t.Errorf("root = %+v", root)
	}
	child, err := e.Sessions.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{Name: "kid", AgentType: "custom", Image: "me/agent:1",
		Model: "gpt-x", ParentID: &root.ID, Task: "sub", Config: json.RawMessage(`{"maxTokens": 5}`)})
	if err != nil {
		t.Fatal(err)
	}
	if child.Image != "me/agent:1" || child.Model != "gpt-x" || *child.ParentID != root.ID || string(child.Config) != `{"maxTokens":5}` {
		t.Errorf("child = %+v", child)
	}
	sess, _ := e.Sessions.GetSession(ctx, u.ID, s.ID)
	if sess.RootNodeID == nil || *sess.RootNodeID != root.ID {
		t.Fatalf("root_node_id = %v", sess.RootNodeID)
	}
	// The log: created + task input for each node, in order.
	recs, err := e.St.Records(ctx, s.ID, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	type kindOp struct{ kind, node, op string }
	var got []kindOp
	for _, r := range recs {
		var d struct {
			Op   string `json:"op"`
			From string `json:"from"`
		}
		_ = json.Unmarshal(r.Data, &d)
		got = append(got, kindOp{r.Kind, r.NodeID, d.Op + d.From})
	}
	want := []kindOp{{"node", root.ID, "created"}, {"input", root.ID, "user"}, {"node", child.ID, "created"}, {"input", child.ID, "parent"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("records = %+v, want %+v", got, want)
	}
	var in map[string]string
	_ = json.Unmarshal(recs[1].Data, &in)
	if !reflect.DeepEqual(in, map[string]string{"type": "message", "from": "user", "content": "build it"}) {
		t.Fatalf("task record = %s", recs[1].Data)
	}
	if pub := e.Pub.All(); len(pub) != 4 || pub[3].Seq != 4 || pub[0].SessionID != s.ID {
		t.Fatalf("published %+v", pub)
	}

	tests := []struct {
		name  string
		in    sessions.NewNode
		code  string
		field string
	}{
		{"unknown agent", sessions.NewNode{AgentType: "hal", ParentID: &root.ID}, orchestrator.EInvalid, "agent_type"},
		{"custom needs image", sessions.NewNode{AgentType: "custom", ParentID: &root.ID}, orchestrator.EInvalid, "image"},
		{"image only for custom", sessions.NewNode{AgentType: "pi", Image: "x:1", ParentID: &root.ID}, orchestrator.EInvalid, "image"},
		{"fork at the top", sessions.NewNode{AgentType: "pi", Workspace: protocol.WorkspaceFork}, orchestrator.EInvalid, "workspace"},
		{"unknown workspace", sessions.NewNode{AgentType: "pi", ParentID: &root.ID, Workspace: "copy"}, orchestrator.EInvalid, "workspace"},
		{"unknown parent", sessions.NewNode{AgentType: "pi", ParentID: storetest.Ptr("nope")}, orchestrator.EInvalid, "parent_id"},
		{"config not object", sessions.NewNode{AgentType: "pi", ParentID: &root.ID, Config: json.RawMessage(`[1]`)}, orchestrator.EInvalid, "config"},
		{"bad name", sessions.NewNode{Name: "a\nb", AgentType: "pi", ParentID: &root.ID}, orchestrator.EInvalid, "name"},
		{"unknown session", sessions.NewNode{AgentType: "pi"}, orchestrator.ENotFound, ""},
	}
	before, npub := storetest.Dump(t, e.St), len(e.Pub.All())
	defer func() {
		if storetest.Dump(t, e.St) != before || len(e.Pub.All()) != npub {
			t.Error("refused CreateNode changed the database or published")
		}
	}()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sid := s.ID
			if tt.code == orchestrator.ENotFound {
				sid = "missing"
			}
			_, err := e.Sessions.CreateNode(ctx, u.ID, sid, tt.in)
			storetest.WantCode(t, err, tt.code, tt.field)
		})
	}
}

// buildTree makes root → {a → {a1, a2}, b}, i.e. 3 levels.
func buildTree(t *testing.T, e *storetest.Env, userID, sessionID string) map[string]sessions.Node {
	t.Helper()
	root := e.Node(t, userID, sessionID, nil, "root")
	a := e.Node(t, userID, sessionID, &root, "a")
	e.Node(t, userID, sessionID, &a, "a1")
	e.Node(t, userID, sessionID, &a, "a2")
	e.Node(t, userID, sessionID, &root, "b")
	nodes, err := e.Sessions.Tree(context.Background(), userID, sessionID)
	if err != nil {
		t.Fatal(err)
	}
	return byName(t, nodes)
}

func TestTreeCounts(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	n := buildTree(t, e, u.ID, s.ID)
	for _, name := range []string{"a1", "b"} {
		if _, err := e.Sessions.UpdateNode(ctx, u.ID, s.ID, n[name].ID, sessions.NodePatch{Status: storetest.Ptr(protocol.StateDone)}); err != nil {
			t.Fatal(err)
		}
	}
	nodes, err := e.Sessions.Tree(ctx, u.ID, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(nodes), []string{"root", "a", "a1", "a2", "b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	want := map[string][2]int{"root": {2, 3}, "a": {1, 2}, "a1": {1, 1}, "a2": {0, 1}, "b": {1, 1}}
	for _, nd := range nodes {
		if got := [2]int{nd.Done, nd.Total}; got != want[nd.Name] {
			t.Errorf("%s done/total = %v, want %v", nd.Name, got, want[nd.Name])
		}
	}
	got, err := e.Sessions.GetNode(ctx, u.ID, s.ID, n["a"].ID)
	if err != nil || got.Done != 1 || got.Total != 2 {
		t.Fatalf("GetNode(a) = %+v, %v", got, err)
	}
}

// TestTreeRollups: a node carries its subtree's tokens and whether a
// descendant (not itself) is active, in the tree, GetNode and the "updated"
// records; the session carries the tokens of all its nodes.
func TestTreeRollups(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	n := buildTree(t, e, u.ID, s.ID) // root(a(a1, a2), b)
	for name, tok := range map[string]int64{"root": 1, "a": 10, "a1": 100, "a2": 1000, "b": 10000} {
		if _, err := e.Sessions.PatchNode(ctx, s.ID, n[name].ID, sessions.NodePatch{Tokens: storetest.Ptr(tok)}); err != nil {
			t.Fatal(err)
		}
	}
	upd, err := e.Sessions.PatchNode(ctx, s.ID, n["a2"].ID, sessions.NodePatch{Status: storetest.Ptr(protocol.StateThinking)})
	if err != nil {
		t.Fatal(err)
	}
	if upd.SubtreeTokens != 1000 || upd.DescendantActive {
		t.Fatalf("the patched leaf: subtree tokens %d, descendant active %v", upd.SubtreeTokens, upd.DescendantActive)
	}
	nodes, err := e.Sessions.Tree(ctx, u.ID, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	type roll struct {
		tokens int64
		active bool
	}
	want := map[string]roll{"root": {11111, true}, "a": {1110, true}, "a1": {100, false}, "a2": {1000, false}, "b": {10000, false}}
	for _, nd := range nodes {
		if got := (roll{nd.SubtreeTokens, nd.DescendantActive}); got != want[nd.Name] {
			t.Errorf("tree: %s = %+v, want %+v", nd.Name, got, want[nd.Name])
		}
		one, err := e.Sessions.GetNode(ctx, u.ID, s.ID, nd.ID)
		if err != nil || one.SubtreeTokens != nd.SubtreeTokens || one.DescendantActive != nd.DescendantActive {
			t.Errorf("GetNode(%s) = %d %v, %v; the tree says %d %v", nd.Name, one.SubtreeTokens, one.DescendantActive, err, nd.SubtreeTokens, nd.DescendantActive)
		}
	}
	// A running leaf makes its ancestors' descendants active, not itself.
	if _, err := e.Sessions.PatchNode(ctx, s.ID, n["a2"].ID, sessions.NodePatch{Status: storetest.Ptr(protocol.StateDone)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sessions.PatchNode(ctx, s.ID, n["b"].ID, sessions.NodePatch{Status: storetest.Ptr(protocol.StateRunning)}); err != nil {
		t.Fatal(err)
	}
	for name, active := range map[string]bool{"root": true, "a": false, "b": false} {
		got, err := e.Sessions.GetNode(ctx, u.ID, s.ID, n[name].ID)
		if err != nil || got.DescendantActive != active {
			t.Errorf("after b runs: %s descendant active %v, %v; want %v", name, got.DescendantActive, err, active)
		}
	}
	// Deleting a subtree takes its tokens out of its ancestors' roll-ups (the
	// session's tokens_used, metered by the gateway, keeps them: billing).
	if _, err := e.Sessions.DeleteNode(ctx, u.ID, s.ID, n["a"].ID); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Sessions.GetNode(ctx, u.ID, s.ID, n["root"].ID); err != nil || got.SubtreeTokens != 10001 {
		t.Fatalf("root's subtree tokens after delete %d, %v; want 10001", got.SubtreeTokens, err)
	}
}

// TestGeneration: a node starts at generation 1; the runner's patch moves
// it on with an "updated" record; 0 is refused.
func TestGeneration(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	root := e.Node(t, u.ID, s.ID, nil, "root")
	if root.Generation != 1 {
		t.Fatalf("new node generation %d", root.Generation)
	}
	before := len(e.Pub.All())
	got, err := e.Sessions.PatchNode(ctx, s.ID, root.ID, sessions.NodePatch{Generation: storetest.Ptr(2)})
	if err != nil || got.Generation != 2 {
		t.Fatalf("patch generation: %+v, %v", got, err)
	}
	recs := e.Pub.All()[before:]
	if len(recs) != 1 || recs[0].Kind != protocol.KindNode || !strings.Contains(string(recs[0].Data), `"generation":2`) {
		t.Fatalf("records of the patch: %+v", recs)
	}
	_, err = e.Sessions.PatchNode(ctx, s.ID, root.ID, sessions.NodePatch{Generation: storetest.Ptr(0)})
	storetest.WantCode(t, err, orchestrator.EInvalid, "generation")
}

func TestUpdateNode(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	root := e.Node(t, u.ID, s.ID, nil, "root")
	cfg := json.RawMessage(`{"systemPrompt":"be nice"}`)
	n, err := e.Sessions.UpdateNode(ctx, u.ID, s.ID, root.ID, sessions.NodePatch{Name: storetest.Ptr("boss"), Status: storetest.Ptr(protocol.StateThinking),
		Config: &cfg, ContextPct: storetest.Ptr(0.5), Tokens: storetest.Ptr(int64(42)), ContainerID: storetest.Ptr("c1"), ExitCode: storetest.Ptr(3)})
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "boss" || n.Status != "thinking" || string(n.Config) != string(cfg) || *n.ContextPct != 0.5 ||
		n.Tokens != 42 || n.ContainerID != "c1" || *n.ExitCode != 3 {
		t.Fatalf("updated = %+v", n)
	}
	last, _ := e.St.LastSeq(ctx, s.ID)
	// log_cursor only, or a no-op patch: stored, but no record.
	if _, err := e.Sessions.PatchNode(ctx, s.ID, root.ID, sessions.NodePatch{LogCursor: storetest.Ptr("2026-01-01T00:00:00Z"), Status: storetest.Ptr("thinking")}); err != nil {
		t.Fatal(err)
	}
	if l, _ := e.St.LastSeq(ctx, s.ID); l != last {
		t.Fatalf("log_cursor change appended a record (%d → %d)", last, l)
	}
	got, _ := e.Sessions.NodeByID(ctx, root.ID)
	if got.LogCursor != "2026-01-01T00:00:00Z" {
		t.Fatalf("log cursor = %q", got.LogCursor)
	}
	n, err = e.Sessions.PatchNode(ctx, s.ID, root.ID, sessions.NodePatch{ClearContextPct: true, ClearExitCode: true})
	if err != nil || n.ContextPct != nil || n.ExitCode != nil {
		t.Fatalf("clear = %+v, %v", n, err)
	}
	recs, _ := e.St.Records(ctx, s.ID, last, 0, root.ID)
	if len(recs) != 1 || recs[0].Kind != protocol.KindNode {
		t.Fatalf("records after %d = %+v", last, recs)
	}
	// StartedAt: set once, by the first MarkStarted; no record.
	last, _ = e.St.LastSeq(ctx, s.ID)
	n, err = e.Sessions.PatchNode(ctx, s.ID, root.ID, sessions.NodePatch{MarkStarted: true})
	if err != nil || n.StartedAt == nil || !n.StartedAt.Equal(e.Clock.Now().Truncate(time.Millisecond)) {
		t.Fatalf("mark started = %+v, %v", n.StartedAt, err)
	}
	first := *n.StartedAt
	e.Clock.Advance(time.Minute)
	if n, err = e.Sessions.PatchNode(ctx, s.ID, root.ID, sessions.NodePatch{MarkStarted: true}); err != nil || !n.StartedAt.Equal(first) {
		t.Fatalf("mark started again = %v, %v; want %v", n.StartedAt, err, first)
	}
	if got, _ := e.Sessions.NodeByID(ctx, root.ID); got.StartedAt == nil || !got.StartedAt.Equal(first) {
		t.Fatalf("stored started_at = %v", got.StartedAt)
	}
	if l, _ := e.St.LastSeq(ctx, s.ID); l != last {
		t.Fatalf("started_at change appended a record (%d → %d)", last, l)
	}
	if n, err = e.Sessions.PatchNode(ctx, s.ID, root.ID, sessions.NodePatch{ClearStarted: true}); err != nil || n.StartedAt != nil {
		t.Fatalf("clear started = %v, %v", n.StartedAt, err)
	}
	active, err := e.Sessions.ActiveNodes(ctx)
	if err != nil || len(active) != 1 || active[0].ID != root.ID {
		t.Fatalf("active = %+v, %v", active, err)
	}

	bad := json.RawMessage(`"x"`)
	tests := []struct {
		name  string
		p     sessions.NodePatch
		field string
	}{
		{"status", sessions.NodePatch{Status: storetest.Ptr("sleeping")}, "status"},
		{"config", sessions.NodePatch{Config: &bad}, "config"},
		{"context_pct high", sessions.NodePatch{ContextPct: storetest.Ptr(1.5)}, "context_pct"},
		{"context_pct negative", sessions.NodePatch{ContextPct: storetest.Ptr(-0.1)}, "context_pct"},
		{"tokens", sessions.NodePatch{Tokens: storetest.Ptr(int64(-1))}, "tokens"},
		{"empty name", sessions.NodePatch{Name: storetest.Ptr(" ")}, "name"},
	}
	before := storetest.Dump(t, e.St)
	defer func() {
		if storetest.Dump(t, e.St) != before {
			t.Error("refused UpdateNode changed the database")
		}
	}()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Sessions.UpdateNode(ctx, u.ID, s.ID, root.ID, tt.p)
			storetest.WantCode(t, err, orchestrator.EInvalid, tt.field)
		})
	}
	_, err = e.Sessions.UpdateNode(ctx, u.ID, s.ID, "missing", sessions.NodePatch{Name: storetest.Ptr("x")})
	storetest.WantCode(t, err, orchestrator.ENotFound, "")
}

func TestMoveNode(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	n := buildTree(t, e, u.ID, s.ID)
	c := e.Node(t, u.ID, s.ID, storetest.Ptr(n["root"]), "c")
	n["c"] = c

	order := func() []string {
		t.Helper()
		nodes, err := e.Sessions.Tree(ctx, u.ID, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{} // sort_order must be contiguous per parent
		for _, nd := range nodes {
			if nd.ParentID == nil {
				continue
			}
			if nd.SortOrder != seen[*nd.ParentID] {
				t.Fatalf("node %s sort_order %d, want %d (contiguous)", nd.Name, nd.SortOrder, seen[*nd.ParentID])
			}
			seen[*nd.ParentID]++
		}
		return names(nodes)
	}

	tests := []struct {
		name   string
		node   string
		parent string
		pos    int
		want   []string
	}{
		{"reorder to front", "c", "", 0, []string{"root", "c", "a", "a1", "a2", "b"}},
		{"reorder past end clamps", "c", "", 99, []string{"root", "a", "a1", "a2", "b", "c"}},
		{"first down by one", "a", "", 1, []string{"root", "b", "a", "a1", "a2", "c"}},
		{"back up", "a", "", 0, []string{"root", "a", "a1", "a2", "b", "c"}},
		{"reparent", "b", "a", 1, []string{"root", "a", "a1", "b", "a2", "c"}},
		{"reparent deeper", "c", "a1", 0, []string{"root", "a", "a1", "c", "b", "a2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var parent *string
			if tt.parent != "" {
				parent = storetest.Ptr(n[tt.parent].ID)
			}
			got, err := e.Sessions.MoveNode(ctx, u.ID, s.ID, n[tt.node].ID, parent, tt.pos)
			if err != nil {
				t.Fatal(err)
			}
			if tt.parent != "" && *got.ParentID != n[tt.parent].ID {
				t.Fatalf("parent %v", *got.ParentID)
			}
			if o := order(); !reflect.DeepEqual(o, tt.want) {
				t.Fatalf("order %v, want %v", o, tt.want)
			}
		})
	}
	last, _ := e.St.LastSeq(ctx, s.ID)
	unchanged := storetest.Snapshot(t, e.St)
	errs := []struct {
		name   string
		node   string
		parent string
		pos    int
		field  string
	}{
		{"under itself", "a", "a", 0, "parent_id"},
		{"under descendant", "a", "c", 0, "parent_id"},
		{"root", "root", "a", 0, "parent_id"},
		{"negative", "b", "", -1, "sort_order"},
		{"unknown parent", "b", "?", 0, "parent_id"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			var parent *string
			if tt.parent == "?" {
				parent = storetest.Ptr("missing")
			} else if tt.parent != "" {
				parent = storetest.Ptr(n[tt.parent].ID)
			}
			_, err := e.Sessions.MoveNode(ctx, u.ID, s.ID, n[tt.node].ID, parent, tt.pos)
			storetest.WantCode(t, err, orchestrator.EInvalid, tt.field)
		})
	}
	unchanged("a refused move")
	// The moved record and the renumbered siblings' records are published.
	if _, err := e.Sessions.MoveNode(ctx, u.ID, s.ID, n["a2"].ID, storetest.Ptr(n["root"].ID), 0); err != nil {
		t.Fatal(err)
	}
	recs, _ := e.St.Records(ctx, s.ID, last, 0, "")
	if len(recs) == 0 {
		t.Fatal("no records for move")
	}
	var first protocol.NodeChange
	_ = json.Unmarshal(recs[0].Data, &first)
	if first.Op != protocol.OpMoved || first.Node.ID != n["a2"].ID || first.Node.SortOrder != 0 {
		t.Fatalf("first record %s", recs[0].Data)
	}
	for _, r := range recs[1:] {
		var ch protocol.NodeChange
		_ = json.Unmarshal(r.Data, &ch)
		if ch.Op != protocol.OpUpdated {
			t.Fatalf("record %s", r.Data)
		}
	}
	order()
}

func TestDeleteNode(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	n := buildTree(t, e, u.ID, s.ID)

	ids, err := e.Sessions.DeleteNode(ctx, u.ID, s.ID, n["a"].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 || ids[0] != n["a"].ID {
		t.Fatalf("removed %v", ids)
	}
	nodes, _ := e.Sessions.Tree(ctx, u.ID, s.ID)
	if got := names(nodes); !reflect.DeepEqual(got, []string{"root", "b"}) {
		t.Fatalf("left %v", got)
	}
	if b := byName(t, nodes)["b"]; b.SortOrder != 0 {
		t.Fatalf("b not renumbered: %d", b.SortOrder)
	}
	recs, _ := e.St.Records(ctx, s.ID, 0, 0, n["a"].ID)
	var del protocol.NodeChange
	if err := json.Unmarshal(recs[len(recs)-1].Data, &del); err != nil || del.Op != protocol.OpDeleted || len(del.IDs) != 3 {
		t.Fatalf("deleted record %s", recs[len(recs)-1].Data)
	}

	if _, err := e.Sessions.DeleteNode(ctx, u.ID, s.ID, n["root"].ID); err != nil {
		t.Fatal(err)
	}
	sess, _ := e.Sessions.GetSession(ctx, u.ID, s.ID)
	if sess.RootNodeID != nil || sess.NodeCount != 0 {
		t.Fatalf("after root delete: %+v", sess)
	}
	// A new root may be created now.
	e.Node(t, u.ID, s.ID, nil, "new-root")
	_, err = e.Sessions.DeleteNode(ctx, u.ID, s.ID, n["b"].ID)
	storetest.WantCode(t, err, orchestrator.ENotFound, "")
}

// TestMaxNodes: a session cannot grow past its agent limit; the refusal
// names the limit and changes nothing.
func TestMaxNodes(t *testing.T) {
	ctx := context.Background()
	s := storetest.NewWith(t, storetest.Options{Sessions: sessions.Config{MaxNodes: 3}})
	u, _ := s.Users.CreateUser(ctx, "alice", false)
	sess, _ := s.Sessions.CreateSession(ctx, u.ID, sessions.NewSession{Name: "s"})
	root, err := s.Sessions.CreateNode(ctx, u.ID, sess.ID, sessions.NewNode{AgentType: "codex"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := s.Sessions.CreateNode(ctx, u.ID, sess.ID, sessions.NewNode{AgentType: "codex", ParentID: &root.ID}); err != nil {
			t.Fatal(err)
		}
	}
	last, _ := s.St.LastSeq(ctx, sess.ID)
	_, err = s.Sessions.CreateNode(ctx, u.ID, sess.ID, sessions.NewNode{AgentType: "codex", ParentID: &root.ID})
	storetest.WantCode(t, err, orchestrator.EConflict, "")
	if err == nil || !regexp.MustCompile(`limit of 3 agents`).MatchString(err.Error()) {
		t.Fatalf("err = %v, want the limit named", err)
	}
	nodes, _ := s.Sessions.Tree(ctx, u.ID, sess.ID)
	if after, _ := s.St.LastSeq(ctx, sess.ID); len(nodes) != 3 || after != last {
		t.Fatalf("refused create changed the session: %d nodes, seq %d → %d", len(nodes), last, after)
	}
}

// TestSeveralTopLevelNodes: a session may have several top-level nodes
// (issue 27); root_node_id names the first, and when it is deleted the
// next one.
func TestSeveralTopLevelNodes(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	first := e.Node(t, u.ID, s.ID, nil, "first")
	second := e.Node(t, u.ID, s.ID, nil, "second")
	e.Node(t, u.ID, s.ID, &second, "kid")
	if second.ParentID != nil || second.SortOrder != 1 {
		t.Fatalf("second = %+v", second)
	}
	_, err := e.Sessions.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{Name: "first", AgentType: "pi"})
	storetest.WantCode(t, err, orchestrator.EConflict, "name")
	sess, _ := e.Sessions.GetSession(ctx, u.ID, s.ID)
	if sess.RootNodeID == nil || *sess.RootNodeID != first.ID {
		t.Fatalf("root_node_id = %v, want the first top-level node", sess.RootNodeID)
	}
	nodes, _ := e.Sessions.Tree(ctx, u.ID, s.ID)
	if got := names(nodes); !reflect.DeepEqual(got, []string{"first", "second", "kid"}) {
		t.Fatalf("tree %v", got)
	}
	if _, err := e.Sessions.DeleteNode(ctx, u.ID, s.ID, first.ID); err != nil {
		t.Fatal(err)
	}
	sess, _ = e.Sessions.GetSession(ctx, u.ID, s.ID)
	if sess.RootNodeID == nil || *sess.RootNodeID != second.ID {
		t.Fatalf("after deleting the root, root_node_id = %v, want the next top-level node", sess.RootNodeID)
	}
}

// TestPausedNode: a paused node shows status paused whatever its agent's
// status is, does not count as done or active, and shows its status again
// once resumed; paused is never set as a status.
func TestPausedNode(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	root := e.Node(t, u.ID, s.ID, nil, "root")
	kid := e.Node(t, u.ID, s.ID, &root, "kid")
	if _, err := e.Sessions.PatchNode(ctx, s.ID, kid.ID, sessions.NodePatch{Status: storetest.Ptr(protocol.StateDone)}); err != nil {
		t.Fatal(err)
	}
	got, err := e.Sessions.PatchNode(ctx, s.ID, kid.ID, sessions.NodePatch{Paused: storetest.Ptr(true)})
	if err != nil || got.Status != protocol.NodePaused {
		t.Fatalf("paused: %+v, %v", got, err)
	}
	recs, _ := e.St.Records(ctx, s.ID, 0, 0, kid.ID)
	var ch protocol.NodeChange
	if err := json.Unmarshal(recs[len(recs)-1].Data, &ch); err != nil || ch.Node.Status != protocol.NodePaused {
		t.Fatalf("the pause's node record %s", recs[len(recs)-1].Data)
	}
	r, _ := e.Sessions.GetNode(ctx, u.ID, s.ID, root.ID)
	if r.Done != 0 || r.Total != 1 {
		t.Fatalf("a paused leaf counts as done: %d/%d", r.Done, r.Total)
	}
	if _, err := e.Sessions.PatchNode(ctx, s.ID, kid.ID, sessions.NodePatch{Status: storetest.Ptr(protocol.StateRunning)}); err != nil {
		t.Fatal(err)
	}
	if r, _ = e.Sessions.GetNode(ctx, u.ID, s.ID, root.ID); r.DescendantActive {
		t.Fatal("a paused node counts as active")
	}
	if got, _ = e.Sessions.PatchNode(ctx, s.ID, kid.ID, sessions.NodePatch{Paused: storetest.Ptr(false)}); got.Status != protocol.StateRunning {
		t.Fatalf("resumed: status %q, want the agent's (running)", got.Status)
	}
	_, err = e.Sessions.PatchNode(ctx, s.ID, kid.ID, sessions.NodePatch{Status: storetest.Ptr(protocol.NodePaused)})
	storetest.WantCode(t, err, orchestrator.EInvalid, "status")
	for _, st := range []string{protocol.NodeStopped, protocol.NodeLost} {
		if got, err := e.Sessions.PatchNode(ctx, s.ID, kid.ID, sessions.NodePatch{Status: storetest.Ptr(st)}); err != nil || got.Status != st {
			t.Fatalf("status %s: %+v, %v", st, got, err)
		}
	}
}

// TestNodeWorkspace: a node says whether it works on a fork.
func TestNodeWorkspace(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	root := e.Node(t, u.ID, s.ID, nil, "root")
	fork, err := e.Sessions.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{Name: "f", AgentType: "pi", ParentID: &root.ID, Workspace: protocol.WorkspaceFork})
	if err != nil {
		t.Fatal(err)
	}
	if root.Workspace != protocol.WorkspaceShared || fork.Workspace != protocol.WorkspaceFork {
		t.Fatalf("workspaces %q %q", root.Workspace, fork.Workspace)
	}
	if n, _ := e.Sessions.NodeByID(ctx, fork.ID); n.Workspace != protocol.WorkspaceFork {
		t.Fatalf("read back %q", n.Workspace)
	}
}
