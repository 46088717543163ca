package main

import (
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/gateway"
)

func TestParseServeLLM(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
		check   func(t *testing.T, c llmConfig)
	}{
		{name: "defaults", check: func(t *testing.T, c llmConfig) {
			g := c.Gateway
			if g.OpenRouter.BaseURL != gateway.DefaultOpenRouterBaseURL || g.Anthropic.BaseURL != gateway.DefaultAnthropicBaseURL ||
				g.OpenAI.BaseURL != gateway.DefaultOpenAIBaseURL || g.OpenRouter.APIKey != "" || g.MaxBody != 32<<20 ||
				g.Timeout != 10*time.Minute || c.Budget.Tokens != nil || c.Budget.USD != nil || c.ModelsTTL != time.Hour {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "env", env: map[string]string{"FILEPATH_OPENROUTER_API_KEY": "sk-or", "FILEPATH_ANTHROPIC_BASE_URL": "http://127.0.0.1:9/x",
			"FILEPATH_SESSION_BUDGET_TOKENS": "100000", "FILEPATH_SESSION_BUDGET_USD": "2.50", "FILEPATH_GATEWAY_TIMEOUT": "30s"},
			check: func(t *testing.T, c llmConfig) {
				if c.Gateway.OpenRouter.APIKey != "sk-or" || c.Gateway.Anthropic.BaseURL != "http://127.0.0.1:9/x" ||
					*c.Budget.Tokens != 100000 || *c.Budget.USD != 2.5 || c.Gateway.Timeout != 30*time.Second {
					t.Fatalf("%+v", c)
				}
			}},
		{name: "models ttl", env: map[string]string{"FILEPATH_MODELS_TTL": "90s"}, check: func(t *testing.T, c llmConfig) {
			if c.ModelsTTL != 90*time.Second {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "bad models ttl", args: []string{"--models-ttl", "0s"}, wantErr: "--models-ttl"},
		{name: "flags win", env: map[string]string{"FILEPATH_OPENAI_API_KEY": "env"}, args: []string{"--openai-api-key", "flag", "--gateway-max-body", "1MiB"},
			check: func(t *testing.T, c llmConfig) {
				if c.Gateway.OpenAI.APIKey != "flag" || c.Gateway.MaxBody != 1<<20 {
					t.Fatalf("%+v", c)
				}
			}},
		{name: "bad base URL", env: map[string]string{"FILEPATH_OPENAI_BASE_URL": "api.openai.com/v1"}, wantErr: "FILEPATH_OPENAI_BASE_URL"},
		{name: "base URL scheme", args: []string{"--openrouter-base-url", "ftp://x"}, wantErr: "--openrouter-base-url"},
		{name: "bad token budget", args: []string{"--session-budget-tokens", "-5"}, wantErr: "--session-budget-tokens"},
		// A bad value from a variable names the variable, from a flag the flag.
		{name: "bad usd budget", env: map[string]string{"FILEPATH_SESSION_BUDGET_USD": "ten"}, wantErr: `FILEPATH_SESSION_BUDGET_USD "ten"`},
		{name: "bad token budget in env", env: map[string]string{"FILEPATH_SESSION_BUDGET_TOKENS": "-1"}, wantErr: `FILEPATH_SESSION_BUDGET_TOKENS "-1"`},
		{name: "bad timeout in env", env: map[string]string{"FILEPATH_GATEWAY_TIMEOUT": "soon"}, wantErr: `FILEPATH_GATEWAY_TIMEOUT "soon"`},
		{name: "bad max body in env", env: map[string]string{"FILEPATH_GATEWAY_MAX_BODY": "huge"}, wantErr: `FILEPATH_GATEWAY_MAX_BODY "huge"`},
		{name: "bad models ttl in env", env: map[string]string{"FILEPATH_MODELS_TTL": "0s"}, wantErr: `FILEPATH_MODELS_TTL "0s"`},
		{name: "flag over bad env budget", env: map[string]string{"FILEPATH_SESSION_BUDGET_TOKENS": "-1"}, args: []string{"--session-budget-tokens", "-2"}, wantErr: `--session-budget-tokens "-2"`},
		{name: "bad timeout", args: []string{"--gateway-timeout", "0s"}, wantErr: "--gateway-timeout"},
		{name: "bad max body", args: []string{"--gateway-max-body", "huge"}, wantErr: "--gateway-max-body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseServeEnv(t, tt.env, tt.args)
			if testkit.WantErr(t, err, tt.wantErr) {
				return
			}
			tt.check(t, c.LLM)
		})
	}
}
