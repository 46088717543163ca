package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator/agentapi"
	"github.com/filepath-dev/filepath/orchestrator/agenttools"
	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/egress"
	"github.com/filepath-dev/filepath/orchestrator/files"
	"github.com/filepath-dev/filepath/orchestrator/files/format"
	"github.com/filepath-dev/filepath/orchestrator/gateway"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/orchestrator/runner"
	"github.com/filepath-dev/filepath/orchestrator/ship"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
	"github.com/filepath-dev/filepath/orchestrator/workspace"
	"github.com/filepath-dev/filepath/protocol"
)

// app is `filepath serve`: every part of the orchestrator, built in
// dependency order by newApp and closed in the reverse order by Close.
type app struct {
	log  *slog.Logger
	data string // absolute data directory

	hub      *hub.Hub[protocol.Record]
	st       *store.Store // the database and the sessions' logs
	users    *identity.Store
	sessions *sessions.Store
	collab   *collab.Store
	secrets  *secrets.Store
	ship     *ship.Nodes
	audit    *audit.Store
	// The coalescer's goroutine turns file changes into `file` records.
	stopCoal context.CancelFunc
	coalDone chan struct{}
	fsys     *vfs.VFS
	files    *files.Service     // the file tiers and tools over fsys
	rt       io.Closer          // the container runtime (Docker client, or the process runtime)
	ws       *workspace.Manager // nil with --workspace dir
	agents   *agentapi.Server   // the agent-facing API (FILEPATH_API_URL)
	gw       *gateway.Gateway   // the LLM gateway, served on agents
	run      *runner.Runner
	tools    *agenttools.Server // the agent tools on the agent-facing API
	// The tools' goroutine denies approvals nobody answers in time.
	stopTools context.CancelFunc
	toolsDone chan struct{}
	// The sweeper's goroutine deletes expired logins.
	stopSweep context.CancelFunc
	sweepDone chan struct{}
	srv       *api.Server

	closeOnce sync.Once
	closeErr  error
}

// newApp builds the hub, the store, the session filesystem and its
// coalescer, the container runtime, the workspaces, the runner (reconciled
// with the real containers) and the API server. On an error it closes what
// it built.
func newApp(ctx context.Context, cfg serveConfig, stdout io.Writer, log *slog.Logger) (a *app, err error) {
	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	data, err := filepath.Abs(cfg.Data)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	a = &app{log: log, data: data}
	defer func() {
		if err != nil {
			a.Close()
			a = nil
		}
	}()
	a.hub = hub.New[protocol.Record](hub.Config{Buffer: cfg.StreamBuffer})
	secretsKey, err := loadSecretsKey(filepath.Join(data, "secrets.key"))
	if err != nil {
		return a, err
	}
	if a.st, err = store.Open(ctx, store.Config{Path: filepath.Join(data, "filepath.db"), URL: cfg.DatabaseURL, Publisher: a.hub}); err != nil {
		return a, err
	}
	a.users = identity.New(a.st)
	a.sessions = sessions.New(a.st, sessions.Config{MaxNodes: cfg.MaxAgents, MaxCheckTimeout: cfg.CheckTimeoutMax, DefaultBudget: cfg.LLM.Budget})
	a.collab = collab.New(a.st, a.sessions, collab.Config{})
	a.secrets = secrets.New(a.st, secrets.Config{Key: secretsKey})
	a.audit = audit.New(a.st)
	// The LLM gateway, served to agents on the agent-facing listener, and
	// the model list of GET /api/v1/models.
	var models *gateway.Models
	if a.gw, models, err = newGateway(cfg.LLM, a.sessions, a.st, log); err != nil {
		return a, err
	}

	// The session filesystem; its changes become coalesced `file` records.
	coal := events.NewCoalescer(logAppender{a.st}, 200*time.Millisecond, nil, log)
	coalCtx, stopCoal := context.WithCancel(context.WithoutCancel(ctx))
	a.stopCoal, a.coalDone = stopCoal, make(chan struct{})
	go func() { defer close(a.coalDone); coal.Run(coalCtx) }()
	readDB, err := a.st.ReadDB().DB()
	if err != nil {
		return a, err
	}
	dbDir := data // where the workspaces' bytes are: statfs's free space
	if cfg.DatabaseURL != "" {
		dbDir = ""
	}
	a.fsys = vfs.New(a.st.SQL(), vfs.Config{MaxFileSize: cfg.FileMax, SessionQuota: cfg.SessionQuota, ReadDB: readDB, Notifier: coal, Logger: log, DataDir: dbDir})
	if _, err := a.fsys.PurgeOrphans(ctx); err != nil {
		return a, fmt.Errorf("purge orphaned files: %w", err)
	}
	// The file tiers and tools, one cache of hot reads for both APIs.
	cacheBytes := cfg.FileCache
	if cacheBytes == 0 {
		cacheBytes = -1
	}
	if a.files, err = files.New(files.Config{VFS: a.fsys, Recorder: api.FileAudit(a.audit), CacheBytes: cacheBytes,
		DownloadAllowPrivate: cfg.GitAllowPrivate, Logger: log}); err != nil {
		return a, err
	}
	if err := format.Register(a.files); err != nil {
		return a, err
	}

	if err := a.newRunner(ctx, cfg); err != nil {
		return a, err
	}
	if err := a.run.Reconcile(ctx); err != nil {
		log.Warn("reconcile nodes with containers", "err", err)
	}
	if d, ok := a.rt.(*containers.Docker); ok {
		// The network sandboxes a stop between making one and its
		// container left behind.
		if n, err := d.PruneSandboxes(ctx); err != nil {
			log.Warn("remove orphan network sandboxes", "err", err)
		} else if n > 0 {
			log.Info("removed orphan network sandboxes", "count", n)
		}
	}

	sweepCtx, stopSweep := context.WithCancel(context.WithoutCancel(ctx))
	a.stopSweep, a.sweepDone = stopSweep, make(chan struct{})
	go func() { defer close(a.sweepDone); sweepExpired(sweepCtx, a.users, time.Hour, log) }()

	a.srv, err = api.New(api.Config{
		Addr:            cfg.Addr,
		Store:           a.st,
		Users:           a.users,
		Sessions:        a.sessions,
		Collab:          a.collab,
		Secrets:         a.secrets,
		Ship:            a.ship,
		Audit:           a.audit,
		Hub:             a.hub,
		Runner:          a.run,
		Logger:          log,
		Stdout:          stdout,
		DataDir:         data,
		AllowedOrigins:  cfg.AllowedOrigins,
		TrustedProxies:  cfg.TrustedProxies,
		PublicURL:       cfg.PublicURL,
		SessionTTL:      cfg.SessionTTL,
		MaxBody:         cfg.MaxBody,
		Files:           a.fsys,
		FileTools:       a.files,
		Models:          models,
		GitAllowPrivate: cfg.GitAllowPrivate,
	})
	if err != nil {
		return a, err
	}
	// Admin commands (`filepath user login`) print links to this address.
	if err := os.WriteFile(filepath.Join(data, urlFile), []byte(a.srv.URL()+"\n"), 0o600); err != nil {
		log.Warn("write the server's URL to the data directory", "err", err)
	}
	log.Info("starting", "data", data, "runtime", cfg.Runtime, "workspace", cfg.Workspace)
	return a, nil
}

