// Package agentapi serves the agent-facing API (FILEPATH_API_URL): the
// routes an agent calls with its node token: the LLM gateway
// (orchestrator/gateway) and the agent tools (orchestrator/agenttools), which
// cmd/filepath's app mounts on it. With Docker each running container gets its own
// listener inside its own network namespace (127.0.0.1:7428 on the
// container's loopback, nothing on the host); with the process runtime one
// listener on the host's loopback serves every agent.
package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
)

// Defaults of Config.
const (
	DefaultAddr              = "127.0.0.1:7428"
	DefaultSharedAddr        = "127.0.0.1:0"
	DefaultMaxConns          = 64
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
)

// sharedConnsFactor multiplies MaxConns for the process runtime's one
// listener, which every agent shares.
const sharedConnsFactor = 16

// Authenticator tells who an API key is; *identity.Store implements it.
type Authenticator interface {
	AuthAPIKey(ctx context.Context, key string) (identity.Principal, error)
}

// Config configures a Server.
type Config struct {
	Auth   Authenticator // required
	Logger *slog.Logger
	// Netns opens each node's listener inside its container (the Docker
	// runtime). nil: one shared listener on SharedAddr for every agent
	// (the process runtime), where the token alone tells the node.
	Netns containers.NetnsListener
	// Addr is where a container's listener listens, in the container's own
	// network namespace (DefaultAddr).
	Addr string
	// SharedAddr is the shared listener's address on the host (DefaultSharedAddr).
	SharedAddr string
	// MaxConns bounds the concurrent connections of one node's listener
	// (DefaultMaxConns); more wait in the kernel's backlog. The shared
	// listener takes 16 times as many.
	MaxConns int
	// ReadHeaderTimeout bounds reading a request's headers; IdleTimeout
	// ends a keep-alive connection left idle. There is no write timeout:
	// LLM streams last as long as they last.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	// Egress serves the proxy requests (CONNECT, or an absolute URL)
	// that reach a listener, authenticated by the node's token in
	// Proxy-Authorization (the password of ProxyURL's user info).
	// nil: they are refused, and agents get no proxy (ProxyURL is "").
	Egress http.Handler
}

// Server is the agent-facing API. Mount its routes, then Open a listener
// for each running container (Docker) or hand every agent URL (process).
type Server struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux
	url string

	// Lock order: openMu, then mu. Neither is held while calling out,
	// except openMu around ListenIn.
	openMu sync.Mutex // serialises Open, so one node never gets two listeners
	mu     sync.Mutex // guards nodes, shared and closed; never held while a listener closes
	nodes  map[string]*listener
	shared *listener
	closed bool
}

// listener is one http.Server on one listener.
type listener struct {
	nodeID      string // "" for the shared listener
	containerID string
	srv         *http.Server
	done        chan struct{} // closed when Serve returns
	// cancel ends the requests' base context: the egress proxy's tunnels,
	// hijacked connections that srv.Close does not close, end with it.
	cancel context.CancelFunc
}

// New checks cfg and returns a Server. Without Config.Netns it listens on
// SharedAddr at once, so that URL is known before any agent starts.
func New(cfg Config) (*Server, error) {
	if cfg.Auth == nil {
		return nil, errors.New("agentapi config: Auth is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.SharedAddr == "" {
		cfg.SharedAddr = DefaultSharedAddr
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), nodes: map[string]*listener{}}
	if cfg.Netns != nil {
		s.url = "http://" + cfg.Addr
		return s, nil
	}
	ln, err := net.Listen("tcp", cfg.SharedAddr)
	if err != nil {
		return nil, fmt.Errorf("agent-facing API: listen on %s: %w", cfg.SharedAddr, err)
	}
	s.url = "http://" + ln.Addr().String()
	s.shared = s.serve("", "", ln, cfg.MaxConns*sharedConnsFactor)
	s.log.Info("agent-facing API listening", "url", s.url)
	return s, nil
}

// Mount serves h under prefix ("/openrouter/" for a subtree, "/mcp" for
// one path) to authenticated agents: h reads the agent from
// orchestrator.CallerFrom(r.Context()) and never sees its token (the
// Authorization and x-api-key headers are removed). Mount before agents
// call; it panics on a prefix mounted twice, like http.ServeMux.
func (s *Server) Mount(prefix string, h http.Handler) {
	if !strings.HasPrefix(prefix, "/") || prefix == "/healthz" {
		panic(fmt.Sprintf("agentapi: cannot mount %q", prefix))
	}
	s.mux.Handle(prefix, h)
}

