package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/filepath-dev/filepath/internal/fakellm"
	"github.com/filepath-dev/filepath/internal/testkit"
)

// collabImage is the shelley image with this tree's native agent
// (adapters/native) in it: filepath/agent-shelley:latest may hold an older
// one, and other work on this machine uses that tag.
const collabImage = "filepath/test-shelley-collab:e2e"

func buildCollabImage(t *testing.T) {
	t.Helper()
	testkit.RequireImage(t, "filepath/agent-shelley:latest")
	testkit.Image(t, collabImage, "FROM filepath/agent-shelley:latest\nCOPY filepath-native /usr/local/bin/filepath-native\n",
		map[string]string{"filepath-native": testkit.Program(t, "../../adapters/native")})
}

// chatMsg is a chat completions message as the fake upstream receives it.
type chatMsg struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	ToolCallID string `json:"tool_call_id"`
}

// scriptedAgents answers every agent of a test by its task (the first user
// message, after the system prompt) and its conversation so far.
func scriptedAgents(t *testing.T, turns map[string]func(msgs []chatMsg) fakellm.Turn) func(fakellm.Request) fakellm.Turn {
	return func(r fakellm.Request) fakellm.Turn {
		var req struct {
			Messages []chatMsg `json:"messages"`
		}
		if err := r.JSON(&req); err != nil {
			return fakellm.Turn{Status: 400, ErrorMessage: err.Error()}
		}
		for _, m := range req.Messages {
			if m.Role != "user" {
				continue
			}
			for prefix, f := range turns {
				if strings.HasPrefix(m.Content, prefix) {
					return f(req.Messages)
				}
			}
			break
		}
		return fakellm.Turn{Status: 500, ErrorMessage: "no script for this agent"}
	}
}

