package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

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
	data := t.TempDir()
	var srv *server
	srv = collabServer(t, up, data, "--approval-timeout", "5m")
	c := newClient(t, data, &srv)
	var sess struct{ ID string }
	if c.do("POST", "/api/v1/sessions", map[string]any{"name": "codex approvals"}, &sess) != 201 {
		t.Fatal("create session")
	}
	removeSessionContainers(t, sess.ID)
	spawn := func(name, parent, task string) nodeJSON {
		t.Helper()
		body := map[string]any{"name": name, "agent_type": "custom", "image": image, "model": "openai/gpt-5.5", "task": task}
		if parent != "" {
			body["parent_id"] = parent
		}
		var n nodeJSON
		if code := c.do("POST", "/api/v1/sessions/"+sess.ID+"/nodes", body, &n); code != 201 {
			t.Fatalf("create %s: %d", name, code)
		}
		return n
	}
	approve := spawn("approve", "", "SAVE THE URL https://example.com")
	deny := spawn("deny", approve.ID, "SAVE THE URL https://example.com")
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, n := range []nodeJSON{approve, deny} {
			var b strings.Builder
			for _, r := range c.records(sess.ID, n.ID) {
				fmt.Fprintf(&b, "%d %s %.600s\n", r.Seq, r.Kind, r.Data)
			}
			t.Logf("records of %s:\n%s", n.Name, b.String())
		}
	})
	denyID := streamApprovalOf(t, c, sess.ID, deny.ID, "bash: curl -s https://example.com")
	approveID := streamApprovalOf(t, c, sess.ID, approve.ID, "bash: curl -s https://example.com")

	if c.do("POST", "/api/v1/sessions/"+sess.ID+"/approvals/"+denyID, map[string]any{"decision": "deny"}, nil) != 200 {
		t.Fatal("deny")
	}
	c.waitRecords("the declined command", sess.ID, deny.ID, func(r []rec) bool {
		return hasRecord(r, "event", `"type":"command"`, `"status":"error"`, "declined") && hasRecord(r, "event", `"type":"text"`, "result:")
	})
	if recs := c.records(sess.ID, deny.ID); hasRecord(recs, "event", "curl: command not found") {
		t.Fatal("the declined command ran")
	}

	srv.cmd.Process.Kill()
	srv.cmd.Wait()
	srv = collabServer(t, up, data, "--approval-timeout", "5m")
	var pending struct{ Data []struct{ ID string } }
	if c.do("GET", "/api/v1/sessions/"+sess.ID+"/approvals?status=pending", nil, &pending) != 200 || len(pending.Data) != 1 || pending.Data[0].ID != approveID {
		t.Fatalf("pending after the restart: %+v", pending)
	}
	if c.do("POST", "/api/v1/sessions/"+sess.ID+"/approvals/"+approveID, map[string]any{"decision": "approve"}, nil) != 200 {
		t.Fatal("approve")
	}
	// curl is not in the image: that bash says so proves the command ran.
	c.waitRecords("the approved command's report", sess.ID, approve.ID, func(r []rec) bool {
		return hasRecord(r, "event", `"type":"text"`, "result:", "curl: command not found")
	})

	c.do("DELETE", "/api/v1/sessions/"+sess.ID, nil, nil)
	srv.stop(t)
}