// URL is FILEPATH_API_URL, the same for every agent: the container's own
// loopback (Docker) or the shared listener (process).
func (s *Server) URL() string { return s.url }

// ProxyURL is the HTTP_PROXY and HTTPS_PROXY of the agent whose token is
// key: this API's address with the token as the password (clients send
// it in Proxy-Authorization). "" when the server has no egress proxy.
func (s *Server) ProxyURL(key string) string {
	if s.cfg.Egress == nil {
		return ""
	}
	u, err := url.Parse(s.url)
	if err != nil {
		return ""
	}
	u.User = url.UserPassword("agent", key)
	return u.String()
}

// Open serves nodeID on a listener inside container containerID's network
// namespace; only nodeID's token is accepted there. Opening the same
// container again is a no-op; another container of the node replaces the
// old listener. Without Netns (the process runtime) it does nothing.
func (s *Server) Open(ctx context.Context, nodeID, containerID string) error {
	if s.cfg.Netns == nil {
		return nil
	}
	if nodeID == "" || containerID == "" {
		return errors.New("agentapi: open needs a node and a container")
	}
	s.openMu.Lock()
	defer s.openMu.Unlock()
	s.mu.Lock()
	old, closed := s.nodes[nodeID], s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("agent-facing API: shut down")
	}
	if old != nil && old.containerID == containerID {
		return nil
	}
	if old != nil {
		s.Close(nodeID)
	}
	ln, err := s.cfg.Netns.ListenIn(ctx, containerID, s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("agent-facing API: %w", err)
	}
	l := s.serve(nodeID, containerID, ln, s.cfg.MaxConns)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.close()
		return errors.New("agent-facing API: shut down")
	}
	s.nodes[nodeID] = l
	s.mu.Unlock()
	s.log.Debug("agent-facing API listening in container", "node", nodeID, "container", containerID, "addr", s.cfg.Addr)
	return nil
}

// Close closes nodeID's listener and its connections, and waits for them:
// call it when the node's container exits or is removed (the listener keeps
// the container's network namespace alive). Closing a node without a
// listener does nothing.
func (s *Server) Close(nodeID string) {
	s.mu.Lock()
	l := s.nodes[nodeID]
	delete(s.nodes, nodeID)
	s.mu.Unlock()
	if l != nil {
		l.close()
	}
}

// Serving reports whether nodeID has a listener of its own (Docker).
func (s *Server) Serving(nodeID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes[nodeID] != nil
}

// Shutdown closes every listener and waits for them; Open fails after it.
// Safe to call twice.
func (s *Server) Shutdown() {
	s.mu.Lock()
	s.closed = true
	ls := make([]*listener, 0, len(s.nodes)+1)
	for _, l := range s.nodes {
		ls = append(ls, l)
	}
	clear(s.nodes)
	if s.shared != nil {
		ls = append(ls, s.shared)
		s.shared = nil
	}
	s.mu.Unlock()
	for _, l := range ls {
		l.close()
	}
}

// serve runs an http.Server for nodeID ("" : any node) on ln.
func (s *Server) serve(nodeID, containerID string, ln net.Listener, maxConns int) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{nodeID: nodeID, containerID: containerID, done: make(chan struct{}), cancel: cancel}
	l.srv = &http.Server{
		BaseContext:       func(net.Listener) context.Context { return ctx },
		Handler:           s.Handler(nodeID),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	go func() {
		defer close(l.done)
		if err := l.srv.Serve(newLimitListener(ln, maxConns)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Warn("agent-facing API stopped serving", "node", nodeID, "err", err)
		}
	}()
	return l
}

func (l *listener) close() {
	l.cancel()
	l.srv.Close()
	<-l.done
}

