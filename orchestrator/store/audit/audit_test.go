package audit_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
)

// TestAuditFromEvents: every tool and command that ends gets one audit row
// with its start time, found in the same batch or an earlier one, also when
// calls of the same tool nest or an end has no start.
func TestAuditFromEvents(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	n := e.Node(t, u.ID, s.ID, nil, "root")
	other := e.Node(t, u.ID, s.ID, &n, "child")
	t0 := e.Clock.Now()
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	rec := func(node string, sec int, ev protocol.Event) protocol.Record {
		b, _ := json.Marshal(ev)
		return protocol.Record{NodeID: node, Kind: protocol.KindEvent, Data: b, At: at(sec)}
	}
	str := func(s string) *string { return &s }
	exit := func(v float64) *float64 { return &v }
	appendRecs := func(recs ...protocol.Record) {
		t.Helper()
		if _, err := e.Sessions.AppendWithCursor(ctx, s.ID, n.ID, "c", recs...); err != nil {
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
	calls, err := e.Audit.ToolCalls(ctx, s.ID, n.ID, 0, 0)
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
	oc, err := e.Audit.ToolCalls(ctx, s.ID, other.ID, 0, 0)
	if err != nil || len(oc) != 1 || !oc[0].StartedAt.Equal(oc[0].CompletedAt) || len(oc[0].Result) > 2200 || !strings.Contains(string(oc[0].Result), "…x") {
		t.Fatalf("other node's audit: %+v %v", oc, err)
	}
	// Paging: before the newest id.
	page, err := e.Audit.ToolCalls(ctx, s.ID, n.ID, calls[1].ID, 2)
	if err != nil || len(page) != 2 || page[0].ID != calls[2].ID {
		t.Fatalf("page before %d: %+v %v", calls[1].ID, page, err)
	}
	// An API call row.
	if err := e.Audit.RecordToolCall(ctx, audit.NewToolCall{SessionID: s.ID, NodeID: n.ID, Source: audit.SourceAPI, Name: "list_children",
		Result: json.RawMessage(`{"children":2}`), StartedAt: at(20), CompletedAt: at(20).Add(15 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	calls, _ = e.Audit.ToolCalls(ctx, s.ID, n.ID, 0, 1)
	if len(calls) != 1 || calls[0].Source != audit.SourceAPI || calls[0].DurationMS != 15 {
		t.Fatalf("api row: %+v", calls)
	}
	// Insert-only.
	if _, err := e.St.SQL().Exec(`UPDATE tool_calls SET name = 'x'`); err == nil {
		t.Fatal("tool_calls took an update")
	}
}
