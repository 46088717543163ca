package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/internal/fakellm"
	"github.com/filepath-dev/filepath/internal/testkit"
)

// TestAgentAPIThroughServe runs the real orchestrator (Docker, agents
// without network): an agent reaches $FILEPATH_API_URL/healthz, and the LLM
// gateway's routes with its token: a provider with a key (OpenAI, here a
// fake upstream on the host's loopback) answers through the gateway, which
// sends the provider's key upstream and never the agent's; a provider
// without one answers 503 naming its variable; also after the orchestrator
// was killed and started again. Spawning shelley while no OpenRouter key is
// configured gives the node an error naming FILEPATH_OPENROUTER_API_KEY. The agent tools
// answer at $FILEPATH_API_URL/api/v1.
func TestAgentAPIThroughServe(t *testing.T) {
	testkit.RequireImage(t, "filepath/byo-echo:latest")
	for _, k := range []string{"FILEPATH_OPENROUTER_API_KEY", "FILEPATH_ANTHROPIC_API_KEY", "FILEPATH_OPENAI_API_KEY"} {
		t.Setenv(k, "")
		unsetenv(t, k)
	}
	up := fakellm.New()
	defer up.Close()
	const openaiKey = "sk-test-openai-key"
	t.Setenv("FILEPATH_OPENAI_API_KEY", openaiKey)
	t.Setenv("FILEPATH_OPENAI_BASE_URL", up.URL+"/v1")
	data := t.TempDir()
	srv := startServer(t, data, "--workspace", "dir", "--network", "none")
	c := newClient(t, srv)
	sid := c.session(map[string]any{"name": "agent api"})
	node := c.spawn(sid, map[string]any{"agent_type": "custom", "image": "filepath/byo-echo:latest"})
	if node.Status != "running" {
		t.Fatalf("spawn byo-echo: %+v", node)
	}
	testkit.WriteProbe(t, filepath.Join(data, "nodes", node.ID))
	run := func(cmd string) string { t.Helper(); return c.run(sid, node.ID, cmd) }
	if got := run("bash probe.sh /healthz"); got != `200 {"ok":true}` {
		t.Fatalf("healthz from the agent: %q", got)
	}
	if got := run(`bash probe.sh /openrouter/v1/models "$FILEPATH_API_KEY"`); !strings.HasPrefix(got, "503 ") || !strings.Contains(got, "FILEPATH_OPENROUTER_API_KEY") {
		t.Fatalf("a gateway route of a provider without a key: %q", got)
	}
	if got := run(`bash probe.sh /openai/v1/models "$FILEPATH_API_KEY"`); !strings.HasPrefix(got, "200 ") || !strings.Contains(got, "anthropic/claude-sonnet-4") {
		t.Fatalf("a gateway route with the agent's token: %q", got)
	}
	reqs := up.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1/models" || reqs[0].Header.Get("Authorization") != "Bearer "+openaiKey {
		t.Fatalf("upstream saw %+v; want one GET /v1/models with the provider's key", reqs)
	}
	if got := run("bash probe.sh /anthropic/v1/messages"); !strings.HasPrefix(got, "401 ") {
		t.Fatalf("a gateway route without a token: %q", got)
	}
	// The agent tools (issue 13) are mounted: the node reads itself.
	if got := run(`bash probe.sh /api/v1/self "$FILEPATH_API_KEY"`); !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"id":"`+node.ID+`"`) {
		t.Fatalf("the agent API's self from the agent: %q", got)
	}

	// kill -9: the listener dies with the orchestrator; the next one opens
	// it again in the container that kept running.
	srv.restart()
	if got := run(`bash probe.sh /openai/v1/models "$FILEPATH_API_KEY" # after a restart`); !strings.HasPrefix(got, "200 ") {
		t.Fatalf("after a restart, a gateway route with the agent's token: %q", got)
	}

	if shelley := c.spawn(sid, map[string]any{"agent_type": "shelley", "parent_id": node.ID}); shelley.Status != "error" {
		t.Fatalf("spawn shelley without a key: %+v", shelley)
	} else if recs := c.records(sid, shelley.ID); !hasRecord(recs, "error", "set FILEPATH_OPENROUTER_API_KEY") {
		t.Fatalf("no error record naming FILEPATH_OPENROUTER_API_KEY: %v", records(recs))
	}
	c.do("DELETE", "/api/v1/sessions/"+sid, nil, nil)
	srv.stop(t)
}
