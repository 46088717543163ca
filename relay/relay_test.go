package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/protocol"
)

func TestLinesBecomeRecords(t *testing.T) {
	h := newHarness()
	dir := t.TempDir()
	ld, err := NewLogDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.cfg.LogDir = ld
	h.cfg.MaxLine = 100
	h.cfg.MaxRaw = 8
	c := h.c
	c.emit(containers.Stdout, 1, `{"type":"text","content":"hi","extra":1}`)
	c.emit(containers.Stderr, 2, "warming up")
	c.emit(containers.Stdout, 3, `not json at all`)
	c.emit(containers.Stdout, 4, "")
	c.emit(containers.Stdout, 5, `{"type":"text"}`)
	c.emit(containers.Stdout, 6, `{"type":"text","content":"`+strings.Repeat("a", 200)+`"}`)
	c.emit(containers.Stdout, 7, "\xff\xfe{\"type\":\"text\"")
	c.emit(containers.Stdout, 8, `{"type":"tool","name":"read","status":"start"}`+"\r")
	c.emit(containers.Stdout, 9, `{"type":"done","summary":"ok"}`)
	c.emit(containers.Stderr, 10, "bye")
	c.exit(0, nil)
	h.start(t)
	ex := h.eff.lastExit(t)
	if !ex.Clean() || ex.StderrTail != "warming up\nbye\n" {
		t.Fatalf("exit = %+v, want clean with the stderr tail", ex)
	}
	msg := func(line string) string {
		_, err := protocol.DecodeEvent([]byte(line))
		b, _ := json.Marshal(err.Error())
		return string(b)
	}
	recs := h.log.records()
	got := summary(recs)
	want := `event {"type":"text","content":"hi"}
error {"message":` + msg("not json at all") + `,"raw":"not json","source":"stdout"}
error {"message":"missing field \"content\"","raw":"{\"type\":","source":"stdout"}
error {"message":"line of 228 bytes is longer than the 100-byte line limit; cut","raw":"{\"type\":","source":"stdout"}
error {"message":` + msg("\xff\xfe{") + `,"raw":"\ufffd\ufffd{\"type","source":"stdout"}
event {"type":"tool","name":"read","status":"start"}
event {"type":"done","summary":"ok"}
`
	if got != want {
		t.Fatalf("records:\n%s\nwant:\n%s", got, want)
	}
	for i, r := range recs {
		if r.Seq != int64(i+1) || r.NodeID != "n1" || r.At.IsZero() {
			t.Fatalf("record %d = %+v", i, r)
		}
	}
	// Each record of a line carries the line's time from the container's
	// log, not the time it was appended.
	for i, ns := range []int{1, 3, 5, 6, 7, 8, 9} {
		if want := c.t0.Add(time.Duration(ns)); !recs[i].At.Equal(want) {
			t.Fatalf("record %d at %v, want the line's time %v", i, recs[i].At, want)
		}
	}
	logs, err := ld.Logs("n1", 0)
	if err != nil || string(logs) != "warming up\nbye\n" {
		t.Fatalf("node log = %q, %v", logs, err)
	}
}

func TestBatching(t *testing.T) {
	h := newHarness()
	h.cfg.MaxBatch = 100
	const n = 1000
	for i := range n {
		h.c.emit(containers.Stdout, i+1, fmt.Sprintf(`{"type":"text","content":"%d"}`, i))
	}
	h.c.exit(0, nil)
	h.start(t)
	h.eff.lastExit(t)
	recs := h.log.records()
	if len(recs) != n+1 { // n events + the exit error (no done event)
		t.Fatalf("%d records, want %d", len(recs), n+1)
	}
	for i := range n {
		if want := fmt.Sprintf(`{"type":"text","content":"%d"}`, i); string(recs[i].Data) != want {
			t.Fatalf("record %d = %s, want %s", i, recs[i].Data, want)
		}
	}
	h.log.mu.Lock()
	defer h.log.mu.Unlock()
	if len(h.log.batches) > n/10 {
		t.Fatalf("%d appends for %d lines: not batched", len(h.log.batches), n)
	}
	for _, b := range h.log.batches {
		if b > 100 {
			t.Fatalf("batch of %d records exceeds MaxBatch 100", b)
		}
	}
}

