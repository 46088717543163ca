// Package relay runs one actor per running agent node: it follows the node's
// container log, validates each stdout line, appends it to the session log
// with the log cursor, applies side effects after the append, and writes
// inputs to the container's stdin.
package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/protocol"
)

// Defaults of Config.
const (
	DefaultMaxBatch   = 512
	DefaultMailboxLen = 64
	DefaultMaxRaw     = 4 << 10
	DefaultStopGrace  = 10 * time.Second
	DefaultKillGrace  = 10 * time.Second
	DefaultTailLines  = 20
	DefaultMaxBuffer  = 16 << 20
	bufferToken       = 4 << 10 // bytes per token of the read-ahead budget
	maxTailLine       = 1 << 10
	maxBackoff        = 5 * time.Second
)

// Errors of Deliver.
var (
	// ErrMailboxFull: the relay already holds MailboxLen undelivered inputs.
	ErrMailboxFull = errors.New("mailbox full")
	// ErrExited: the container has exited; nothing more can be delivered.
	ErrExited = errors.New("agent is not running")
	// ErrClosed: the relay has ended.
	ErrClosed = errors.New("relay closed")
	// ErrStopping: the agent was told to stop (or hands off) and is ending;
	// a message written now would reach an agent on its way out and be
	// lost. Nothing was appended: deliver it to the node's next container.
	ErrStopping = errors.New("agent is stopping")
)

// Log is the durable, ordered session log (the store).
type Log interface {
	// Append appends recs in one transaction and returns them as stored
	// (with Seq, and At when it was zero).
	Append(ctx context.Context, sessionID string, recs ...protocol.Record) ([]protocol.Record, error)
	// AppendWithCursor appends recs and sets the node's log cursor in the
	// same transaction, so that the cursor never covers a line whose records
	// are not committed, nor the reverse. recs may be empty: then only the
	// cursor moves. It returns the records as stored.
	AppendWithCursor(ctx context.Context, sessionID, nodeID, cursor string, recs ...protocol.Record) ([]protocol.Record, error)
	// Inputs returns the node's input records with seq > after, in order.
	Inputs(ctx context.Context, sessionID, nodeID string, after int64) ([]protocol.Record, error)
}

// Node is the node a relay serves.
type Node struct {
	SessionID   string
	ID          string
	ParentID    string
	Name        string
	ContainerID string
}

// Effects are the side effects of a node's events, run by the relay after
// the events are appended, in the order of the events.
type Effects interface {
	// Spawn creates a child node of parent and starts its container.
	Spawn(ctx context.Context, parent Node, ev protocol.SpawnEvent) error
	// StatusChanged records the node's new state and context use.
	StatusChanged(ctx context.Context, node Node, ev protocol.StatusEvent) error
	// Done marks the node done and tells its parent.
	Done(ctx context.Context, node Node, ev protocol.DoneEvent) error
	// Handoff: the agent handed its work over. The relay has appended a
	// stop signal with the event and stops the agent (signal, grace, kill);
	// its Exit then says Handoff, and the node's continuation starts after
	// it. Done and status events that follow a handoff have no effect.
	Handoff(ctx context.Context, node Node, ev protocol.HandoffEvent) error
	// Exited records that the container has exited; the relay then ends.
	Exited(ctx context.Context, node Node, exit Exit) error
}

// Exit describes how a node's container ended.
type Exit struct {
	Code       int    // exit code; -1 when Err is set
	Done       bool   // a done event came before the exit
	Stopped    bool   // a stop signal was delivered through this relay
	StderrTail string // the last stderr lines
	Err        error  // waiting for the container failed (e.g. it was removed)
	// Replayed: the exit was appended before a restart; only Effects.Exited
	// runs again.
	Replayed bool
	// Handoff: the agent handed off before it exited (the relay stopped it
	// for that): the node continues in a fresh agent.
	Handoff bool
}

// Clean reports whether the exit is a normal end: code 0 after a done event.
func (e Exit) Clean() bool { return e.Err == nil && e.Code == 0 && e.Done }