// The lifecycle runner is the API's Runner.
var _ api.Runner = (*runner.Runner)(nil)

// The runner lends the nodes' workspaces to push from.
var _ ship.Workspaces = (*runner.Runner)(nil)

// newRunner builds the container runtime, the agent-facing API (a listener
// in each container's network namespace with Docker, one on the host's
// loopback with the process runtime) and the lifecycle runner, with each
// node's /workspace served over FUSE from the session filesystem (or a plain
// directory with --workspace dir).
func (a *app) newRunner(ctx context.Context, cfg serveConfig) error {
	st, fsys, log := a.st, a.fsys, a.log
	rcfg := runner.Config{Store: st, Users: a.users, Sessions: a.sessions, Collab: a.collab, VendorKeys: a.secrets, DataDir: a.data, MaxLine: int(cfg.MaxLine), MailboxLen: cfg.Mailbox, Network: cfg.Network, Logger: log,
		ProviderKeys:    func(p string) bool { return cfg.ProviderKeys[p] != "" },
		CheckTimeout:    cfg.CheckTimeout,
		GitAllowPrivate: cfg.GitAllowPrivate,
		Memories:        memories{a.collab}}
	acfg := agentapi.Config{Auth: a.users, Logger: log}
	if cfg.Egress {
		// The proxy asks the agent tools (made below, before any agent
		// starts) about hosts off the operator's list.
		px, err := egress.New(egress.Config{Allow: cfg.EgressAllow, AllowPrivate: cfg.EgressAllowPrivate, Logger: log,
			Policy: lazyPolicy{&a.tools}, Audit: auditEgress(a.audit, log)})
		if err != nil {
			return err
		}
		acfg.Egress = px
	}
	switch cfg.Runtime {
	case "process":
		rt, err := containers.NewProcess(containers.ProcessConfig{Dir: filepath.Join(a.data, "proc"), Logger: log})
		if err != nil {
			return err
		}
		a.rt, rcfg.Runtime = rt, rt
		rcfg.Cmd = func(sessions.Node) []string { return cfg.AgentCmd }
	default:
		rt, err := containers.NewDocker(ctx, containers.DockerConfig{Network: cfg.Network})
		if err != nil {
			return err
		}
		a.rt, rcfg.Runtime = rt, rt
		acfg.Netns = rt
	}
	agents, err := agentapi.New(acfg)
	if err != nil {
		return err
	}
	a.agents, rcfg.AgentAPI = agents, agents
	// The LLM gateway on the agent-facing API (FILEPATH_API_URL).
	mountGateway(agents, a.gw)
	if cfg.Workspace == "fuse" {
		nodes := nodeFiles{sessions: a.sessions, v: fsys}
		ws, err := workspace.NewManager(workspace.ManagerConfig{
			Dir:    filepath.Join(a.data, "mnt"),
			Logger: log,
			Open: func(ctx context.Context, nodeID string) (workspace.FS, error) {
				return nodes.open(ctx, nodeID)
			},
		})
		if err != nil {
			return fmt.Errorf("workspace over FUSE (use --workspace dir to run without it): %w", err)
		}
		a.ws = ws
		// Every change (a node's mount, the REST API) is pushed to the
		// kernels of the session's other mounts.
		fsys.SetInvalidator(ws.Fanout())
		rcfg.Workspaces = ws
		rcfg.WorkspacePropagation = workspace.Propagation
		rcfg.Forks = forks{fsys}
		rcfg.Import = nodes
	}
	run, err := runner.New(rcfg)
	if err != nil {
		return err
	}
	a.run = run
	// Pushes from the host, in the workspaces the runner lends (issue 21).
	a.ship = ship.NewNodes(ship.New(ship.Config{Secrets: a.secrets, AllowPrivate: cfg.GitAllowPrivate}), a.sessions, run)
	// The agent tools (issue 13): REST under /api/v1/, MCP at /mcp.
	a.tools, err = agenttools.New(agenttools.Config{Store: st, Sessions: a.sessions, Collab: a.collab, Audit: a.audit, Hub: a.hub, Runner: run, Ship: a.ship, Logger: log, ApprovalTimeout: cfg.ApprovalTimeout, Files: a.files, VendorKey: run.VendorKey})
	if err != nil {
		return err
	}
	agents.Mount(agenttools.RESTPrefix, a.tools.REST())
	agents.Mount(agenttools.MCPPath, a.tools.MCP())
	toolsCtx, stopTools := context.WithCancel(context.WithoutCancel(ctx))
	a.stopTools, a.toolsDone = stopTools, make(chan struct{})
	go func() { defer close(a.toolsDone); a.tools.Run(toolsCtx) }()
	if a.ws != nil {
		// Containers outlive the orchestrator: serve the workspaces of the
		// nodes whose container still runs before the relays re-attach,
		// and clear every other mount a previous run left. A finished
		// node is mounted when it starts again.
		if ids, err := run.LiveNodes(ctx); err != nil {
			// Clear nothing: a dead mount is what reaches a running
			// container, and a node's next start replaces it.
			log.Warn("list running agents to recover their workspaces", "err", err)
		} else if err := a.ws.Recover(ctx, ids); err != nil {
			log.Warn("recover workspaces", "err", err)
		}
	}
	return nil
}

