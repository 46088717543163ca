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

func signalIn(a string) protocol.SignalInput { return protocol.SignalInput{Type: "signal", Action: a} }
func message(s string) protocol.MessageInput {
	return protocol.MessageInput{Type: "message", From: "user", Content: s}
}

// TestPausedHoldsMessages: a message to a paused agent is appended at once
// (its Deliver does not wait for the frozen agent) and written only after
// the resume thaws the container, in order, never into the frozen stdin
// (issue 27: a message to a paused node was swallowed).
func TestPausedHoldsMessages(t *testing.T) {
	h := newHarness()
	r := h.start(t)
	ctx := context.Background()
	if _, err := r.Deliver(ctx, signalIn("pause")); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"are you there?", "hello?"} {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rec, err := r.Deliver(dctx, message(m))
		cancel()
		if err != nil || rec.Seq == 0 {
			t.Fatalf("deliver %q while paused: %+v, %v", m, rec, err)
		}
	}
	if s := h.c.stdinText(); strings.Contains(s, "are you there") {
		t.Fatalf("a message reached the frozen agent's stdin: %q", s)
	}
	if c, _ := ParseCursor(h.log.lastCursor()); !c.Paused {
		t.Fatalf("cursor %q does not remember the pause", h.log.lastCursor())
	}
	if _, err := r.Deliver(ctx, signalIn("resume")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`append 1:{"type":"signal","action":"pause"}`,
		`stdin {"type":"signal","action":"pause"}`,
		`pause`,
		`append 2:{"type":"message","from":"user","content":"are you there?"}`,
		`append 3:{"type":"message","from":"user","content":"hello?"}`,
		`append 4:{"type":"signal","action":"resume"}`,
		`unpause`,
		`stdin {"type":"message","from":"user","content":"are you there?"}`,
		`stdin {"type":"message","from":"user","content":"hello?"}`,
		`stdin {"type":"signal","action":"resume"}`,
	}
	testkit.Eventually(t, 10*time.Second, "the held messages on stdin", func() bool { return len(h.tr.list()) >= len(want) })
	if got := h.tr.list(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("trace:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if c, _ := ParseCursor(h.log.lastCursor()); c.Paused {
		t.Fatalf("cursor %q still paused after the resume", h.log.lastCursor())
	}
}

// TestStopThawsPaused: a stop of a paused agent thaws it first, writes the
// messages held for it, then the stop (the agent can stop on its own
// instead of waiting out the grace period frozen).
func TestStopThawsPaused(t *testing.T) {
	h := newHarness()
	r := h.start(t)
	ctx := context.Background()
	for _, in := range []protocol.Input{signalIn("pause"), message("m"), signalIn("stop")} {
		if _, err := r.Deliver(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	got := strings.Join(h.tr.list(), "\n")
	want := strings.Join([]string{
		"unpause",
		`stdin {"type":"message","from":"user","content":"m"}`,
		`stdin {"type":"signal","action":"stop"}`,
	}, "\n")
	if !strings.HasSuffix(got, want) {
		t.Fatalf("trace:\n%s\nwant it to end with:\n%s", got, want)
	}
}

// TestPausedAcrossRestart: a relay started with a paused cursor (the
// orchestrator restarted while the agent was frozen) holds the messages not
// yet written until the resume.
func TestPausedAcrossRestart(t *testing.T) {
	h := newHarness()
	h.log.Append(context.Background(), testNode.SessionID,
		protocol.Record{Kind: protocol.KindInput, NodeID: testNode.ID, Data: []byte(`{"type":"signal","action":"pause"}`)},
		protocol.Record{Kind: protocol.KindInput, NodeID: testNode.ID, Data: []byte(`{"type":"message","from":"user","content":"waiting"}`)},
	)
	h.cfg.Cursor = "o=0:0,e=0:0,i=1,p"
	r := h.start(t)
	if _, err := r.Deliver(context.Background(), message("later")); err != nil {
		t.Fatal(err)
	}
	if s := h.c.stdinText(); s != "" {
		t.Fatalf("stdin of a frozen agent = %q", s)
	}
	if _, err := r.Deliver(context.Background(), signalIn("resume")); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"message","from":"user","content":"waiting"}` + "\n" +
		`{"type":"message","from":"user","content":"later"}` + "\n" +
		`{"type":"signal","action":"resume"}` + "\n"
	testkit.Eventually(t, 10*time.Second, "the held messages after the resume", func() bool { return h.c.stdinText() == want })
}

// TestDoneAnsweringStop: a done the agent writes after it was told to stop
// (byo-echo answers a stop with done "stopped") does not make it done: its
// exit says Stopped without Done, so the node shows stopped (issue 27).
// A done before the stop counts; a message after a done makes the agent
// work again, so a stop then is not a finished agent either.
func TestDoneAnsweringStop(t *testing.T) {
	tests := []struct {
		name string
		// steps: "stop", "msg", or an event line the agent prints
		steps    []string
		wantDone bool
	}{
		{"done after stop", []string{"stop", `{"type":"done","summary":"stopped"}`}, false},
		{"done, then stop", []string{`{"type":"done","summary":"finished"}`, "stop"}, true},
		{"done, message, then stop", []string{`{"type":"done"}`, "msg", "stop"}, false},
		// a child's "finished" notice reaches a parent that said done and is
		// on its way out: it finished (TestSpawnTree's parents)
		{"done, a system notice, then stop", []string{`{"type":"done"}`, "notice", "stop"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness()
			r := h.start(t)
			ns := 10
			for _, s := range tt.steps {
				switch s {
				case "stop":
					if _, err := r.Deliver(context.Background(), signalIn("stop")); err != nil {
						t.Fatal(err)
					}
				case "msg":
					if _, err := r.Deliver(context.Background(), message("more")); err != nil {
						t.Fatal(err)
					}
				case "notice":
					if _, err := r.Deliver(context.Background(), protocol.MessageInput{Type: "message", From: protocol.FromSystem, Content: "worker finished."}); err != nil {
						t.Fatal(err)
					}
				default:
					ns++
					n := len(h.log.records()) // before the emit: its record may be appended at once
					h.c.emit(containers.Stdout, ns, s)
					testkit.Eventually(t, 10*time.Second, "the event's record", func() bool { return len(h.log.records()) > n })
				}
			}
			h.c.exit(0, nil)
			ex := h.eff.lastExit(t)
			if !ex.Stopped || ex.Done != tt.wantDone {
				t.Fatalf("exit = %+v, want Stopped and Done=%v", ex, tt.wantDone)
			}
		})
	}
}
