// Package agenttools serves the agent tools on the agent-facing API
// (FILEPATH_API_URL) for the node whose token authenticated the request
// (orchestrator.CallerFrom): list, read and message its descendants, report
// to its parent, spawn children, wait for them, keep memories, ask a
// person for approval, and the file tools (orchestrator/files) on its
// workspace. The same operations are plain REST (REST, mounted at
// /api/v1/) and an MCP server (MCP, mounted at /mcp, Streamable HTTP). Every
// call is written to the node's audit.
package agenttools

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/files"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// Defaults of Config.
const (
	DefaultApprovalTimeout = 10 * time.Minute
	DefaultMaxWait         = 10 * time.Minute
	DefaultWait            = 5 * time.Minute
	DefaultMaxPoll         = 2 * time.Minute
	DefaultMaxBody         = 1 << 20
	MaxMessageBytes        = 256 << 10
	MaxTaskBytes           = sessions.MaxTaskBytes
)

// Runner runs the agents; runner.Runner implements it.
type Runner interface {
	// StartNode starts a node's agent unless it runs.
	StartNode(ctx context.Context, userID, sessionID, nodeID string) error
	// Deliver appends an input for a running node and writes it to its stdin.
	Deliver(ctx context.Context, sessionID, nodeID string, in protocol.Input) (protocol.Record, error)
	// Running tells whether a node's agent runs.
	Running(nodeID string) bool
	// SpawnChild creates a child of parentID and starts it (the spawn event
	// is appended already).
	SpawnChild(ctx context.Context, sessionID, parentID string, ev protocol.SpawnEvent) (sessions.Node, error)
}

// Clock is the time source of the approvals' timeouts.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config configures a Server.
type Config struct {
	Store    *store.Store              // required: the sessions' logs
	Sessions *sessions.Store           // required
	Collab   *collab.Store             // required: approvals, memories
	Audit    *audit.Store              // required: the calls of the tools
	Hub      *hub.Hub[protocol.Record] // required: waits follow the session log
	Runner   Runner                    // required
	// Ship pushes a node's commits once the person approved the agent's
	// request_push (nil: request_push answers 503).
	Ship   Shipper
	Logger *slog.Logger
	Clock  Clock // nil: the real clock
	// ApprovalTimeout is how long a request waits for an answer before it
	// is denied (DefaultApprovalTimeout).
	ApprovalTimeout time.Duration
	// MaxWait bounds wait_for_children (DefaultMaxWait); MaxPoll bounds one
	// long poll of an approval (DefaultMaxPoll).
	MaxWait time.Duration
	MaxPoll time.Duration
	MaxBody int64 // bytes of a request body (DefaultMaxBody)
	// Files serves the file tools (nil: none are offered).
	Files *files.Service
	// VendorKey answers a node's adapter the key of the vendor its agent
	// runs on (GET /api/v1/vendor-key; nil: ENotFound).
	VendorKey func(ctx context.Context, sessionID, nodeID string) (name, value string, err error)
}

// Server is the agent tools. Mount REST and MCP on the agent-facing API and
// Run it (it denies the approvals nobody answers in time).
type Server struct {
	cfg      Config
	st       *store.Store
	sessions *sessions.Store
	collab   *collab.Store
	audit    *audit.Store
	hub      *hub.Hub[protocol.Record]
	run      Runner
	log      *slog.Logger
	clock    Clock
	wake     chan struct{} // a new approval may expire before the sweeper's next wake

	mcpOnce sync.Once
	mcp     mcpHandler
}

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Store == nil || cfg.Sessions == nil || cfg.Collab == nil || cfg.Audit == nil:
		return nil, errors.New("agenttools config: Store, Sessions, Collab and Audit are required")
	case cfg.Hub == nil:
		return nil, errors.New("agenttools config: Hub is required")
	case cfg.Runner == nil:
		return nil, errors.New("agenttools config: Runner is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = DefaultApprovalTimeout
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.MaxPoll <= 0 {
		cfg.MaxPoll = DefaultMaxPoll
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	return &Server{cfg: cfg, st: cfg.Store, sessions: cfg.Sessions, collab: cfg.Collab, audit: cfg.Audit, hub: cfg.Hub, run: cfg.Runner, log: cfg.Logger, clock: cfg.Clock,
		wake: make(chan struct{}, 1)}, nil
}

// Run denies every approval whose time ran out, at its deadline (also those
// that ran out while the orchestrator was down), until ctx ends.
func (s *Server) Run(ctx context.Context) {
	for {
		if _, err := s.collab.ExpireApprovals(ctx, s.clock.Now()); err != nil && ctx.Err() == nil {
			s.log.Warn("deny approvals nobody answered", "err", err)
		}
		wait := time.Hour
		if next, ok, err := s.collab.NextApprovalExpiry(ctx); err == nil && ok {
			wait = max(next.Sub(s.clock.Now()), 0)
		} else if err != nil && ctx.Err() == nil {
			wait = 10 * time.Second
			s.log.Warn("read the next approval deadline", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-s.clock.After(wait):
		}
	}
}

// nudge wakes Run to look at the deadlines again.
func (s *Server) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// errNoCaller answers a request that reached the tools without a node (it
// cannot through the agent-facing API, which authenticates first).
var errNoCaller = orchestrator.Errorf(orchestrator.EUnauthorized, "the agent tools need the node's token (FILEPATH_API_KEY)")

func callerOf(ctx context.Context) (orchestrator.Caller, error) {
	c, ok := orchestrator.CallerFrom(ctx)
	if !ok {
		return c, errNoCaller
	}
	return c, nil
}
