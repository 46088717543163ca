package relay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/protocol"
)

const stopLine = `{"type":"signal","action":"stop"}`

// TestHandoff: a handoff event is appended together with a stop signal and
// a cursor that remembers both; the relay writes the stop to stdin, runs
// Effects.Handoff after the append, ignores the done and status the agent
// prints on its way out, and reports an exit that says Handoff, not an
// error.
func TestHandoff(t *testing.T) {
	h := newHarness()
	clk := newClock()
	h.cfg.Clock = clk
	h.c.emit(containers.Stdout, 1, `{"type":"text","content":"working"}`)
	h.c.emit(containers.Stdout, 2, `{"type":"handoff","summary":"half done; next: tests"}`)
	r := h.start(t)
	testkit.Eventually(t, 10*time.Second, "the stop on stdin", func() bool { return strings.Contains(h.c.stdinText(), stopLine) })
	// The agent answers the stop as the test agent does, and exits.
	h.c.emit(containers.Stdout, 3, `{"type":"status","state":"idle"}`)
	h.c.emit(containers.Stdout, 4, `{"type":"done","summary":"stopped"}`)
	h.c.exit(0, nil)
	ex := h.eff.lastExit(t)
	<-r.Done()
	if !ex.Handoff || !ex.Stopped || ex.Code != 0 {
		t.Fatalf("exit = %+v", ex)
	}
	recs := h.log.records()
	var kinds []string
	for _, rec := range recs {
		kinds = append(kinds, rec.Kind+" "+string(rec.Data))
	}
	want := []string{
		`event {"type":"text","content":"working"}`,
		`event {"type":"handoff","summary":"half done; next: tests"}`,
		`input ` + stopLine,
		`event {"type":"status","state":"idle"}`,
		`event {"type":"done","summary":"stopped"}`,
	}
	if strings.Join(kinds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}
	// The handoff (record 1) and its stop (record 2) are one append, with
	// the cursor saying so. The text before them may have gone in an
	// earlier append when the relay read it alone.
	k, end := 0, 0
	for ; k < len(h.log.batches); k++ {
		if end += h.log.batches[k]; end > 1 {
			break
		}
	}
	if k == len(h.log.batches) || end < 3 {
		t.Fatalf("batches %v: the handoff and its stop must be one append", h.log.batches)
	}
	if cur, err := ParseCursor(h.log.cursors[k]); err != nil || !cur.Handoff || !cur.Stopping {
		t.Fatalf("cursor after the handoff %q (%v)", h.log.cursors[k], err)
	}
	tr := h.tr.list()
	if h.tr.index("handoff half done; next: tests") < 0 || h.tr.index("handoff half done; next: tests") < h.tr.index(`append 3:`+stopLine) {
		t.Fatalf("Effects.Handoff must run after the append; trace:\n%s", strings.Join(tr, "\n"))
	}
	if h.tr.index("done") >= 0 || h.tr.index("status idle") >= 0 {
		t.Fatalf("done and status after a handoff must have no effect; trace:\n%s", strings.Join(tr, "\n"))
	}
	// A restart after the exit replays it, handoff included.
	h2 := newHarness()
	h2.cfg.Cursor = h.log.cursor
	h2.start(t)
	if ex2 := h2.eff.lastExit(t); !ex2.Replayed || !ex2.Handoff || !ex2.Stopped {
		t.Fatalf("replayed exit = %+v", ex2)
	}
}

// TestHandoffEscalates: an agent that does not stop after its handoff is
// stopped by the runtime after the grace period; a relay started after a
// crash (cursor ",s,h") does the same and still reports the handoff.
func TestHandoffEscalates(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cursor string
	}{{"live", ""}, {"after a restart", "o=0:0,e=0:0,s,h"}} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness()
			clk := newClock()
			h.cfg.Clock = clk
			h.cfg.Cursor = tt.cursor
			h.cfg.StopGrace, h.cfg.KillGrace = 5*time.Second, time.Second
			if tt.cursor == "" {
				h.c.emit(containers.Stdout, 1, `{"type":"handoff","summary":"s"}`)
			}
			h.start(t)
			testkit.Eventually(t, 10*time.Second, "the grace timer", func() bool { return clk.Timers() == 1 })
			clk.Advance(5 * time.Second)
			ex := h.eff.lastExit(t)
			if !ex.Handoff || !ex.Stopped || ex.Code != 137 {
				t.Fatalf("exit = %+v", ex)
			}
			for _, rec := range h.log.records() {
				if rec.Kind == protocol.KindError {
					t.Fatalf("a handoff's stop is not an error: %s", rec.Data)
				}
			}
		})
	}
}