// TestResumeExactlyOnce runs a relay over a whole log, then for every cursor
// it saved restarts a fresh relay from that cursor: the records before the
// cursor plus those appended after the restart must be the full list, with
// nothing lost or repeated, even when many lines share one timestamp.
func TestResumeExactlyOnce(t *testing.T) {
	tests := []struct {
		name        string
		secondSince bool
		stamps      func(i int) (stream containers.Stream, ns int)
	}{
		{name: "distinct stamps", stamps: func(i int) (containers.Stream, int) { return containers.Stdout, i + 1 }},
		{name: "shared stamps", stamps: func(i int) (containers.Stream, int) { return containers.Stdout, i / 7 }},
		{name: "shared stamps both streams", stamps: func(i int) (containers.Stream, int) {
			if i%3 == 0 {
				return containers.Stderr, i / 5
			}
			return containers.Stdout, i / 5
		}},
		{name: "one stamp for all", stamps: func(int) (containers.Stream, int) { return containers.Stdout, 42 }},
		{name: "second precision since", secondSince: true, stamps: func(i int) (containers.Stream, int) { return containers.Stdout, i * 1e7 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n = 60
			build := func() *harness {
				h := newHarness()
				h.cfg.MaxBatch = 4
				h.c.secondSince = tt.secondSince
				for i := range n {
					s, ns := tt.stamps(i)
					line := fmt.Sprintf(`{"type":"text","content":"%d"}`, i)
					if s == containers.Stderr {
						line = fmt.Sprintf("stderr %d", i)
					}
					h.c.emit(s, ns, line)
				}
				h.c.emit(containers.Stdout, 1e9*3, `{"type":"done"}`)
				h.c.exit(0, nil)
				return h
			}
			full := build()
			full.start(t)
			full.eff.lastExit(t)
			all := full.log.records()
			full.log.mu.Lock()
			cursors, batches := full.log.cursors, full.log.batches
			full.log.mu.Unlock()
			if len(cursors) < 5 {
				t.Fatalf("only %d cursors saved", len(cursors))
			}
			before := 0
			for k, cur := range cursors {
				before += batches[k]
				h := build()
				h.cfg.Cursor = cur
				h.start(t)
				h.eff.lastExit(t)
				got := append(append([]protocol.Record(nil), all[:before]...), h.log.records()...)
				if summary(got) != summary(all) {
					t.Fatalf("resume from cursor %d (%s): got\n%s\nwant\n%s", k, cur, summary(got), summary(all))
				}
			}
		})
	}
}

func TestSideEffectsAfterAppend(t *testing.T) {
	h := newHarness()
	h.eff.StatusFn = func(context.Context, Node, protocol.StatusEvent) error { return errBoom }
	h.c.emit(containers.Stdout, 1, `{"type":"spawn","name":"kid","agent":"shelley","model":"m","task":"t"}`)
	h.c.emit(containers.Stdout, 2, `{"type":"status","state":"thinking","context_pct":0.5}`)
	h.c.emit(containers.Stdout, 3, `{"type":"done"}`)
	h.c.exit(0, nil)
	h.start(t)
	h.eff.lastExit(t)
	tr := h.tr.list()
	find := func(sub string) int {
		for i, e := range tr {
			if e == sub {
				return i
			}
		}
		for i, e := range tr {
			if strings.Contains(e, sub) {
				return i
			}
		}
		t.Fatalf("%q not in trace:\n%s", sub, strings.Join(tr, "\n"))
		return -1
	}
	order := []string{
		`append 1:{"type":"spawn"`,
		`spawn kid`,
		`status thinking`,
		`"status thinking: boom"`,
		`done`,
		`exited 0`,
	}
	for i := 1; i < len(order); i++ {
		if find(order[i-1]) >= find(order[i]) {
			t.Fatalf("%q must come before %q; trace:\n%s", order[i-1], order[i], strings.Join(tr, "\n"))
		}
	}
	for _, p := range [][2]string{
		{`{"type":"status"`, `status thinking`},
		{`{"type":"done"}`, `done`},
	} {
		if find(p[0]) >= find(p[1]) {
			t.Fatalf("%q must be appended before its side effect; trace:\n%s", p[0], strings.Join(tr, "\n"))
		}
	}
}

