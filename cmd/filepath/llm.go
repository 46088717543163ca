package main

import (
	"flag"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/gateway"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
)

// llmConfig is the validated configuration of the LLM gateway, the model
// list and the default session budget.
type llmConfig struct {
	Gateway gateway.Config  // without its Store
	Budget  sessions.Budget // a new session's budget (nil fields: unlimited)
	// ModelsTTL is how long the live model list is served before it is
	// fetched again (gateway.DefaultModelsTTL).
	ModelsTTL time.Duration
}

// llmFlags are the serve flags of llmConfig, each also a FILEPATH_* variable.
type llmFlags struct {
	keys, bases            map[string]*string
	budgetTokens, budgetUS *string
	maxBody, timeout       *string
	modelsTTL              *string
}

func addLLMFlags(fs *flag.FlagSet) *llmFlags {
	f := &llmFlags{keys: map[string]*string{}, bases: map[string]*string{}}
	for _, p := range []struct{ name, def string }{
		{gateway.OpenRouter, gateway.DefaultOpenRouterBaseURL},
		{gateway.Anthropic, gateway.DefaultAnthropicBaseURL},
		{gateway.OpenAI, gateway.DefaultOpenAIBaseURL},
	} {
		kv, bv := gateway.KeyVar(p.name), gateway.BaseURLVar(p.name)
		f.keys[p.name] = fs.String(p.name+"-api-key", env(kv, ""), fmt.Sprintf("the %s API key agents use through the LLM gateway; prefer the env var (env %s)", p.name, kv))
		f.bases[p.name] = fs.String(p.name+"-base-url", env(bv, p.def), fmt.Sprintf("the %s API base URL (env %s)", p.name, bv))
	}
	f.budgetTokens = fs.String("session-budget-tokens", env("FILEPATH_SESSION_BUDGET_TOKENS", ""), "a new session's LLM budget in tokens; empty: unlimited (env FILEPATH_SESSION_BUDGET_TOKENS)")
	f.budgetUS = fs.String("session-budget-usd", env("FILEPATH_SESSION_BUDGET_USD", ""), "a new session's LLM budget in US dollars; empty: unlimited (env FILEPATH_SESSION_BUDGET_USD)")
	f.maxBody = fs.String("gateway-max-body", env("FILEPATH_GATEWAY_MAX_BODY", "32MiB"), "largest LLM request body an agent may send (env FILEPATH_GATEWAY_MAX_BODY)")
	f.timeout = fs.String("gateway-timeout", env("FILEPATH_GATEWAY_TIMEOUT", gateway.DefaultTimeout.String()), "longest wait for an LLM upstream to start answering, and longest silence within an answer (env FILEPATH_GATEWAY_TIMEOUT)")
	f.modelsTTL = fs.String("models-ttl", env("FILEPATH_MODELS_TTL", gateway.DefaultModelsTTL.String()), "how long the model list fetched from OpenRouter is served before it is fetched again (env FILEPATH_MODELS_TTL)")
	return f
}

// config validates the flags. where(flag, variable) names the source of a
// value in an error: the variable when it was set and the flag was not.
func (f *llmFlags) config(where func(flag, variable string) string) (llmConfig, error) {
	var c llmConfig
	ups := map[string]*gateway.Upstream{gateway.OpenRouter: &c.Gateway.OpenRouter, gateway.Anthropic: &c.Gateway.Anthropic, gateway.OpenAI: &c.Gateway.OpenAI}
	for name, up := range ups {
		up.APIKey, up.BaseURL = strings.TrimSpace(*f.keys[name]), strings.TrimSpace(*f.bases[name])
		if _, err := gateway.ParseBaseURL(up.BaseURL); err != nil {
			return c, fmt.Errorf("serve: --%s-base-url (%s): %w", name, gateway.BaseURLVar(name), err)
		}
	}
	if s := strings.TrimSpace(*f.budgetTokens); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return c, fmt.Errorf("serve: %s %q: want a number of tokens, or empty for unlimited", where("session-budget-tokens", "FILEPATH_SESSION_BUDGET_TOKENS"), s)
		}
		c.Budget.Tokens = &n
	}
	if s := strings.TrimSpace(*f.budgetUS); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return c, fmt.Errorf("serve: %s %q: want a number of dollars, or empty for unlimited", where("session-budget-usd", "FILEPATH_SESSION_BUDGET_USD"), s)
		}
		c.Budget.USD = &v
	}
	n, err := parseSize(*f.maxBody)
	if err != nil || n < 1 {
		return c, fmt.Errorf("serve: %s %q: want a size like 32MiB", where("gateway-max-body", "FILEPATH_GATEWAY_MAX_BODY"), *f.maxBody)
	}
	c.Gateway.MaxBody = n
	d, err := time.ParseDuration(strings.TrimSpace(*f.timeout))
	if err != nil || d <= 0 {
		return c, fmt.Errorf("serve: %s %q: want a duration like 10m", where("gateway-timeout", "FILEPATH_GATEWAY_TIMEOUT"), *f.timeout)
	}
	c.Gateway.Timeout = d
	if c.ModelsTTL, err = time.ParseDuration(strings.TrimSpace(*f.modelsTTL)); err != nil || c.ModelsTTL <= 0 {
		return c, fmt.Errorf("serve: %s %q: want a duration like 1h", where("models-ttl", "FILEPATH_MODELS_TTL"), *f.modelsTTL)
	}
	return c, c.Gateway.Validate()
}

// newGateway builds the LLM gateway (served to agents on the agent-facing
// listener) and the model list of GET /api/v1/models.
func newGateway(c llmConfig, st gateway.Store, lg gateway.Log, log *slog.Logger) (*gateway.Gateway, *gateway.Models, error) {
	gcfg := c.Gateway
	gcfg.Store, gcfg.Log, gcfg.Logger = st, lg, log
	gw, err := gateway.New(gcfg)
	if err != nil {
		return nil, nil, err
	}
	models, err := gateway.NewModels(gateway.ModelsConfig{OpenRouter: c.Gateway.OpenRouter, TTL: c.ModelsTTL, Logger: log})
	if err != nil {
		gw.Close()
		return nil, nil, err
	}
	var missing []string
	for _, p := range []string{gateway.OpenRouter, gateway.Anthropic, gateway.OpenAI} {
		if gw.Configured(p) != nil {
			missing = append(missing, gateway.KeyVar(p))
		}
	}
	if len(missing) > 0 {
		log.Info("LLM providers without a key: their agents get a 503 naming the variable", "unset", strings.Join(missing, ", "))
	}
	return gw, models, nil
}
