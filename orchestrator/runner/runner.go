// Package runner is the lifecycle glue between the store, the container
// runtime and the relays: it starts agent containers with the container
// contract, runs one relay per running node, applies spawn/status/done/exit
// side effects, and reconciles nodes with the real containers at start-up.
package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator/gitnet"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/relay"
)

// Contract environment variables (docs/protocol.md "The container contract").
const (
	EnvTask      = "FILEPATH_TASK"
	EnvAPIKey    = "FILEPATH_API_KEY"
	EnvAgentID   = "FILEPATH_AGENT_ID"
	EnvSessionID = "FILEPATH_SESSION_ID"
	EnvModel     = "FILEPATH_MODEL"
	EnvAgentType = "FILEPATH_AGENT_TYPE"
	EnvParentID  = "FILEPATH_PARENT_ID"
	EnvAPIURL    = "FILEPATH_API_URL"
	// EnvStartMessage is "1" when the agent's first stdin line will be a
	// system message about this start (a restart, a continuation, health
	// checks or memories): an agent that acts on FILEPATH_TASK at once can
	// wait for it and read both together.
	EnvStartMessage = "FILEPATH_START_MESSAGE"
	// EnvVendorKey names the vendor key (e.g. AMP_API_KEY) an agent that
	// runs on its vendor's service needs; its value is read from the agent
	// API (GET /api/v1/vendor-key), never set in the container's
	// configuration.
	EnvVendorKey = "FILEPATH_VENDOR_KEY"
)

// ResumeMessage is the system message a restarted agent reads first on its
// stdin (instead of FILEPATH_TASK, which only a node's first start gets):
// its task was its first job, done already.
const ResumeMessage = "This agent was restarted: its earlier conversation is in the session log. Continue from the messages that follow."

// LabelInstance marks the containers (and their state volumes) of one
// orchestrator (one data dir): Reconcile only ever touches containers and
// volumes carrying its own instance id, so two
// orchestrators (or test runs) sharing a Docker engine leave each other alone.
const LabelInstance = "filepath.instance"

// AgentCustom is the agent type whose image the user brings.
const AgentCustom = "custom"

// StateVolume names a node's state volume (containers.Spec.StateVolume):
// every container of the node mounts it at the FILEPATH_STATE_DIR of its
// image, so an agent that keeps its session there (the CLI agents) resumes
// its conversation after a restart; it goes when the node is deleted (or,
// should the orchestrator stop before, at the next Reconcile).
func StateVolume(nodeID string) string { return "filepath-state-" + nodeID }

// Workspaces gives each node a host directory to bind-mount at /workspace.
// workspace.Manager (the FUSE view of the session VFS) satisfies it; without
// one the runner uses plain directories under <DataDir>/nodes/<node-id>.
type Workspaces interface {
	Mount(ctx context.Context, nodeID string) (string, error)
	Unmount(nodeID string) error
}

// AgentAPI serves the agent-facing API (FILEPATH_API_URL) to the
// containers; agentapi.Server implements it. Open gives a container its
// listener (before it starts, so the agent reaches the API from its first
// instruction, or when it is re-attached), Close takes it away when the
// container exits or is removed. ProxyURL is the egress proxy for the
// container whose token is key ("" : none).
type AgentAPI interface {
	URL() string
	ProxyURL(key string) string
	Open(ctx context.Context, nodeID, containerID string) error
	Close(nodeID string)
}

// VendorKeys opens a session's vendor keys; secrets.Store implements it.
type VendorKeys interface {
	// OpenForSession returns the secret name of sessionID's owner (the
	// session's own, else the user's); ENotFound when there is none.
	OpenForSession(ctx context.Context, sessionID, name string) (secrets.Secret, error)
}

