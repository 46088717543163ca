package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/fakellm"
	"github.com/filepath-dev/filepath/internal/testkit"
)

// cliImages are the CLI images (the real claude 2.1.x, codex 0.169) with
// this tree's adapter (adapters/cli) in them, run as custom agents: the
// shared tags may hold an older adapter.
var cliImages = map[string]string{
	"claude-code": "filepath/test-claude-approvals:e2e",
	"codex":       "filepath/test-codex-approvals:e2e",
}

const claudeImage = "filepath/test-claude-approvals:e2e"

// buildCLIImage builds the custom image of agent (its CLI's image with
// this tree's adapter as the entrypoint) and returns its tag.
func buildCLIImage(t *testing.T, agent string) string {
	t.Helper()
	testkit.RequireImage(t, "filepath/agent-"+agent+":latest")
	// A custom agent (the only kind whose image a node may name) gets
	// FILEPATH_AGENT_TYPE=custom: the flag says which CLI.
	df := "FROM filepath/agent-" + agent + ":latest\nCOPY filepath-cli-adapter /usr/local/bin/filepath-cli-adapter\n" +
		`ENTRYPOINT ["/usr/local/bin/filepath-cli-adapter", "--agent", "` + agent + `"]` + "\n"
	testkit.Image(t, cliImages[agent], df, map[string]string{"filepath-cli-adapter": testkit.Program(t, "../../adapters/cli")})
	return cliImages[agent]
}

// anthropicMsg is a Messages API message as the fake upstream receives it.
type anthropicMsg struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

func blocksOf(raw json.RawMessage) []anthropicBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var bs []anthropicBlock
	json.Unmarshal(raw, &bs)
	return bs
}

// textOfContent is a tool result's content: a string or text blocks.
func textOfContent(raw json.RawMessage) string {
	var parts []string
	for _, b := range blocksOf(raw) {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n")
}

// claudeUpstream plays the model of every claude node: asked to save the
// URL, it runs a Bash command naming it (which needs a person's approval);
// once the command has a result it reports it as "result: ...". Requests
// without a task (claude's own side calls) get a short text.
func claudeUpstream(r fakellm.Request) fakellm.Turn {
	var req struct {
		Messages []anthropicMsg `json:"messages"`
	}
	if err := r.JSON(&req); err != nil {
		return fakellm.Turn{Status: 400, ErrorMessage: err.Error()}
	}
	task := false
	for _, m := range req.Messages {
		for _, b := range blocksOf(m.Content) {
			task = task || (m.Role == "user" && strings.Contains(b.Text, "SAVE THE URL"))
		}
	}
	if !task || len(req.Messages) == 0 {
		return fakellm.Turn{Text: "ok", Usage: fakellm.Usage{Input: 10, Output: 1}}
	}
	last := req.Messages[len(req.Messages)-1]
	for _, b := range blocksOf(last.Content) {
		if b.Type == "tool_result" {
			return fakellm.Turn{Text: "result: " + textOfContent(b.Content), Usage: fakellm.Usage{Input: 300, Output: 10}}
		}
	}
	return fakellm.Turn{Usage: fakellm.Usage{Input: 200, Output: 20}, ToolCalls: []fakellm.ToolCall{{
		ID: "toolu_save", Name: "Bash",
		Arguments: `{"command":"echo https://example.com > fetched.txt","description":"Save the URL"}`}}}
}

// TestClaudeCodeApprovals runs the real Claude Code CLI (the
// agent-claude-code image with this tree's adapter) against a scripted
// Anthropic upstream behind the gateway: its Bash command naming a URL is a
// permission prompt that reaches the inbox over the WebSocket; denied, the
// command does not run and claude reports the refusal; a request pending
// while the orchestrator is killed is still pending after it starts again,
// and approving it then lets the command run.
func TestClaudeCodeApprovals(t *testing.T) {
	buildCLIImage(t, "claude-code")
	up := fakellm.New()
	defer up.Close()
	up.Fallback(claudeUpstream)
	t.Setenv("FILEPATH_ANTHROPIC_API_KEY", "sk-ant-test")
	t.Setenv("FILEPATH_ANTHROPIC_BASE_URL", up.URL)
	data := t.TempDir()
	srv := llmServer(t, up, data, "--approval-timeout", "5m")
	c := newClient(t, srv)
	sid := c.session(map[string]any{"name": "claude approvals"})
	spawn := func(name, parent string) nodeJSON {
		t.Helper()
		return c.spawn(sid, map[string]any{"name": name, "agent_type": "custom", "image": claudeImage, "model": "anthropic/claude-sonnet-4-5",
			"task": "SAVE THE URL https://example.com to fetched.txt", "parent_id": parent})
	}
	approve := spawn("approve", "")
	deny := spawn("deny", approve.ID)
	c.logRecordsOnFailure(sid, approve, deny)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%d upstream requests", len(up.Requests()))
		}
	})
	denyID := streamApproval(t, c, sid, deny.ID)
	approveID := streamApproval(t, c, sid, approve.ID)

	// Denied: claude is refused, the command does not run, claude reports
	// the refusal.
	c.answerApproval(sid, denyID, "deny")
	c.waitRecords("the denied claude's report", sid, deny.ID, 3*time.Minute, func(r []rec) bool {
		return hasRecord(r, "event", "result:", "filepath: not allowed", "denied it")
	})
	if _, err := os.Stat(filepath.Join(data, "nodes", deny.ID, "fetched.txt")); err == nil {
		t.Fatal("the denied command ran")
	}

	// The orchestrator dies while the other prompt waits; after the
	// restart it is still pending, and approving it runs the command.
	srv.restart()
	c.wantPending(sid, approveID)
	c.answerApproval(sid, approveID, "approve")
	c.waitRecords("the approved claude's report", sid, approve.ID, 3*time.Minute, func(r []rec) bool { return hasRecord(r, "event", `"type":"text"`, "result:") })
	b, err := os.ReadFile(filepath.Join(data, "nodes", approve.ID, "fetched.txt"))
	if err != nil || strings.TrimSpace(string(b)) != "https://example.com" {
		t.Fatalf("the approved command did not run: %q %v", b, err)
	}
	c.do("DELETE", "/api/v1/sessions/"+sid, nil, nil)
	srv.stop(t)
}

