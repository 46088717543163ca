package relay

import (
	"bytes"
	"context"
	"encoding/binary"
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

// trace is a shared, ordered list of what happened, to assert that side
// effects come after the appends that cover them.
type trace struct {
	mu sync.Mutex
	ev []string
}

func (t *trace) add(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ev = append(t.ev, fmt.Sprintf(format, args...))
}

func (t *trace) list() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.ev...)
}

func (t *trace) index(s string) int {
	for i, e := range t.list() {
		if e == s {
			return i
		}
	}
	return -1
}

// fakeProcess is a Process built from function fields.
type fakeProcess struct {
	LogsFn    func(ctx context.Context, id string, opts containers.LogOptions) (*containers.LogReader, error)
	AttachFn  func(ctx context.Context, id string) (io.WriteCloser, error)
	WaitFn    func(ctx context.Context, id string) (int, error)
	StopFn    func(ctx context.Context, id string, grace time.Duration) error
	PauseFn   func(ctx context.Context, id string) error
	UnpauseFn func(ctx context.Context, id string) error
}

func (p *fakeProcess) Logs(ctx context.Context, id string, opts containers.LogOptions) (*containers.LogReader, error) {
	return p.LogsFn(ctx, id, opts)
}
func (p *fakeProcess) AttachStdin(ctx context.Context, id string) (io.WriteCloser, error) {
	return p.AttachFn(ctx, id)
}
func (p *fakeProcess) Wait(ctx context.Context, id string) (int, error) { return p.WaitFn(ctx, id) }
func (p *fakeProcess) Stop(ctx context.Context, id string, grace time.Duration) error {
	return p.StopFn(ctx, id, grace)
}
func (p *fakeProcess) Pause(ctx context.Context, id string) error   { return p.PauseFn(ctx, id) }
func (p *fakeProcess) Unpause(ctx context.Context, id string) error { return p.UnpauseFn(ctx, id) }

// fakeContainer plays a container whose log behaves like Docker's json-file
// log: lines with timestamps, an inclusive since filter, follow until exit.
type fakeContainer struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	lines   []fakeLine
	exited  bool
	code    int
	waitErr error
	stdin   bytes.Buffer
	// secondSince makes the since filter whole seconds, like a runtime that
	// formats since as a Unix second: the relay must skip the extra lines.
	secondSince bool
	t0          time.Time
	opens       int
}

func (c *fakeContainer) opened() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opens
}

func newContainer() *fakeContainer {
	return &fakeContainer{changed: make(chan struct{}), t0: time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC)}
}

func (c *fakeContainer) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

type fakeLine struct {
	stream containers.Stream
	t      time.Time
	text   string // with its newline, if any
}

// emit appends a line stamped t0 + ns nanoseconds.
func (c *fakeContainer) emit(stream containers.Stream, ns int, line string) {
	c.emitLine(fakeLine{stream: stream, t: c.t0.Add(time.Duration(ns)), text: line + "\n"})
}

func (c *fakeContainer) emitLine(ln fakeLine) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, ln)
	c.notify()
}

func (c *fakeContainer) exit(code int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exited, c.code, c.waitErr = true, code, err
	c.notify()
}

func (c *fakeContainer) stdinText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stdin.String()
}

// logs serves the log as Docker does: multiplexed frames with timestamps,
// through a pipe, read by the real containers.LogReader.
func (c *fakeContainer) logs(ctx context.Context, _ string, opts containers.LogOptions) (*containers.LogReader, error) {
	since := opts.Since
	if c.secondSince {
		since = since.Truncate(time.Second)
	}
	c.mu.Lock()
	c.opens++
	c.mu.Unlock()
	pr, pw := io.Pipe()
	go func() { // ends when the log ends, the reader closes the pipe, or ctx ends
		i := 0
		for {
			c.mu.Lock()
			var buf []byte
			for ; i < len(c.lines); i++ {
				ln := c.lines[i]
				if !since.IsZero() && ln.t.Before(since) {
					continue
				}
				buf = appendFrame(buf, ln.stream, ln.t, ln.text)
			}
			exited, ch := c.exited, c.changed
			c.mu.Unlock()
			if len(buf) > 0 {
				if _, err := pw.Write(buf); err != nil {
					return
				}
			}
			if !opts.Follow || exited {
				pw.Close()
				return
			}
			select {
			case <-ctx.Done():
				pw.CloseWithError(ctx.Err())
				return
			case <-ch:
			}
		}
	}()
	return containers.NewLogReader(pr, opts), nil
}

