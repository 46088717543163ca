package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/orchestrator/runner"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/workspace"
	"github.com/filepath-dev/filepath/relay"
)

// serveConfig is the validated configuration of `filepath serve`.
type serveConfig struct {
	Addr           string
	Data           string
	LogLevel       slog.Level
	LogFormat      string // text | json
	Runtime        string // docker | process (wired by the lifecycle runner)
	AllowedOrigins []string
	MaxBody        int64
	StreamBuffer   int
	MaxLine        int64  // longest agent output line
	FileMax        int64  // largest file in a session's filesystem
	SessionQuota   int64  // bytes of files per session
	Workspace      string // fuse | dir
	AgentCmd       []string
	Network        string
	Mailbox        int // inputs queued per agent
	MaxAgents      int // agents per session
	LLM            llmConfig
}

// env returns the FILEPATH_* variable name or def when it is unset.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// parseServe reads flags, then FILEPATH_* env vars for what the flags left
// unset (flags win), and validates the result.
func parseServe(args []string, stderr io.Writer) (serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", env("FILEPATH_ADDR", "127.0.0.1:8080"), "listen address (env FILEPATH_ADDR)")
	data := fs.String("data", env("FILEPATH_DATA", "./data"), "data directory: filepath.db, node workspaces, logs (env FILEPATH_DATA)")
	level := fs.String("log-level", env("FILEPATH_LOG_LEVEL", "info"), "debug, info, warn or error (env FILEPATH_LOG_LEVEL)")
	format := fs.String("log-format", env("FILEPATH_LOG_FORMAT", "text"), "text or json (env FILEPATH_LOG_FORMAT)")
	runtime := fs.String("runtime", env("FILEPATH_RUNTIME", "docker"), "agent runtime: docker or process (env FILEPATH_RUNTIME)")
	origins := fs.String("allowed-origins", env("FILEPATH_ALLOWED_ORIGINS", ""), "comma-separated extra WebSocket origin patterns, e.g. app.example.com (env FILEPATH_ALLOWED_ORIGINS)")
	maxBody := fs.String("max-body", env("FILEPATH_MAX_BODY", "1MiB"), "largest JSON request body (env FILEPATH_MAX_BODY)")
	buffer := fs.Int("stream-buffer", envInt("FILEPATH_STREAM_BUFFER", hub.DefaultBuffer), "records buffered per stream client before it is dropped as too slow (env FILEPATH_STREAM_BUFFER)")
	maxAgents := fs.Int("max-agents", envInt("FILEPATH_MAX_AGENTS", store.DefaultMaxNodes), "agents one session may hold, spawned ones included (env FILEPATH_MAX_AGENTS)")
	mailbox := fs.Int("mailbox", envInt("FILEPATH_MAILBOX", relay.DefaultMailboxLen), "inputs queued per agent before sending more is refused (env FILEPATH_MAILBOX)")
	maxLine := fs.String("max-line", env("FILEPATH_MAX_LINE", "1MiB"), "longest agent output line; longer lines are cut and recorded as errors (env FILEPATH_MAX_LINE)")
	fileMax := fs.String("file-max", env("FILEPATH_FILE_MAX", "50MiB"), "largest file in a session's filesystem (env FILEPATH_FILE_MAX)")
	quota := fs.String("session-quota", env("FILEPATH_SESSION_QUOTA", "1GiB"), "bytes of files per session (env FILEPATH_SESSION_QUOTA)")
	workspace := fs.String("workspace", env("FILEPATH_WORKSPACE", "fuse"), "how /workspace is served: fuse (the session filesystem, live) or dir (a plain directory per node) (env FILEPATH_WORKSPACE)")
	agentCmd := fs.String("agent-cmd", env("FILEPATH_AGENT_CMD", ""), "with --runtime process: the command every agent runs, e.g. 'bin/testagent' (env FILEPATH_AGENT_CMD)")
	network := fs.String("network", env("FILEPATH_NETWORK", "bridge"), "Docker network mode of agent containers: bridge, none, or a network name (env FILEPATH_NETWORK)")
	llm := addLLMFlags(fs)
	if err := fs.Parse(args); err != nil {
		return serveConfig{}, err
	}
	if fs.NArg() > 0 {
		return serveConfig{}, fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	cfg := serveConfig{Addr: *addr, Data: *data, LogFormat: *format, Runtime: *runtime, StreamBuffer: *buffer,
		Workspace: *workspace, AgentCmd: strings.Fields(*agentCmd), Network: *network, Mailbox: *mailbox, MaxAgents: *maxAgents}
	if err := cfg.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return cfg, fmt.Errorf("serve: --log-level %q: want debug, info, warn or error", *level)
	}
	switch cfg.LogFormat {
	case "text", "json":
	default:
		return cfg, fmt.Errorf("serve: --log-format %q: want text or json", cfg.LogFormat)
	}
	switch cfg.Runtime {
	case "docker", "process":
	default:
		return cfg, fmt.Errorf("serve: --runtime %q: want docker or process", cfg.Runtime)
	}
	if cfg.Addr == "" {
		return cfg, errors.New("serve: --addr is empty")
	}
	if cfg.Data == "" {
		return cfg, errors.New("serve: --data is empty")
	}
	if cfg.MaxAgents < 1 {
		return cfg, fmt.Errorf("serve: --max-agents %d: want at least 1", cfg.MaxAgents)
	}
	if cfg.Mailbox < 1 {
		return cfg, fmt.Errorf("serve: --mailbox %d: want at least 1", cfg.Mailbox)
	}
	if cfg.StreamBuffer < 1 {
		return cfg, fmt.Errorf("serve: --stream-buffer %d: want at least 1", cfg.StreamBuffer)
	}
	n, err := parseSize(*maxBody)
	if err != nil || n < 1 {
		return cfg, fmt.Errorf("serve: --max-body %q: want a size like 1MiB or 65536", *maxBody)
	}
	cfg.MaxBody = n
	for _, sz := range []struct {
		flag string
		val  string
		dst  *int64
	}{{"max-line", *maxLine, &cfg.MaxLine}, {"file-max", *fileMax, &cfg.FileMax}, {"session-quota", *quota, &cfg.SessionQuota}} {
		n, err := parseSize(sz.val)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("serve: --%s %q: want a size like 1MiB or 65536", sz.flag, sz.val)
		}
		*sz.dst = n
	}
	switch cfg.Workspace {
	case "fuse", "dir":
	default:
		return cfg, fmt.Errorf("serve: --workspace %q: want fuse or dir", cfg.Workspace)
	}
	if cfg.Runtime == "process" && len(cfg.AgentCmd) == 0 {
		return cfg, errors.New("serve: --runtime process needs --agent-cmd (the program every agent runs, e.g. bin/testagent)")
	}
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.AllowedOrigins = append(cfg.AllowedOrigins, o)
		}
	}
	if cfg.LLM, err = llm.config(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// envInt returns the FILEPATH_* variable as an int, or def when it is unset
// or not a number (the flag's own check then reports a bad value).
func envInt(name string, def int) int {
	if v, ok := os.LookupEnv(name); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			return n
		}
	}
	return def
}

