package sessions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
)

// TestTreeRandomOps applies a seeded random sequence of creates, updates,
// moves and deletes, and after each checks the tree's invariants; at the end
// it replays the published "node" records (what a browser sees) and checks
// they rebuild exactly the stored tree.
func TestTreeRandomOps(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { treeRandomOps(t, seed) })
	}
}

func treeRandomOps(t *testing.T, seed uint64) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	statuses := []string{protocol.StateIdle, protocol.StateThinking, protocol.StateRunning, protocol.StateDone, protocol.StateError}

	tree := func() []sessions.Node {
		nodes, err := e.Sessions.Tree(ctx, u.ID, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		return nodes
	}
	pick := func(nodes []sessions.Node) sessions.Node { return nodes[rng.IntN(len(nodes))] }

	for step := range 300 {
		nodes := tree()
		checkTree(t, step, nodes)
		var err error
		switch op := rng.IntN(10); {
		case len(nodes) == 0:
			_, err = e.Sessions.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{AgentType: "pi"})
		case op < 4:
			p := pick(nodes)
			_, err = e.Sessions.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{AgentType: "pi", ParentID: &p.ID})
		case op < 6:
			st := statuses[rng.IntN(len(statuses))]
			tok := int64(rng.IntN(1000))
			_, err = e.Sessions.UpdateNode(ctx, u.ID, s.ID, pick(nodes).ID, sessions.NodePatch{Status: &st, Tokens: &tok})
		case op < 9:
			n, p := pick(nodes), pick(nodes)
			_, err = e.Sessions.MoveNode(ctx, u.ID, s.ID, n.ID, &p.ID, rng.IntN(4))
			if err != nil && orchestrator.ErrorField(err) == "parent_id" {
				err = nil // root or cycle: refused, as it should be
			}
		default:
			if rng.IntN(3) == 0 || len(nodes) > 25 {
				_, err = e.Sessions.DeleteNode(ctx, u.ID, s.ID, pick(nodes).ID)
			}
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}

	// Replay the node records.
	type view struct {
		Parent    string
		SortOrder int
		Status    string
	}
	replayed := map[string]view{}
	for _, r := range e.Pub.All() {
		if r.Kind != protocol.KindNode {
			continue
		}
		var ch protocol.NodeChange
		if err := json.Unmarshal(r.Data, &ch); err != nil {
			t.Fatal(err)
		}
		switch ch.Op {
		case protocol.OpDeleted:
			for _, id := range ch.IDs {
				delete(replayed, id)
			}
		default:
			parent := ""
			if ch.Node.ParentID != nil {
				parent = *ch.Node.ParentID
			}
			replayed[ch.Node.ID] = view{parent, ch.Node.SortOrder, ch.Node.Status}
		}
	}
	stored := map[string]view{}
	for _, n := range tree() {
		parent := ""
		if n.ParentID != nil {
			parent = *n.ParentID
		}
		stored[n.ID] = view{parent, n.SortOrder, n.Status}
	}
	if !reflect.DeepEqual(replayed, stored) {
		t.Fatalf("replayed node records differ from the stored tree:\nreplayed %v\nstored   %v", replayed, stored)
	}
}

// checkTree verifies one root, parents present, no cycles, contiguous
// sort_order per parent, and done/total equal to a brute-force count.
func checkTree(t *testing.T, step int, nodes []sessions.Node) {
	t.Helper()
	byID := map[string]sessions.Node{}
	for _, n := range nodes {
		byID[n.ID] = n
	}
	kids := map[string][]sessions.Node{}
	roots := 0
	for _, n := range nodes {
		if n.ParentID == nil {
			roots++
			continue
		}
		if _, ok := byID[*n.ParentID]; !ok {
			t.Fatalf("step %d: node %s has missing parent %s", step, n.ID, *n.ParentID)
		}
		kids[*n.ParentID] = append(kids[*n.ParentID], n)
	}
	if len(nodes) > 0 && roots != 1 {
		t.Fatalf("step %d: %d roots", step, roots)
	}
	for p, ks := range kids {
		seen := make([]bool, len(ks))
		for _, k := range ks {
			if k.SortOrder < 0 || k.SortOrder >= len(ks) || seen[k.SortOrder] {
				t.Fatalf("step %d: children of %s have sort orders not 0..%d: %v", step, p, len(ks)-1, sortOrders(ks))
			}
			seen[k.SortOrder] = true
		}
	}
	var count func(id string, depth int) (int, int)
	count = func(id string, depth int) (int, int) {
		if depth > len(nodes) {
			t.Fatalf("step %d: cycle through %s", step, id)
		}
		if len(kids[id]) == 0 {
			if byID[id].Status == protocol.StateDone {
				return 1, 1
			}
			return 0, 1
		}
		d, n := 0, 0
		for _, k := range kids[id] {
			kd, kn := count(k.ID, depth+1)
			d, n = d+kd, n+kn
		}
		return d, n
	}
	// Tokens of the subtree; whether a descendant is running or thinking.
	var sum func(id string) (int64, bool)
	sum = func(id string) (int64, bool) {
		tok, active := byID[id].Tokens, false
		for _, k := range kids[id] {
			kt, ka := sum(k.ID)
			tok += kt
			active = active || ka || k.Status == protocol.StateRunning || k.Status == protocol.StateThinking
		}
		return tok, active
	}
	for _, n := range nodes {
		if d, tot := count(n.ID, 0); d != n.Done || tot != n.Total {
			t.Fatalf("step %d: %s done/total %d/%d, want %d/%d", step, n.Name, n.Done, n.Total, d, tot)
		}
		if tok, active := sum(n.ID); tok != n.SubtreeTokens || active != n.DescendantActive {
			t.Fatalf("step %d: %s subtree tokens %d, descendant active %v; want %d, %v", step, n.Name, n.SubtreeTokens, n.DescendantActive, tok, active)
		}
	}
}

func sortOrders(ns []sessions.Node) string {
	out := ""
	for _, n := range ns {
		out += fmt.Sprint(n.SortOrder, " ")
	}
	return out
}