// memories is the memory store as the runner reads it: the learnings of a
// user and repository that match a task, given to each agent at its start.
type memories struct{ collab *collab.Store }

func (m memories) Relevant(ctx context.Context, userID, repoURL, query string, limit int) ([]runner.Memory, error) {
	ms, err := m.collab.SearchMemories(ctx, userID, collab.NormalizeRepo(repoURL), query, limit)
	if err != nil {
		return nil, err
	}
	out := make([]runner.Memory, len(ms))
	for i, x := range ms {
		out[i] = runner.Memory{Key: x.Key, Text: x.Text}
	}
	return out, nil
}

var _ runner.Memories = memories{}

// forks makes the runner's forked workspaces in the session VFS.
type forks struct{ v *vfs.VFS }

func (f forks) ForkForNode(ctx context.Context, sessionID, parentID, childID string) error {
	_, err := f.v.ForkForNode(ctx, sessionID, parentID, childID)
	return err
}

// nodeFiles opens a node's files as its mount sees them: its workspace (a
// node spawned with workspace "fork" works on its fork), within its
// allowed paths. It is the runner's TreeImporter.
type nodeFiles struct {
	sessions *sessions.Store
	v        *vfs.VFS
}

func (n nodeFiles) open(ctx context.Context, nodeID string) (*vfs.FS, error) {
	node, err := n.sessions.NodeByID(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	allowed, err := paths.AllowedPaths(node.Config)
	if err != nil {
		return nil, err
	}
	ws, err := n.v.WorkspaceOfNode(ctx, node.SessionID, nodeID)
	if err != nil {
		return nil, err
	}
	return n.v.Session(ws).ForNode(nodeID, allowed)
}

func (n nodeFiles) ImportTree(ctx context.Context, nodeID, hostDir string) (map[string]vfs.Attr, error) {
	fs, err := n.open(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	return fs.ImportTree(ctx, "/", hostDir)
}

func (n nodeFiles) WriteFile(ctx context.Context, nodeID, p string, data []byte, mtime time.Time) error {
	fs, err := n.open(ctx, nodeID)
	if err != nil {
		return err
	}
	_, _, err = fs.WriteFile(ctx, p, data, vfs.WriteOptions{Mode: vfs.WriteUpdate, Mtime: mtime})
	return err
}

var _ runner.TreeImporter = nodeFiles{}

// The lifecycle runner is the agent tools' Runner.
var _ agenttools.Runner = (*runner.Runner)(nil)

// Run serves until ctx ends or Close is called.
func (a *app) Run(ctx context.Context) error { return a.srv.Run(ctx) }

// Close stops every part in the reverse order of newApp, each after what
// uses it, and waits for their goroutines:
//
//  1. the API server (no request or stream reaches what follows);
//  2. the login sweeper;
//  3. the runner: relays detach, the containers keep running; then the
//     agent-facing API's listeners close, and the agent tools' approval
//     timer stops (the deadlines are stored: the next start keeps them);
//  4. the workspaces: the mounts of nodes that do not run are unmounted;
//     those under running containers stop serving, left dead for the next
//     start to replace (their invalidators and retry timers end with them);
//     with none left, the bind mount of DATA/mnt goes too;
//  5. the container runtime (the Docker client's connections; the process
//     runtime's agents, which die with the orchestrator anyway);
//  6. the coalescer, which appends the file changes it still holds;
//  7. the session filesystem, the store, the hub.
//
// Safe to call more than once, also on a partly built app.
func (a *app) Close() error {
	a.closeOnce.Do(func() {
		var errs []error
		if a.srv != nil {
			errs = append(errs, a.srv.Close())
		}
		if a.stopSweep != nil {
			a.stopSweep()
			<-a.sweepDone
		}
		// The workspaces of nodes that run stay (dead) under their
		// containers; the others are unmounted.
		running := map[string]bool{}
		if a.ws != nil && a.run != nil {
			for _, id := range a.ws.Mounted() {
				running[id] = a.run.Running(id)
			}
		}
		if a.run != nil {
			errs = append(errs, a.run.Close())
		}
		if a.agents != nil {
			a.agents.Shutdown()
		}
		if a.stopTools != nil {
			a.stopTools()
			<-a.toolsDone
		}
		if a.gw != nil {
			a.gw.Close() // writes the usage it still holds, before the store closes
		}
		if a.ws != nil {
			if a.fsys != nil {
				a.fsys.SetInvalidator(nil)
			}
			errs = append(errs, a.ws.Shutdown(func(id string) bool { return running[id] }))
			// DATA/mnt stays mounted only under a running container's
			// workspace; otherwise nothing is left mounted.
			errs = append(errs, a.ws.Release())
		}
		if a.rt != nil {
			errs = append(errs, a.rt.Close())
		}
		if a.stopCoal != nil {
			a.stopCoal()
			<-a.coalDone
		}
		if a.fsys != nil {
			a.fsys.Close()
		}
		if a.st != nil {
			errs = append(errs, a.st.Close())
		}
		if a.hub != nil {
			a.hub.Close()
		}
		a.closeErr = errors.Join(errs...)
	})
	return a.closeErr
}

// loadSecretsKey reads the key sealing the sessions' secrets (vendor keys)
// from path, making a random one (mode 0600) on the first start. The key
// lives beside the database, not in it: a copy of filepath.db alone opens
// no secret.
func loadSecretsKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key := make([]byte, secrets.KeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		enc := []byte(hex.EncodeToString(key) + "\n")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) { // another start made it meanwhile
			return loadSecretsKey(path)
		}
		if err != nil {
			return nil, fmt.Errorf("create the secrets key: %w", err)
		}
		if _, err := f.Write(enc); err != nil {
			f.Close()
			return nil, fmt.Errorf("write the secrets key %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("write the secrets key %s: %w", path, err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the secrets key: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != secrets.KeySize {
		return nil, fmt.Errorf("the secrets key %s is damaged: want %d hex-encoded bytes (remove it to make a new one; the secrets stored with the old one must then be set again)", path, secrets.KeySize)
	}
	return key, nil
}