// Handler returns the API as served on nodeID's listener: /healthz for
// anyone, every other route for nodeID's token only ("" : any node's token,
// as on the shared listener).
func (s *Server) Handler(nodeID string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "use GET /healthz")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"ok":true}` + "\n"))
			return
		}
		if r.Method == http.MethodConnect || r.URL.IsAbs() {
			s.proxy(w, r, nodeID)
			return
		}
		c, ok := s.authenticate(w, r, nodeID)
		if !ok {
			return
		}
		r.Header.Del("Authorization")
		r.Header.Del("X-Api-Key")
		r = r.WithContext(orchestrator.WithCaller(r.Context(), c))
		h, pattern := s.mux.Handler(r)
		if pattern == "" {
			writeError(w, http.StatusNotFound, "not_found_error", "not_found", fmt.Sprintf("no route %s %s on the agent-facing API", r.Method, r.URL.Path))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// proxy serves a proxy request with Config.Egress, once the token in its
// Proxy-Authorization (Basic, the token as the password) is nodeID's.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, nodeID string) {
	if s.cfg.Egress == nil {
		http.Error(w, "filepath egress: this server has no egress proxy: the agent reaches no network but the agent-facing API", http.StatusForbidden)
		return
	}
	// BasicAuth reads Authorization: read the proxy's header the same way.
	_, token, ok := (&http.Request{Header: http.Header{"Authorization": r.Header.Values("Proxy-Authorization")}}).BasicAuth()
	if !ok || token == "" {
		w.Header().Set("Proxy-Authenticate", `Basic realm="filepath"`)
		http.Error(w, "filepath egress: missing proxy credentials: use the HTTP_PROXY and HTTPS_PROXY the container was given (they carry its FILEPATH_API_KEY)", http.StatusProxyAuthRequired)
		return
	}
	r.Header.Set("Authorization", "Bearer "+token)
	c, ok := s.authenticate(w, r, nodeID)
	r.Header.Del("Authorization")
	r.Header.Del("Proxy-Authorization")
	if !ok {
		return
	}
	s.cfg.Egress.ServeHTTP(w, r.WithContext(orchestrator.WithCaller(r.Context(), c)))
}

// authenticate answers 401/403/500 itself when the request may not go on.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, nodeID string) (orchestrator.Caller, bool) {
	token := requestToken(r)
	if token == "" {
		writeError(w, http.StatusUnauthorized, "authentication_error", "missing_api_key",
			"missing token: send the container's FILEPATH_API_KEY as Authorization: Bearer <key> or x-api-key: <key>")
		return orchestrator.Caller{}, false
	}
	p, err := s.cfg.Auth.AuthAPIKey(r.Context(), token)
	var expired *identity.APIKeyExpiredError
	switch {
	case errors.As(err, &expired): // only user keys expire
		writeError(w, http.StatusUnauthorized, "authentication_error", "expired_api_key",
			fmt.Sprintf("expired token: this user API key expired at %s; use the container's FILEPATH_API_KEY",
				expired.ExpiresAt.UTC().Format(time.RFC3339)))
		return orchestrator.Caller{}, false
	case orchestrator.ErrorCode(err) == orchestrator.EUnauthorized:
		writeError(w, http.StatusUnauthorized, "authentication_error", "invalid_api_key",
			"invalid token: it is unknown or was revoked when its agent's container exited; use the container's FILEPATH_API_KEY")
		return orchestrator.Caller{}, false
	case err != nil:
		s.log.Error("agent-facing API: authenticate", "err", err)
		writeError(w, http.StatusInternalServerError, "api_error", "internal_error", "could not check the token; retry")
		return orchestrator.Caller{}, false
	case p.NodeID == "":
		writeError(w, http.StatusForbidden, "permission_error", "user_api_key",
			"a user API key cannot call the agent-facing API: use the container's FILEPATH_API_KEY")
		return orchestrator.Caller{}, false
	case nodeID != "" && p.NodeID != nodeID:
		writeError(w, http.StatusForbidden, "permission_error", "wrong_agent",
			"this token belongs to another agent: use this container's own FILEPATH_API_KEY")
		return orchestrator.Caller{}, false
	}
	return orchestrator.Caller{UserID: p.User.ID, SessionID: p.SessionID, NodeID: p.NodeID}, true
}

// requestToken reads "Authorization: Bearer <token>" or "x-api-key: <token>"
// (what Anthropic's clients send).
func requestToken(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		if scheme, tok, ok := strings.Cut(a, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		return ""
	}
	return strings.TrimSpace(r.Header.Get("X-Api-Key"))
}

// writeError answers in a shape both OpenAI's and Anthropic's clients read:
// {"type":"error","error":{"type","code","message"}}.
func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": typ, "code": code, "message": msg},
	})
}