// Config configures a Runner.
type Config struct {
	Store    *store.Store       // required: the sessions' logs
	Users    *identity.Store    // required: the nodes' API keys
	Sessions *sessions.Store    // required
	Collab   *collab.Store      // required: approvals to withdraw
	Runtime  containers.Runtime // required
	DataDir  string             // required: nodes/<id> workspaces (plain), logs/<id>.log
	// Workspaces replaces the plain per-node directories (the FUSE seam).
	Workspaces Workspaces
	// WorkspacePropagation is passed to the runtime for /workspace
	// (workspace.Propagation with FUSE; "" for plain directories).
	WorkspacePropagation string
	Network              string            // "" : the runtime's default
	Limits               containers.Limits // zero fields: containers.DefaultLimits
	LogMaxBytes          int64             // per-node stderr log bound (relay.DefaultLogMaxBytes)
	// Cmd returns the argv for a node (containers.Spec.Cmd); nil: the
	// image's own command. The process runtime needs it.
	Cmd    func(sessions.Node) []string
	Logger *slog.Logger
	// CloneTimeout bounds cloning the session's repository into the
	// workspace before its first agent starts (DefaultCloneTimeout).
	CloneTimeout time.Duration
	// GitAllowPrivate lets a session clone from a host that is or resolves
	// to a loopback, private or link-local address (--git-allow-private);
	// Resolver looks hosts up for that check (nil: the system's).
	GitAllowPrivate bool
	Resolver        gitnet.Resolver

	// Relay settings (zero: the relay's defaults).
	MaxLine    int
	MaxBatch   int
	MailboxLen int
	StopGrace  time.Duration
	KillGrace  time.Duration
	Clock      relay.Clock
	// NotifyTimeout bounds delivering "<child> finished" to a parent (10s).
	NotifyTimeout time.Duration

	// AgentAPI, when set, is FILEPATH_API_URL and gets a listener for each
	// running container.
	AgentAPI AgentAPI
	// ProviderKeys reports whether the orchestrator has the key of an LLM
	// provider (orchestrator.Provider*). When set, a catalog agent whose
	// provider has none fails to start with an error naming the variable
	// to set. nil: no check.
	ProviderKeys func(provider string) bool

	// Health checks before every agent session (first start, restart,
	// continuation): CheckTimeout is a check's time limit when the session
	// sets none (DefaultCheckTimeout), CheckOutput the bytes of output kept
	// of each (DefaultCheckOutput), CheckConcurrency how many run at once
	// on this machine (DefaultCheckConcurrency).
	CheckTimeout     time.Duration
	CheckOutput      int
	CheckConcurrency int
	// VendorKeys opens the vendor key a catalog agent that runs on its
	// vendor's service needs (orchestrator.Agent.VendorKey), as the
	// session's owner holds it (secrets.Store); nil: such agents fail to
	// start, naming the key.
	VendorKeys VendorKeys
	// Memories gives each agent session the memories relevant to its task
	// (nil: none); MemoryLimit bounds them (DefaultMemoryLimit).
	Memories    Memories
	MemoryLimit int
	// Forks makes a child's forked workspace (spawn with workspace
	// "fork"); nil: such a spawn is refused.
	Forks Forks
	// Import brings a repository cloned on the host into a node's
	// workspace in bulk (clone.go); nil: git clones into the workspace
	// directory itself (plain directories).
	Import TreeImporter
}

// Forks makes copy-on-write forks of workspaces for nodes; vfs.VFS
// satisfies it through cmd/filepath.
type Forks interface {
	// ForkForNode forks the workspace parentID works on for its new child.
	ForkForNode(ctx context.Context, sessionID, parentID, childID string) error
}

// Runner implements the API's lifecycle interface and relay.Effects.
type Runner struct {
	cfg      Config
	st       *store.Store
	users    *identity.Store
	sessions *sessions.Store
	collab   *collab.Store
	rt       containers.Runtime
	ws       Workspaces
	logs     *relay.LogDir
	log      *slog.Logger
	// instance is this data dir's id (<DataDir>/instance), the value of
	// LabelInstance on every container the runner creates.
	instance string

	ctx    context.Context // lives until Close; relays and notifications run under it
	cancel context.CancelFunc
	wg     sync.WaitGroup // relay watchers and parent notifications

	mu     sync.Mutex // guards relays, starting, lent, continuing, startErr, deleting, reconciling and closed
	relays map[string]*relay.Relay
	// starting holds the nodes whose agent is being started: its container
	// is created, its health checks run, it has no relay yet.
	starting map[string]*startJob
	// lent counts the loans of each node's workspace (Workspace): a lent
	// workspace is not unmounted when its container exits.
	lent map[string]int
	// continuing holds the nodes whose agent exited after a handoff: the
	// end of its relay starts the continuation.
	continuing map[string]bool
	// startErr is the error the last start of a node failed with: the same
	// failure again (a message to a node that cannot start) is answered,
	// not recorded in its chat a second time.
	startErr map[string]string
	checkSem chan struct{} // CheckConcurrency tokens
	// deleting holds the sessions being deleted: no new container starts
	// in them (a spawn racing the delete would leave one running).
	deleting map[string]bool
	// reconciling: Reconcile is attaching relays; a relay that ends
	// meanwhile leaves settling its session to Reconcile (a sibling may
	// not be attached yet).
	reconciling bool
	closed      bool

	// statusMu serializes a session's status decisions: settleSession
	// (nothing runs any more: stopped or error) against the starts that mark
	// a session running. A start marks it after its relay is in the map, so
	// a settle either sees that relay or is overwritten by the start: never
	// a session shown stopped while its agent runs. Taken before mu, never
	// held while waiting on a relay.
	statusMu sync.Mutex
	// settleHook, when set (tests), runs in settleSession after it found no
	// relay of the session, before it reads and writes the session;
	// settledHook when settleSession returns.
	settleHook, settledHook func()
}

