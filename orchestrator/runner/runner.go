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
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/gitnet"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/protocol"
	"github.com/filepath-dev/filepath/relay"
)

// Contract environment variables (DESIGN "The container contract").
const (
	EnvTask      = "FILEPATH_TASK"
	EnvAPIKey    = "FILEPATH_API_KEY"
	EnvAgentID   = "FILEPATH_AGENT_ID"
	EnvSessionID = "FILEPATH_SESSION_ID"
	EnvModel     = "FILEPATH_MODEL"
	EnvAgentType = "FILEPATH_AGENT_TYPE"
	EnvParentID  = "FILEPATH_PARENT_ID"
	EnvAPIURL    = "FILEPATH_API_URL"
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
// containers; agentapi.Server implements it. Open gives a container that
// just started (or was re-attached) its listener, Close takes it away when
// the container exits or is removed.
type AgentAPI interface {
	URL() string
	Open(ctx context.Context, nodeID, containerID string) error
	Close(nodeID string)
}

// Config configures a Runner.
type Config struct {
	Store   *store.Store       // required
	Runtime containers.Runtime // required
	DataDir string             // required: nodes/<id> workspaces (plain), logs/<id>.log
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
	Cmd    func(store.Node) []string
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
	cfg  Config
	st   *store.Store
	rt   containers.Runtime
	ws   Workspaces
	logs *relay.LogDir
	log  *slog.Logger
	// instance is this data dir's id (<DataDir>/instance), the value of
	// LabelInstance on every container the runner creates.
	instance string

	ctx    context.Context // lives until Close; relays and notifications run under it
	cancel context.CancelFunc
	wg     sync.WaitGroup // relay watchers and parent notifications

	mu     sync.Mutex // guards relays, starting, continuing, deleting, reconciling and closed
	relays map[string]*relay.Relay
	// starting holds the nodes whose agent is being started: its container
	// is created, its health checks run, it has no relay yet.
	starting map[string]*startJob
	// continuing holds the nodes whose agent exited after a handoff: the
	// end of its relay starts the continuation.
	continuing map[string]bool
	checkSem   chan struct{} // CheckConcurrency tokens
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
	case cfg.Store == nil:
		return nil, errors.New("runner config: Store is required")
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
	return &Runner{cfg: cfg, st: cfg.Store, rt: cfg.Runtime, ws: ws, logs: logs, log: cfg.Logger, instance: instance,
		ctx: ctx, cancel: cancel, relays: map[string]*relay.Relay{}, starting: map[string]*startJob{},
		continuing: map[string]bool{}, checkSem: make(chan struct{}, cfg.CheckConcurrency)}, nil
}

// startJob is an agent start in progress (Runner.starting).
type startJob struct {
	sessionID string
	cancel    context.CancelFunc
	done      chan struct{}
	stopped   bool // canceled by a stop or a delete; guarded by Runner.mu
}

// waitStarting waits until nodeID's agent start in progress (if any) has
// ended, so that what is delivered to it follows its first message.
func (r *Runner) waitStarting(ctx context.Context, nodeID string) error {
	r.mu.Lock()
	job := r.starting[nodeID]
	r.mu.Unlock()
	if job == nil {
		return nil
	}
	select {
	case <-job.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cancelStart stops nodeID's agent start in progress (a stop or delete)
// and waits for it to end (bounded by ctx).
func (r *Runner) cancelStart(ctx context.Context, nodeID string) {
	r.mu.Lock()
	job := r.starting[nodeID]
	if job != nil {
		job.stopped = true
		job.cancel()
	}
	r.mu.Unlock()
	if job != nil {
		select {
		case <-job.done:
		case <-ctx.Done():
		}
	}
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

func (r *Runner) relayOf(nodeID string) *relay.Relay {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.relays[nodeID]
}

// StartSession starts the container of the session's root node (a fresh
// container if it ran before) and marks the session running.
func (r *Runner) StartSession(ctx context.Context, userID, sessionID string) error {
	sess, err := r.st.GetSession(ctx, userID, sessionID)
	if err != nil {
		return err
	}
	if sess.RootNodeID == nil {
		return orchestrator.Errorf(orchestrator.EConflict, "session %s has no root node: add an agent first", sessionID)
	}
	if !r.Running(*sess.RootNodeID) {
		node, err := r.st.GetNode(ctx, userID, sessionID, *sess.RootNodeID)
		if err != nil {
			return err
		}
		if err := r.startNode(ctx, sess, node); err != nil {
			if serr := r.st.UpdateSessionStatus(context.WithoutCancel(ctx), sessionID, store.SessionError); serr != nil {
				r.log.Warn("mark session error", "session", sessionID, "err", serr)
			}
			return err
		}
	}
	return r.markRunning(ctx, sessionID)
}

// markRunning marks a session running after one of its agents started.
func (r *Runner) markRunning(ctx context.Context, sessionID string) error {
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	return r.st.UpdateSessionStatus(ctx, sessionID, store.SessionRunning)
}

// StartNode starts nodeID's container when it is not running (a node just
// spawned through the API, or one that exited and gets a new message) and
// marks the session running. A node that fails to start is marked error with
// an error record naming the reason, and the error is returned.
func (r *Runner) StartNode(ctx context.Context, userID, sessionID, nodeID string) error {
	sess, err := r.st.GetSession(ctx, userID, sessionID)
	if err != nil {
		return err
	}
	node, err := r.st.GetNode(ctx, userID, sessionID, nodeID)
	if err != nil {
		return err
	}
	if r.Running(nodeID) {
		return nil
	}
	if err := r.startNode(ctx, sess, node); err != nil {
		if sess.RootNodeID != nil && *sess.RootNodeID == nodeID && sess.Status != store.SessionRunning {
			// Nothing runs: the session shows that its agent failed.
			if serr := r.st.UpdateSessionStatus(context.WithoutCancel(ctx), sessionID, store.SessionError); serr != nil {
				r.log.Warn("mark session error", "session", sessionID, "err", serr)
			}
		}
		return err
	}
	// Even when sess said running: a settle of the session may have read the
	// relay map before this start and may be about to write stopped.
	return r.markRunning(ctx, sessionID)
}

// StopSession delivers signal{stop} to every running node of the session,
// concurrently; each relay escalates to SIGTERM and SIGKILL after its grace
// period. A node whose relay cannot take the signal (mailbox full) is
// stopped through the runtime at once. It marks the session stopped.
func (r *Runner) StopSession(ctx context.Context, userID, sessionID string) error {
	nodes, err := r.st.Tree(ctx, userID, sessionID)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { r.cancelStart(ctx, n.ID) })
		rel := r.relayOf(n.ID)
		if rel == nil {
			continue
		}
		wg.Go(func() {
			// The relay arms its escalation when it appends the signal; the
			// wait is only for the write, which a stuck agent may block.
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := rel.Deliver(dctx, protocol.SignalInput{Type: protocol.TypeSignal, Action: protocol.ActionStop})
			if errors.Is(err, relay.ErrMailboxFull) {
				r.log.Warn("stop: mailbox full; stopping the container directly", "node", n.ID)
				r.goTracked(func() {
					if err := r.rt.Stop(r.ctx, rel.Node().ContainerID, r.killGrace()); err != nil && r.ctx.Err() == nil {
						r.log.Warn("stop container", "node", n.ID, "err", err)
					}
				})
			} else if err != nil && !errors.Is(err, relay.ErrExited) && !errors.Is(err, relay.ErrClosed) {
				r.log.Warn("stop: deliver signal", "node", n.ID, "err", err)
			}
		})
	}
	wg.Wait()
	return r.st.UpdateSessionStatus(ctx, sessionID, store.SessionStopped)
}

// goTracked runs f in a goroutine Close waits for, unless Close has begun.
func (r *Runner) goTracked(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.wg.Go(f)
	}
}

func (r *Runner) killGrace() time.Duration {
	if r.cfg.KillGrace > 0 {
		return r.cfg.KillGrace
	}
	return relay.DefaultKillGrace
}

// Deliver appends an input for a running node and writes it to its stdin.
// To a node whose agent is being started it is delivered once the agent
// runs, after its first message.
func (r *Runner) Deliver(ctx context.Context, sessionID, nodeID string, in protocol.Input) (store.Record, error) {
	if err := r.waitStarting(ctx, nodeID); err != nil {
		return store.Record{}, orchestrator.Errorf(orchestrator.EUnavailable, "node %s is still starting (its health checks run): %v; retry later", nodeID, err)
	}
	rel := r.relayOf(nodeID)
	if rel == nil || rel.Node().SessionID != sessionID {
		return store.Record{}, orchestrator.Errorf(orchestrator.EConflict, "node %s is not running: start the session first", nodeID)
	}
	rec, err := rel.Deliver(ctx, in)
	if errors.Is(err, relay.ErrStopping) {
		// The agent is on its way out (a stop, a handoff): the message
		// goes to the node's next container instead of being lost.
		if rel, err = r.nextRelay(ctx, sessionID, nodeID, rel); err == nil {
			rec, err = rel.Deliver(ctx, in)
		}
	}
	switch {
	case err == nil:
		// rec is the record as stored (the relay's Log returns it).
		return store.Record{SessionID: sessionID, Seq: rec.Seq, Kind: rec.Kind, NodeID: rec.NodeID, At: rec.At, Data: rec.Data}, nil
	case errors.Is(err, relay.ErrMailboxFull):
		return store.Record{}, orchestrator.Errorf(orchestrator.EUnavailable, "node %s: %v; retry later", nodeID, err)
	case errors.Is(err, relay.ErrExited), errors.Is(err, relay.ErrClosed):
		return store.Record{}, orchestrator.Errorf(orchestrator.EConflict, "node %s is not running", nodeID)
	case isInvalidInput(err):
		return store.Record{}, orchestrator.Errorf(orchestrator.EInvalid, "%v", err)
	default:
		return store.Record{}, err
	}
}

// nextRelay waits for old, the relay of a stopping agent, to end, and
// returns the relay of the node's next container: the continuation after a
// handoff, or a fresh start (as a message to a stopped node makes).
func (r *Runner) nextRelay(ctx context.Context, sessionID, nodeID string, old *relay.Relay) (*relay.Relay, error) {
	bound := r.cfg.StopGrace + r.cfg.KillGrace + 30*time.Second
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-old.Done():
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, orchestrator.Errorf(orchestrator.EUnavailable, "node %s is stopping and did not end within %s; retry later", nodeID, bound)
	}
	// The old relay leaves the map just after it ends, and a continuation
	// starts right after that: give them a moment before starting anew.
	deadline := time.Now().Add(2 * time.Second)
	for {
		if err := r.waitStarting(ctx, nodeID); err != nil {
			return nil, err
		}
		r.mu.Lock()
		cur, starting := r.relays[nodeID], r.starting[nodeID] != nil
		r.mu.Unlock()
		switch {
		case starting:
			continue
		case cur != nil && cur != old:
			return cur, nil
		case cur == nil && time.Now().After(deadline):
			sess, err := r.st.SessionByID(ctx, sessionID)
			if err != nil {
				return nil, err
			}
			if err := r.StartNode(ctx, sess.UserID, sessionID, nodeID); err != nil {
				return nil, err
			}
			if err := r.waitStarting(ctx, nodeID); err != nil {
				return nil, err
			}
			if cur := r.relayOf(nodeID); cur != nil && cur != old {
				return cur, nil
			}
			return nil, orchestrator.Errorf(orchestrator.EConflict, "node %s stopped and did not start again", nodeID)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func isInvalidInput(err error) bool {
	var de *protocol.DecodeError
	return errors.As(err, &de)
}

// DeleteNode removes the containers, workspaces and logs of nodeID's
// subtree; call it before store.DeleteNode.
func (r *Runner) DeleteNode(ctx context.Context, userID, sessionID, nodeID string) error {
	nodes, err := r.st.Tree(ctx, userID, sessionID)
	if err != nil {
		return err
	}
	kids := map[string][]store.Node{}
	byID := map[string]store.Node{}
	for _, n := range nodes {
		byID[n.ID] = n
		if n.ParentID != nil {
			kids[*n.ParentID] = append(kids[*n.ParentID], n)
		}
	}
	root, ok := byID[nodeID]
	if !ok {
		return orchestrator.Errorf(orchestrator.ENotFound, "node %s not found", nodeID)
	}
	var subtree []store.Node
	var walk func(n store.Node)
	walk = func(n store.Node) {
		subtree = append(subtree, n)
		for _, k := range kids[n.ID] {
			walk(k)
		}
	}
	walk(root)
	return r.removeNodes(ctx, subtree)
}

// DeleteSession removes every container, workspace and log of the session
// (also containers whose node is unknown); call it before
// store.DeleteSession.
func (r *Runner) DeleteSession(ctx context.Context, userID, sessionID string) error {
	nodes, err := r.st.Tree(ctx, userID, sessionID)
	if err != nil {
		return err
	}
	// From here on no container starts in this session; one created just
	// before is in the list below (startNode checks again after creating).
	r.mu.Lock()
	if r.deleting == nil {
		r.deleting = map[string]bool{}
	}
	r.deleting[sessionID] = true
	r.mu.Unlock()
	errs := []error{r.removeNodes(ctx, nodes)}
	infos, err := r.rt.List(ctx, map[string]string{containers.LabelSession: sessionID, LabelInstance: r.instance})
	if err != nil {
		errs = append(errs, err)
	}
	for _, in := range infos {
		if err := r.rt.Remove(ctx, in.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (r *Runner) removeNodes(ctx context.Context, nodes []store.Node) error {
	var errs []error
	for _, n := range nodes {
		r.cancelStart(ctx, n.ID)
		r.mu.Lock()
		rel := r.relays[n.ID]
		delete(r.relays, n.ID)
		r.mu.Unlock()
		if rel != nil {
			rel.Close()
		}
		r.closeAPI(n.ID)
		if n.ContainerID != "" {
			if err := r.rt.Remove(ctx, n.ContainerID); err != nil {
				errs = append(errs, err)
			}
		}
		if err := r.ws.Unmount(n.ID); err != nil {
			errs = append(errs, err)
		}
		if err := r.rt.RemoveVolume(ctx, StateVolume(n.ID)); err != nil {
			errs = append(errs, err)
		}
		if err := r.logs.Remove(n.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// startNode starts a fresh agent for node: its first (with its task) or a
// restart (with the resume message).
func (r *Runner) startNode(ctx context.Context, sess store.Session, node store.Node) error {
	p := &startPlan{kind: startRestart}
	if node.StartedAt == nil {
		p.kind = startFirst
	}
	return r.start(ctx, sess, node, p)
}

// start creates a fresh container for node and hands it to a goroutine
// that runs the health checks in the workspace, appends the first system
// message and starts the container with its relay (prepare). The container
// id is saved before anything starts, so that a crash in between leaves
// something Reconcile finds. What fails here is returned (and recorded on
// the node); what fails later is recorded on the node.
func (r *Runner) start(ctx context.Context, sess store.Session, node store.Node, p *startPlan) (err error) {
	defer func() {
		if err != nil {
			ctx := context.WithoutCancel(ctx)
			r.releaseWorkspace(node.ID) // no container of this start runs
			r.recordError(ctx, node, "start agent: "+err.Error())
			st := store.NodeError
			if _, perr := r.st.PatchNode(ctx, node.SessionID, node.ID, store.NodePatch{Status: &st}); perr != nil {
				r.log.Warn("mark node error", "node", node.ID, "err", perr)
			}
		}
	}()
	if r.isDeleting(sess.ID) {
		return orchestrator.Errorf(orchestrator.ENotFound, "session %s is being deleted", sess.ID)
	}
	image := node.Image
	if image == "" {
		agent, ok := orchestrator.AgentByType(node.AgentType)
		if !ok || agent.Image == "" {
			return orchestrator.FieldErrorf("image", "node %s (%s) has no image", node.ID, node.AgentType)
		}
		image = agent.Image
	}
	if err := r.checkProviderKey(node); err != nil {
		return err
	}
	vendorEnv, err := r.vendorKey(ctx, node)
	if err != nil {
		return err
	}
	p.sess, p.node, p.image = sess, node, image
	switch p.kind {
	case startFirst:
		// The task is the first start's: a restart gets ResumeMessage.
		if p.task, err = r.firstTask(ctx, node); err != nil {
			return err
		}
		p.query = p.task
	case startContinuation:
		p.task, p.query = p.summary, p.summary
	case startRestart:
		if node.Generation > 1 {
			if rec, err := r.st.LastRecordOf(ctx, node.SessionID, node.ID, store.KindSystem, protocol.SystemContinuation); err == nil {
				var d protocol.SystemData
				if json.Unmarshal(rec.Data, &d) == nil {
					p.summary, p.query = d.Summary, d.Summary
				}
			}
		}
		if p.query == "" {
			// The memories of a restart are the task's.
			if p.query, err = r.firstTask(ctx, node); err != nil {
				return err
			}
		}
	}
	// One token per container: whatever an earlier container of the node
	// held is revoked before the new one is made (and the new one goes if
	// this start fails).
	if err := r.revokeTokens(ctx, node.ID); err != nil {
		return err
	}
	key, _, err := r.st.CreateNodeAPIKey(ctx, sess.UserID, sess.ID, node.ID)
	if err != nil {
		return fmt.Errorf("create node api key: %w", err)
	}
	defer func() {
		if err != nil {
			if rerr := r.revokeTokens(context.WithoutCancel(ctx), node.ID); rerr != nil {
				r.log.Warn("revoke the token of a node that did not start", "node", node.ID, "err", rerr)
			}
		}
	}()
	dir, err := r.ws.Mount(ctx, node.ID)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	p.dir = dir
	if p.cloned, err = r.cloneRepo(ctx, sess, node, dir); err != nil {
		return err
	}
	parent := ""
	if node.ParentID != nil {
		parent = *node.ParentID
	}
	var cmd []string
	if r.cfg.Cmd != nil {
		cmd = r.cfg.Cmd(node)
	}
	if node.ContainerID != "" {
		if err := r.rt.Remove(ctx, node.ContainerID); err != nil {
			return fmt.Errorf("remove the previous container: %w", err)
		}
	}
	env := map[string]string{
		EnvTask: p.task, EnvAPIKey: key, EnvAgentID: node.ID, EnvSessionID: sess.ID,
		EnvModel: node.Model, EnvAgentType: node.AgentType, EnvParentID: parent,
		EnvAPIURL: r.apiURL(),
	}
	maps.Copy(env, vendorEnv)
	id, err := r.rt.Create(ctx, containers.Spec{
		SessionID:            sess.ID,
		NodeID:               node.ID,
		Image:                image,
		Env:                  env,
		Labels:               map[string]string{LabelInstance: r.instance},
		StateVolume:          StateVolume(node.ID),
		WorkspaceDir:         dir,
		WorkspacePropagation: r.cfg.WorkspacePropagation,
		Network:              r.cfg.Network,
		Limits:               r.cfg.Limits,
		Cmd:                  cmd,
	})
	if err != nil {
		if node.AgentType != AgentCustom && orchestrator.ErrorField(err) == "image" {
			// A built-in agent's image is built by images/build.sh.
			return orchestrator.Errorf(orchestrator.EUnavailable, "the %s agent's image %s is not on this machine: build it with `make images` (images/build.sh %s), or spawn a custom agent with an image you have", node.AgentType, image, node.AgentType)
		}
		return err
	}
	if r.isDeleting(sess.ID) {
		r.rt.Remove(context.WithoutCancel(ctx), id)
		return orchestrator.Errorf(orchestrator.ENotFound, "session %s is being deleted", sess.ID)
	}
	// Every input so far is history (the task goes in FILEPATH_TASK): the
	// relay must not write any of it to the new container's stdin.
	last, err := r.st.LastSeq(ctx, node.SessionID)
	if err != nil {
		r.rt.Remove(context.WithoutCancel(ctx), id)
		return err
	}
	running, cursor := store.NodeRunning, relay.Cursor{Input: last}.String()
	node, err = r.st.PatchNode(ctx, node.SessionID, node.ID, store.NodePatch{
		ContainerID: &id, LogCursor: &cursor, Status: &running, ClearExitCode: true, ClearContextPct: true,
	})
	if err != nil {
		r.rt.Remove(context.WithoutCancel(ctx), id)
		return err
	}
	p.node, p.id, p.cursor = node, id, cursor
	return r.launch(p)
}

// launch runs prepare in a goroutine of its own, as the node's start in
// progress. A start that fails there is recorded on the node (error) and
// its container removed; one canceled by a stop or delete leaves the node
// idle; one cut short by Close is left for Reconcile to start again.
func (r *Runner) launch(p *startPlan) error {
	ctx, cancel := context.WithCancel(r.ctx)
	job := &startJob{sessionID: p.node.SessionID, cancel: cancel, done: make(chan struct{})}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		cancel()
		r.rt.Remove(context.Background(), p.id)
		return orchestrator.Errorf(orchestrator.EUnavailable, "the orchestrator is shutting down")
	}
	r.starting[p.node.ID] = job
	r.wg.Go(func() {
		defer cancel()
		err := r.prepare(ctx, p)
		r.mu.Lock()
		delete(r.starting, p.node.ID)
		stopped, closing := job.stopped, r.closed || r.ctx.Err() != nil
		r.mu.Unlock()
		defer close(job.done)
		if err == nil || (closing && !stopped) {
			return
		}
		wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer wcancel()
		node := p.node
		if rerr := r.rt.Remove(wctx, p.id); rerr != nil {
			r.log.Warn("remove the container of a start that did not finish", "node", node.ID, "err", rerr)
		}
		r.releaseWorkspace(node.ID) // mounted again at its next start
		if rerr := r.revokeTokens(wctx, node.ID); rerr != nil {
			r.log.Warn("revoke the token of a node that did not start", "node", node.ID, "err", rerr)
		}
		status, empty := store.NodeIdle, ""
		if !stopped {
			status = store.NodeError
			r.recordError(wctx, node, "start agent: "+err.Error())
		}
		if _, perr := r.st.PatchNode(wctx, node.SessionID, node.ID, store.NodePatch{Status: &status, ContainerID: &empty}); perr != nil && !permanent(perr) {
			r.log.Warn("mark a node that did not start", "node", node.ID, "err", perr)
		}
		if serr := r.settleSession(wctx, node.SessionID); serr != nil && !permanent(serr) {
			r.log.Warn("settle session", "session", node.SessionID, "err", serr)
		}
	})
	r.mu.Unlock()
	return nil
}

// revokeTokens deletes the node's container tokens (DESIGN invariant 9: a
// token dies with its container).
func (r *Runner) revokeTokens(ctx context.Context, nodeID string) error {
	if _, err := r.st.DeleteNodeAPIKeys(ctx, nodeID); err != nil {
		return fmt.Errorf("revoke the node's token: %w", err)
	}
	// Nobody is left to receive an answer to the requests it was waiting
	// on: withdraw them, so the inbox does not ask a person about them.
	if _, err := r.st.WithdrawNodeApprovals(ctx, nodeID); err != nil {
		return fmt.Errorf("withdraw the node's pending approvals: %w", err)
	}
	return nil
}

// firstTask is the content of the node's first input message (its task).
func (r *Runner) firstTask(ctx context.Context, node store.Node) (string, error) {
	recs, err := r.st.Records(ctx, node.SessionID, 0, 4, node.ID)
	if err != nil {
		return "", err
	}
	for _, rec := range recs {
		if rec.Kind != store.KindInput {
			continue
		}
		in, err := protocol.DecodeInput(rec.Data)
		if m, ok := in.(protocol.MessageInput); err == nil && ok {
			return m.Content, nil
		}
	}
	return "", nil
}

// checkProviderKey refuses a catalog agent whose LLM provider's key the
// orchestrator does not have: it could start, but never think.
func (r *Runner) checkProviderKey(node store.Node) error {
	if r.cfg.ProviderKeys == nil || node.AgentType == AgentCustom {
		return nil
	}
	agent, ok := orchestrator.AgentByType(node.AgentType)
	if !ok || agent.Provider == "" || r.cfg.ProviderKeys(agent.Provider) {
		return nil
	}
	return orchestrator.Errorf(orchestrator.EUnavailable,
		"the %s agent reaches its model through %s, and this orchestrator has no %s key: set %s where filepath serve runs and restart it",
		node.AgentType, agent.Provider, agent.Provider, orchestrator.ProviderKeyEnv(agent.Provider))
}

// vendorKey is the environment giving a catalog agent that runs on its
// vendor's service (Agent.VendorKey) its key, a secret of the session; an
// error naming the key when the session has none.
func (r *Runner) vendorKey(ctx context.Context, node store.Node) (map[string]string, error) {
	agent, ok := orchestrator.AgentByType(node.AgentType)
	if node.AgentType == AgentCustom || !ok || agent.VendorKey == "" {
		return nil, nil
	}
	v, err := r.st.OpenSessionSecret(ctx, node.SessionID, agent.VendorKey)
	if orchestrator.ErrorCode(err) == orchestrator.ENotFound {
		return nil, orchestrator.FieldErrorf("agent_type", "the %s agent runs on %s's own service and needs %s: set it on the session (PUT /api/v1/sessions/%s/secrets/%s, or in the spawn dialog) and send the node a message",
			agent.Type, agent.Name, agent.VendorKey, node.SessionID, agent.VendorKey)
	}
	if err != nil {
		return nil, err
	}
	return map[string]string{agent.VendorKey: v}, nil
}

// attach starts the relay of a node whose container exists, after opening
// the container's agent-facing API listener.
func (r *Runner) attach(node store.Node, cursor string) error {
	parent := ""
	if node.ParentID != nil {
		parent = *node.ParentID
	}
	r.openAPI(node)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.closeAPI(node.ID)
		return orchestrator.Errorf(orchestrator.EUnavailable, "the orchestrator is shutting down")
	}
	if r.relays[node.ID] != nil {
		return nil
	}
	rel, err := relay.Start(r.ctx, relay.Config{
		Node:   relay.Node{SessionID: node.SessionID, ID: node.ID, ParentID: parent, Name: node.Name, ContainerID: node.ContainerID},
		Cursor: cursor, Log: storeLog{st: r.st}, Process: r.rt, Effects: r, LogDir: r.logs,
		Clock: r.cfg.Clock, Logger: r.log, Permanent: permanent,
		MaxBatch: r.cfg.MaxBatch, MailboxLen: r.cfg.MailboxLen, MaxLine: r.cfg.MaxLine,
		StopGrace: r.cfg.StopGrace, KillGrace: r.cfg.KillGrace,
	})
	if err != nil {
		r.closeAPI(node.ID)
		return err
	}
	r.relays[node.ID] = rel
	r.wg.Go(func() {
		<-rel.Done()
		// The container exited, was removed, or the runner closes: its
		// listener goes (a new runner opens it again). Before the relay
		// leaves the map, so a new start of the node keeps its own.
		r.closeAPI(node.ID)
		r.mu.Lock()
		if r.relays[node.ID] == rel {
			delete(r.relays, node.ID)
		}
		// Settled here, after the relay left the map, not in Exited: of
		// two relays of a session ending at once, the later one to leave
		// sees no other and settles the session.
		settle := !r.closed && !r.reconciling
		cont := r.continuing[node.ID] && !r.closed
		delete(r.continuing, node.ID)
		r.mu.Unlock()
		if cont {
			// Before settling: the continuation's start counts as running.
			r.continueNode(node.SessionID, node.ID)
		}
		if settle {
			ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
			if err := r.settleSession(ctx, node.SessionID); err != nil && r.ctx.Err() == nil && !permanent(err) {
				r.log.Warn("settle session", "session", node.SessionID, "err", err)
			}
			cancel()
		}
		if err := rel.Err(); err != nil {
			r.log.Warn("relay ended", "node", node.ID, "err", err)
			if permanent(err) && r.ctx.Err() == nil {
				// The node or session was deleted under a running relay
				// (without DeleteNode/DeleteSession): do their cleanup.
				ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
				defer cancel()
				if err := r.removeNodes(ctx, []store.Node{node}); err != nil {
					r.log.Warn("clean up a deleted node", "node", node.ID, "err", err)
				}
			}
		}
	})
	return nil
}

// openAPI opens the agent-facing API listener of node's container. A
// container that already exited gets none (its relay records the exit);
// any other failure is an error record: the agent runs, but cannot reach
// FILEPATH_API_URL.
func (r *Runner) openAPI(node store.Node) {
	if r.cfg.AgentAPI == nil || node.ContainerID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	err := r.cfg.AgentAPI.Open(ctx, node.ID, node.ContainerID)
	switch {
	case err == nil:
	case containers.CodeOf(err) == containers.CodeConflict || r.ctx.Err() != nil:
		r.log.Debug("no agent-facing API listener", "node", node.ID, "err", err)
	default:
		r.log.Warn("open the agent-facing API listener", "node", node.ID, "err", err)
		r.recordError(ctx, node, "the agent cannot reach "+EnvAPIURL+": "+err.Error())
	}
}

// apiURL is FILEPATH_API_URL ("" without an agent-facing API).
func (r *Runner) apiURL() string {
	if r.cfg.AgentAPI == nil {
		return ""
	}
	return r.cfg.AgentAPI.URL()
}

func (r *Runner) closeAPI(nodeID string) {
	if r.cfg.AgentAPI != nil {
		r.cfg.AgentAPI.Close(nodeID)
	}
}

// permanent: the session or node is gone; retrying an append cannot help.
func permanent(err error) bool {
	return orchestrator.ErrorCode(err) == orchestrator.ENotFound
}

// Spawn implements relay.Effects: it creates the child node (with the task
// as its first input, from "parent") and starts its container. A child of a
// custom agent runs its parent's image.
func (r *Runner) Spawn(ctx context.Context, parent relay.Node, ev protocol.SpawnEvent) error {
	_, err := r.SpawnChild(ctx, parent.SessionID, parent.ID, ev)
	return err
}

// SpawnChild is Spawn for the agent API, which appends the spawn event
// itself: it returns the child, also when only its start failed (the child
// then has status error and an error record saying why, and err is set).
func (r *Runner) SpawnChild(ctx context.Context, sessionID, parentID string, ev protocol.SpawnEvent) (store.Node, error) {
	sess, err := r.st.SessionByID(ctx, sessionID)
	if err != nil {
		return store.Node{}, err
	}
	pnode, err := r.st.NodeByID(ctx, parentID)
	if err != nil {
		return store.Node{}, err
	}
	if pnode.SessionID != sessionID {
		return store.Node{}, orchestrator.Errorf(orchestrator.ENotFound, "node %s not found in session %s", parentID, sessionID)
	}
	in := store.NewNode{Name: ev.Name, AgentType: ev.Agent, Model: ev.Model, ParentID: &pnode.ID}
	if ev.Task != nil {
		in.Task = *ev.Task
	}
	fork := ev.Workspace != nil && *ev.Workspace == protocol.WorkspaceFork
	if fork && r.cfg.Forks == nil {
		return store.Node{}, orchestrator.FieldErrorf("workspace", "this orchestrator cannot fork workspaces (it runs without the session filesystem); spawn with workspace \"shared\"")
	}
	// A child of a custom agent runs its parent's image unless the spawn
	// names another catalog agent; a name the catalog does not know (a BYO
	// agent's own name for its workers) is the parent's image too.
	if _, known := orchestrator.AgentByType(ev.Agent); pnode.AgentType == AgentCustom && (!known || ev.Agent == AgentCustom) {
		in.AgentType, in.Image = AgentCustom, pnode.Image
	} else if ev.Agent == AgentCustom {
		in.Image = pnode.Image
	}
	child, err := r.st.CreateNode(ctx, sess.UserID, sess.ID, in)
	if err != nil {
		return store.Node{}, err
	}
	if fork {
		if err := r.cfg.Forks.ForkForNode(ctx, sess.ID, pnode.ID, child.ID); err != nil {
			// no child without the workspace it was promised
			if _, derr := r.st.DeleteNode(context.WithoutCancel(ctx), sess.UserID, sess.ID, child.ID); derr != nil {
				r.log.Warn("delete a child whose workspace fork failed", "node", child.ID, "err", derr)
			}
			return store.Node{}, fmt.Errorf("fork the workspace: %w", err)
		}
	}
	return child, r.startNode(ctx, sess, child)
}

// Handoff implements relay.Effects: the node stays running (its relay
// stops the agent; its exit starts the continuation), whatever the agent
// said last, so that a restart in between finds it live and continues it.
func (r *Runner) Handoff(ctx context.Context, node relay.Node, _ protocol.HandoffEvent) error {
	running := store.NodeRunning
	_, err := r.st.PatchNode(ctx, node.SessionID, node.ID, store.NodePatch{Status: &running})
	return err
}

// continueNode starts the next generation of a node whose agent handed
// off: the continuation record, then a fresh agent in the same node and
// workspace whose FILEPATH_TASK is the handoff summary and whose first
// message is the summary, the health checks and the memories.
func (r *Runner) continueNode(sessionID, nodeID string) {
	ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
	defer cancel()
	c, err := r.st.ContinueNode(ctx, sessionID, nodeID)
	if err != nil {
		if !permanent(err) && r.ctx.Err() == nil {
			r.log.Warn("continue after a handoff", "node", nodeID, "err", err)
		}
		return
	}
	sess, err := r.st.SessionByID(ctx, sessionID)
	if err != nil {
		return
	}
	if err := r.start(ctx, sess, c.Node, &startPlan{kind: startContinuation, summary: c.Summary}); err != nil {
		r.log.Warn("start the continuation", "node", nodeID, "err", err)
	}
}

// StatusChanged implements relay.Effects.
func (r *Runner) StatusChanged(ctx context.Context, node relay.Node, ev protocol.StatusEvent) error {
	p := store.NodePatch{Status: &ev.State, ContextPct: ev.ContextPct}
	_, err := r.st.PatchNode(ctx, node.SessionID, node.ID, p)
	return err
}

// Done implements relay.Effects: the node is done and its parent, if it
// runs, gets a system message "<name> finished: <summary>".
func (r *Runner) Done(ctx context.Context, node relay.Node, ev protocol.DoneEvent) error {
	done := store.NodeDone
	if _, err := r.st.PatchNode(ctx, node.SessionID, node.ID, store.NodePatch{Status: &done}); err != nil {
		return err
	}
	if node.ParentID == "" {
		return nil
	}
	summary := ""
	if ev.Summary != nil {
		summary = *ev.Summary
	}
	content := node.Name + " finished."
	if summary != "" {
		content = fmt.Sprintf("%s finished: %s", node.Name, summary)
	}
	msg := protocol.MessageInput{Type: protocol.TypeMessage, From: protocol.FromSystem, Content: content}
	// Asynchronous: the parent's stdin may be slow, or the parent is being
	// started (its health checks run); this relay must not wait.
	r.goTracked(func() {
		ctx, cancel := context.WithTimeout(r.ctx, r.cfg.NotifyTimeout)
		defer cancel()
		if err := r.waitStarting(ctx, node.ParentID); err != nil {
			r.log.Warn("tell parent a child finished: the parent is still starting", "node", node.ID, "parent", node.ParentID)
			return
		}
		prel := r.relayOf(node.ParentID)
		if prel == nil {
			r.log.Info("parent not running; finish not delivered", "node", node.ID, "parent", node.ParentID)
			return
		}
		if _, err := prel.Deliver(ctx, msg); err != nil && r.ctx.Err() == nil {
			r.log.Warn("tell parent a child finished", "node", node.ID, "parent", node.ParentID, "err", err)
		}
	})
	return nil
}

// Exited implements relay.Effects: the container's token is revoked, the
// node gets its real end state, and its workspace is unmounted until it
// starts again. (The relay's end then settles the session.)
func (r *Runner) Exited(ctx context.Context, node relay.Node, ex relay.Exit) error {
	r.releaseWorkspace(node.ID)
	if err := r.revokeTokens(ctx, node.ID); err != nil {
		return err
	}
	if ex.Handoff {
		// The node goes on: it stays running (for Reconcile, should the
		// orchestrator stop before the continuation starts), and the end
		// of this relay starts its next generation.
		if ex.Err == nil {
			if _, err := r.st.PatchNode(ctx, node.SessionID, node.ID, store.NodePatch{ExitCode: &ex.Code}); err != nil {
				return err
			}
		}
		r.mu.Lock()
		r.continuing[node.ID] = true
		r.mu.Unlock()
		return nil
	}
	status := store.NodeError
	switch {
	case ex.Clean():
		status = store.NodeDone
	case ex.Stopped && ex.Done && ex.Err == nil:
		status = store.NodeDone
	case ex.Stopped && ex.Err == nil:
		status = store.NodeIdle
	}
	p := store.NodePatch{Status: &status}
	if ex.Err == nil {
		p.ExitCode = &ex.Code
	}
	_, err := r.st.PatchNode(ctx, node.SessionID, node.ID, p)
	return err
}

// settleSession gives a running session in which no relay runs the status
// that tells what happened: error when its root ended in error, stopped
// otherwise (invariant 6: no session shows running with nothing running).
func (r *Runner) settleSession(ctx context.Context, sessionID string) error {
	if r.settledHook != nil {
		defer r.settledHook()
	}
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	r.mu.Lock()
	for _, rel := range r.relays {
		if rel.Node().SessionID == sessionID {
			r.mu.Unlock()
			return nil
		}
	}
	for _, job := range r.starting {
		if job.sessionID == sessionID {
			r.mu.Unlock()
			return nil
		}
	}
	r.mu.Unlock()
	if r.settleHook != nil {
		r.settleHook()
	}
	sess, err := r.st.SessionByID(ctx, sessionID)
	if err != nil || sess.Status != store.SessionRunning {
		return err
	}
	status := store.SessionStopped
	if sess.RootNodeID != nil {
		if root, err := r.st.NodeByID(ctx, *sess.RootNodeID); err == nil && root.Status == store.NodeError {
			status = store.SessionError
		}
	}
	return r.st.UpdateSessionStatus(ctx, sessionID, status)
}

// recordError appends a runtime error record for the node.
func (r *Runner) recordError(ctx context.Context, node store.Node, msg string) {
	data, _ := json.Marshal(map[string]string{"message": msg, "source": relay.SourceRuntime})
	if _, err := r.st.Append(context.WithoutCancel(ctx), node.SessionID, store.NewRecord{NodeID: node.ID, Kind: store.KindError, Data: data}); err != nil {
		r.log.Warn("append runtime error", "node", node.ID, "err", err)
	}
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

// plainDirs is the workspace seam's stand-in until the FUSE manager is
// wired: a plain directory per node.
type plainDirs struct{ root string }

func (p plainDirs) Mount(_ context.Context, nodeID string) (string, error) {
	if nodeID == "" || filepath.Base(nodeID) != nodeID {
		return "", fmt.Errorf("node id %q is not a directory name", nodeID)
	}
	dir := filepath.Join(p.root, nodeID)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", fmt.Errorf("create workspace dir: %w", err)
	}
	// The agent may run as any user inside its container.
	if err := os.Chmod(dir, 0o777); err != nil {
		return "", fmt.Errorf("create workspace dir: %w", err)
	}
	return dir, nil
}

func (p plainDirs) Unmount(string) error { return nil }
