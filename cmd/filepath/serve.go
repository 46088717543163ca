package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/agentapi"
	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/egress"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
	"github.com/filepath-dev/filepath/relay"
)

// serveConfig is the validated configuration of `filepath serve`.
type serveConfig struct {
	// DatabaseURL, when set, is the PostgreSQL database of the store
	// (FILEPATH_DATABASE_URL); empty: SQLite in Data.
	DatabaseURL    string
	Addr           string
	Data           string
	LogLevel       slog.Level
	LogFormat      string // text | json
	Runtime        string // docker | process (wired by the lifecycle runner)
	AllowedOrigins []string
	TrustedProxies []*net.IPNet
	SessionTTL     time.Duration // login cookie lifetime
	MaxBody        int64
	StreamBuffer   int
	MaxLine        int64  // longest agent output line
	FileMax        int64  // largest file in a session's filesystem
	SessionQuota   int64  // bytes of files per session
	FileCache      int64  // bytes of the cache of hot reads (0: none)
	Workspace      string // fuse | dir
	AgentCmd       []string
	Network        string
	Mailbox        int // inputs queued per agent
	MaxAgents      int // agents per session
	// ApprovalTimeout is how long an agent's request for approval waits
	// before it is denied.
	ApprovalTimeout time.Duration
	// CheckTimeout is a health check's time limit when its session sets
	// none; CheckTimeoutMax the most a session may set.
	CheckTimeout    time.Duration
	CheckTimeoutMax time.Duration
	// ProviderKeys holds the LLM providers' keys by provider
	// (orchestrator.Provider*), from LLM's (FILEPATH_<PROVIDER>_API_KEY;
	// prefer the variable: a flag shows a key in ps).
	ProviderKeys map[string]string
	LLM          llmConfig
	// GitAllowPrivate lets sessions clone from hosts that are or resolve
	// to loopback, private or link-local addresses.
	GitAllowPrivate bool
	// Egress serves agents the egress proxy (HTTP_PROXY, HTTPS_PROXY);
	// EgressAllow are the hosts any agent reaches through it without
	// asking, EgressAllowPrivate lets it reach private addresses.
	Egress             bool
	EgressAllow        []string
	EgressAllowPrivate bool
	// PublicURL is where browsers reach the server ("" : unknown); an
	// https one makes the login cookie Secure.
	PublicURL string
}

// env returns the FILEPATH_* variable name or def when it is unset.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// serveEnv maps each serve flag to its environment variable.
var serveEnv = map[string]string{
	"addr": "FILEPATH_ADDR", "data": "FILEPATH_DATA", "log-level": "FILEPATH_LOG_LEVEL",
	"log-format": "FILEPATH_LOG_FORMAT", "runtime": "FILEPATH_RUNTIME", "allowed-origins": "FILEPATH_ALLOWED_ORIGINS",
	"max-body": "FILEPATH_MAX_BODY", "stream-buffer": "FILEPATH_STREAM_BUFFER", "max-agents": "FILEPATH_MAX_AGENTS",
	"mailbox": "FILEPATH_MAILBOX", "max-line": "FILEPATH_MAX_LINE", "file-max": "FILEPATH_FILE_MAX",
	"session-quota": "FILEPATH_SESSION_QUOTA", "file-cache": "FILEPATH_FILE_CACHE", "workspace": "FILEPATH_WORKSPACE", "agent-cmd": "FILEPATH_AGENT_CMD",
	"network": "FILEPATH_NETWORK", "trusted-proxies": "FILEPATH_TRUSTED_PROXIES", "session-ttl": "FILEPATH_SESSION_TTL",
	"approval-timeout": "FILEPATH_APPROVAL_TIMEOUT",
	"check-timeout":    "FILEPATH_CHECK_TIMEOUT", "check-timeout-max": "FILEPATH_CHECK_TIMEOUT_MAX",
	"git-allow-private": "FILEPATH_GIT_ALLOW_PRIVATE",
	"egress":            "FILEPATH_EGRESS", "egress-allow": "FILEPATH_EGRESS_ALLOW", "egress-allow-private": "FILEPATH_EGRESS_ALLOW_PRIVATE",
	"public-url":   "FILEPATH_PUBLIC_URL",
	"database-url": "FILEPATH_DATABASE_URL",
}