// TestHandoffAfterStop: a stop asked for before the agent hands off wins:
// the exit is a plain stop, and a second handoff adds no second stop.
func TestHandoffAfterStop(t *testing.T) {
	h := newHarness()
	r := h.start(t)
	if _, err := r.Deliver(context.Background(), protocol.SignalInput{Type: "signal", Action: "stop"}); err != nil {
		t.Fatal(err)
	}
	h.c.emit(containers.Stdout, 1, `{"type":"handoff","summary":"s"}`)
	h.c.emit(containers.Stdout, 2, `{"type":"handoff","summary":"again"}`)
	testkit.Eventually(t, 10*time.Second, "both handoffs", func() bool { return len(h.log.records()) == 3 })
	h.c.exit(0, nil)
	if ex := h.eff.lastExit(t); ex.Handoff || !ex.Stopped {
		t.Fatalf("exit = %+v", ex)
	}
	if h.tr.index("handoff s") >= 0 {
		t.Fatal("Effects.Handoff ran for a node being stopped")
	}
}

// TestCommitRefs: a commit links to the node's last tool or command record
// (start or done) since the last turn boundary, within one append or
// across appends; a message, an idle status or a done event ends the turn.
func TestCommitRefs(t *testing.T) {
	h := newHarness()
	r := h.start(t)
	n := 0
	emit := func(lines ...string) {
		t.Helper()
		want := len(h.log.records()) + len(lines)
		for _, l := range lines {
			n++
			h.c.emit(containers.Stdout, n, l)
		}
		testkit.Eventually(t, 10*time.Second, "the lines appended", func() bool { return len(h.log.records()) == want })
	}
	refOfLast := func() int64 {
		recs := h.log.records()
		return recs[len(recs)-1].Ref
	}
	seqOf := func(data string) int64 {
		var s int64
		for _, rec := range h.log.records() {
			if string(rec.Data) == data {
				s = rec.Seq
			}
		}
		return s
	}
	commit := `{"type":"commit","hash":"abc","message":"m"}`
	cmdStart := `{"type":"command","cmd":"git commit -am x","status":"start"}`
	cmdDone := `{"type":"command","cmd":"git commit -am x","status":"done"}`

	emit(`{"type":"text","content":"a"}`, commit)
	if got := refOfLast(); got != 0 {
		t.Fatalf("a commit with no tool before it links to %d", got)
	}
	emit(cmdStart, `{"type":"text","content":"b"}`, commit)
	if got, want := refOfLast(), seqOf(cmdStart); got != want {
		t.Fatalf("commit in the append of its command's start: ref %d, want %d", got, want)
	}
	emit(cmdDone)
	emit(commit)
	if got, want := refOfLast(), seqOf(cmdDone); got != want {
		t.Fatalf("commit appended after its command's done: ref %d, want %d", got, want)
	}
	tool := `{"type":"tool","name":"bash","status":"done"}`
	emit(tool, commit, commit)
	recs := h.log.records()
	if want := seqOf(tool); recs[len(recs)-1].Ref != want || recs[len(recs)-2].Ref != want {
		t.Fatalf("two commits after one tool: refs %d %d, want %d", recs[len(recs)-2].Ref, recs[len(recs)-1].Ref, want)
	}
	emit(`{"type":"status","state":"idle"}`, commit)
	if got := refOfLast(); got != 0 {
		t.Fatalf("a commit after the turn ended (idle) links to %d", got)
	}
	emit(tool)
	if _, err := r.Deliver(context.Background(), protocol.MessageInput{Type: "message", From: "user", Content: "next"}); err != nil {
		t.Fatal(err)
	}
	emit(commit)
	if got := refOfLast(); got != 0 {
		t.Fatalf("a commit in the turn after a message links to %d", got)
	}
}

// TestStopDuringHandoff: a stop delivered while the agent hands off ends
// the node: the exit does not say Handoff, and the cursor forgets it.
func TestStopDuringHandoff(t *testing.T) {
	h := newHarness()
	h.c.emit(containers.Stdout, 1, `{"type":"handoff","summary":"s"}`)
	r := h.start(t)
	testkit.Eventually(t, 10*time.Second, "the handoff's stop on stdin", func() bool { return strings.Contains(h.c.stdinText(), stopLine) })
	if _, err := r.Deliver(context.Background(), protocol.SignalInput{Type: "signal", Action: "stop"}); err != nil {
		t.Fatal(err)
	}
	if cur, err := ParseCursor(h.log.lastCursor()); err != nil || cur.Handoff || !cur.Stopping {
		t.Fatalf("cursor after the user's stop %q (%v)", h.log.lastCursor(), err)
	}
	h.c.exit(0, nil)
	if ex := h.eff.lastExit(t); ex.Handoff || !ex.Stopped {
		t.Fatalf("exit = %+v", ex)
	}
}