// Config configures one relay.
type Config struct {
	Node    Node
	Cursor  string // the node's saved log cursor; "" reads the log from its start
	Log     Log
	Process Process
	Effects Effects
	LogDir  *LogDir // where stderr goes; nil keeps only the tail
	Clock   Clock   // nil: the real clock
	Logger  *slog.Logger
	// Permanent reports Log errors that a retry cannot fix (e.g. the node
	// was deleted): the relay then ends, and Err returns the error. nil:
	// every error is retried until the relay is closed.
	Permanent func(error) bool

	MaxBatch   int           // lines appended in one transaction (DefaultMaxBatch)
	MailboxLen int           // undelivered inputs held (DefaultMailboxLen)
	MaxLine    int           // bytes of one log line; longer ones are cut (containers.DefaultMaxLine)
	MaxRaw     int           // bytes of a bad line kept in its error record (DefaultMaxRaw)
	StopGrace  time.Duration // after signal{stop}, before the runtime's stop (DefaultStopGrace)
	KillGrace  time.Duration // runtime stop: SIGTERM, then SIGKILL after this (DefaultKillGrace)
	TailLines  int           // stderr lines kept for the exit record (DefaultTailLines)
	// MaxBuffer bounds the bytes of log lines read ahead of their append
	// (DefaultMaxBuffer), so that long lines cannot pile up in memory.
	MaxBuffer int
}

// Relay is the actor of one node. Its state is owned by one goroutine; other
// goroutines talk to it through Deliver.
type Relay struct {
	cfg    Config
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	err    error // why the relay ended early; written before done closes

	mailbox chan request
	writes  chan writeJob
	lines   chan logItem
	exitCh  chan exitResult // buffered 1: the waiter never blocks
	written chan int64      // seqs of inputs the writer has written to stdin
	exited  chan struct{}   // closed once the container has exited
	budget  chan struct{}   // read-ahead tokens of bufferToken bytes: reader takes, run returns

	// Owned by the run goroutine.
	cur         Cursor
	exit        *exitResult
	stopArmed   bool // the escalation timer was started (it fires once)
	stopTimer   <-chan time.Time
	tail        []string
	batch       []logItem
	recs        []protocol.Record
	effects     []protocol.Event
	stderrLines [][]byte
	// step is the seq of the node's last tool or command record since the
	// last turn boundary (a message to the agent, a status idle or done, a
	// done event): a commit event links to it. 0: none.
	step int64
}

type request struct {
	in    protocol.Input
	reply chan result
}

type result struct {
	rec protocol.Record
	err error
}

type logItem struct {
	containers.LogLine
	pos    Cursor // the cursor just after this line
	tokens int    // read-ahead budget held until the line is appended
}

type exitResult struct {
	code int
	err  error
}

