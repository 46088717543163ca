// Package models is the catalogue of LLMs the spawn dialog offers: the list
// bundled with filepath (models.json) and the reading of OpenRouter's live
// listing. The gateway fetches and caches the live list; the API serves it.
package models

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Model is one selectable LLM. ID is OpenRouter's model id, the value of a
// node's model for the agents that reach LLMs through OpenRouter.
type Model struct {
	ID            string `json:"id"`             // e.g. "anthropic/claude-sonnet-4"
	Name          string `json:"name"`           // e.g. "Claude Sonnet 4"
	ContextLength int    `json:"context_length"` // tokens; 0: unknown
	// PromptPrice and CompletionPrice are USD per million tokens (null:
	// unknown or variable).
	PromptPrice     *float64 `json:"prompt_price" jsonschema:"nullable"`
	CompletionPrice *float64 `json:"completion_price" jsonschema:"nullable"`
	Tools           bool     `json:"tools"` // takes tool definitions (agents need them)
}

// Provider groups the models of one vendor: the prefix of their ids.
type Provider struct {
	Name   string  `json:"name"`
	Models []Model `json:"models"`
}

// List is the answer of GET /api/v1/models.
type List struct {
	Providers []Provider `json:"providers"`
	// Offline is true when the list is the one bundled with filepath, not
	// OpenRouter's live list; Note then says why (the UI shows it).
	Offline bool   `json:"offline"`
	Note    string `json:"note,omitempty"`
	// FetchedAt is when the live list was fetched (null: bundled).
	FetchedAt *time.Time `json:"fetched_at" jsonschema:"nullable"`
}

//go:embed models.json
var bundledModels []byte

// Bundled returns the model list compiled into the binary (well-known
// models with their context lengths, prices and tool support), marked
// offline with note.
func Bundled(note string) List {
	ps, err := ParseOpenRouter(bundledModels)
	if err != nil {
		panic("models: bundled models.json: " + err.Error()) // a test reads it
	}
	return List{Providers: ps, Offline: true, Note: note}
}

// ParseOpenRouter reads OpenRouter's GET /models answer ({"data": [{id,
// name, context_length, pricing: {prompt, completion}, supported_parameters}]})
// into providers sorted by name, each with its models in the answer's order.
func ParseOpenRouter(body []byte) ([]Provider, error) {
	var in struct {
		Data []struct {
			ID            string          `json:"id"`
			Name          string          `json:"name"`
			ContextLength json.RawMessage `json:"context_length"`
			Pricing       struct {
				Prompt     json.RawMessage `json:"prompt"`
				Completion json.RawMessage `json:"completion"`
			} `json:"pricing"`
			SupportedParameters []string `json:"supported_parameters"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("read the model list: %w", err)
	}
	byName := map[string]*Provider{}
	for _, d := range in.Data {
		if d.ID == "" {
			continue
		}
		vendor, _, ok := strings.Cut(d.ID, "/")
		if !ok {
			vendor = "other"
		}
		name := d.Name
		if _, rest, ok := strings.Cut(name, ": "); ok && rest != "" {
			name = rest // "Anthropic: Claude Sonnet 4" within the anthropic group
		}
		if name == "" {
			name = d.ID
		}
		ctxLen, _ := number(d.ContextLength)
		m := Model{ID: d.ID, Name: name, ContextLength: int(max(0, ctxLen)),
			PromptPrice: perMillion(d.Pricing.Prompt), CompletionPrice: perMillion(d.Pricing.Completion),
			Tools: slices.Contains(d.SupportedParameters, "tools")}
		p := byName[vendor]
		if p == nil {
			p = &Provider{Name: vendor}
			byName[vendor] = p
		}
		p.Models = append(p.Models, m)
	}
	if len(byName) == 0 {
		return nil, errors.New("the model list is empty")
	}
	out := make([]Provider, 0, len(byName))
	for _, p := range byName {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Provider) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// number reads a JSON number or numeric string.
func number(raw json.RawMessage) (float64, bool) {
	s := strings.Trim(string(raw), `"`)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// perMillion turns OpenRouter's USD per token into USD per million tokens;
// negative (OpenRouter's "variable") and unreadable prices are nil.
func perMillion(raw json.RawMessage) *float64 {
	f, ok := number(raw)
	if !ok || f < 0 {
		return nil
	}
	v := math.Round(f*1e6*1e6) / 1e6 // no float noise: 0.000003 → 3
	return &v
}
