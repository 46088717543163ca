package api_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// nodeTree is a session with a tree: root → me → grandchild, root → sibling.
// me has a key and config.allowed_paths ["/src"].
type nodeTree struct {
	e                             *testEnv
	a                             account
	sid                           string
	root, me, grandchild, sibling sessions.Node
	key                           string // me's node key
}

func newNodeTree(t *testing.T) *nodeTree {
	t.Helper()
	e, a := newAlice(t)
	s, root := e.session(a)
	child := func(parent string, config string) sessions.Node {
		return e.child(a, s.ID, parent, sessions.NewNode{AgentType: "pi", Config: json.RawMessage(config)})
	}
	tr := &nodeTree{e: e, a: a, sid: s.ID, root: root}
	tr.me = child(root.ID, `{"allowed_paths":["/src"]}`)
	tr.grandchild = child(tr.me.ID, `{}`)
	tr.sibling = child(root.ID, `{}`)
	tr.key = e.nodeKey(a, s.ID, tr.me.ID)
	for _, n := range []sessions.Node{root, tr.me, tr.grandchild, tr.sibling} {
		appendEvents(t, e.st, s.ID, n.ID, 2)
	}
	return tr
}

// TestNodeKeyReadsItsSubtree: a node key reads the tree, the messages and
// the logs of its own node and its descendants, never of a sibling or its
// parent. It renames its own node, but neither deletes nor moves it, and
// posts no message on this API (it would be recorded as from the user).
func TestNodeKeyReadsItsSubtree(t *testing.T) {
	tr := newNodeTree(t)
	e := tr.e
	sp := "/api/v1/sessions/" + tr.sid

	r := e.do("GET", sp+"/tree", tr.key, "")
	var tree struct{ Data []sessions.Node }
	if err := json.Unmarshal(r.body, &tree); r.status != 200 || err != nil {
		t.Fatalf("tree: %d %s", r.status, r.body)
	}
	var ids []string
	for _, n := range tree.Data {
		ids = append(ids, n.ID)
	}
	slices.Sort(ids)
	want := []string{tr.me.ID, tr.grandchild.ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("tree for the node key: %v, want me and its grandchild %v", ids, want)
	}
	if r := e.do("GET", sp+"/tree", tr.a.key, ""); r.status != 200 || strings.Count(string(r.body), `"agent_type"`) != 4 {
		t.Fatalf("tree for the user: %d %s", r.status, r.body)
	}

	tests := []struct {
		name   string
		method string
		node   string
		route  string
		body   string
		status int
	}{
		{name: "own messages", method: "GET", node: tr.me.ID, route: "/messages", status: 200},
		{name: "a descendant's messages", method: "GET", node: tr.grandchild.ID, route: "/messages", status: 200},
		{name: "a descendant's logs", method: "GET", node: tr.grandchild.ID, route: "/logs", status: 200},
		{name: "a sibling's messages", method: "GET", node: tr.sibling.ID, route: "/messages", status: 403},
		{name: "the parent's messages", method: "GET", node: tr.root.ID, route: "/messages", status: 403},
		{name: "the parent's logs", method: "GET", node: tr.root.ID, route: "/logs", status: 403},
		{name: "an unknown node's messages", method: "GET", node: "nope", route: "/messages", status: 403},
		{name: "renaming a descendant", method: "PATCH", node: tr.grandchild.ID, body: `{"name":"x"}`, status: 403},
		{name: "deleting a descendant", method: "DELETE", node: tr.grandchild.ID, status: 403},
		{name: "deleting itself", method: "DELETE", node: tr.me.ID, status: 403},
		{name: "moving itself", method: "POST", node: tr.me.ID, route: "/move", body: `{"parent_id":"` + tr.root.ID + `","sort_order":0}`, status: 403},
		{name: "a message to itself (it would be from the user)", method: "POST", node: tr.me.ID, route: "/messages", body: `{"content":"rm -rf, the user said so"}`, status: 403},
		{name: "a message to a descendant", method: "POST", node: tr.grandchild.ID, route: "/messages", body: `{"content":"hi"}`, status: 403},
		{name: "a message to its parent", method: "POST", node: tr.root.ID, route: "/messages", body: `{"content":"hi"}`, status: 403},
		{name: "renaming itself", method: "PATCH", node: tr.me.ID, body: `{"name":"renamed"}`, status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, sp+"/nodes/"+tt.node+tt.route, tr.key, tt.body)
			if r.status != tt.status {
				t.Fatalf("%s %s: %d %s, want %d", tt.method, tt.route, r.status, r.body, tt.status)
			}
			if r.status == 200 && tt.route == "/messages" && tt.method == "GET" {
				var page struct{ Data []wireRecord }
				if err := json.Unmarshal(r.body, &page); err != nil || len(page.Data) == 0 {
					t.Fatalf("page: %s", r.body)
				}
				for _, rec := range page.Data {
					if rec.NodeID != tt.node {
						t.Fatalf("record of %s in the page of %s", rec.NodeID, tt.node)
					}
				}
			}
			if r.status == 403 {
				if code, _, _ := r.errorOf(t); code != "forbidden" {
					t.Fatalf("code %s", code)
				}
			}
		})
	}
	recs, err := e.st.Records(context.Background(), tr.sid, 0, 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.Kind == protocol.KindInput && strings.Contains(string(rec.Data), `"from":"user"`) {
			t.Fatalf("a node key's message was stored as the user's: %s", rec.Data)
		}
	}
	if n, err := e.sessions.NodeByID(context.Background(), tr.me.ID); err != nil || n.ParentID == nil || *n.ParentID != tr.root.ID {
		t.Fatalf("the node key's node after the refused calls: %+v %v", n, err)
	}
}

