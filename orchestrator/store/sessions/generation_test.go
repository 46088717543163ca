package sessions_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
)

// TestContinueNode: after a handoff the node moves to the next generation
// with a continuation record carrying the summary, once per handoff: a
// repeated call (a restart before the continuation's agent started)
// changes nothing; the next handoff starts the generation after.
func TestContinueNode(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	root := e.Node(t, u.ID, s.ID, nil, "root")
	other := e.Node(t, u.ID, s.ID, &root, "other")

	_, err := e.Sessions.ContinueNode(ctx, s.ID, root.ID)
	storetest.WantCode(t, err, orchestrator.EConflict, "")
	_, err = e.St.LastRecordOf(ctx, s.ID, root.ID, protocol.KindEvent, protocol.TypeHandoff)
	storetest.WantCode(t, err, orchestrator.ENotFound, "")

	handoff := func(nodeID, summary string) {
		t.Helper()
		if _, err := e.St.Append(ctx, s.ID, protocol.Record{NodeID: nodeID, Kind: protocol.KindEvent,
			Data: storetest.MustJSON(t, protocol.HandoffEvent{Type: protocol.TypeHandoff, Summary: summary})}); err != nil {
			t.Fatal(err)
		}
	}
	handoff(root.ID, "first half done")
	handoff(other.ID, "not root's")
	before := len(e.Pub.All())
	c, err := e.Sessions.ContinueNode(ctx, s.ID, root.ID)
	if err != nil || !c.New || c.Summary != "first half done" || c.Node.Generation != 2 {
		t.Fatalf("continue: %+v, %v", c, err)
	}
	recs := e.Pub.All()[before:]
	if len(recs) != 2 || recs[0].Kind != protocol.KindNode || recs[1].Kind != protocol.KindSystem {
		t.Fatalf("records %+v", recs)
	}
	var sd protocol.SystemData
	if err := json.Unmarshal(recs[1].Data, &sd); err != nil || sd.Type != protocol.SystemContinuation || sd.Generation != 2 || sd.Summary != "first half done" {
		t.Fatalf("continuation record %s (%v)", recs[1].Data, err)
	}
	last, err := e.St.LastRecordOf(ctx, s.ID, root.ID, protocol.KindSystem, protocol.SystemContinuation)
	if err != nil || last.Seq != recs[1].Seq {
		t.Fatalf("LastRecordOf: %+v, %v", last, err)
	}

	again, err := e.Sessions.ContinueNode(ctx, s.ID, root.ID)
	if err != nil || again.New || again.Node.Generation != 2 || len(e.Pub.All()) != before+2 {
		t.Fatalf("repeated continue: %+v, %v", again, err)
	}
	handoff(root.ID, "second")
	c, err = e.Sessions.ContinueNode(ctx, s.ID, root.ID)
	if err != nil || !c.New || c.Node.Generation != 3 || c.Summary != "second" {
		t.Fatalf("second continue: %+v, %v", c, err)
	}
}
