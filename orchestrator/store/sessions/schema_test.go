package sessions_test

import (
	"context"
	"testing"

	"github.com/filepath-dev/filepath/internal/schematest"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
)

// TestJSONMatchesProtocol: the store's records, nodes and sessions encode to
// exactly the shapes protocol/record.go defines (the schemas forbid unknown
// fields and require every field), so the UI's generated types and the
// OpenAPI document describe what the API really sends.
func TestJSONMatchesProtocol(t *testing.T) {
	ctx := context.Background()
	e, u := storetest.NewUser(t)
	repo := "https://example.com/r.git"
	sess, err := e.Sessions.CreateSession(ctx, u.ID, sessions.NewSession{Name: "s", GitRepoURL: &repo, Checks: []protocol.Check{{Command: "go vet ./..."}, {Command: "make", Timeout: 30}}})
	if err != nil {
		t.Fatal(err)
	}
	root := e.Node(t, u.ID, sess.ID, nil, "root")
	a := e.Node(t, u.ID, sess.ID, &root, "a")
	b := e.Node(t, u.ID, sess.ID, &root, "b")
	c := e.Node(t, u.ID, sess.ID, &a, "c")
	running, pct, code := protocol.StateRunning, 0.25, 2
	if _, err := e.Sessions.PatchNode(ctx, sess.ID, b.ID, sessions.NodePatch{Status: &running, ContextPct: &pct, ExitCode: &code}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sessions.MoveNode(ctx, u.ID, sess.ID, c.ID, &b.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.St.Append(ctx, sess.ID,
		protocol.Record{NodeID: b.ID, Kind: protocol.KindEvent, Data: storetest.MustJSON(t, protocol.TextEvent{Type: "text", Content: "hi"})},
		protocol.Record{NodeID: b.ID, Kind: protocol.KindInput, Data: storetest.MustJSON(t, protocol.SignalInput{Type: "signal", Action: "pause"})},
		protocol.Record{NodeID: b.ID, Kind: protocol.KindError, Data: storetest.MustJSON(t, protocol.ErrorData{Message: "agent exited with code 2", Source: protocol.SourceExit, ExitCode: &code})},
		protocol.Record{Kind: protocol.KindFile, Data: storetest.MustJSON(t, protocol.FileChange{Op: protocol.FileCreated, Path: "/a.txt", Size: 1})},
		protocol.Record{NodeID: b.ID, Kind: protocol.KindSystem, Data: storetest.MustJSON(t, protocol.SystemData{Type: protocol.SystemCheck, Text: "go vet ./... passed"})},
		protocol.Record{NodeID: b.ID, Kind: protocol.KindSystem, Data: storetest.MustJSON(t, protocol.SystemData{Type: protocol.SystemCheck, Text: "go vet ./... failed",
			Command: "go vet ./...", Exit: &code, Output: "x declared and not used", DurationMS: 1200})},
		protocol.Record{NodeID: b.ID, Kind: protocol.KindSystem, Data: storetest.MustJSON(t, protocol.SystemData{Type: protocol.SystemCheck, Text: "timed out",
			Command: "sleep 100", Output: "", DurationMS: 1000, TimedOut: true})},
		protocol.Record{NodeID: b.ID, Kind: protocol.KindSystem, Data: storetest.MustJSON(t, protocol.SystemData{Type: protocol.SystemMemory, Text: "1 memory",
			Memories: []protocol.Memory{{Key: "k", Text: "use make"}}})},
		protocol.Record{NodeID: b.ID, Kind: protocol.KindSystem, Data: storetest.MustJSON(t, protocol.SystemData{Type: protocol.SystemContinuation, Text: "continuation",
			Generation: 2, Summary: "went far"})},
		protocol.Record{NodeID: b.ID, Kind: protocol.KindEvent, Data: storetest.MustJSON(t, protocol.CommandEvent{Type: "command", Cmd: "git commit -am x", Status: "done"})},
		protocol.Record{NodeID: b.ID, Kind: protocol.KindEvent, Ref: -1, Data: storetest.MustJSON(t, protocol.CommitEvent{Type: "commit", Hash: "abc", Message: "x"})},
	); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sessions.DeleteNode(ctx, u.ID, sess.ID, a.ID); err != nil {
		t.Fatal(err)
	}

	recordSchema := schematest.Compile(t, "record.schema.json")
	kinds := map[string]bool{}
	refs := 0
	for _, r := range e.Pub.All() {
		if r.Ref != 0 {
			refs++
		}
		kinds[r.Kind] = true
		if err := schematest.Validate(recordSchema, r.Record); err != nil {
			t.Errorf("record %d (%s) %s: %v", r.Seq, r.Kind, r.Data, err)
		}
	}
	for _, k := range protocol.RecordKinds() {
		if !kinds[k] {
			t.Errorf("no %s record was checked", k)
		}
	}
	if refs != 1 {
		t.Errorf("%d records with a ref were checked, want 1", refs)
	}
	recs, err := e.St.Records(ctx, sess.ID, 0, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := schematest.Validate(recordSchema, r); err != nil {
			t.Errorf("stored record %d (%s): %v", r.Seq, r.Kind, err)
		}
	}

	nodeSchema := schematest.Compile(t, "record.schema.json#/$defs/Node")
	tree, err := e.Sessions.Tree(ctx, u.ID, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range tree {
		if err := schematest.Validate(nodeSchema, n); err != nil {
			t.Errorf("node %s: %v", n.Name, err)
		}
	}

	sessionSchema := schematest.Compile(t, "record.schema.json#/$defs/Session")
	got, err := e.Sessions.GetSession(ctx, u.ID, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	bare := e.Session(t, u.ID, "no repo")
	for _, s := range []protocol.Session{got, bare} {
		if err := schematest.Validate(sessionSchema, s); err != nil {
			t.Errorf("session %s: %v", s.Name, err)
		}
	}
}