// appendFrame writes one frame of Docker's multiplexed, timestamped log.
func appendFrame(dst []byte, s containers.Stream, t time.Time, content string) []byte {
	ts := t.UTC().Format("2006-01-02T15:04:05.000000000Z07:00")
	var hdr [8]byte
	hdr[0] = byte(s)
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(ts)+1+len(content)))
	dst = append(dst, hdr[:]...)
	dst = append(dst, ts...)
	dst = append(dst, ' ')
	return append(dst, content...)
}

func (c *fakeContainer) wait(ctx context.Context, _ string) (int, error) {
	for {
		c.mu.Lock()
		exited, code, err, ch := c.exited, c.code, c.waitErr, c.changed
		c.mu.Unlock()
		if exited {
			return code, err
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-ch:
		}
	}
}

type stdinWriter struct {
	c  *fakeContainer
	tr *trace
}

func (w stdinWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	w.c.stdin.Write(p)
	w.c.mu.Unlock()
	if w.tr != nil {
		w.tr.add("stdin %s", bytes.TrimSpace(p))
	}
	return len(p), nil
}
func (stdinWriter) Close() error { return nil }

func (c *fakeContainer) process(tr *trace) *fakeProcess {
	return &fakeProcess{
		LogsFn: c.logs,
		AttachFn: func(context.Context, string) (io.WriteCloser, error) {
			return stdinWriter{c: c, tr: tr}, nil
		},
		WaitFn: c.wait,
		StopFn: func(_ context.Context, _ string, grace time.Duration) error {
			tr.add("stop %s", grace)
			c.exit(137, nil)
			return nil
		},
		PauseFn:   func(context.Context, string) error { tr.add("pause"); return nil },
		UnpauseFn: func(context.Context, string) error { tr.add("unpause"); return nil },
	}
}

// fakeLog is a Log recording every append.
type fakeLog struct {
	mu      sync.Mutex
	tr      *trace
	seq     int64
	recs    []protocol.Record
	batches []int
	cursor  string
	cursors []string // the cursor after each AppendWithCursor
	failFn  func(n int) error
	calls   int
}

func (l *fakeLog) append(cursor *string, recs []protocol.Record) ([]protocol.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.failFn != nil {
		if err := l.failFn(l.calls); err != nil {
			return nil, err
		}
	}
	stored := make([]protocol.Record, len(recs))
	var kinds []string
	for i, r := range recs {
		l.seq++
		r.Seq = l.seq
		if r.Ref < 0 { // as the store does: k records back in this append
			r.Ref = stored[i+int(r.Ref)].Seq
		}
		r.Data = bytes.Clone(r.Data)
		if r.At.IsZero() { // as the store does
			r.At = time.Now()
		}
		stored[i] = r
		l.recs = append(l.recs, r)
		kinds = append(kinds, fmt.Sprintf("%d:%s", r.Seq, r.Data))
	}
	l.batches = append(l.batches, len(recs))
	if cursor != nil {
		l.cursor = *cursor
		l.cursors = append(l.cursors, *cursor)
	}
	if l.tr != nil {
		for _, k := range kinds {
			l.tr.add("append %s", k)
		}
	}
	return stored, nil
}

func (l *fakeLog) Append(_ context.Context, _ string, recs ...protocol.Record) ([]protocol.Record, error) {
	return l.append(nil, recs)
}

func (l *fakeLog) AppendWithCursor(_ context.Context, _, _, cursor string, recs ...protocol.Record) ([]protocol.Record, error) {
	return l.append(&cursor, recs)
}