// parseSize parses a byte size: 123, 64KiB, 1MiB, 2GiB (also KB/MB/GB as
// powers of 1000).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(v), u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, err
	}
	return n * mult, nil
}

func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// runServe is `filepath serve`: it serves until ctx ends (main cancels it on
// SIGINT/SIGTERM).
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseServe(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	log := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	if err := serve(ctx, cfg, stdout, log); err != nil {
		log.Error("serve failed", "err", err)
		return 1
	}
	return 0
}

// serve builds the hub, the store, the session filesystem, the runtime, the
// runner and the API server, and runs them until ctx ends.
func serve(ctx context.Context, cfg serveConfig, stdout io.Writer, log *slog.Logger) error {
	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	data, err := filepath.Abs(cfg.Data)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	h := hub.New(hub.Config{Buffer: cfg.StreamBuffer}, func(r store.Record) string { return r.SessionID })
	defer h.Close()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(data, "filepath.db"), Publisher: h, MaxNodes: cfg.MaxAgents,
		DefaultBudget: cfg.LLM.Budget})
	if err != nil {
		return err
	}
	defer st.Close()
	// The LLM gateway, for the agent-facing listener; closed before the
	// store so that its last metered requests are written.
	gw, models, err := newGateway(cfg.LLM, st, log)
	if err != nil {
		return err
	}
	defer gw.Close()

	// The session filesystem; its changes become coalesced `file` records.
	coalCtx, stopCoal := context.WithCancel(context.WithoutCancel(ctx))
	coal := vfs.NewCoalescer(logAppender{st}, 200*time.Millisecond, nil, log)
	coalDone := make(chan struct{})
	go func() { defer close(coalDone); coal.Run(coalCtx) }()
	defer func() { stopCoal(); <-coalDone }()
	readDB, err := st.ReadDB().DB()
	if err != nil {
		return err
	}
	fsys := vfs.New(st.SQL(), vfs.Config{MaxFileSize: cfg.FileMax, SessionQuota: cfg.SessionQuota, ReadDB: readDB, Notifier: coal, Logger: log})
	defer fsys.Close()
	if _, err := fsys.PurgeOrphans(ctx); err != nil {
		return fmt.Errorf("purge orphaned files: %w", err)
	}

	run, ws, err := newRunner(ctx, cfg, data, st, fsys, log)
	if err != nil {
		return err
	}
	defer func() {
		run.Close()
		if ws != nil {
			// Leave the mounts dead, not unmounted: the agents' containers
			// keep running, and the next start stacks new mounts on them.
			ws.Shutdown()
		}
	}()
	if err := run.Reconcile(ctx); err != nil {
		log.Warn("reconcile nodes with containers", "err", err)
	}

	sweepCtx, stopSweep := context.WithCancel(ctx)
	sweepDone := make(chan struct{})
	go func() { defer close(sweepDone); sweepExpired(sweepCtx, st, time.Hour, log) }()
	defer func() { stopSweep(); <-sweepDone }()

	files := vfs.NewHandler(fsys)
	srv, err := api.New(api.Config{
		Addr:           cfg.Addr,
		Store:          st,
		Hub:            h,
		Runner:         run,
		Logger:         log,
		Stdout:         stdout,
		AllowedOrigins: cfg.AllowedOrigins,
		MaxBody:        cfg.MaxBody,
		Models:         models,
		Routes:         []func(g *echo.Group){func(g *echo.Group) { files.Register(g.Group("/sessions/:id/fs")) }},
		RouteDocs:      fsRouteDocs(),
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	// Admin commands (`filepath user login`) print links to this address.
	if err := os.WriteFile(filepath.Join(data, urlFile), []byte(srv.URL()+"\n"), 0o600); err != nil {
		log.Warn("write the server's URL to the data directory", "err", err)
	}
	log.Info("starting", "data", data, "runtime", cfg.Runtime, "workspace", cfg.Workspace)
	return srv.Run(ctx)
}

// newRunner builds the container runtime and the lifecycle runner, with each
// node's /workspace served over FUSE from the session filesystem (or a plain
// directory with --workspace dir).
func newRunner(ctx context.Context, cfg serveConfig, data string, st *store.Store, fsys *vfs.VFS, log *slog.Logger) (*runner.Runner, *workspace.Manager, error) {
	rcfg := runner.Config{Store: st, DataDir: data, MaxLine: int(cfg.MaxLine), MailboxLen: cfg.Mailbox, Network: cfg.Network, Logger: log}
	switch cfg.Runtime {
	case "process":
		rt, err := containers.NewProcess(containers.ProcessConfig{Dir: filepath.Join(data, "proc"), Logger: log})
		if err != nil {
			return nil, nil, err
		}
		rcfg.Runtime = rt
		rcfg.Cmd = func(store.Node) []string { return cfg.AgentCmd }
	default:
		rt, err := containers.NewDocker(ctx, containers.DockerConfig{Network: cfg.Network})
		if err != nil {
			return nil, nil, err
		}
		rcfg.Runtime = rt
	}
	if cfg.Workspace == "fuse" {
		ws, err := workspace.NewManager(workspace.ManagerConfig{
			Dir:    filepath.Join(data, "mnt"),
			Logger: log,
			Open: func(ctx context.Context, nodeID string) (workspace.FS, error) {
				n, err := st.NodeByID(ctx, nodeID)
				if err != nil {
					return nil, err
				}
				allowed, err := allowedPaths(n.Config)
				if err != nil {
					return nil, err
				}
				return fsys.Session(n.SessionID).ForNode(nodeID, allowed)
			},
		})
		if err != nil {
			return nil, nil, fmt.Errorf("workspace over FUSE (use --workspace dir to run without it): %w", err)
		}
		// Every change (a node's mount, the REST API) is pushed to the
		// kernels of the session's other mounts.
		fsys.SetInvalidator(ws.Fanout())
		// Containers outlive the orchestrator: serve the workspaces of the
		// nodes that may still run again before the relays re-attach.
		active, err := st.ActiveNodes(ctx)
		if err != nil {
			return nil, nil, err
		}
		ids := make([]string, len(active))
		for i, n := range active {
			ids[i] = n.ID
		}
		if err := ws.Recover(ctx, ids); err != nil {
			log.Warn("recover workspaces", "err", err)
		}
		rcfg.Workspaces = ws
		rcfg.WorkspacePropagation = workspace.Propagation
		run, err := runner.New(rcfg)
		return run, ws, err
	}
	run, err := runner.New(rcfg)
	return run, nil, err
}

// allowedPaths reads a node's allowed-paths policy from its config
// ({"allowed_paths": ["/src", "/docs"]}): the only parts of the session's
// files its /workspace may touch. None (the default) is the whole workspace.
func allowedPaths(config json.RawMessage) ([]string, error) {
	if len(config) == 0 {
		return nil, nil
	}
	var c struct {
		AllowedPaths json.RawMessage `json:"allowed_paths"`
	}
	if err := json.Unmarshal(config, &c); err != nil || len(c.AllowedPaths) == 0 || string(c.AllowedPaths) == "null" {
		return nil, nil
	}
	var paths []string
	if err := json.Unmarshal(c.AllowedPaths, &paths); err != nil {
		return nil, orchestrator.FieldErrorf("config.allowed_paths", "config.allowed_paths must be a list of paths like [\"/src\"]")
	}
	return paths, nil
}

// sweepExpired deletes expired login links and browser sessions at start and
// then every interval, until ctx ends.
func sweepExpired(ctx context.Context, st *store.Store, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := st.DeleteExpired(ctx); err != nil && ctx.Err() == nil {
			log.Warn("delete expired logins", "err", err)
		} else if n > 0 {
			log.Info("deleted expired logins", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// logAppender appends the session filesystem's coalesced changes to the
// session log as `file` records.
type logAppender struct{ st *store.Store }

func (a logAppender) Append(ctx context.Context, sessionID, kind string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	_, err = a.st.Append(ctx, sessionID, store.NewRecord{Kind: kind, Data: b})
	return err
}

// fsRouteDocs documents the session filesystem's routes (vfs.Handler.Register
// under /sessions/{id}/fs) in the OpenAPI document.
func fsRouteDocs() []api.RouteDoc {
	base := "/sessions/{id}/fs"
	docs := []api.RouteDoc{
		{Method: "POST", Path: base + "/_/stat", Summary: "metadata of a file or directory {path}", Status: 200},
		{Method: "POST", Path: base + "/_/move", Summary: "move or rename {src_path, dst_path}", Status: 200},
		{Method: "POST", Path: base + "/_/copy", Summary: "copy a file or directory {src_path, dst_path}", Status: 201},
		{Method: "POST", Path: base + "/_/grep", Summary: "search text files {pattern, path_pattern?}", Status: 200},
		{Method: "GET", Path: base + "/_/audit", Summary: "the session's security audit records (refused paths, symlink escapes), newest first; ?limit=N", Status: 200},
	}
	for _, p := range []string{"", "/", "/{path}"} {
		docs = append(docs,
			api.RouteDoc{Method: "GET", Path: base + p, Summary: "read a file (JSON, or raw bytes with Accept: application/octet-stream) or list a directory", Status: 200},
			api.RouteDoc{Method: "HEAD", Path: base + p, Summary: "headers of a read (ETag = sha256 of the content)", Status: 200},
			api.RouteDoc{Method: "POST", Path: base + p, Summary: "create a file {content, encoding, is_readonly?} or directory {is_directory: true}; parents are created", Status: 201},
			api.RouteDoc{Method: "PUT", Path: base + p, Summary: "update a file's content (If-Match: <hash> for a conditional write)", Status: 200},
			api.RouteDoc{Method: "DELETE", Path: base + p, Summary: "delete a file, or a directory with ?recursive=true", Status: 204},
		)
	}
	return docs
}
