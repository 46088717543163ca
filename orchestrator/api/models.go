package api

import "context"

// Model is one selectable LLM.
type Model struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Provider groups the models of one vendor.
type Provider struct {
	Name   string  `json:"name"`
	Models []Model `json:"models"`
}

// ModelList is the answer of GET /api/v1/models.
type ModelList struct {
	Providers []Provider `json:"providers"`
}

// ModelSource lists the models the UI offers. A live source (e.g. a cached
// OpenRouter listing) can replace the static one.
type ModelSource interface {
	Models(ctx context.Context) ([]Provider, error)
}

// ModelSourceFunc adapts a function to ModelSource.
type ModelSourceFunc func(ctx context.Context) ([]Provider, error)

// Models calls f.
func (f ModelSourceFunc) Models(ctx context.Context) ([]Provider, error) { return f(ctx) }

// StaticModels returns the model list compiled into the binary (no LLM API is
// reachable from here).
func StaticModels() ModelSource {
	return ModelSourceFunc(func(context.Context) ([]Provider, error) {
		return []Provider{
			{Name: "anthropic", Models: []Model{
				{ID: "claude-sonnet-4", Name: "Claude Sonnet 4"},
				{ID: "claude-opus-4", Name: "Claude Opus 4"},
				{ID: "claude-haiku-3.5", Name: "Claude Haiku 3.5"},
			}},
			{Name: "openai", Models: []Model{
				{ID: "o3", Name: "o3"},
				{ID: "o4-mini", Name: "o4-mini"},
				{ID: "gpt-4.1", Name: "GPT-4.1"},
			}},
			{Name: "google", Models: []Model{
				{ID: "gemini-2.5-pro", Name: "Gemini 2.5 Pro"},
				{ID: "gemini-2.5-flash", Name: "Gemini 2.5 Flash"},
			}},
		}, nil
	})
}