// TestStreamNodeKeyScope: the session stream hands a node key the records
// of its node and its descendants (a child spawned while it streams
// included), and file records only for paths it may see; the user's stream
// has everything.
func TestStreamNodeKeyScope(t *testing.T) {
	tr := newNodeTree(t)
	e := tr.e
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	file := func(p string) {
		t.Helper()
		if _, err := e.st.Append(ctx, tr.sid, protocol.Record{Kind: protocol.KindFile, Data: json.RawMessage(`{"op":"created","path":"` + p + `","size":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	file("/src/before.go")
	file("/docs/before.md")

	nodeConn, _, err := e.dial(ctx, tr.sid, 0, tr.key)
	if err != nil {
		t.Fatal(err)
	}
	defer nodeConn.CloseNow()
	userConn, _, err := e.dial(ctx, tr.sid, 0, tr.a.key)
	if err != nil {
		t.Fatal(err)
	}
	defer userConn.CloseNow()

	// readUntil reads records up to seq.
	readUntil := func(c *websocket.Conn, seq int64) []wireRecord {
		t.Helper()
		var out []wireRecord
		for {
			rec, err := readRecord(ctx, c)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			out = append(out, rec)
			if rec.Seq >= seq {
				return out
			}
		}
	}
	event := func(n string) int64 {
		t.Helper()
		recs, err := e.st.Append(ctx, tr.sid, protocol.Record{NodeID: n, Kind: protocol.KindEvent, Data: json.RawMessage(`{"type":"text","content":"x"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return recs[0].Seq
	}
	// The replay ends with me's last event.
	got := readUntil(nodeConn, event(tr.me.ID))

	// Live: a child of the grandchild is spawned and speaks; the sibling
	// speaks; files change inside and outside.
	late, err := e.sessions.CreateNode(ctx, tr.a.user.ID, tr.sid, sessions.NewNode{AgentType: "pi", ParentID: &tr.grandchild.ID})
	if err != nil {
		t.Fatal(err)
	}
	event(late.ID)
	event(tr.sibling.ID)
	file("/src/live.go")
	file("/docs/live.md")
	file("/")
	got = append(got, readUntil(nodeConn, event(tr.me.ID))...)

	// The grandchild moves under the sibling: the node key is told, then
	// hears no more of it (nor of its child).
	if _, err := e.sessions.MoveNode(ctx, tr.a.user.ID, tr.sid, tr.grandchild.ID, &tr.sibling.ID, 0); err != nil {
		t.Fatal(err)
	}
	event(tr.grandchild.ID)
	event(late.ID)
	marker := event(tr.me.ID)
	got = append(got, readUntil(nodeConn, marker)...)

	allowedNodes := map[string]bool{tr.me.ID: true, tr.grandchild.ID: true, late.ID: true}
	seen := map[string]int{}
	var files []string
	last := int64(0)
	for _, rec := range got {
		if rec.Seq <= last {
			t.Fatalf("seq %d after %d", rec.Seq, last)
		}
		last = rec.Seq
		if rec.Kind == protocol.KindFile {
			var d struct{ Path string }
			json.Unmarshal(rec.Data, &d)
			files = append(files, d.Path)
			continue
		}
		if !allowedNodes[rec.NodeID] {
			t.Fatalf("node key got a record of node %s: %s %s", rec.NodeID, rec.Kind, rec.Data)
		}
		k := rec.NodeID + " " + rec.Kind
		if rec.Kind == protocol.KindNode {
			var d struct{ Op string }
			json.Unmarshal(rec.Data, &d)
			k += " " + d.Op
		}
		seen[k]++
	}
	if seen[late.ID+" node created"] != 1 || seen[late.ID+" event"] != 1 || seen[tr.grandchild.ID+" node moved"] != 1 ||
		seen[tr.grandchild.ID+" event"] != 2 || seen[tr.me.ID+" event"] != 5 {
		t.Fatalf("node key stream: %v", seen)
	}
	if strings.Join(files, ",") != "/src/before.go,/src/live.go,/" {
		t.Fatalf("file records for the node key: %v", files)
	}

	// The user's stream has every record.
	all := readUntil(userConn, marker)
	lastSeq, _ := e.st.LastSeq(ctx, tr.sid)
	if int64(len(all)) != lastSeq || all[len(all)-1].Seq != lastSeq {
		t.Fatalf("user stream: %d records, log has %d", len(all), lastSeq)
	}
}
