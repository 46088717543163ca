// Package gateway is the LLM gateway: agent-facing endpoints that speak each
// provider's own wire format, swap the node's token for the provider's key,
// pass answers through unbuffered and meter every request per node.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// Providers.
const (
	OpenRouter = "openrouter"
	Anthropic  = "anthropic"
	OpenAI     = "openai"
)

// Defaults of Config.
const (
	DefaultOpenRouterBaseURL = "https://openrouter.ai/api/v1"
	DefaultAnthropicBaseURL  = "https://api.anthropic.com"
	DefaultOpenAIBaseURL     = "https://api.openai.com/v1"
	// DefaultMaxBody bounds a request body: coding CLIs send long contexts.
	DefaultMaxBody = 32 << 20
	// DefaultTimeout bounds the wait for the upstream's answer to begin and
	// any silence in the middle of it.
	DefaultTimeout = 10 * time.Minute
	// DefaultMeterQueue is the number of finished requests waiting to be
	// written to the store before requests wait for the writer.
	DefaultMeterQueue = 4096
	// DefaultSpendTTL is how long a session's spend read from the store is
	// used for budget checks.
	DefaultSpendTTL = time.Second
)

// KeyVar is the environment variable holding provider's API key, e.g.
// FILEPATH_OPENROUTER_API_KEY.
func KeyVar(provider string) string { return "FILEPATH_" + strings.ToUpper(provider) + "_API_KEY" }

// BaseURLVar is the environment variable holding provider's base URL.
func BaseURLVar(provider string) string { return "FILEPATH_" + strings.ToUpper(provider) + "_BASE_URL" }

// Upstream is one provider's configuration.
type Upstream struct {
	APIKey  string // "": the provider's routes answer 503 naming KeyVar
	BaseURL string // "": the provider's public URL
}

// Store is what the gateway needs of the sessions' store
// (orchestrator/store/sessions): a session's spend, and the metering.
type Store interface {
	// SessionSpend returns a session's budget and spend.
	SessionSpend(ctx context.Context, sessionID string) (sessions.Spend, error)
	// RecordUsage stores metered requests and adds them to the nodes' and
	// sessions' totals.
	RecordUsage(ctx context.Context, us ...sessions.Usage) error
}

// Log is what the gateway needs of the session log (orchestrator/store).
type Log interface {
	// Append adds records to a session's log (the over-budget notice).
	Append(ctx context.Context, sessionID string, recs ...protocol.Record) ([]protocol.Record, error)
}

var (
	_ Store = (*sessions.Store)(nil)
	_ Log   = (*store.Store)(nil)
)

// Config configures New.
type Config struct {
	OpenRouter Upstream
	Anthropic  Upstream
	OpenAI     Upstream
	Store      Store // required
	Log        Log   // required
	// MaxBody bounds a request body in bytes (DefaultMaxBody); over it: 413.
	MaxBody int64
	// Timeout bounds the wait for the upstream's response headers (over it:
	// 504) and any silence within its body (the answer is cut there).
	// DefaultTimeout.
	Timeout time.Duration
	// Transport sends upstream requests (nil: a transport of the gateway's
	// own, without compression so answers pass through byte for byte).
	Transport http.RoundTripper
	// MeterQueue is DefaultMeterQueue by default.
	MeterQueue int
	// SpendTTL is how long a session's budget and spend read from the store
	// are used for budget checks (DefaultSpendTTL): a budget raised through
	// the API lets requests through within it.
	SpendTTL time.Duration
	Now      func() time.Time // the clock of SpendTTL (time.Now)
	Logger   *slog.Logger
}

// provider is a configured upstream.
type provider struct {
	name   string
	key    string
	base   *url.URL
	keyVar string
}

func (c *Config) upstreams() []struct {
	name string
	up   Upstream
	def  string
} {
	return []struct {
		name string
		up   Upstream
		def  string
	}{
		{OpenRouter, c.OpenRouter, DefaultOpenRouterBaseURL},
		{Anthropic, c.Anthropic, DefaultAnthropicBaseURL},
		{OpenAI, c.OpenAI, DefaultOpenAIBaseURL},
	}
}

