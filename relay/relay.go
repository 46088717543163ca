// Package relay runs one actor per running agent node: it follows the node's
// container log, validates each stdout line, appends it to the session log
// with the log cursor, applies side effects after the append, and writes
// inputs to the container's stdin.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	writes  chan *writeJob  // pointers: an idle relay's queue is 8 bytes a slot
	lines   *lineQueue      // allocates only while lines wait (lines.go)
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
	// held are the messages appended while the agent is paused
	// (cur.Paused), in order: written once it is resumed (or stopped),
	// never into a frozen container's stdin.
	held []writeJob
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
		writes:  make(chan *writeJob, cfg.MailboxLen),
		lines:   newLineQueue(cfg.MaxBatch),
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

	if r.cur.Paused {
		// Still frozen (paused before a restart): they wait for the resume.
		if n := cap(r.writes) - 1; len(pending) > n {
			pending = pending[len(pending)-n:]
		}
		r.held = pending
	} else {
		for _, j := range pending {
			r.writes <- &j
		}
	}
	if r.cur.Stopping {
		// A stop was requested before a restart: escalate as if it had just
		// been sent.
		r.stopArmed = true
		r.stopTimer = r.cfg.Clock.After(r.cfg.StopGrace)
	}
	ready := r.lines.Ready()
	linesDone := false
	for {
		if linesDone && r.exit != nil {
			r.finish(ctx)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ready:
			var done bool
			r.batch, done = r.lines.take(r.batch)
			if done {
				ready, linesDone = nil, true
			}
			if len(r.batch) == 0 {
				continue
			}
			small := len(r.batch) <= keepCap
			r.process(ctx, r.batch)
			for i := range r.batch {
				for range r.batch[i].tokens {
					r.budget <- struct{}{}
				}
				r.batch[i] = logItem{}
			}
			if small && len(ready) == 0 {
				// The burst is over (a small batch, no line waiting): let
				// its buffers go. Not after every batch: a busy relay
				// would allocate them again for each.
				r.shrink()
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
