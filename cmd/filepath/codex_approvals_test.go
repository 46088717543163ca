package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/fakellm"
)

// responsesItem is an input item of an OpenAI Responses request.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Output  json.RawMessage `json:"output"`
}

func responsesText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, "\n")
}

// codexUpstream plays the model of codex nodes: asked to SAVE THE URL it
// runs a command Codex's rules (from the adapter) make it ask about; with
// the call's output it reports "result: ...".
func codexUpstream(r fakellm.Request) fakellm.Turn {
	var req struct {
		Input []responsesItem `json:"input"`
	}
	if err := r.JSON(&req); err != nil {
		return fakellm.Turn{Status: 400, ErrorMessage: err.Error()}
	}
	task := ""
	for _, it := range req.Input {
		if it.Type == "message" && it.Role == "user" {
			if strings.Contains(responsesText(it.Content), "SAVE THE URL") {
				task = "save"
			}
		}
	}
	if task == "" || len(req.Input) == 0 {
		return fakellm.Turn{Text: "ok", Usage: fakellm.Usage{Input: 10, Output: 1}}
	}
	if last := req.Input[len(req.Input)-1]; last.Type == "function_call_output" {
		return fakellm.Turn{Text: "result: " + responsesText(last.Output), Usage: fakellm.Usage{Input: 300, Output: 10}}
	}
	// A plain command: Codex matches its rules against the words of
	// commands it can parse (with a redirection it runs without asking).
	return fakellm.Turn{Usage: fakellm.Usage{Input: 200, Output: 20}, ToolCalls: []fakellm.ToolCall{{
		ID: "call_save", Name: "exec_command", Arguments: `{"cmd":"curl -s https://example.com"}`}}}
}

// TestCodexApprovals runs the real Codex (the agent-codex image with this
// tree's adapter) behind the real orchestrator: a command its rules make it
// ask about reaches the inbox over the WebSocket; declined, it does not
// run; pending while the orchestrator is killed, it is still pending after
// the restart, and approving it runs it.
func TestCodexApprovals(t *testing.T) {
	image := buildCLIImage(t, "codex")
	up := fakellm.New()
	defer up.Close()
	up.Fallback(codexUpstream)
	t.Setenv("FILEPATH_OPENAI_API_KEY", "sk-test")
	t.Setenv("FILEPATH_OPENAI_BASE_URL", up.URL+"/v1")
	srv := llmServer(t, up, t.TempDir(), "--approval-timeout", "5m")
	c := newClient(t, srv)
	sid := c.session(map[string]any{"name": "codex approvals"})
	spawn := func(name, parent, task string) nodeJSON {
		t.Helper()
		return c.spawn(sid, map[string]any{"name": name, "agent_type": "custom", "image": image, "model": "openai/gpt-5.5", "task": task, "parent_id": parent})
	}
	approve := spawn("approve", "", "SAVE THE URL https://example.com")
	deny := spawn("deny", approve.ID, "SAVE THE URL https://example.com")
	c.logRecordsOnFailure(sid, approve, deny)
	denyID := streamApprovalOf(t, c, sid, deny.ID, "bash: curl -s https://example.com")
	approveID := streamApprovalOf(t, c, sid, approve.ID, "bash: curl -s https://example.com")

	c.answerApproval(sid, denyID, "deny")
	c.waitRecords("the declined command", sid, deny.ID, 3*time.Minute, func(r []rec) bool {
		return hasRecord(r, "event", `"type":"command"`, `"status":"error"`, "declined") && hasRecord(r, "event", `"type":"text"`, "result:")
	})
	if recs := c.records(sid, deny.ID); hasRecord(recs, "event", "curl: command not found") {
		t.Fatal("the declined command ran")
	}

	srv.restart()
	c.wantPending(sid, approveID)
	c.answerApproval(sid, approveID, "approve")
	// curl is not in the image: that bash says so proves the command ran.
	c.waitRecords("the approved command's report", sid, approve.ID, 3*time.Minute, func(r []rec) bool {
		return hasRecord(r, "event", `"type":"text"`, "result:", "curl: command not found")
	})

	c.do("DELETE", "/api/v1/sessions/"+sid, nil, nil)
	srv.stop(t)
}