func TestDeliverAppendsThenWrites(t *testing.T) {
	h := newHarness()
	r := h.start(t)
	rec, err := r.Deliver(context.Background(), protocol.MessageInput{Type: "message", From: "user", Content: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	line := `{"type":"message","from":"user","content":"hello"}`
	if rec.Seq != 1 || rec.Kind != protocol.KindInput || string(rec.Data) != line {
		t.Fatalf("record = %+v", rec)
	}
	// Deliver answers with the record as the Log stored it (its time too).
	if stored := h.log.records(); len(stored) != 1 || rec.At.IsZero() || !rec.At.Equal(stored[0].At) {
		t.Fatalf("delivered %+v, stored %+v", rec, stored)
	}
	if a, s := h.tr.index("append 1:"+line), h.tr.index("stdin "+line); a < 0 || s < a {
		t.Fatalf("append at %d, stdin at %d: %v", a, s, h.tr.list())
	}
	if _, err := r.Deliver(context.Background(), protocol.MessageInput{Type: "message", From: "nobody", Content: "x"}); err == nil || !strings.Contains(err.Error(), "from") {
		t.Fatalf("invalid input: err = %v", err)
	}
}

func TestStdinReattach(t *testing.T) {
	h := newHarness()
	attaches := 0
	var mu sync.Mutex
	h.p.AttachFn = func(context.Context, string) (io.WriteCloser, error) {
		mu.Lock()
		defer mu.Unlock()
		attaches++
		if attaches == 1 {
			return brokenWriter{}, nil
		}
		return stdinWriter{c: h.c, tr: h.tr}, nil
	}
	r := h.start(t)
	if _, err := r.Deliver(context.Background(), protocol.MessageInput{Type: "message", From: "user", Content: "a"}); err != nil {
		t.Fatal(err)
	}
	if got := h.c.stdinText(); got != `{"type":"message","from":"user","content":"a"}`+"\n" {
		t.Fatalf("stdin = %q", got)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errBoom }

type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }
func (brokenWriter) Close() error              { return nil }

// blockingWriter blocks every write until release is closed, like an agent
// that does not read its stdin.
type blockingWriter struct {
	release chan struct{}
	closed  chan struct{}
	once    *sync.Once
}

func (w blockingWriter) Write(p []byte) (int, error) {
	select {
	case <-w.release:
		return len(p), nil
	case <-w.closed:
		return 0, io.ErrClosedPipe
	}
}
func (w blockingWriter) Close() error { w.once.Do(func() { close(w.closed) }); return nil }

func TestMailboxFull(t *testing.T) {
	h := newHarness()
	h.cfg.MailboxLen = 2
	w := blockingWriter{release: make(chan struct{}), closed: make(chan struct{}), once: &sync.Once{}}
	h.p.AttachFn = func(context.Context, string) (io.WriteCloser, error) { return w, nil }
	r := h.start(t)
	msg := protocol.MessageInput{Type: "message", From: "user", Content: "x"}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	// One input blocks in the write, two wait behind it.
	for range 3 {
		wg.Go(func() {
			_, err := r.Deliver(context.Background(), msg)
			errs <- err
		})
		testkit.Eventually(t, 10*time.Second, "the input to be appended", func() bool { return len(h.log.records()) >= 1 })
	}
	testkit.Eventually(t, 10*time.Second, "three inputs appended", func() bool { return len(h.log.records()) == 3 })
	_, err := r.Deliver(context.Background(), msg)
	if !errors.Is(err, ErrMailboxFull) || !strings.Contains(err.Error(), "mailbox full") {
		t.Fatalf("4th deliver: err = %v, want mailbox full", err)
	}
	close(w.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(h.log.records()); n != 3 {
		t.Fatalf("%d records: the refused input must not be appended", n)
	}
}

func TestCloseReleasesCallers(t *testing.T) {
	h := newHarness()
	w := blockingWriter{release: make(chan struct{}), closed: make(chan struct{}), once: &sync.Once{}}
	h.p.AttachFn = func(context.Context, string) (io.WriteCloser, error) { return w, nil }
	r := h.start(t)
	msg := protocol.MessageInput{Type: "message", From: "user", Content: "x"}
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := r.Deliver(context.Background(), msg)
			errs <- err
		}()
	}
	testkit.Eventually(t, 10*time.Second, "three inputs appended", func() bool { return len(h.log.records()) == 3 })
	r.Close()
	r.Close()
	for range 3 {
		if err := testkit.Recv(t, errs, 10*time.Second, "a caller to return after Close"); err == nil {
			t.Fatal("deliver succeeded on a closed relay with a blocked stdin")
		}
	}
	if _, err := r.Deliver(context.Background(), msg); !errors.Is(err, ErrClosed) {
		t.Fatalf("deliver after close: %v", err)
	}
}

func TestSignals(t *testing.T) {
	sig := func(a string) protocol.SignalInput { return protocol.SignalInput{Type: "signal", Action: a} }
	t.Run("pause then resume", func(t *testing.T) {
		h := newHarness()
		r := h.start(t)
		for _, a := range []string{"pause", "resume"} {
			if _, err := r.Deliver(context.Background(), sig(a)); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{
			`append 1:{"type":"signal","action":"pause"}`,
			`stdin {"type":"signal","action":"pause"}`,
			`pause`,
			`append 2:{"type":"signal","action":"resume"}`,
			`unpause`,
			`stdin {"type":"signal","action":"resume"}`,
		}
		if got := h.tr.list(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("trace:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("stop escalates after the grace", func(t *testing.T) {
		h := newHarness()
		clk := newClock()
		h.cfg.Clock = clk
		h.cfg.StopGrace = 5 * time.Second
		h.cfg.KillGrace = 3 * time.Second
		r := h.start(t)
		if _, err := r.Deliver(context.Background(), sig("stop")); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "the grace timer", func() bool { return clk.Timers() == 1 })
		clk.Advance(5*time.Second - time.Nanosecond)
		if h.tr.index("stop 3s") >= 0 {
			t.Fatal("stopped before the grace period ended")
		}
		clk.Advance(time.Nanosecond)
		testkit.Eventually(t, 10*time.Second, "runtime stop", func() bool { return h.tr.index("stop 3s") >= 0 })
		ex := h.eff.lastExit(t)
		if !ex.Stopped || ex.Code != 137 {
			t.Fatalf("exit = %+v", ex)
		}
		if h.tr.index(`stdin {"type":"signal","action":"stop"}`) > h.tr.index("stop 3s") {
			t.Fatal("runtime stop before the stop signal was written")
		}
		for _, rec := range h.log.records() {
			if rec.Kind == protocol.KindError {
				t.Fatalf("a requested stop must not be an error: %s", rec.Data)
			}
		}
	})
	t.Run("stop requested before a restart still escalates", func(t *testing.T) {
		h := newHarness()
		clk := newClock()
		h.cfg.Clock = clk
		h.cfg.Cursor = "o=0:0,e=0:0,s"
		h.start(t)
		testkit.Eventually(t, 10*time.Second, "the grace timer", func() bool { return clk.Timers() == 1 })
		clk.Advance(DefaultStopGrace)
		testkit.Eventually(t, 10*time.Second, "runtime stop", func() bool { return h.tr.index("stop 10s") >= 0 })
		if ex := h.eff.lastExit(t); !ex.Stopped {
			t.Fatalf("exit = %+v", ex)
		}
	})
	t.Run("agent stops by itself within the grace", func(t *testing.T) {
		h := newHarness()
		clk := newClock()
		h.cfg.Clock = clk
		r := h.start(t)
		if _, err := r.Deliver(context.Background(), sig("stop")); err != nil {
			t.Fatal(err)
		}
		h.c.exit(0, nil)
		h.eff.lastExit(t)
		<-r.Done()
		clk.Advance(time.Hour)
		if h.tr.index("stop 10s") >= 0 {
			t.Fatal("runtime stop after the agent exited")
		}
	})
}

func TestExit(t *testing.T) {
	tests := []struct {
		name     string
		lines    []string
		code     int
		waitErr  error
		wantRec  string // the exit error record, "" for none
		wantDone bool
	}{
		{name: "clean", lines: []string{`{"type":"done"}`}, wantDone: true},
		{name: "zero without done", wantRec: `{"message":"agent exited with code 0 without a done event","source":"exit","exit_code":0,"stderr_tail":"e1\ne2\n"}`},
		{name: "crash after done", lines: []string{`{"type":"done"}`}, code: 2, wantDone: true,
			wantRec: `{"message":"agent exited with code 2","source":"exit","exit_code":2,"stderr_tail":"e1\ne2\n"}`},
		{name: "crash", code: 3, wantRec: `{"message":"agent exited with code 3","source":"exit","exit_code":3,"stderr_tail":"e1\ne2\n"}`},
		{name: "container gone", waitErr: errBoom, wantRec: `{"message":"lost the agent's container: boom","source":"exit","stderr_tail":"e1\ne2\n"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness()
			h.cfg.TailLines = 2
			h.c.emit(containers.Stderr, 1, "e0")
			h.c.emit(containers.Stderr, 2, "e1")
			h.c.emit(containers.Stderr, 3, "e2")
			for i, l := range tt.lines {
				h.c.emit(containers.Stdout, 10+i, l)
			}
			h.c.exit(tt.code, tt.waitErr)
			r := h.start(t)
			ex := h.eff.lastExit(t)
			<-r.Done()
			if ex.Done != tt.wantDone {
				t.Fatalf("exit = %+v", ex)
			}
			var got string
			for _, rec := range h.log.records() {
				if rec.Kind == protocol.KindError {
					got = string(rec.Data)
				}
			}
			if got != tt.wantRec {
				t.Fatalf("exit record = %s, want %s", got, tt.wantRec)
			}
			cur, err := ParseCursor(h.log.cursor)
			if err != nil || !cur.Exited {
				t.Fatalf("final cursor %q must mark the exit (%v)", h.log.cursor, err)
			}
			if _, err := r.Deliver(context.Background(), protocol.SignalInput{Type: "signal", Action: "stop"}); err == nil {
				t.Fatal("deliver to an exited node succeeded")
			}
			// A restart after the exit was appended runs only Effects.Exited.
			h2 := newHarness()
			h2.cfg.Cursor = h.log.cursor
			h2.start(t)
			ex2 := h2.eff.lastExit(t)
			if !ex2.Replayed || ex2.Code != ex.Code || ex2.Done != ex.Done || len(h2.log.records()) != 0 {
				t.Fatalf("replayed exit = %+v with %d records", ex2, len(h2.log.records()))
			}
		})
	}
}

func TestAppendRetry(t *testing.T) {
	h := newHarness()
	clk := newClock()
	h.cfg.Clock = clk
	h.log.failFn = func(n int) error {
		if n <= 2 {
			return errBoom
		}
		return nil
	}
	h.c.emit(containers.Stdout, 1, `{"type":"spawn","name":"kid","agent":"a","model":"m"}`)
	h.start(t)
	for range 2 {
		testkit.Eventually(t, 10*time.Second, "a retry timer", func() bool { return clk.Timers() >= 1 })
		if h.tr.index("spawn kid") >= 0 {
			t.Fatal("side effect before the append succeeded")
		}
		clk.Advance(maxBackoff)
	}
	testkit.Eventually(t, 10*time.Second, "the spawn", func() bool { return h.tr.index("spawn kid") >= 0 })
	if n := len(h.log.records()); n != 1 {
		t.Fatalf("%d records after retries, want 1", n)
	}
}

func TestFollowReopens(t *testing.T) {
	h := newHarness()
	clk := newClock()
	h.cfg.Clock = clk
	opens := 0
	var mu sync.Mutex
	inner := h.p.LogsFn
	h.p.LogsFn = func(ctx context.Context, id string, opts containers.LogOptions) (*containers.LogReader, error) {
		mu.Lock()
		opens++
		first := opens == 1
		mu.Unlock()
		if first { // the first follow breaks after one line
			frame := appendFrame(nil, containers.Stdout, h.c.t0.Add(1), `{"type":"text","content":"1"}`+"\n")
			return containers.NewLogReader(io.NopCloser(io.MultiReader(bytes.NewReader(frame), errReader{})), opts), nil
		}
		return inner(ctx, id, opts)
	}
	h.c.emit(containers.Stdout, 1, `{"type":"text","content":"1"}`)
	h.c.emit(containers.Stdout, 1, `{"type":"text","content":"2"}`)
	h.start(t)
	testkit.Eventually(t, 10*time.Second, "the first line", func() bool { return len(h.log.records()) == 1 })
	testkit.Eventually(t, 10*time.Second, "a re-open timer", func() bool { return clk.Timers() == 1 })
	clk.Advance(time.Second)
	testkit.Eventually(t, 10*time.Second, "the second line", func() bool { return len(h.log.records()) == 2 })
	h.c.exit(0, nil)
	h.eff.lastExit(t)
	if got := summary(h.log.records()[:2]); got != "event {\"type\":\"text\",\"content\":\"1\"}\nevent {\"type\":\"text\",\"content\":\"2\"}\n" {
		t.Fatalf("records:\n%s", got)
	}
}

func TestStartValidates(t *testing.T) {
	h := newHarness()
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{name: "no log", mod: func(c *Config) { c.Log = nil }},
		{name: "no container", mod: func(c *Config) { c.Node.ContainerID = "" }},
		{name: "bad cursor", mod: func(c *Config) { c.Cursor = "o=zz" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := h.cfg
			tt.mod(&cfg)
			if _, err := Start(context.Background(), cfg); err == nil {
				t.Fatal("Start accepted a bad config")
			}
		})
	}
}

// TestUnterminatedLastLine: a line the agent did not end with a newline is
// held while the container runs and handled once it has exited.
func TestUnterminatedLastLine(t *testing.T) {
	h := newHarness()
	h.c.emitLine(fakeLine{stream: containers.Stdout, t: h.c.t0.Add(1), text: `{"type":"done"}`})
	h.start(t)
	testkit.Eventually(t, 10*time.Second, "the follow to start", func() bool { return h.c.opened() > 0 })
	if n := len(h.log.records()); n != 0 {
		t.Fatalf("%d records before the line ended", n)
	}
	h.c.exit(0, nil)
	if ex := h.eff.lastExit(t); !ex.Clean() {
		t.Fatalf("exit = %+v", ex)
	}
	if got := summary(h.log.records()); got != "event {\"type\":\"done\"}\n" {
		t.Fatalf("records:\n%s", got)
	}
}

func TestPermanentAppendErrorEndsRelay(t *testing.T) {
	h := newHarness()
	h.log.failFn = func(int) error { return errBoom }
	h.cfg.Permanent = func(err error) bool { return errors.Is(err, errBoom) }
	h.c.emit(containers.Stdout, 1, `{"type":"spawn","name":"kid","agent":"a","model":"m"}`)
	r := h.start(t)
	testkit.Recv(t, r.Done(), 10*time.Second, "the relay to end after a permanent append error")
	if !errors.Is(r.Err(), errBoom) {
		t.Fatalf("Err() = %v", r.Err())
	}
	if h.tr.index("spawn kid") >= 0 {
		t.Fatal("side effect of an event that was not appended")
	}
}

// TestReadAheadBound: with a read-ahead budget smaller than one line, lines
// still flow, one at a time.
func TestReadAheadBound(t *testing.T) {
	h := newHarness()
	h.cfg.MaxBuffer = 8 << 10
	big := strings.Repeat("x", 10<<10)
	for i := range 50 {
		h.c.emit(containers.Stdout, i+1, fmt.Sprintf(`{"type":"text","content":"%d %s"}`, i, big))
	}
	h.c.emit(containers.Stdout, 100, `{"type":"done"}`)
	h.c.exit(0, nil)
	h.start(t)
	if ex := h.eff.lastExit(t); !ex.Clean() {
		t.Fatalf("exit %+v", ex)
	}
	recs := h.log.records()
	if len(recs) != 51 {
		t.Fatalf("%d records", len(recs))
	}
	for i := range 50 {
		if !strings.HasPrefix(string(recs[i].Data), fmt.Sprintf(`{"type":"text","content":"%d x`, i)) {
			t.Fatalf("record %d out of order", i)
		}
	}
	h.log.mu.Lock()
	defer h.log.mu.Unlock()
	for _, b := range h.log.batches {
		if b > 2 {
			t.Fatalf("a batch of %d 10 KiB lines with an 8 KiB read-ahead budget", b)
		}
	}
}

func TestPendingInputsWrittenAfterRestart(t *testing.T) {
	h := newHarness()
	in := func(s string) protocol.Record {
		return protocol.Record{Kind: protocol.KindInput, NodeID: testNode.ID, Data: []byte(s)}
	}
	h.log.Append(context.Background(), testNode.SessionID,
		in(`{"type":"message","from":"user","content":"a"}`), // seq 1: written before the crash
		in(`{"type":"message","from":"user","content":"b"}`), // seq 2: appended, never written
		in(`{"type":"signal","action":"pause"}`),             // seq 3: signals are not repeated
		protocol.Record{Kind: protocol.KindInput, NodeID: "other", Data: []byte(`{"type":"message","from":"user","content":"x"}`)},
	)
	h.cfg.Cursor = "o=0:0,e=0:0,i=1"
	r := h.start(t)
	want := `{"type":"message","from":"user","content":"b"}` + "\n"
	testkit.Eventually(t, 10*time.Second, "the pending input on stdin", func() bool { return h.c.stdinText() == want })
	testkit.Eventually(t, 10*time.Second, "the cursor to cover it", func() bool {
		h.log.mu.Lock()
		defer h.log.mu.Unlock()
		c, _ := ParseCursor(h.log.cursor)
		return c.Input == 2
	})
	rec, err := r.Deliver(context.Background(), protocol.MessageInput{Type: "message", From: "user", Content: "c"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the cursor to cover the new input", func() bool {
		h.log.mu.Lock()
		defer h.log.mu.Unlock()
		c, _ := ParseCursor(h.log.cursor)
		return c.Input == rec.Seq
	})
	if got := h.c.stdinText(); got != want+`{"type":"message","from":"user","content":"c"}`+"\n" {
		t.Fatalf("stdin = %q", got)
	}
}
