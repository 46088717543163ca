package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/models"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
)

type modelList struct {
	Providers []struct {
		Name   string
		Models []struct {
			ID              string   `json:"id"`
			Name            string   `json:"name"`
			ContextLength   int      `json:"context_length"`
			PromptPrice     *float64 `json:"prompt_price"`
			CompletionPrice *float64 `json:"completion_price"`
			Tools           bool     `json:"tools"`
		}
	}
	Offline   bool       `json:"offline"`
	Note      string     `json:"note"`
	FetchedAt *time.Time `json:"fetched_at"`
}

// TestModelsBundledByDefault: without a live source the answer is the
// bundled list, grouped by provider, with context lengths, prices and tool
// support, and marked offline with a note.
func TestModelsBundledByDefault(t *testing.T) {
	e, a := newAlice(t)
	r := e.do("GET", "/api/v1/models", a.key, "")
	var l modelList
	if r.status != 200 || json.Unmarshal(r.body, &l) != nil {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if !l.Offline || l.Note == "" || l.FetchedAt != nil {
		t.Fatalf("bundled list: offline %v note %q fetched_at %v", l.Offline, l.Note, l.FetchedAt)
	}
	found := false
	for i, p := range l.Providers {
		if i > 0 && l.Providers[i-1].Name >= p.Name {
			t.Fatalf("providers not sorted: %s before %s", l.Providers[i-1].Name, p.Name)
		}
		for _, m := range p.Models {
			if m.ID == "" || m.Name == "" || m.ContextLength <= 0 || m.PromptPrice == nil || m.CompletionPrice == nil {
				t.Fatalf("incomplete bundled model %+v", m)
			}
			if m.ID == "anthropic/claude-sonnet-4" {
				found = p.Name == "anthropic" && m.Name == "Claude Sonnet 4" && m.ContextLength == 200000 &&
					*m.PromptPrice == 3 && *m.CompletionPrice == 15 && m.Tools
			}
		}
	}
	if !found {
		t.Fatalf("anthropic/claude-sonnet-4 missing or wrong in %s", r.body)
	}
}

func TestModelsFromSource(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	src := api.ModelSourceFunc(func(context.Context) (models.List, error) {
		return models.List{Providers: []models.Provider{{Name: "x", Models: []models.Model{{ID: "x/y", Name: "Y"}}}}, FetchedAt: &at}, nil
	})
	e := newEnv(t, envOpts{cfg: func(c *api.Config) { c.Models = src }})
	a := e.account("alice")
	var l modelList
	if r := e.do("GET", "/api/v1/models", a.key, ""); r.status != 200 || json.Unmarshal(r.body, &l) != nil {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if l.Offline || l.FetchedAt == nil || !l.FetchedAt.Equal(at) || len(l.Providers) != 1 || l.Providers[0].Models[0].PromptPrice != nil {
		t.Fatalf("list %+v", l)
	}
	failing := api.ModelSourceFunc(func(context.Context) (models.List, error) { return models.List{}, errors.New("boom") })
	e2 := newEnv(t, envOpts{cfg: func(c *api.Config) { c.Models = failing }})
	a2 := e2.account("bob")
	if r := e2.do("GET", "/api/v1/models", a2.key, ""); r.status != 500 {
		t.Fatalf("failing source: %d", r.status)
	}
}

// TestSessionBudgetAPI: PATCH /sessions/:id sets and clears the budget; the
// session shows budget and spend.
func TestSessionBudgetAPI(t *testing.T) {
	e, a := newAlice(t)
	s, n := e.session(a)
	path := "/api/v1/sessions/" + s.ID
	type sess struct {
		BudgetTokens *int64   `json:"budget_tokens"`
		BudgetUSD    *float64 `json:"budget_usd"`
		TokensUsed   int64    `json:"tokens_used"`
		CostUSD      float64  `json:"cost_usd"`
	}
	get := func(r reply) sess {
		t.Helper()
		var v sess
		if r.status != 200 || json.Unmarshal(r.body, &v) != nil {
			t.Fatalf("%d %s", r.status, r.body)
		}
		return v
	}
	if v := get(e.do("GET", path, a.key, "")); v.BudgetTokens != nil || v.BudgetUSD != nil || v.TokensUsed != 0 {
		t.Fatalf("new session %+v", v)
	}
	v := get(e.do("PATCH", path, a.key, `{"budget_tokens":5000,"budget_usd":2.5}`))
	if v.BudgetTokens == nil || *v.BudgetTokens != 5000 || v.BudgetUSD == nil || *v.BudgetUSD != 2.5 {
		t.Fatalf("after set %+v", v)
	}
	v = get(e.do("PATCH", path, a.key, `{"budget_usd":null}`))
	if v.BudgetUSD != nil || v.BudgetTokens == nil || *v.BudgetTokens != 5000 {
		t.Fatalf("after clearing usd %+v", v)
	}
	cost := 0.25
	if err := e.sessions.RecordUsage(context.Background(), sessions.Usage{UserID: a.user.ID, SessionID: s.ID, NodeID: n.ID,
		Provider: "openrouter", Endpoint: "chat/completions", InputTokens: 10, OutputTokens: 5, CostUSD: &cost, Status: 200}); err != nil {
		t.Fatal(err)
	}
	if v := get(e.do("GET", path, a.key, "")); v.TokensUsed != 15 || v.CostUSD != 0.25 {
		t.Fatalf("spend %+v", v)
	}
	for _, tt := range []struct{ body, field string }{
		{`{"budget_tokens":"lots"}`, "budget_tokens"},
		{`{"budget_tokens":1.5}`, "budget_tokens"},
		{`{"budget_tokens":-1}`, "budget_tokens"},
		{`{"budget_usd":-0.5}`, "budget_usd"},
		{`{"name":"x"}`, ""},
	} {
		r := e.do("PATCH", path, a.key, tt.body)
		code, _, field := r.errorOf(t)
		if r.status < 400 || r.status >= 500 || code != "invalid" || (tt.field != "" && field != tt.field) {
			t.Errorf("%s: %d %s", tt.body, r.status, r.body)
		}
	}
}