// ParseBaseURL checks a provider base URL: absolute http or https with a
// host, no query or fragment. It returns it without a trailing slash.
func ParseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%q is not a URL: %w", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q: want an http:// or https:// URL", raw)
	case u.Host == "":
		return nil, fmt.Errorf("%q has no host", raw)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return nil, fmt.Errorf("%q: a base URL has no query, fragment or user", raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// Validate checks the configuration: each base URL must be an http or https
// URL. The error names the variable to fix.
func (c Config) Validate() error {
	for _, u := range c.upstreams() {
		if u.up.BaseURL == "" {
			continue
		}
		if _, err := ParseBaseURL(u.up.BaseURL); err != nil {
			return fmt.Errorf("%s: %w", BaseURLVar(u.name), err)
		}
	}
	if c.MaxBody < 0 {
		return fmt.Errorf("gateway max body %d: want a positive size", c.MaxBody)
	}
	return nil
}

// Gateway is the http.Handler of the LLM routes. Build it with New; Close it
// to write the last metered requests.
type Gateway struct {
	cfg       Config
	log       *slog.Logger
	providers map[string]*provider
	client    *http.Client

	// Metering: handlers send finished requests to queue (under mu's read
	// lock, so that Close, which takes the write lock, knows no send is in
	// flight); one goroutine writes them to the store in batches.
	mu     sync.RWMutex
	closed bool
	queue  chan meterItem
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once

	flightMu sync.Mutex // guards inFlight
	inFlight int        // requests between their body and their metering
	idle     *sync.Cond // broadcast when inFlight drops to 0

	spendMu sync.Mutex
	spends  map[string]*spendEntry // by session id

	noticeMu sync.Mutex
	noticed  map[string]string // node id -> the budget state already reported in its chat
}

// New validates cfg and starts the gateway's metering writer.
func New(cfg Config) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Store == nil || cfg.Log == nil {
		return nil, errors.New("gateway: Store and Log are required")
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MeterQueue <= 0 {
		cfg.MeterQueue = DefaultMeterQueue
	}
	if cfg.SpendTTL <= 0 {
		cfg.SpendTTL = DefaultSpendTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Identity encoding: the agent gets the upstream's bytes as they
		// are, and the usage reader can read them.
		t.DisableCompression = true
		// Many agents stream at once from the same upstream.
		t.MaxIdleConns = 1024
		t.MaxIdleConnsPerHost = 256
		cfg.Transport = t
	}
	g := &Gateway{
		cfg: cfg, log: cfg.Logger, providers: map[string]*provider{},
		client: &http.Client{Transport: cfg.Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // an upstream's redirect goes back to the agent, never re-sent with the key
		}},
		queue: make(chan meterItem, cfg.MeterQueue), quit: make(chan struct{}), done: make(chan struct{}),
		noticed: map[string]string{}, spends: map[string]*spendEntry{},
	}
	g.idle = sync.NewCond(&g.flightMu)
	for _, u := range cfg.upstreams() {
		raw := u.up.BaseURL
		if raw == "" {
			raw = u.def
		}
		base, err := ParseBaseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", BaseURLVar(u.name), err)
		}
		g.providers[u.name] = &provider{name: u.name, key: strings.TrimSpace(u.up.APIKey), base: base, keyVar: KeyVar(u.name)}
	}
	go g.writeUsage()
	return g, nil
}

// Configured returns nil when provider has an API key, else an error naming
// the variable to set (for refusing to start an agent that needs it).
func (g *Gateway) Configured(provider string) error {
	p := g.providers[provider]
	if p == nil {
		return fmt.Errorf("unknown LLM provider %q", provider)
	}
	if p.key == "" {
		return fmt.Errorf("no %s API key is configured: set %s (or the serve flag --%s-api-key) and restart filepath", provider, p.keyVar, provider)
	}
	return nil
}

// Close writes the requests metered so far to the store and stops the
// writer. Requests that end later are written synchronously. Safe to call
// twice.
func (g *Gateway) Close() error {
	g.once.Do(func() {
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
		close(g.quit)
		<-g.done
	})
	return nil
}

// route is one endpoint of the gateway.
type route struct {
	provider string
	method   string
	upstream string // path below the provider's base URL
	wire     wire
}

// routes are the gateway's endpoints, by request path (GATEWAY.md).
var routes = map[string]route{
	"/openrouter/v1/chat/completions":     {OpenRouter, http.MethodPost, "/chat/completions", wireChat},
	"/openrouter/v1/models":               {OpenRouter, http.MethodGet, "/models", wireNone},
	"/anthropic/v1/messages":              {Anthropic, http.MethodPost, "/v1/messages", wireAnthropic},
	"/anthropic/v1/messages/count_tokens": {Anthropic, http.MethodPost, "/v1/messages/count_tokens", wireNone},
	"/openai/v1/responses":                {OpenAI, http.MethodPost, "/responses", wireResponses},
	"/openai/v1/chat/completions":         {OpenAI, http.MethodPost, "/chat/completions", wireChat},
	"/openai/v1/models":                   {OpenAI, http.MethodGet, "/models", wireNone},
}

// errTimeout is the cause of an upstream request cut by Config.Timeout.
var errTimeout = errors.New("upstream timeout")

// upstreamError turns a failed upstream round trip into the agent's answer:
// 504 when the upstream did not answer in time, else 502 naming the host.
func (g *Gateway) upstreamError(p *provider, ctx context.Context, err error) apiError {
	host := p.base.Host
	if errors.Is(context.Cause(ctx), errTimeout) {
		return apiError{status: http.StatusGatewayTimeout, retry: true,
			msg: fmt.Sprintf("upstream %s (%s) did not answer within %s", host, p.name, g.cfg.Timeout)}
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return apiError{status: http.StatusBadGateway, retry: true,
			msg: fmt.Sprintf("upstream %s (%s) is unreachable: %v", host, p.name, op.Err)}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return apiError{status: http.StatusBadGateway, retry: true,
		msg: fmt.Sprintf("upstream %s (%s) failed: %v", host, p.name, err)}
}