// TestClaudeCodeCallsFilepathsTools: the adapter gives the real Claude Code
// filepath's MCP server ($FILEPATH_API_URL/mcp with the node's token), so
// the model's call of mcp__filepath__memory_store stores a memory the user
// then finds, with no permission prompt for filepath's own tools.
func TestClaudeCodeCallsFilepathsTools(t *testing.T) {
	buildCLIImage(t, "claude-code")
	up := fakellm.New()
	defer up.Close()
	up.Fallback(func(r fakellm.Request) fakellm.Turn {
		var req struct {
			Messages []anthropicMsg `json:"messages"`
			Tools    []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := r.JSON(&req); err != nil || len(req.Messages) == 0 {
			return fakellm.Turn{Text: "ok"}
		}
		task := false
		for _, m := range req.Messages {
			for _, b := range blocksOf(m.Content) {
				task = task || (m.Role == "user" && strings.Contains(b.Text, "REMEMBER THE BUILD"))
			}
		}
		if !task {
			return fakellm.Turn{Text: "ok", Usage: fakellm.Usage{Input: 10, Output: 1}}
		}
		for _, b := range blocksOf(req.Messages[len(req.Messages)-1].Content) {
			if b.Type == "tool_result" {
				return fakellm.Turn{Text: "stored: " + textOfContent(b.Content), Usage: fakellm.Usage{Input: 300, Output: 10}}
			}
		}
		return fakellm.Turn{Usage: fakellm.Usage{Input: 200, Output: 20}, ToolCalls: []fakellm.ToolCall{{
			ID: "toolu_mem", Name: "mcp__filepath__memory_store",
			Arguments: `{"key":"build","text":"run make build before the tests"}`}}}
	})
	t.Setenv("FILEPATH_ANTHROPIC_API_KEY", "sk-ant-test")
	t.Setenv("FILEPATH_ANTHROPIC_BASE_URL", up.URL)
	srv := llmServer(t, up, t.TempDir())
	c := newClient(t, srv)
	sid := c.session(map[string]any{"name": "claude mcp"})
	n := c.spawn(sid, map[string]any{"name": "mem", "agent_type": "custom", "image": claudeImage, "model": "anthropic/claude-sonnet-4-5", "task": "REMEMBER THE BUILD step"})
	recs := c.waitRecords("claude's report of the tool call", sid, n.ID, 3*time.Minute, func(r []rec) bool { return hasRecord(r, "event", "stored:") })
	if hasRecord(recs, "system", `"type":"approval"`) {
		t.Error("a call of filepath's own tool asked for approval")
	}
	if !hasRecord(recs, "event", "stored:", "run make build before the tests") {
		t.Errorf("the tool's result is not the stored memory: %v", records(recs))
	}
	var mems struct {
		Data []struct{ Key, Text string }
	}
	if c.do("GET", "/api/v1/memories", nil, &mems) != 200 || len(mems.Data) != 1 || mems.Data[0].Key != "build" || mems.Data[0].Text != "run make build before the tests" {
		t.Fatalf("memories: %+v", mems)
	}
	c.do("DELETE", "/api/v1/sessions/"+sid, nil, nil)
	srv.stop(t)
}
