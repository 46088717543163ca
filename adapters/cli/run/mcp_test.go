package run

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestMCPConfigs(t *testing.T) {
	cfg := Config{APIURL: "http://10.0.0.1:8081/", APIKey: "fp_node"}
	if got := cfg.MCPURL(); got != "http://10.0.0.1:8081/mcp" {
		t.Fatalf("MCPURL %q", got)
	}
	server := map[string]any{"url": "http://10.0.0.1:8081/mcp", "headers": map[string]any{"Authorization": "Bearer fp_node"}}
	withType := map[string]any{"type": "http", "url": server["url"], "headers": server["headers"]}
	for _, tt := range []struct {
		name string
		make func(Config) ([]byte, error)
		want any
	}{
		// Claude Code's --mcp-config: a streamable-HTTP server is "http".
		{"claude", ClaudeMCPConfig, map[string]any{"mcpServers": map[string]any{"filepath": withType}}},
		// Amp's --mcp-config: the servers by name.
		{"amp", AmpMCPConfig, map[string]any{"filepath": server}},
		// Cursor's ~/.cursor/mcp.json.
		{"cursor", CursorMCPConfig, map[string]any{"mcpServers": map[string]any{"filepath": server}}},
	} {
		b, err := tt.make(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var got any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v\n%s", tt.name, err, b)
		}
		want, _ := json.Marshal(tt.want)
		gotJSON, _ := json.Marshal(got)
		if string(gotJSON) != string(want) {
			t.Errorf("%s config\n got %s\nwant %s", tt.name, gotJSON, want)
		}
	}
}

func TestWriteMCPConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "home", ".cursor", "mcp.json")
	got, err := WriteMCPConfig(Config{APIURL: "http://h:1", APIKey: "fp_x"}, p, CursorMCPConfig)
	if err != nil || got != p {
		t.Fatalf("WriteMCPConfig = %q, %v", got, err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v: the file holds the node's token, want 0600", fi.Mode().Perm())
	}
	// Without the agent API (or its token) there is no server to give.
	for _, cfg := range []Config{{}, {APIURL: "http://h:1"}, {APIKey: "fp_x"}} {
		q := filepath.Join(dir, "none.json")
		if got, err := WriteMCPConfig(cfg, q, ClaudeMCPConfig); got != "" || err != nil {
			t.Errorf("%+v: %q, %v; want nothing written", cfg, got, err)
		}
		if _, err := os.Stat(q); err == nil {
			t.Errorf("%+v: a config was written", cfg)
		}
	}
}
