package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/models"
)

// Defaults of ModelsConfig.
const (
	DefaultModelsTTL   = time.Hour
	DefaultModelsRetry = time.Minute
	modelsFetchTimeout = 15 * time.Second
	maxModelsBody      = 32 << 20
)

// ModelsConfig configures NewModels.
type ModelsConfig struct {
	// OpenRouter is where the list comes from (GET <BaseURL>/models with the
	// key). Without a key the bundled list is served.
	OpenRouter Upstream
	// TTL is how long a fetched list is served (DefaultModelsTTL); Retry how
	// long after a failed fetch the next one is tried (DefaultModelsRetry):
	// meanwhile the last good list, or the bundled one, is served.
	TTL       time.Duration
	Retry     time.Duration
	Now       func() time.Time  // the clock (time.Now)
	Transport http.RoundTripper // nil: http.DefaultTransport
	Logger    *slog.Logger
}

// Models is the model list of GET /api/v1/models (api.ModelSource):
// OpenRouter's live list, cached; the bundled list when there is no key or no
// good list yet. A failed refresh keeps the last good list.
type Models struct {
	cfg    ModelsConfig
	base   *url.URL
	key    string
	client *http.Client
	log    *slog.Logger

	mu      sync.Mutex // held while fetching: callers wait for one fetch
	good    *models.List
	fetched time.Time
	tried   time.Time // the last failed fetch
	lastErr error
}

// NewModels checks cfg and returns the list; nothing is fetched before the
// first call.
func NewModels(cfg ModelsConfig) (*Models, error) {
	raw := cfg.OpenRouter.BaseURL
	if raw == "" {
		raw = DefaultOpenRouterBaseURL
	}
	base, err := ParseBaseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", BaseURLVar(OpenRouter), err)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultModelsTTL
	}
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultModelsRetry
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Models{cfg: cfg, base: base, key: strings.TrimSpace(cfg.OpenRouter.APIKey), log: cfg.Logger,
		client: &http.Client{Transport: cfg.Transport, Timeout: modelsFetchTimeout}}, nil
}

// Models returns the list: cached within the TTL, else fetched again.
func (m *Models) Models(ctx context.Context) (models.List, error) {
	if m.key == "" {
		return models.Bundled(fmt.Sprintf("offline list: no OpenRouter key is configured (%s)", KeyVar(OpenRouter))), nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Now()
	if m.good != nil && now.Sub(m.fetched) < m.cfg.TTL {
		return *m.good, nil
	}
	if m.lastErr != nil && now.Sub(m.tried) < m.cfg.Retry {
		return m.fallback(), nil
	}
	ps, err := m.fetch(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return models.List{}, ctx.Err() // the caller went away: not the upstream's failure
		}
		m.tried, m.lastErr = now, err
		m.log.Warn("fetch the model list", "url", m.base.String()+"/models", "err", err)
		return m.fallback(), nil
	}
	at := now.UTC()
	m.good = &models.List{Providers: ps, FetchedAt: &at}
	m.fetched, m.lastErr = now, nil
	return *m.good, nil
}

// fallback is the last good list with a note, or the bundled list.
func (m *Models) fallback() models.List {
	if m.good != nil {
		l := *m.good
		l.Note = fmt.Sprintf("could not refresh the list from %s (%v); showing the list of %s", m.base.Host, m.lastErr,
			m.fetched.UTC().Format(time.RFC3339))
		return l
	}
	return models.Bundled(fmt.Sprintf("offline list: could not reach %s (%v)", m.base.Host, m.lastErr))
}

func (m *Models) fetch(ctx context.Context) ([]models.Provider, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base.String()+"/models", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+m.key)
	req.Header.Set("Accept", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxModelsBody+1))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	if len(body) > maxModelsBody {
		return nil, fmt.Errorf("the list is larger than %d bytes", maxModelsBody)
	}
	return models.ParseOpenRouter(body)
}