func assistants(msgs []chatMsg) int {
	n := 0
	for _, m := range msgs {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

func lastMsg(msgs []chatMsg) chatMsg { return msgs[len(msgs)-1] }

func toolCall(id, name string, args map[string]any) fakellm.ToolCall {
	b, _ := json.Marshal(args)
	return fakellm.ToolCall{ID: id, Name: name, Arguments: string(b)}
}

// TestShelleyCoordinatesChildren runs a shelley parent (the native agent in
// a real container without network, its model a scripted fake upstream
// behind the gateway) that spawns two children through the agent API,
// lists them, reads one's messages, messages the other, waits for both and
// reports; the tree, the records and the parent's chat show every step.
func TestShelleyCoordinatesChildren(t *testing.T) {
	buildCollabImage(t)
	up := fakellm.New()
	defer up.Close()
	up.Fallback(scriptedAgents(t, map[string]func([]chatMsg) fakellm.Turn{
		"LEAD:": func(msgs []chatMsg) fakellm.Turn {
			switch assistants(msgs) {
			case 0:
				return fakellm.Turn{ToolCalls: []fakellm.ToolCall{
					toolCall("s1", "spawn", map[string]any{"name": "alpha", "agent": "custom", "model": "fake/coder", "task": "ALPHA: write alpha.txt"}),
					toolCall("s2", "spawn", map[string]any{"name": "beta", "agent": "custom", "model": "fake/coder", "task": "BETA: wait for instructions"})}}
			case 1:
				return fakellm.Turn{ToolCalls: []fakellm.ToolCall{toolCall("l", "list_children", map[string]any{})}}
			case 2:
				return fakellm.Turn{ToolCalls: []fakellm.ToolCall{toolCall("r", "read_child_messages", map[string]any{"child": "alpha"})}}
			case 3:
				return fakellm.Turn{ToolCalls: []fakellm.ToolCall{toolCall("m", "send_message", map[string]any{"to": "beta", "content": "please write beta.txt"})}}
			case 4:
				return fakellm.Turn{ToolCalls: []fakellm.ToolCall{toolCall("w", "wait_for_children", map[string]any{"timeout": 120})}}
			}
			return fakellm.Turn{Text: "Report: both children finished. " + lastMsg(msgs).Content}
		},
		"ALPHA:": func(msgs []chatMsg) fakellm.Turn {
			if lastMsg(msgs).Role == "tool" {
				return fakellm.Turn{Text: "alpha wrote alpha.txt"}
			}
			return fakellm.Turn{ToolCalls: []fakellm.ToolCall{toolCall("a", "bash", map[string]any{"command": "echo alpha > alpha.txt"})}}
		},
		"BETA:": func(msgs []chatMsg) fakellm.Turn {
			last := lastMsg(msgs)
			switch {
			case last.Role == "tool":
				return fakellm.Turn{Text: "beta wrote beta.txt"}
			case strings.Contains(last.Content, "please write beta.txt"):
				return fakellm.Turn{ToolCalls: []fakellm.ToolCall{toolCall("b", "bash", map[string]any{"command": "echo beta > beta.txt"})}}
			}
			return fakellm.Turn{Text: "beta is ready"}
		},
	}))
	data := t.TempDir()
	srv := llmServer(t, up, data)
	c := newClient(t, srv)
	sid := c.session(map[string]any{"name": "collab"})
	lead := c.spawn(sid, map[string]any{"name": "lead", "agent_type": "custom", "image": collabImage, "model": "fake/coder", "task": "LEAD: coordinate alpha and beta"})
	recs := c.waitRecords("the lead's report", sid, lead.ID, 3*time.Minute, func(r []rec) bool { return hasRecord(r, "event", `"type":"done"`, "Report: both children finished") })

	tree := c.tree(sid)
	kids := map[string]nodeJSON{}
	for _, n := range tree {
		if n.ParentID != nil && *n.ParentID == lead.ID {
			kids[n.Name] = n
		}
	}
	alpha, beta := kids["alpha"], kids["beta"]
	if len(kids) != 2 || alpha.ID == "" || beta.ID == "" {
		t.Fatalf("the tree: %+v", tree)
	}
	// The lead's chat: both spawns logged, then each tool's call.
	for _, want := range [][]string{
		{`"type":"spawn"`, `"name":"alpha"`}, {`"type":"spawn"`, `"name":"beta"`},
		{`"name":"list_children"`, `"status":"done"`, "alpha (id " + alpha.ID},
		{`"name":"read_child_messages"`, `"status":"done"`},
		{`"name":"send_message"`, `"status":"done"`, "sent to beta"},
		{`"name":"wait_for_children"`, `"status":"done"`, "all children finished"},
	} {
		if !hasRecord(recs, "event", want...) {
			t.Errorf("no event with %q in the lead's chat", want)
		}
	}
	// Beta got the message from its parent, named.
	betaRecs := c.waitRecords("beta's work", sid, beta.ID, 3*time.Minute, func(r []rec) bool { return hasRecord(r, "event", "beta wrote beta.txt") })
	if !hasRecord(betaRecs, "input", `"from":"parent"`, "please write beta.txt", `"from_node":{"id":"`+lead.ID+`","name":"lead"}`) {
		t.Errorf("beta's input from its parent: %+v", betaRecs)
	}
	for name, id := range map[string]string{"alpha.txt": alpha.ID, "beta.txt": beta.ID} {
		if _, err := os.Stat(filepath.Join(data, "nodes", id, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The audit has the lead's API calls and its children's commands.
	var audit struct {
		Data []struct{ Source, Name string }
	}
	c.do("GET", "/api/v1/sessions/"+sid+"/nodes/"+lead.ID+"/audit", nil, &audit)
	names := map[string]bool{}
	for _, a := range audit.Data {
		names[a.Source+" "+a.Name] = true
	}
	for _, want := range []string{"api spawn", "api list_children", "api read_child_messages", "api send_message", "api wait_for_children", "tool list_children"} {
		if !names[want] {
			t.Errorf("no %q in the lead's audit: %v", want, names)
		}
	}
	c.do("GET", "/api/v1/sessions/"+sid+"/nodes/"+alpha.ID+"/audit", nil, &audit)
	if len(audit.Data) == 0 || audit.Data[0].Source != "command" {
		t.Errorf("alpha's audit: %+v", audit.Data)
	}
	c.do("DELETE", "/api/v1/sessions/"+sid, nil, nil)
	srv.stop(t)
}

// streamApproval reads the session's live stream until a pending approval
// record of node arrives and returns its id.
func streamApproval(t *testing.T, c *client, sid, nid string) string {
	t.Helper()
	return streamApprovalOf(t, c, sid, nid, "bash: echo https://example.com")
}

// streamApprovalOf waits on the session's WebSocket for a pending approval
// of node nid whose action starts with action, and returns its id.
func streamApprovalOf(t *testing.T, c *client, sid, nid, action string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	url := strings.Replace(c.srv.base, "http://", "ws://", 1) + "/api/v1/sessions/" + sid + "/stream?after=0"
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: map[string][]string{"Authorization": {"Bearer " + c.key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(4 << 20)
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("no approval record on the stream: %v", err)
		}
		var r struct {
			Kind   string `json:"kind"`
			NodeID string `json:"node_id"`
			Data   struct {
				Type     string `json:"type"`
				Approval *struct{ ID, Status, Action string }
			} `json:"data"`
		}
		if json.Unmarshal(b, &r) == nil && r.Kind == "system" && r.NodeID == nid && r.Data.Type == "approval" &&
			r.Data.Approval != nil && r.Data.Approval.Status == "pending" {
			if !strings.HasPrefix(r.Data.Approval.Action, action) {
				t.Fatalf("approval action %q", r.Data.Approval.Action)
			}
			return r.Data.Approval.ID
		}
	}
}

// TestApprovalsInbox runs native agents whose bash command names a URL:
// each request reaches the inbox over the WebSocket; denied, the agent
// reports the refusal; a request pending while the orchestrator is killed
// is still pending after it starts again, and approving it then lets the
// agent, which polls again, run the command; nobody answering denies it at
// the timeout.
func TestApprovalsInbox(t *testing.T) {
	buildCollabImage(t)
	up := fakellm.New()
	defer up.Close()
	asker := func(msgs []chatMsg) fakellm.Turn {
		// Once the command has a result, report it (a system message, such
		// as a child's "finished", may come after it).
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == "tool" {
				return fakellm.Turn{Text: "result: " + msgs[i].Content}
			}
		}
		return fakellm.Turn{ToolCalls: []fakellm.ToolCall{toolCall("c", "bash", map[string]any{"command": "echo https://example.com > fetched.txt"})}}
	}
	up.Fallback(scriptedAgents(t, map[string]func([]chatMsg) fakellm.Turn{"APPROVE:": asker, "DENY:": asker, "TIMEOUT:": asker}))
	data := t.TempDir()
	srv := llmServer(t, up, data, "--approval-timeout", "5m")
	c := newClient(t, srv)
	sid := c.session(map[string]any{"name": "approvals"})
	spawn := func(name, task, parent string) nodeJSON {
		t.Helper()
		return c.spawn(sid, map[string]any{"name": name, "agent_type": "custom", "image": collabImage, "model": "fake/coder", "task": task, "parent_id": parent})
	}
	approve := spawn("approve", "APPROVE: fetch it", "")
	deny := spawn("deny", "DENY: fetch it", approve.ID)
	approveID := streamApproval(t, c, sid, approve.ID)
	denyID := streamApproval(t, c, sid, deny.ID)

	// Denied: the agent is told, and says so.
	c.answerApproval(sid, denyID, "deny")
	c.waitRecords("the denied agent's report", sid, deny.ID, 3*time.Minute, func(r []rec) bool { return hasRecord(r, "event", "result: not run:", "denied it") })
	if _, err := os.Stat(filepath.Join(data, "nodes", deny.ID, "fetched.txt")); err == nil {
		t.Fatal("the denied command ran")
	}

	// The orchestrator dies while the other request waits; it is still
	// pending after the restart, and its answer reaches the agent.
	srv.restart("--approval-timeout", "3s")
	c.wantPending(sid, approveID)
	c.answerApproval(sid, approveID, "approve")
	c.waitRecords("the approved command", sid, approve.ID, 3*time.Minute, func(r []rec) bool { return hasRecord(r, "event", "result: exit code: 0") })
	if _, err := os.Stat(filepath.Join(data, "nodes", approve.ID, "fetched.txt")); err != nil {
		t.Fatalf("the approved command did not run: %v", err)
	}

	// Nobody answers: denied at the timeout (3 s on this server).
	late := spawn("late", "TIMEOUT: fetch it", approve.ID)
	streamApproval(t, c, sid, late.ID)
	recs := c.waitRecords("the timed-out agent's report", sid, late.ID, 3*time.Minute, func(r []rec) bool { return hasRecord(r, "event", "result: not run:", "nobody answered") })
	if !hasRecord(recs, "system", `"status":"denied"`, `"answered_by":"timeout"`) {
		t.Fatalf("no timeout record: %v", records(recs))
	}
	c.do("DELETE", "/api/v1/sessions/"+sid, nil, nil)
	srv.stop(t)
}