// parseServe reads flags, then FILEPATH_* env vars for what the flags left
// unset (flags win), and validates the result. An invalid value is an
// error naming where it came from: the flag, or the variable.
func parseServe(args []string, stderr io.Writer) (serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	str := func(name, def, usage string) *string {
		return fs.String(name, env(serveEnv[name], def), usage+" (env "+serveEnv[name]+")")
	}
	addr := str("addr", "127.0.0.1:8080", "listen address")
	data := str("data", "./data", "data directory: filepath.db, node workspaces, logs")
	dbURL := str("database-url", "", "a PostgreSQL database (postgres://user@host/db) to keep the store in instead of <data>/filepath.db; its collation must be C")
	level := str("log-level", "info", "debug, info, warn or error")
	format := str("log-format", "text", "text or json")
	runtime := str("runtime", "docker", "agent runtime: docker or process")
	origins := str("allowed-origins", "", "comma-separated extra origin patterns allowed to use the login cookie and the live stream, e.g. app.example.com")
	proxies := str("trusted-proxies", "", "comma-separated networks of reverse proxies whose X-Forwarded-For and X-Forwarded-Proto are believed, e.g. 127.0.0.1/32")
	sessionTTL := str("session-ttl", "7d", "how long a browser stays logged in, e.g. 12h or 7d")
	maxBody := str("max-body", "1MiB", "largest JSON request body")
	buffer := str("stream-buffer", strconv.Itoa(hub.DefaultBuffer), "records buffered per stream client before it is dropped as too slow")
	maxAgents := str("max-agents", strconv.Itoa(sessions.DefaultMaxNodes), "agents one session may hold, spawned ones included")
	mailbox := str("mailbox", strconv.Itoa(relay.DefaultMailboxLen), "inputs queued per agent before sending more is refused")
	maxLine := str("max-line", "1MiB", "longest agent output line; longer lines are cut and recorded as errors")
	fileMax := str("file-max", "50MiB", "largest file in a session's filesystem")
	quota := str("session-quota", "1GiB", "bytes of files per session")
	fileCache := str("file-cache", "64MiB", "memory for files read often by the file tools (0: none)")
	workspace := str("workspace", "fuse", "how /workspace is served: fuse (the session filesystem, live) or dir (a plain directory per node)")
	agentCmd := str("agent-cmd", "", "with --runtime process: the command every agent runs, e.g. 'bin/testagent'")
	network := str("network", "none", "Docker network mode of agent containers: none (they reach the agent-facing API and, through its egress proxy, what --egress allows), or bridge or a network name for images that need raw sockets (they then reach the host's network directly)")
	egressOn := str("egress", "on", "on: agents reach the network through filepath's egress proxy (HTTP_PROXY, HTTPS_PROXY), each host checked against the allowed list, the node's policy and the approvals inbox; off: no proxy")
	egressAllow := str("egress-allow", strings.Join(egress.DefaultAllow, ","), "comma-separated hosts agents reach through the egress proxy without asking (*.example.com for subdomains); \"\" for none")
	egressPrivateEnv := strings.TrimSpace(os.Getenv(serveEnv["egress-allow-private"]))
	egressPrivateDef, egressPrivateErr := false, error(nil)
	if egressPrivateEnv != "" {
		egressPrivateDef, egressPrivateErr = strconv.ParseBool(egressPrivateEnv)
	}
	egressPrivate := fs.Bool("egress-allow-private", egressPrivateDef, "let agents reach loopback, private and link-local addresses through the egress proxy, each still allowed by the list, the node's policy or a person (env "+serveEnv["egress-allow-private"]+"=1)")
	publicURL := str("public-url", "", "the URL browsers reach this server at, e.g. https://filepath.example.com; https makes the login cookie Secure (behind a TLS-terminating proxy)")
	approvalTimeout := str("approval-timeout", "10m", "how long an agent's request for approval waits for an answer before it is denied, e.g. 10m or 1h")
	gitPrivateEnv := strings.TrimSpace(os.Getenv(serveEnv["git-allow-private"]))
	gitPrivateDef, gitPrivateErr := false, error(nil)
	if gitPrivateEnv != "" {
		gitPrivateDef, gitPrivateErr = strconv.ParseBool(gitPrivateEnv)
	}
	gitPrivate := fs.Bool("git-allow-private", gitPrivateDef, "let sessions clone git repositories from hosts that are or resolve to loopback, private or link-local addresses (the server's own network); off: such URLs are refused (env "+serveEnv["git-allow-private"]+"=1)")
	llm := addLLMFlags(fs)
	checkTimeout := str("check-timeout", "5m", "time limit of a health check whose session sets none")
	checkTimeoutMax := str("check-timeout-max", "30m", "the longest time limit a session may set on a health check")
	if err := fs.Parse(args); err != nil {
		return serveConfig{}, err
	}
	if fs.NArg() > 0 {
		return serveConfig{}, fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// where names the source of a flag's value in an error.
	where := func(name string) string {
		if _, ok := os.LookupEnv(serveEnv[name]); ok && !set[name] {
			return serveEnv[name]
		}
		return "--" + name
	}
	if *dbURL != "" && !store.IsPostgresURL(*dbURL) {
		return serveConfig{}, fmt.Errorf("%s %q: want postgres://…", where("database-url"), *dbURL)
	}
	cfg := serveConfig{Addr: *addr, Data: *data, DatabaseURL: *dbURL, LogFormat: *format, Runtime: *runtime,
		Workspace: *workspace, AgentCmd: strings.Fields(*agentCmd), Network: *network, GitAllowPrivate: *gitPrivate}
	if gitPrivateErr != nil && !set["git-allow-private"] {
		return cfg, fmt.Errorf("serve: %s %q: want 1, true, 0 or false", serveEnv["git-allow-private"], gitPrivateEnv)
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return cfg, fmt.Errorf("serve: %s %q: want debug, info, warn or error", where("log-level"), *level)
	}
	switch cfg.LogFormat {
	case "text", "json":
	default:
		return cfg, fmt.Errorf("serve: %s %q: want text or json", where("log-format"), cfg.LogFormat)
	}
	switch cfg.Runtime {
	case "docker", "process":
	default:
		return cfg, fmt.Errorf("serve: %s %q: want docker or process", where("runtime"), cfg.Runtime)
	}
	if cfg.Addr == "" {
		return cfg, fmt.Errorf("serve: %s is empty", where("addr"))
	}
	if cfg.Data == "" {
		return cfg, fmt.Errorf("serve: %s is empty", where("data"))
	}
	for _, n := range []struct {
		flag string
		val  string
		dst  *int
	}{{"max-agents", *maxAgents, &cfg.MaxAgents}, {"mailbox", *mailbox, &cfg.Mailbox}, {"stream-buffer", *buffer, &cfg.StreamBuffer}} {
		v, err := strconv.Atoi(strings.TrimSpace(n.val))
		if err != nil || v < 1 {
			return cfg, fmt.Errorf("serve: %s %q: want a whole number of at least 1", where(n.flag), n.val)
		}
		*n.dst = v
	}
	for _, sz := range []struct {
		flag string
		val  string
		dst  *int64
	}{{"max-body", *maxBody, &cfg.MaxBody}, {"max-line", *maxLine, &cfg.MaxLine}, {"file-max", *fileMax, &cfg.FileMax}, {"session-quota", *quota, &cfg.SessionQuota}} {
		v, err := parseSize(sz.val)
		if err != nil || v < 1 {
			return cfg, fmt.Errorf("serve: %s %q: want a size like 1MiB or 65536", where(sz.flag), sz.val)
		}
		*sz.dst = v
	}
	if v, err := parseSize(*fileCache); err != nil || v < 0 {
		return cfg, fmt.Errorf("serve: %s %q: want a size like 64MiB, or 0", where("file-cache"), *fileCache)
	} else {
		cfg.FileCache = v
	}
	switch cfg.Workspace {
	case "fuse", "dir":
	default:
		return cfg, fmt.Errorf("serve: %s %q: want fuse or dir", where("workspace"), cfg.Workspace)
	}
	if cfg.Runtime == "process" && len(cfg.AgentCmd) == 0 {
		return cfg, errors.New("serve: --runtime process needs --agent-cmd (the program every agent runs, e.g. bin/testagent)")
	}
	var err error
	switch strings.ToLower(strings.TrimSpace(*egressOn)) {
	case "on", "true", "1":
		cfg.Egress = true
	case "off", "false", "0":
	default:
		return cfg, fmt.Errorf("serve: %s %q: want on or off", where("egress"), *egressOn)
	}
	cfg.EgressAllow = egress.ParseAllow(*egressAllow)
	if err := egress.CheckAllow(cfg.EgressAllow); err != nil {
		return cfg, fmt.Errorf("serve: %s: %v", where("egress-allow"), err)
	}
	if egressPrivateErr != nil && !set["egress-allow-private"] {
		return cfg, fmt.Errorf("serve: %s %q: want true or false", serveEnv["egress-allow-private"], egressPrivateEnv)
	}
	cfg.EgressAllowPrivate = *egressPrivate
	if cfg.PublicURL = strings.TrimRight(strings.TrimSpace(*publicURL), "/"); cfg.PublicURL != "" {
		if u, err := url.Parse(cfg.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cfg, fmt.Errorf("serve: %s %q: want an http:// or https:// URL, e.g. https://filepath.example.com", where("public-url"), *publicURL)
		}
	}
	if cfg.TrustedProxies, err = api.ParseCIDRs(*proxies); err != nil {
		return cfg, fmt.Errorf("serve: %s %q: want networks like 127.0.0.1/32,10.0.0.0/8: %v", where("trusted-proxies"), *proxies, err)
	}
	if cfg.ApprovalTimeout, err = parseTTL(*approvalTimeout); err != nil || cfg.ApprovalTimeout < time.Second {
		return cfg, fmt.Errorf("serve: %s %q: want a duration of at least 1s, like 10m or 1h", where("approval-timeout"), *approvalTimeout)
	}
	if cfg.SessionTTL, err = parseTTL(*sessionTTL); err != nil || cfg.SessionTTL < time.Minute {
		return cfg, fmt.Errorf("serve: %s %q: want a duration of at least 1m, like 12h or 7d", where("session-ttl"), *sessionTTL)
	}
	for _, d := range []struct {
		flag, val string
		dst       *time.Duration
	}{{"check-timeout", *checkTimeout, &cfg.CheckTimeout}, {"check-timeout-max", *checkTimeoutMax, &cfg.CheckTimeoutMax}} {
		if *d.dst, err = time.ParseDuration(strings.TrimSpace(d.val)); err != nil || *d.dst < time.Second {
			return cfg, fmt.Errorf("serve: %s %q: want a duration of at least 1s, like 90s or 5m", where(d.flag), d.val)
		}
	}
	if cfg.CheckTimeout > cfg.CheckTimeoutMax {
		return cfg, fmt.Errorf("serve: %s %s is longer than %s %s", where("check-timeout"), cfg.CheckTimeout, where("check-timeout-max"), cfg.CheckTimeoutMax)
	}
	whereVar := func(flag, variable string) string {
		if _, ok := os.LookupEnv(variable); ok && !set[flag] {
			return variable
		}
		return "--" + flag
	}
	if cfg.LLM, err = llm.config(whereVar); err != nil {
		return cfg, err
	}
	cfg.ProviderKeys = map[string]string{}
	for p, up := range map[string]string{orchestrator.ProviderOpenRouter: cfg.LLM.Gateway.OpenRouter.APIKey,
		orchestrator.ProviderAnthropic: cfg.LLM.Gateway.Anthropic.APIKey, orchestrator.ProviderOpenAI: cfg.LLM.Gateway.OpenAI.APIKey} {
		if up != "" {
			cfg.ProviderKeys[p] = up
		}
	}
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.AllowedOrigins = append(cfg.AllowedOrigins, o)
		}
	}
	return cfg, nil
}

