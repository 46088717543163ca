package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	var key bytes.Buffer
	if code := Main(context.Background(), []string{"apikey", "create", "--data", data}, nil, &key, io.Discard); code != 0 {
		t.Fatal("apikey create failed")
	}
	c := &client{t: t, key: strings.TrimSpace(key.String()), base: func() string { return srv.base }}
	var sess struct{ ID string }
	if c.do("POST", "/api/v1/sessions", map[string]any{"name": "agent api"}, &sess) != 201 {
		t.Fatal("create session")
	}
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=filepath.session="+sess.ID).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
		}
	})
	type nodeJSON struct{ ID, Status string }
	var node nodeJSON
	if c.do("POST", "/api/v1/sessions/"+sess.ID+"/nodes", map[string]any{"agent_type": "custom", "image": "filepath/byo-echo:latest"}, &node) != 201 || node.Status != "running" {
		t.Fatalf("spawn byo-echo: %+v", node)
	}
	probe, err := os.ReadFile("testdata/probe.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "nodes", node.ID, "probe.sh"), probe, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) string {
		t.Helper()
		if code := c.do("POST", "/api/v1/sessions/"+sess.ID+"/nodes/"+node.ID+"/messages", map[string]any{"content": "/cmd " + cmd}, nil); code != 202 {
			t.Fatalf("send %q: %d", cmd, code)
		}
		return c.commandDone(sess.ID, node.ID, cmd)
	}
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
	srv.cmd.Process.Signal(syscall.SIGKILL)
	srv.cmd.Wait()
	srv = startServer(t, data, "--workspace", "dir", "--network", "none")
	if got := run(`bash probe.sh /openai/v1/models "$FILEPATH_API_KEY" # after a restart`); !strings.HasPrefix(got, "200 ") {
		t.Fatalf("after a restart, a gateway route with the agent's token: %q", got)
	}

	var shelley nodeJSON
	if c.do("POST", "/api/v1/sessions/"+sess.ID+"/nodes", map[string]any{"agent_type": "shelley", "parent_id": node.ID}, &shelley) != 201 || shelley.Status != "error" {
		t.Fatalf("spawn shelley without a key: %+v", shelley)
	}
	found := false
	for _, r := range c.records(sess.ID, shelley.ID) {
		found = found || r.Kind == "error" && strings.Contains(string(r.Data), "set FILEPATH_OPENROUTER_API_KEY")
	}
	if !found {
		t.Fatalf("no error record naming FILEPATH_OPENROUTER_API_KEY: %+v", c.records(sess.ID, shelley.ID))
	}
	c.do("DELETE", "/api/v1/sessions/"+sess.ID, nil, nil)
	srv.stop(t)
}
