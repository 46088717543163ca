// Package api is the HTTP edge of the orchestrator: the REST API under
// /api/v1, the live session stream, login and API-key auth, the OpenAPI
// document and the embedded UI.
package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator/changes"
	"github.com/filepath-dev/filepath/orchestrator/files"
	"github.com/filepath-dev/filepath/orchestrator/files/format"
	"github.com/filepath-dev/filepath/orchestrator/gitnet"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/orchestrator/models"
	"github.com/filepath-dev/filepath/orchestrator/ship"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/protocol"
	"github.com/filepath-dev/filepath/web"
)

// Defaults of Config.
const (
	DefaultMaxBody      = 1 << 20
	DefaultPingInterval = 30 * time.Second
	DefaultPingTimeout  = 10 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultLoginTTL     = 24 * time.Hour
	DefaultSessionTTL   = 7 * 24 * time.Hour
	DefaultReplayPage   = 500
)

// Runner runs the agents: it starts and stops sessions and nodes, delivers
// inputs, tells liveness, cleans up before deletions and reads agents' logs.
// The lifecycle runner implements all of it (checked at compile time in
// cmd/filepath), so a renamed method is a build error, never a feature
// silently switched off.
type Runner interface {
	// StartSession starts the containers of the session's nodes. The session
	// belongs to userID (already checked by the API).
	StartSession(ctx context.Context, userID, sessionID string) error
	// StopSession stops them (signal stop, grace period, kill).
	StopSession(ctx context.Context, userID, sessionID string) error
	// StartNode starts one node's agent unless it runs. The API calls it for
	// a node it has just created, and before delivering a message (so that
	// a message to a stopped node restarts it).
	StartNode(ctx context.Context, userID, sessionID, nodeID string) error
	// Deliver appends in to the session log as an input record of nodeID
	// and queues it for the node's stdin; it returns the appended record.
	Deliver(ctx context.Context, sessionID, nodeID string, in protocol.Input) (protocol.Record, error)
	// Running tells whether a node's agent process runs: the API refuses to
	// mark a node that does not run as running or thinking.
	Running(nodeID string) bool
	// DeleteNode and DeleteSession remove what runs for the nodes
	// (containers, workspaces, logs); the API calls them before the store
	// deletes the rows.
	DeleteNode(ctx context.Context, userID, sessionID, nodeID string) error
	DeleteSession(ctx context.Context, userID, sessionID string) error
	// NodeLog reads the tail of a node's stderr log.
	NodeLog(ctx context.Context, sessionID, nodeID string, tailLines int) ([]byte, error)
}

// The hub is the store's publisher.
var _ store.Publisher = (*hub.Hub[protocol.Record])(nil)

// ModelSource lists the models the UI offers (a cached OpenRouter listing in
// production: gateway.Models).
type ModelSource interface {
	Models(ctx context.Context) (models.List, error)
}

// ModelSourceFunc adapts a function to ModelSource.
type ModelSourceFunc func(ctx context.Context) (models.List, error)

// Models calls f.
func (f ModelSourceFunc) Models(ctx context.Context) (models.List, error) { return f(ctx) }

// bundledModels is the default ModelSource: the list compiled into the
// binary.
var bundledModels = ModelSourceFunc(func(context.Context) (models.List, error) {
	return models.Bundled("the bundled model list: this server has no live source"), nil
})