// parseTTL parses a duration (time.ParseDuration) or a number of days ("7d").
func parseTTL(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n > 3650 {
			return 0, fmt.Errorf("invalid number of days %q", d)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
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
	if n > math.MaxInt64/mult || n < math.MinInt64/mult {
		return 0, fmt.Errorf("size %s is too large", s)
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

// serve builds the app and runs it until ctx ends, then closes it.
func serve(ctx context.Context, cfg serveConfig, stdout io.Writer, log *slog.Logger) error {
	a, err := newApp(ctx, cfg, stdout, log)
	if err != nil {
		return err
	}
	err = a.Run(ctx)
	return errors.Join(err, a.Close())
}

// sweepExpired deletes expired login links and browser sessions at start and
// then every interval, until ctx ends.
func sweepExpired(ctx context.Context, st *identity.Store, interval time.Duration, log *slog.Logger) {
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
// session log as `file` records, each in the chat of the node that wrote
// it (none for a person's).
type logAppender struct{ st *store.Store }

func (a logAppender) Append(ctx context.Context, sessionID, nodeID, kind string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	_, err = a.st.Append(ctx, sessionID, protocol.Record{NodeID: nodeID, Kind: kind, Data: b})
	return err
}

// gatewayPrefixes are the LLM gateway's routes on the agent-facing API
// (one per provider wire format).
var gatewayPrefixes = []string{"/openrouter/", "/anthropic/", "/openai/"}

// mountGateway serves h under every gateway prefix of the agent-facing API.
func mountGateway(a *agentapi.Server, h http.Handler) {
	for _, p := range gatewayPrefixes {
		a.Mount(p, h)
	}
}