func (r *Runner) isDeleting(sessionID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deleting[sessionID]
}

var _ relay.Effects = (*Runner)(nil)

// New checks cfg and returns a Runner. Call Reconcile once before serving.
func New(cfg Config) (*Runner, error) {
	switch {
	case cfg.Store == nil || cfg.Users == nil || cfg.Sessions == nil || cfg.Collab == nil:
		return nil, errors.New("runner config: Store, Users, Sessions and Collab are required")
	case cfg.Runtime == nil:
		return nil, errors.New("runner config: Runtime is required")
	case cfg.DataDir == "":
		return nil, errors.New("runner config: DataDir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NotifyTimeout <= 0 {
		cfg.NotifyTimeout = 10 * time.Second
	}
	logs, err := relay.NewLogDir(filepath.Join(cfg.DataDir, "logs"), cfg.LogMaxBytes)
	if err != nil {
		return nil, err
	}
	instance, err := instanceID(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if err := clearClones(cfg.DataDir); err != nil {
		return nil, err
	}
	ws := cfg.Workspaces
	if ws == nil {
		ws = plainDirs{root: filepath.Join(cfg.DataDir, "nodes")}
	}
	if cfg.CheckConcurrency <= 0 {
		cfg.CheckConcurrency = DefaultCheckConcurrency
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner{cfg: cfg, st: cfg.Store, users: cfg.Users, sessions: cfg.Sessions, collab: cfg.Collab, rt: cfg.Runtime, ws: ws, logs: logs, log: cfg.Logger, instance: instance,
		ctx: ctx, cancel: cancel, relays: map[string]*relay.Relay{}, starting: map[string]*startJob{}, lent: map[string]int{},
		continuing: map[string]bool{}, startErr: map[string]string{}, checkSem: make(chan struct{}, cfg.CheckConcurrency)}, nil
}

// Close detaches every relay and waits for them; the containers keep
// running and a later Runner re-attaches. Safe to call more than once.
func (r *Runner) Close() error {
	r.mu.Lock()
	r.closed = true
	rels := make([]*relay.Relay, 0, len(r.relays))
	for _, rel := range r.relays {
		rels = append(rels, rel)
	}
	r.mu.Unlock()
	r.cancel()
	for _, rel := range rels {
		rel.Close()
	}
	r.wg.Wait()
	return nil
}

// Running reports whether nodeID's agent runs (it has a relay) or is
// being started.
func (r *Runner) Running(nodeID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.relays[nodeID] != nil || r.starting[nodeID] != nil
}

// NodeLog returns the tail of a node's stderr log (the API's LogSource).
func (r *Runner) NodeLog(_ context.Context, _, nodeID string, tailLines int) ([]byte, error) {
	return r.logs.Logs(nodeID, tailLines)
}

// instanceID reads <dataDir>/instance, creating it with a random id first.
func instanceID(dataDir string) (string, error) {
	p := filepath.Join(dataDir, "instance")
	b, err := os.ReadFile(p)
	if err == nil && len(bytes.TrimSpace(b)) > 0 {
		return string(bytes.TrimSpace(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read instance id: %w", err)
	}
	var raw [12]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("make instance id: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return "", fmt.Errorf("create data dir: %w", err)
	}
	if err := os.WriteFile(p, []byte(id+"\n"), 0o640); err != nil {
		return "", fmt.Errorf("write instance id: %w", err)
	}
	return id, nil
}