func (l *fakeLog) Inputs(_ context.Context, _, nodeID string, after int64) ([]protocol.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []protocol.Record
	for _, r := range l.recs {
		if r.Kind == protocol.KindInput && r.NodeID == nodeID && r.Seq > after {
			out = append(out, r)
		}
	}
	return out, nil
}

func (l *fakeLog) lastCursor() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cursor
}

func (l *fakeLog) records() []protocol.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]protocol.Record(nil), l.recs...)
}

// fakeEffects is an Effects built from function fields; nil fields record
// into the trace.
type fakeEffects struct {
	tr        *trace
	SpawnFn   func(ctx context.Context, parent Node, ev protocol.SpawnEvent) error
	StatusFn  func(ctx context.Context, node Node, ev protocol.StatusEvent) error
	DoneFn    func(ctx context.Context, node Node, ev protocol.DoneEvent) error
	HandoffFn func(ctx context.Context, node Node, ev protocol.HandoffEvent) error
	ExitedFn  func(ctx context.Context, node Node, exit Exit) error
	mu        sync.Mutex
	exits     []Exit
	exitedCh  chan struct{}
	closeOnce sync.Once
}

// orNil calls fn when the test set it.
func orNil[E any](fn func(context.Context, Node, E) error, ctx context.Context, node Node, ev E) error {
	if fn == nil {
		return nil
	}
	return fn(ctx, node, ev)
}

func newEffects(tr *trace) *fakeEffects { return &fakeEffects{tr: tr, exitedCh: make(chan struct{})} }

func (e *fakeEffects) Spawn(ctx context.Context, parent Node, ev protocol.SpawnEvent) error {
	e.tr.add("spawn %s", ev.Name)
	return orNil(e.SpawnFn, ctx, parent, ev)
}

func (e *fakeEffects) StatusChanged(ctx context.Context, node Node, ev protocol.StatusEvent) error {
	e.tr.add("status %s", ev.State)
	return orNil(e.StatusFn, ctx, node, ev)
}

func (e *fakeEffects) Done(ctx context.Context, node Node, ev protocol.DoneEvent) error {
	e.tr.add("done")
	return orNil(e.DoneFn, ctx, node, ev)
}

func (e *fakeEffects) Handoff(ctx context.Context, node Node, ev protocol.HandoffEvent) error {
	e.tr.add("handoff %s", ev.Summary)
	return orNil(e.HandoffFn, ctx, node, ev)
}

func (e *fakeEffects) Exited(ctx context.Context, node Node, exit Exit) error {
	e.tr.add("exited %d", exit.Code)
	e.mu.Lock()
	e.exits = append(e.exits, exit)
	e.mu.Unlock()
	e.closeOnce.Do(func() { close(e.exitedCh) })
	return orNil(e.ExitedFn, ctx, node, exit)
}

func (e *fakeEffects) lastExit(t *testing.T) Exit {
	t.Helper()
	testkit.Recv(t, e.exitedCh, 10*time.Second, "Effects.Exited")
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.exits[len(e.exits)-1]
}

// newClock returns a fake clock at a fixed time.
func newClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC))
}

var testNode = Node{SessionID: "s1", ID: "n1", ParentID: "p1", Name: "worker", ContainerID: "c1"}

type harness struct {
	c   *fakeContainer
	tr  *trace
	log *fakeLog
	eff *fakeEffects
	p   *fakeProcess
	cfg Config
}

func newHarness() *harness {
	h := &harness{c: newContainer(), tr: &trace{}}
	h.log = &fakeLog{tr: h.tr}
	h.eff = newEffects(h.tr)
	h.p = h.c.process(h.tr)
	h.cfg = Config{Node: testNode, Log: h.log, Process: h.p, Effects: h.eff}
	return h
}

func (h *harness) start(t *testing.T) *Relay {
	t.Helper()
	r, err := Start(context.Background(), h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// dataOf decodes a record's data into a map.
func dataOf(t *testing.T, r protocol.Record) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		t.Fatalf("record data %s: %v", r.Data, err)
	}
	return m
}

func summary(recs []protocol.Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s %s\n", r.Kind, r.Data)
	}
	return b.String()
}

var errBoom = errors.New("boom")
