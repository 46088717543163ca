package orchestrator

import (
	"regexp"
	"testing"
)

func TestCatalog(t *testing.T) {
	want := []string{"shelley", "pi", "claude-code", "codex", "cursor", "amp", "custom"}
	got := Catalog()
	if len(got) != len(want) {
		t.Fatalf("catalog has %d agents, want %d", len(got), len(want))
	}
	for i, a := range got {
		if a.Type != want[i] || a.Name == "" || a.Description == "" || a.Icon == "" {
			t.Errorf("agent %d = %+v", i, a)
		}
		// A custom (BYO) agent has no model unless its node names one: the
		// UI shows no model for it (issue 27).
		if (a.DefaultModel == "") != (a.Type == AgentCustom) {
			t.Errorf("%s default model %q", a.Type, a.DefaultModel)
		}
		wantImage := "filepath/agent-" + a.Type + ":latest"
		if a.Type == AgentCustom {
			wantImage = ""
		}
		if a.Image != wantImage {
			t.Errorf("%s image %q, want %q", a.Type, a.Image, wantImage)
		}
	}
	providers := map[string]string{"shelley": "openrouter", "pi": "openrouter", "claude-code": "anthropic", "codex": "openai"}
	for _, a := range got {
		if a.Provider != providers[a.Type] {
			t.Errorf("%s provider %q, want %q", a.Type, a.Provider, providers[a.Type])
		}
	}
	if v := ProviderKeyEnv(ProviderOpenRouter); v != "FILEPATH_OPENROUTER_API_KEY" {
		t.Errorf("ProviderKeyEnv = %s", v)
	}
	// The CLIs' defaults are models the pinned CLIs know (Codex 0.169 runs
	// an unknown model without its apply_patch tool); the end-to-end tests
	// in cmd/filepath run each with its catalog default.
	for typ, model := range map[string]string{"claude-code": "claude-sonnet-4-5", "codex": "gpt-5.5"} {
		if a, ok := AgentByType(typ); !ok || a.DefaultModel != model {
			t.Errorf("%s = %+v, %v; want default model %s", typ, a, ok, model)
		}
	}
	keys := map[string]string{"amp": "AMP_API_KEY", "cursor": "CURSOR_API_KEY"}
	for _, a := range got {
		if a.VendorKey != keys[a.Type] {
			t.Errorf("%s vendor key %q, want %q", a.Type, a.VendorKey, keys[a.Type])
		}
	}
	if v := VendorKeys(); len(v) != 2 || v[0] != "CURSOR_API_KEY" || v[1] != "AMP_API_KEY" {
		t.Errorf("VendorKeys = %q", v)
	}
	// shelley and pi reach OpenRouter: their default is an OpenRouter id
	// (vendor/model), one the model list (GET /api/v1/models) offers.
	for _, typ := range []string{"shelley", "pi"} {
		if a, _ := AgentByType(typ); a.DefaultModel != "anthropic/claude-sonnet-4" {
			t.Errorf("%s default model %q, want the OpenRouter id anthropic/claude-sonnet-4", typ, a.DefaultModel)
		}
	}
	if _, ok := AgentByType("hal"); ok {
		t.Error("unknown type found")
	}
	got[0].Name = "changed"
	if Catalog()[0].Name != "Shelley" {
		t.Error("Catalog shares its slice")
	}
}

func TestNewNodeName(t *testing.T) {
	re := regexp.MustCompile(`^[a-z]+-([1-9][0-9]{0,2})$`)
	seen := map[string]bool{}
	for range 200 {
		n := NewNodeName()
		if !re.MatchString(n) {
			t.Fatalf("name %q is not adjective-number (1..999)", n)
		}
		seen[n] = true
	}
	if len(seen) < 150 {
		t.Fatalf("only %d distinct names in 200", len(seen))
	}
}