// Start validates cfg and starts the relay of cfg.Node. The relay runs until
// the container has exited and Effects.Exited has run, or until ctx ends or
// Close is called (which leaves the container running: a later relay
// resumes from the saved cursor).
func Start(ctx context.Context, cfg Config) (*Relay, error) {
	switch {
	case cfg.Log == nil || cfg.Process == nil || cfg.Effects == nil:
		return nil, errors.New("relay config: Log, Process and Effects are required")
	case cfg.Node.SessionID == "" || cfg.Node.ID == "" || cfg.Node.ContainerID == "":
		return nil, errors.New("relay config: node session id, id and container id are required")
	}
	cur, err := ParseCursor(cfg.Cursor)
	if err != nil {
		return nil, fmt.Errorf("relay config: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	setDefault(&cfg.MaxLine, containers.DefaultMaxLine)
	setDefault(&cfg.MaxBatch, DefaultMaxBatch)
	setDefault(&cfg.MailboxLen, DefaultMailboxLen)
	setDefault(&cfg.MaxRaw, DefaultMaxRaw)
	setDefault(&cfg.TailLines, DefaultTailLines)
	setDefault(&cfg.MaxBuffer, DefaultMaxBuffer)
	setDefault(&cfg.StopGrace, DefaultStopGrace)
	setDefault(&cfg.KillGrace, DefaultKillGrace)

	ctx, cancel := context.WithCancel(ctx)
	r := &Relay{
		cfg:     cfg,
		log:     cfg.Logger.With("session", cfg.Node.SessionID, "node", cfg.Node.ID),
		cancel:  cancel,
		done:    make(chan struct{}),
		mailbox: make(chan request, cfg.MailboxLen),
		writes:  make(chan writeJob, cfg.MailboxLen),
		lines:   make(chan logItem, cfg.MaxBatch),
		exitCh:  make(chan exitResult, 1),
		written: make(chan int64),
		exited:  make(chan struct{}),
		budget:  make(chan struct{}, max(cfg.MaxBuffer/bufferToken, 1)),
		cur:     cur,
	}
	for range cap(r.budget) {
		r.budget <- struct{}{}
	}
	go r.run(ctx)
	return r, nil
}

func setDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Node returns the node the relay serves.
func (r *Relay) Node() Node { return r.cfg.Node }

// Done is closed when the relay has ended.
func (r *Relay) Done() <-chan struct{} { return r.done }

// Err returns, once Done is closed, the permanent Log error that ended the
// relay, or nil.
func (r *Relay) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

// Close ends the relay without touching the container and waits for its
// goroutines. Safe to call more than once.
func (r *Relay) Close() error {
	r.once.Do(r.cancel)
	<-r.done
	return nil
}

// Deliver appends the input to the session log and then writes it to the
// container's stdin. It returns the record as stored once the line is
// written (for pause and resume: once the container is paused/unpaused).
// It fails at once with ErrMailboxFull when too many inputs are pending.
func (r *Relay) Deliver(ctx context.Context, in protocol.Input) (protocol.Record, error) {
	req := request{in: in, reply: make(chan result, 1)}
	select {
	case <-r.done:
		return protocol.Record{}, ErrClosed
	default:
	}
	select {
	case r.mailbox <- req:
	default:
		return protocol.Record{}, fmt.Errorf("deliver to node %s: %w (%d inputs pending)", r.cfg.Node.ID, ErrMailboxFull, r.cfg.MailboxLen)
	}
	select {
	case res := <-req.reply:
		return res.rec, res.err
	case <-r.done:
		select {
		case res := <-req.reply:
			return res.rec, res.err
		default:
			return protocol.Record{}, ErrClosed
		}
	case <-ctx.Done():
		return protocol.Record{}, ctx.Err()
	}
}

func (r *Relay) run(ctx context.Context) {
	inner, stopInner := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stopInner()
		wg.Wait()
		r.drain()
		if r.cfg.LogDir != nil {
			r.cfg.LogDir.Release(r.cfg.Node.ID)
		}
		r.once.Do(r.cancel)
		close(r.done)
	}()

	if r.cur.Exited {
		// The exit was appended before a restart; make sure its effect ran.
		r.callExited(ctx, Exit{Code: r.cur.ExitCode, Done: r.cur.SawDone, Stopped: r.cur.Stopping, Handoff: r.cur.Handoff, Replayed: true})
		return
	}
	pending := r.pendingInputs(ctx)
	from := r.cur
	wg.Go(func() { r.readLoop(inner, from) })
	wg.Go(func() { r.waitLoop(inner) })
	wg.Go(func() { r.writeLoop(inner) })

	for _, j := range pending {
		r.writes <- j
	}
	if r.cur.Stopping {
		// A stop was requested before a restart: escalate as if it had just
		// been sent.
		r.stopArmed = true
		r.stopTimer = r.cfg.Clock.After(r.cfg.StopGrace)
	}
	lines := r.lines
	linesDone := false
	for {
		if linesDone && r.exit != nil {
			r.finish(ctx)
			return
		}
		select {
		case <-ctx.Done():
			return
		case it, ok := <-lines:
			if !ok {
				lines, linesDone = nil, true
				continue
			}
			r.batch = append(r.batch[:0], it)
		collect:
			for len(r.batch) < r.cfg.MaxBatch {
				select {
				case it, ok := <-lines:
					if !ok {
						lines, linesDone = nil, true
						break collect
					}
					r.batch = append(r.batch, it)
				default:
					break collect
				}
			}
			r.process(ctx, r.batch)
			for i := range r.batch {
				for range r.batch[i].tokens {
					r.budget <- struct{}{}
				}
				r.batch[i] = logItem{}
			}
		case req := <-r.mailbox:
			r.handle(ctx, req)
		case ex := <-r.exitCh:
			r.exit = &ex
		case seq := <-r.written:
			if seq > r.cur.Input {
				cur := r.cur
				cur.Input = seq
				if _, err := r.appendRetry(ctx, cur, nil); err == nil {
					r.cur = cur
				}
			}
		case <-r.stopTimer:
			r.stopTimer = nil
			if r.exit == nil {
				r.log.Info("agent did not stop after signal; stopping container", "grace", r.cfg.StopGrace)
				wg.Go(func() {
					if err := r.cfg.Process.Stop(inner, r.cfg.Node.ContainerID, r.cfg.KillGrace); err != nil && inner.Err() == nil {
						r.log.Warn("stop container", "err", err)
					}
				})
			}
		}
	}
}

// pendingInputs returns write jobs for the node's messages appended after
// the last input the cursor says was written: a crash between an input's
// append and its write would otherwise lose it, and a message appended
// before the relay started (the runner's resume message for a restarted
// node) is written before anything delivered to the relay. Such a message
// may reach the agent twice (written, then a crash before the cursor
// moved); signals are not repeated (a stale pause or stop could do harm),
// and at most MailboxLen messages are.
func (r *Relay) pendingInputs(ctx context.Context) []writeJob {
	recs, err := r.cfg.Log.Inputs(ctx, r.cfg.Node.SessionID, r.cfg.Node.ID, r.cur.Input)
	if err != nil {
		r.log.Warn("read inputs not yet written", "err", err)
		return nil
	}
	var jobs []writeJob
	for _, rec := range recs {
		in, err := protocol.DecodeInput(rec.Data)
		if _, ok := in.(protocol.MessageInput); err != nil || !ok {
			continue
		}
		if len(jobs) == cap(r.writes) {
			r.log.Warn("too many inputs not yet written; repeating only the last ones", "max", cap(r.writes))
			jobs = jobs[1:]
		}
		jobs = append(jobs, writeJob{line: append(bytes.Clone(rec.Data), '\n'), rec: rec})
		r.log.Debug("writing an input appended before the relay started", "seq", rec.Seq)
	}
	return jobs
}

// drain answers every request still queued once the goroutines have ended.
func (r *Relay) drain() {
	for {
		select {
		case req := <-r.mailbox:
			req.reply <- result{err: ErrClosed}
		case j := <-r.writes:
			if j.reply != nil {
				j.reply <- result{rec: j.rec, err: fmt.Errorf("input seq %d appended but not written: %w", j.rec.Seq, ErrClosed)}
			}
		default:
			return
		}
	}
}

// process appends one batch of log lines with the cursor after its last
// line, then runs the side effects of its events in order.
func (r *Relay) process(ctx context.Context, batch []logItem) {
	recs, effects, stderr := r.recs[:0], r.effects[:0], r.stderrLines[:0]
	cur := r.cur
	// The step a commit links to: r.step (appended before), or the record
	// at index stepAt of recs (its seq comes with the append).
	step, stepAt := r.step, -1
	var stop *writeJob
	for i := range batch {
		it := &batch[i]
		cur.Stdout, cur.Stderr = it.pos.Stdout, it.pos.Stderr
		if it.Stream == containers.Stderr {
			stderr = append(stderr, it.Line)
			r.pushTail(it.Line)
			continue
		}
		line := bytes.TrimSuffix(it.Line, []byte{'\r'})
		if len(bytes.TrimSpace(line)) == 0 && !it.Truncated {
			continue
		}
		at := it.Time // zero (a runtime without times): the Log's append time
		if it.Truncated {
			msg := fmt.Sprintf("line of %d bytes is longer than the %d-byte line limit; cut", it.Size, r.cfg.MaxLine)
			recs = append(recs, r.errorRecord(at, protocol.ErrorData{Message: msg, Raw: r.raw(line), Source: protocol.SourceStdout}))
			continue
		}
		ev, err := protocol.DecodeEvent(line)
		if err != nil {
			recs = append(recs, r.errorRecord(at, protocol.ErrorData{Message: err.Error(), Raw: r.raw(line), Source: protocol.SourceStdout}))
			continue
		}
		data, err := json.Marshal(ev)
		if err != nil { // cannot happen for the protocol's structs
			recs = append(recs, r.errorRecord(at, protocol.ErrorData{Message: "encode event: " + err.Error(), Raw: r.raw(line), Source: protocol.SourceStdout}))
			continue
		}
		rec := protocol.Record{Kind: protocol.KindEvent, NodeID: r.cfg.Node.ID, At: at, Data: data}
		switch e := ev.(type) {
		case protocol.ToolEvent, protocol.CommandEvent:
			step, stepAt = 0, len(recs)
		case protocol.CommitEvent:
			if stepAt >= 0 {
				rec.Ref = -int64(len(recs) - stepAt)
			} else {
				rec.Ref = step
			}
		case protocol.StatusEvent:
			if e.State == protocol.StateIdle || e.State == protocol.StateDone {
				step, stepAt = 0, -1
			}
		case protocol.DoneEvent:
			step, stepAt = 0, -1
		}
		recs = append(recs, rec)
		switch e := ev.(type) {
		case protocol.SpawnEvent:
			effects = append(effects, ev)
		case protocol.StatusEvent:
			if !cur.Handoff {
				effects = append(effects, ev)
			}
		case protocol.DoneEvent:
			cur.SawDone = true
			if !cur.Handoff {
				effects = append(effects, ev)
			}
		case protocol.HandoffEvent:
			if cur.Handoff || cur.Stopping {
				// One handoff per agent; and a stop asked for already wins.
				break
			}
			// The stop that ends this agent goes with the event, in the
			// same transaction as the cursor that remembers both: a restart
			// in between still stops it and continues the node.
			cur.Handoff, cur.Stopping = true, true
			sig, _ := json.Marshal(protocol.SignalInput{Type: protocol.TypeSignal, Action: protocol.ActionStop})
			recs = append(recs, protocol.Record{Kind: protocol.KindInput, NodeID: r.cfg.Node.ID, Data: sig})
			stop = &writeJob{line: append(sig, '\n')}
			effects = append(effects, e)
		}
	}
	r.recs, r.effects, r.stderrLines = recs, effects, stderr
	if len(stderr) > 0 && r.cfg.LogDir != nil {
		// Written before the cursor moves: after a crash in between, these
		// lines appear twice in the node's log, never zero times.
		if err := r.cfg.LogDir.Write(r.cfg.Node.ID, stderr...); err != nil {
			r.log.Warn("write node log", "err", err)
		}
	}
	stored, err := r.appendRetry(ctx, cur, recs)
	if err != nil {
		return
	}
	r.cur = cur
	if stepAt >= 0 && stepAt < len(stored) {
		step = stored[stepAt].Seq
	}
	r.step = step
	if stop != nil {
		for _, rec := range stored {
			if rec.Kind == protocol.KindInput {
				stop.rec = rec
			}
		}
		r.armStop()
		if len(r.writes) < cap(r.writes) { // only this goroutine sends: cannot block
			r.writes <- *stop
		} else {
			r.log.Warn("handoff: stdin queue full; the agent is stopped after the grace period without the stop line")
		}
	}
	for _, ev := range effects {
		r.apply(ctx, ev)
	}
	clear(recs)
	clear(stderr)
}

// armStop starts the escalation to the runtime's stop (once).
func (r *Relay) armStop() {
	if r.stopTimer == nil && !r.stopArmed {
		r.stopArmed = true
		r.stopTimer = r.cfg.Clock.After(r.cfg.StopGrace)
	}
}

// appendRetry appends recs with cur until it succeeds or ctx ends: the lines
// stay in the container's log, so a failed append is retried, never dropped.
func (r *Relay) appendRetry(ctx context.Context, cur Cursor, recs []protocol.Record) ([]protocol.Record, error) {
	backoff := 50 * time.Millisecond
	cs := cur.String()
	for {
		stored, err := r.cfg.Log.AppendWithCursor(ctx, r.cfg.Node.SessionID, r.cfg.Node.ID, cs, recs...)
		if err == nil {
			return stored, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if r.cfg.Permanent != nil && r.cfg.Permanent(err) {
			r.log.Warn("append to session log failed; ending the relay", "err", err)
			r.err = fmt.Errorf("append to session log: %w", err)
			r.once.Do(r.cancel)
			return nil, err
		}
		r.log.Warn("append to session log failed; retrying", "records", len(recs), "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.cfg.Clock.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (r *Relay) apply(ctx context.Context, ev protocol.Event) {
	var err error
	var what string
	switch e := ev.(type) {
	case protocol.SpawnEvent:
		what = "spawn " + strconv.Quote(e.Name)
		err = r.cfg.Effects.Spawn(ctx, r.cfg.Node, e)
	case protocol.StatusEvent:
		what = "status " + e.State
		err = r.cfg.Effects.StatusChanged(ctx, r.cfg.Node, e)
	case protocol.DoneEvent:
		what = "done"
		err = r.cfg.Effects.Done(ctx, r.cfg.Node, e)
	case protocol.HandoffEvent:
		what = "handoff"
		err = r.cfg.Effects.Handoff(ctx, r.cfg.Node, e)
	}
	if err == nil || ctx.Err() != nil {
		return
	}
	r.log.Warn("side effect failed", "effect", what, "err", err)
	rec := r.errorRecord(time.Time{}, protocol.ErrorData{Message: what + ": " + err.Error(), Source: protocol.SourceRuntime})
	if _, err := r.cfg.Log.Append(ctx, r.cfg.Node.SessionID, rec); err != nil {
		r.log.Warn("append side effect error", "err", err)
	}
}

// finish appends the exit (once: the cursor remembers it) and runs
// Effects.Exited.
func (r *Relay) finish(ctx context.Context) {
	ex := Exit{Code: r.exit.code, Err: r.exit.err, Done: r.cur.SawDone, Stopped: r.cur.Stopping, Handoff: r.cur.Handoff, StderrTail: r.tailText()}
	if ex.Err != nil {
		ex.Code = -1
	}
	var recs []protocol.Record
	if !ex.Clean() && !ex.Stopped {
		d := protocol.ErrorData{Source: protocol.SourceExit, StderrTail: ex.StderrTail}
		if ex.Err != nil {
			d.Message = "lost the agent's container: " + ex.Err.Error()
		} else {
			code := ex.Code
			d.ExitCode = &code
			d.Message = fmt.Sprintf("agent exited with code %d", code)
			if code == 0 {
				d.Message += " without a done event"
			}
		}
		recs = append(recs, r.errorRecord(time.Time{}, d))
	}
	cur := r.cur
	cur.Exited, cur.ExitCode = true, ex.Code
	if _, err := r.appendRetry(ctx, cur, recs); err != nil {
		return
	}
	r.cur = cur
	r.callExited(ctx, ex)
}

func (r *Relay) callExited(ctx context.Context, ex Exit) {
	if err := r.cfg.Effects.Exited(ctx, r.cfg.Node, ex); err != nil && ctx.Err() == nil {
		r.log.Warn("record exit", "err", err)
	}
}

// handle appends an input and queues it for the stdin writer.
func (r *Relay) handle(ctx context.Context, req request) {
	if r.exit != nil {
		req.reply <- result{err: ErrExited}
		return
	}
	if _, isMsg := req.in.(protocol.MessageInput); isMsg && r.cur.Stopping {
		req.reply <- result{err: ErrStopping}
		return
	}
	if len(r.writes) == cap(r.writes) { // only this goroutine sends: the send below cannot block
		req.reply <- result{err: fmt.Errorf("deliver to node %s: %w (%d inputs not yet written to stdin)", r.cfg.Node.ID, ErrMailboxFull, cap(r.writes))}
		return
	}
	data, err := json.Marshal(req.in)
	if err == nil {
		_, err = protocol.DecodeInput(data)
	}
	if err != nil {
		req.reply <- result{err: fmt.Errorf("invalid input: %w", err)}
		return
	}
	rec := protocol.Record{Kind: protocol.KindInput, NodeID: r.cfg.Node.ID, Data: data}
	sig, isSignal := req.in.(protocol.SignalInput)
	var stored []protocol.Record
	if isSignal && sig.Action == protocol.ActionStop && (!r.cur.Stopping || r.cur.Handoff) {
		// Remembered with the record, so that a restart keeps escalating.
		// A stop asked for while the agent hands off ends the node: no
		// continuation follows.
		cur := r.cur
		cur.Stopping, cur.Handoff = true, false
		stored, err = r.cfg.Log.AppendWithCursor(ctx, r.cfg.Node.SessionID, r.cfg.Node.ID, cur.String(), rec)
		if err == nil {
			r.cur = cur
		}
	} else {
		stored, err = r.cfg.Log.Append(ctx, r.cfg.Node.SessionID, rec)
	}
	if err == nil && len(stored) != 1 {
		err = fmt.Errorf("the log stored %d records for one", len(stored))
	}
	if err != nil {
		req.reply <- result{err: fmt.Errorf("append input: %w", err)}
		return
	}
	rec = stored[0]
	if !isSignal {
		r.step = 0 // a message starts a turn
	}
	job := writeJob{line: append(data, '\n'), rec: rec, reply: req.reply}
	if isSignal {
		id := r.cfg.Node.ContainerID
		switch sig.Action {
		case protocol.ActionStop:
			r.armStop()
		case protocol.ActionPause:
			job.after = func(ctx context.Context) error { return r.cfg.Process.Pause(ctx, id) }
		case protocol.ActionResume:
			job.before = func(ctx context.Context) error { return r.cfg.Process.Unpause(ctx, id) }
		}
	}
	r.writes <- job
}

func (r *Relay) errorRecord(at time.Time, d protocol.ErrorData) protocol.Record {
	data, _ := json.Marshal(d) // strings and an int: cannot fail
	return protocol.Record{Kind: protocol.KindError, NodeID: r.cfg.Node.ID, At: at, Data: data}
}

// raw cuts a bad line to MaxRaw bytes for its error record. Invalid UTF-8 is
// replaced by U+FFFD when the record is encoded as JSON.
func (r *Relay) raw(line []byte) string {
	if len(line) > r.cfg.MaxRaw {
		line = line[:r.cfg.MaxRaw]
	}
	return string(line)
}

func (r *Relay) pushTail(line []byte) {
	if len(line) > maxTailLine {
		line = line[:maxTailLine]
	}
	if len(r.tail) == r.cfg.TailLines {
		copy(r.tail, r.tail[1:])
		r.tail = r.tail[:len(r.tail)-1]
	}
	r.tail = append(r.tail, string(line))
}

func (r *Relay) tailText() string {
	var b bytes.Buffer
	for _, l := range r.tail {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// readLoop follows the container's log from the cursor and feeds lines to
// the run goroutine. When a follow ends before the container has exited, it
// re-opens the log from where it stopped; once the container has exited it
// reads the log one last time (without follow) and closes r.lines.
func (r *Relay) readLoop(ctx context.Context, from Cursor) {
	defer close(r.lines)
	pos := from
	backoff := 100 * time.Millisecond
	for {
		final := false
		select {
		case <-r.exited:
			final = true
		default:
		}
		sk := skipper{from: pos}
		got := false
		streamErr := r.readOnce(ctx, containers.LogOptions{Since: pos.since(), Follow: !final, MaxLine: r.cfg.MaxLine},
			func(ln containers.LogLine) bool {
				s := 0
				if ln.Stream == containers.Stderr {
					s = 1
				}
				if sk.skip(s, ln.Time) {
					return true
				}
				if ln.Unterminated && !final {
					// Its rest may still come: read it again once the
					// container has exited (or the follow is re-opened).
					return false
				}
				if s == 0 {
					pos.Stdout = pos.Stdout.advance(ln.Time)
				} else {
					pos.Stderr = pos.Stderr.advance(ln.Time)
				}
				got = true
				k := min(max(len(ln.Line)/bufferToken, 1), cap(r.budget))
				for range k {
					select {
					case <-r.budget:
					case <-ctx.Done():
						return false
					}
				}
				select {
				case r.lines <- logItem{LogLine: ln, pos: pos, tokens: k}:
					return true
				case <-ctx.Done():
					return false
				}
			})
		if ctx.Err() != nil {
			return
		}
		if final {
			if streamErr != nil {
				r.log.Warn("read the exited container's log", "err", streamErr)
			}
			return
		}
		if streamErr != nil {
			r.log.Warn("follow container log; re-opening", "err", streamErr, "backoff", backoff)
		}
		if got {
			backoff = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-r.exited:
		case <-r.cfg.Clock.After(backoff):
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// readOnce opens the log once and hands each line to fn until fn returns
// false or the log ends (nil) or breaks (the error).
func (r *Relay) readOnce(ctx context.Context, opts containers.LogOptions, fn func(containers.LogLine) bool) error {
	rd, err := r.cfg.Process.Logs(ctx, r.cfg.Node.ContainerID, opts)
	if err != nil {
		return err
	}
	defer rd.Close()
	stop := context.AfterFunc(ctx, func() { rd.Close() })
	defer stop()
	for {
		ln, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !fn(ln) {
			return nil
		}
	}
}

func (r *Relay) waitLoop(ctx context.Context) {
	code, err := r.cfg.Process.Wait(ctx, r.cfg.Node.ContainerID)
	if ctx.Err() != nil {
		return
	}
	r.exitCh <- exitResult{code: code, err: err}
	close(r.exited)
}

type writeJob struct {
	line          []byte
	rec           protocol.Record
	before, after func(context.Context) error
	reply         chan result
}

// writeLoop owns the container's stdin: it writes queued inputs in order,
// attaching (again) when there is no working attachment.
func (r *Relay) writeLoop(ctx context.Context) {
	var mu sync.Mutex // guards w against the close on cancel
	var w io.WriteCloser
	stop := context.AfterFunc(ctx, func() {
		// A write to an agent that does not read its stdin blocks; closing
		// the attachment ends it.
		mu.Lock()
		defer mu.Unlock()
		if w != nil {
			w.Close()
			w = nil
		}
	})
	defer func() {
		stop()
		mu.Lock()
		defer mu.Unlock()
		if w != nil {
			w.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-r.writes:
			err := r.write(ctx, &mu, &w, j)
			if err == nil {
				select {
				case r.written <- j.rec.Seq:
				case <-ctx.Done():
				}
			}
			if err != nil && ctx.Err() == nil {
				r.log.Warn("write input", "seq", j.rec.Seq, "err", err)
				rec := r.errorRecord(time.Time{}, protocol.ErrorData{Message: fmt.Sprintf("input seq %d not delivered: %v", j.rec.Seq, err), Source: protocol.SourceRuntime})
				if _, aerr := r.cfg.Log.Append(ctx, r.cfg.Node.SessionID, rec); aerr != nil {
					r.log.Warn("append write error", "err", aerr)
				}
			}
			if j.reply != nil {
				j.reply <- result{rec: j.rec, err: err}
			}
		}
	}
}

func (r *Relay) write(ctx context.Context, mu *sync.Mutex, w *io.WriteCloser, j writeJob) error {
	if j.before != nil {
		if err := j.before(ctx); err != nil {
			return err
		}
	}
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		mu.Lock()
		cur := *w
		mu.Unlock()
		if cur == nil {
			cur, err = r.cfg.Process.AttachStdin(ctx, r.cfg.Node.ContainerID)
			if err != nil {
				err = fmt.Errorf("attach stdin: %w", err)
				continue
			}
			mu.Lock()
			if ctx.Err() != nil {
				mu.Unlock()
				cur.Close()
				return ctx.Err()
			}
			*w = cur
			mu.Unlock()
		}
		if _, err = cur.Write(j.line); err == nil {
			break
		}
		err = fmt.Errorf("write stdin: %w", err)
		mu.Lock()
		if *w == cur {
			cur.Close()
			*w = nil
		}
		mu.Unlock()
	}
	if err != nil {
		return err
	}
	if j.after != nil {
		return j.after(ctx)
	}
	return nil
}