// Config is everything a Server needs. Store, Users, Sessions, Collab,
// Audit and Hub are required.
type Config struct {
	// Addr is the listen address, e.g. "127.0.0.1:8080" or "127.0.0.1:0".
	Addr     string
	Store    *store.Store // the sessions' logs
	Users    *identity.Store
	Sessions *sessions.Store
	Collab   *collab.Store
	// Secrets keeps the users' secrets and pinned host keys (nil: a store
	// without a key, which keeps none).
	Secrets *secrets.Store
	Audit   *audit.Store
	Hub     *hub.Hub[protocol.Record]
	// Ship pushes nodes' branches (nil: push answers 503).
	Ship *ship.Nodes
	// Runner runs the agents (nil: no runtime; inputs are only appended,
	// start/stop answer 503, logs are empty).
	Runner Runner
	Models ModelSource
	Logger *slog.Logger
	// Stdout receives the one-line login URL printed on first start.
	Stdout io.Writer
	// DataDir is the server's data directory (--data): the admin commands
	// the server suggests (a new login link) name it, so that they reach
	// this server's database. "": they name none.
	DataDir string
	// UI is the built web UI (nil: web.Assets()).
	UI fs.FS
	// AllowedOrigins are extra origin patterns (path.Match on the host, or on
	// scheme://host when the pattern has "://") allowed to open the stream
	// and to make cookie-authenticated changes. The request's own host is
	// always allowed.
	AllowedOrigins []string
	// TrustedProxies are the networks of reverse proxies whose
	// X-Forwarded-For (the client's address) and X-Forwarded-Proto (https
	// makes the login cookie Secure) are believed. Empty: no proxy is.
	TrustedProxies []*net.IPNet
	// PublicURL is where browsers reach the server (--public-url); an
	// https:// one makes the login cookie Secure whatever the request
	// says (the usual deployment: a TLS-terminating proxy in front).
	PublicURL    string
	MaxBody      int64         // bytes of a JSON request body (default 1 MiB)
	PingInterval time.Duration // WebSocket keepalive (default 30s)
	PingTimeout  time.Duration // a pong must arrive within (default 10s)
	WriteTimeout time.Duration // one stream message write (default 10s)
	LoginTTL     time.Duration // first-start login link lifetime (default 24h)
	SessionTTL   time.Duration // login cookie lifetime (default 7 days)
	ReplayPage   int           // records per store read when replaying (default 500)
	// Files is the session filesystem served under /sessions/:id/fs (nil:
	// no file routes).
	Files *vfs.VFS
	// FileTools are the file tiers and tools over Files (nil: made here,
	// auditing to Store).
	FileTools *files.Service
	// GitAllowPrivate accepts a session's git URL whose host is or
	// resolves to a loopback, private or link-local address
	// (--git-allow-private); Resolver looks hosts up (nil: the system's).
	GitAllowPrivate bool
	Resolver        gitnet.Resolver
}

