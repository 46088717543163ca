package models_test

import (
	"encoding/json"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/models"
)

func TestParseOpenRouter(t *testing.T) {
	body := []byte(`{"data":[
{"id":"openai/gpt-x","name":"OpenAI: GPT X","context_length":128000,"pricing":{"prompt":"0.0000025","completion":"0.00001"},"supported_parameters":["tools"]},
{"id":"anthropic/c","name":"Anthropic: C","context_length":"200000","pricing":{"prompt":0.000003,"completion":"0.000015"},"supported_parameters":["max_tokens"]},
{"id":"openrouter/auto","name":"Auto Router","context_length":2000000,"pricing":{"prompt":"-1","completion":"-1"}},
{"id":"loner","name":"","pricing":{"prompt":"x"}},
{"id":"","name":"skipped"},
{"id":"openai/gpt-y","name":"GPT Y","context_length":null,"pricing":{}}
]}`)
	ps, err := models.ParseOpenRouter(body)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(ps)
	want := `[{"name":"anthropic","models":[{"id":"anthropic/c","name":"C","context_length":200000,"prompt_price":3,"completion_price":15,"tools":false}]},` +
		`{"name":"openai","models":[{"id":"openai/gpt-x","name":"GPT X","context_length":128000,"prompt_price":2.5,"completion_price":10,"tools":true},` +
		`{"id":"openai/gpt-y","name":"GPT Y","context_length":0,"prompt_price":null,"completion_price":null,"tools":false}]},` +
		`{"name":"openrouter","models":[{"id":"openrouter/auto","name":"Auto Router","context_length":2000000,"prompt_price":null,"completion_price":null,"tools":false}]},` +
		`{"name":"other","models":[{"id":"loner","name":"loner","context_length":0,"prompt_price":null,"completion_price":null,"tools":false}]}]`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	for _, bad := range []string{`{"data":[]}`, `not json`, `{"data":[{"id":""}]}`} {
		if _, err := models.ParseOpenRouter([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestOpenRouterAgentsDefaultToListedModels: the catalog default of an agent
// that reaches OpenRouter (shelley, pi) is one of the model list's ids, a
// model that takes tools, so that the spawn dialog shows it selected and the
// id sent upstream is one OpenRouter knows.
func TestOpenRouterAgentsDefaultToListedModels(t *testing.T) {
	listed := map[string]bool{}
	for _, p := range models.Bundled("").Providers {
		for _, m := range p.Models {
			listed[m.ID] = m.Tools
		}
	}
	n := 0
	for _, a := range orchestrator.Catalog() {
		if a.Provider != orchestrator.ProviderOpenRouter {
			continue
		}
		n++
		if tools, ok := listed[a.DefaultModel]; !ok || !tools {
			t.Errorf("%s defaults to %q: listed %v, takes tools %v", a.Type, a.DefaultModel, ok, tools)
		}
	}
	if n < 2 {
		t.Fatalf("%d catalog agents use OpenRouter, want shelley and pi", n)
	}
}