func (c *Config) setDefaults() error {
	if c.Store == nil || c.Users == nil || c.Sessions == nil || c.Collab == nil || c.Audit == nil || c.Hub == nil {
		return errors.New("api config: Store, Users, Sessions, Collab, Audit and Hub are required")
	}
	if c.Secrets == nil {
		c.Secrets = secrets.New(c.Store, secrets.Config{})
	}
	if c.Addr == "" {
		c.Addr = "127.0.0.1:8080"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.UI == nil {
		c.UI = web.Assets()
	}
	if c.Models == nil {
		c.Models = bundledModels
	}
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.PingInterval <= 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.PingTimeout <= 0 {
		c.PingTimeout = DefaultPingTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.LoginTTL <= 0 {
		c.LoginTTL = DefaultLoginTTL
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.ReplayPage <= 0 {
		c.ReplayPage = DefaultReplayPage
	}
	c.ReplayPage = min(c.ReplayPage, store.MaxRecordsLimit)
	return nil
}

// Server serves the API. Build it with New, then Run; Close stops it.
type Server struct {
	cfg      Config
	log      *slog.Logger
	store    *store.Store
	users    *identity.Store
	sessions *sessions.Store
	collab   *collab.Store
	secrets  *secrets.Store
	audit    *audit.Store
	hub      *hub.Hub[protocol.Record]
	frames   frames // the streams' encodings of recent records, one per record
	// changes computes workspaces' changes (nil without Config.Files).
	changes *changes.Service
	files   *files.Service // nil without Config.Files
	e       *echo.Echo
	ln      net.Listener
	http    *http.Server

	// streamCtx is canceled at shutdown; stream handlers then close their
	// WebSocket with 1001 going away. streams counts running handlers.
	uiCSP sync.Map // UI page name → its Content-Security-Policy

	// openAPI is the document of the routes served, built once.
	openAPIOnce sync.Once
	openAPI     map[string]any
	openAPIErr  error

	streamCtx    context.Context
	stopStreams  context.CancelFunc
	streamsMu    sync.Mutex // orders streams.Add against shutdown's Wait
	streams      sync.WaitGroup
	closeOnce    sync.Once
	runDone      chan struct{}
	runStarted   bool
	runStartedMu sync.Mutex
}

// New validates cfg, builds the routes and binds the listen address (so Addr
// is known before Run).
func New(cfg Config) (*Server, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, store: cfg.Store, users: cfg.Users, sessions: cfg.Sessions, collab: cfg.Collab,
		secrets: cfg.Secrets, audit: cfg.Audit, hub: cfg.Hub, files: cfg.FileTools, runDone: make(chan struct{})}
	if cfg.Files != nil {
		s.changes = changes.New(cfg.Files, cfg.Sessions, cfg.Store)
	}
	if s.files == nil && cfg.Files != nil {
		var err error
		if s.files, err = files.New(files.Config{VFS: cfg.Files, Recorder: FileAudit(cfg.Audit), Logger: cfg.Logger,
			DownloadAllowPrivate: cfg.GitAllowPrivate, Resolver: cfg.Resolver}); err != nil {
			return nil, err
		}
		if err := format.Register(s.files); err != nil {
			return nil, err
		}
	}
	s.streamCtx, s.stopStreams = context.WithCancel(context.Background())
	s.e = s.routes()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	s.ln = ln
	s.http = &http.Server{
		Handler:           s.e,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// Addr returns the bound address, e.g. "127.0.0.1:41234".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL returns the base URL of the server, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return "http://" + displayAddr(s.Addr()) }

// Echo returns the router (tests walk its routes).
func (s *Server) Echo() *echo.Echo { return s.e }

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.e }

// displayAddr turns an unspecified listen host into localhost for URLs.
func displayAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// Run bootstraps the first user when the database is empty (printing a login
// URL to Config.Stdout), then serves until ctx is canceled or Close is called,
// then shuts down gracefully: streams close with 1001, in-flight requests
// finish, and Run returns when every handler has returned.
func (s *Server) Run(ctx context.Context) error {
	s.runStartedMu.Lock()
	if s.runStarted {
		s.runStartedMu.Unlock()
		return errors.New("api server: Run called twice")
	}
	s.runStarted = true
	s.runStartedMu.Unlock()
	defer close(s.runDone)

	if err := s.bootstrap(ctx); err != nil {
		s.ln.Close()
		s.stopStreams()
		if ctx.Err() != nil {
			// stopped while starting: a graceful stop; what the first
			// user's creation began rolled back and is redone next start
			s.log.Info("stopped while starting")
			return nil
		}
		return err
	}
	s.log.Info("listening", "addr", s.Addr(), "url", s.URL())

	serveErr := make(chan error, 1)
	go func() { serveErr <- s.http.Serve(s.ln) }()

	var err error
	select {
	case <-ctx.Done():
	case <-s.streamCtx.Done():
	case err = <-serveErr:
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	}
	s.streamsMu.Lock()
	s.stopStreams()
	s.streamsMu.Unlock()
	shutCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if serr := s.http.Shutdown(shutCtx); serr != nil && err == nil {
		err = fmt.Errorf("shut down http server: %w", serr)
	}
	s.streams.Wait()
	s.log.Info("stopped")
	return err
}

// Close stops a running server and waits for Run to return. Safe to call
// twice, and without Run.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.stopStreams()
		s.runStartedMu.Lock()
		started := s.runStarted
		s.runStarted = true // a later Run must not start
		s.runStartedMu.Unlock()
		if !started {
			s.ln.Close()
			close(s.runDone)
		}
	})
	<-s.runDone
	return nil
}

// adminCommand is the command line of an admin command (args after
// "filepath") for this server's data directory.
func (s *Server) adminCommand(args string) string {
	cmd := "filepath " + args
	if s.cfg.DataDir != "" {
		cmd += " --data " + shellQuote(s.cfg.DataDir)
	}
	return cmd
}

// shellQuote quotes v for a POSIX shell when it needs it.
func shellQuote(v string) string {
	if v != "" && strings.IndexFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:@,", r))
	}) < 0 {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// bootstrap creates the first (admin) user of an empty database and prints
// its login URL.
func (s *Server) bootstrap(ctx context.Context) error {
	n, err := s.users.CountUsers(ctx)
	if err != nil {
		return fmt.Errorf("count users: %w", err)
	}
	if n > 0 {
		s.log.Info("for a login link, run: " + s.adminCommand("user login NAME"))
		return nil
	}
	u, err := s.users.CreateUser(ctx, "admin", true)
	if err != nil {
		return fmt.Errorf("create first user: %w", err)
	}
	tok, err := s.users.CreateLoginToken(ctx, u.ID, s.cfg.LoginTTL)
	if err != nil {
		return fmt.Errorf("create login token: %w", err)
	}
	if _, err := fmt.Fprintf(s.cfg.Stdout, "login: %s\n", LoginURL(s.URL(), tok)); err != nil {
		return fmt.Errorf("print login url: %w", err)
	}
	return nil
}

// LoginURL returns the one-time login link for a token on a server at base
// (e.g. "http://127.0.0.1:8080").
func LoginURL(base, token string) string {
	return base + "/login?token=" + token
}
