package streamjson

import (
	"context"
	"encoding/json"
	"log/slog"
	"path"
	"strings"

	"github.com/filepath-dev/filepath/adapters/internal/approval"
)

// Claude Code's permission prompts. The adapter starts claude with
// `--permission-prompt-tool stdio`: when a tool call needs permission,
// claude writes a control_request (subtype can_use_tool: tool_name, input,
// tool_use_id) on stdout and waits for the control_response on stdin,
// {"behavior":"allow","updatedInput":…} or {"behavior":"deny","message":…}
// (the shape an MCP permission prompt tool answers in, too). A
// control_cancel_request withdraws one (an interrupt).
//
// The adapter answers at once what needs nobody (a command the approval
// heuristic lets through, an edit in /workspace or /tmp, a read, filepath's
// own MCP tools) and asks the rest through the agent API's approvals inbox
// (approval.Client: durable, re-polled by id across orchestrator restarts),
// with claude's tool_use_id as the request id.

// permissionRequest is the request of a can_use_tool control_request.
type permissionRequest struct {
	Subtype   string         `json:"subtype"`
	ToolName  string         `json:"tool_name"`
	Input     map[string]any `json:"input"`
	ToolUseID string         `json:"tool_use_id"`
}

// controlLine is a control line claude writes on stdout.
type controlLine struct {
	Type      string            `json:"type"`
	RequestID string            `json:"request_id"`
	Request   permissionRequest `json:"request"`
}

// readOnly are claude's tools that change nothing; reading outside the
// workspace is not something the adapter asks about (the container is the
// sandbox).
var readOnly = map[string]bool{"Read": true, "Glob": true, "Grep": true, "LS": true, "NotebookRead": true,
	"TodoWrite": true, "TodoRead": true, "Task": true, "Agent": true, "ExitPlanMode": true, "BashOutput": true,
	"KillShell": true, "KillBash": true, "TaskOutput": true, "ListMcpResourcesTool": true, "ReadMcpResourceTool": true}

// Ask is a permission claude asked for that needs a person.
type Ask struct {
	Request approval.Request
	Reason  string // why it needs one, for the refusal
}

// ClassifyClaude decides a can_use_tool request: ask nil means allow at
// once. workspace is claude's working directory (relative paths are in it).
func ClassifyClaude(tool string, input map[string]any, workspace string) *Ask {
	str := func(k string) string { s, _ := input[k].(string); return s }
	switch {
	case tool == "Bash":
		cmd := str("command")
		reason := approval.Reason(cmd)
		if reason == "" {
			return nil
		}
		detail := reason
		if d := str("description"); d != "" {
			detail = d + " (" + reason + ")"
		}
		return &Ask{Request: approval.Request{Action: "bash: " + cut(cmd, 1000), Detail: detail, Kind: "bash"}, Reason: reason}
	case tool == "Edit" || tool == "Write" || tool == "MultiEdit" || tool == "NotebookEdit":
		p := str("file_path")
		if p == "" {
			p = str("notebook_path")
		}
		if !path.IsAbs(p) {
			p = path.Join(workspace, p)
		}
		if approval.WritablePath(p) {
			return nil
		}
		reason := "it writes " + p + ", outside /workspace and /tmp"
		return &Ask{Request: approval.Request{Action: strings.ToLower(tool) + ": " + p, Detail: reason, Kind: "edit"}, Reason: reason}
	case tool == "WebFetch":
		reason := "it fetches " + cut(str("url"), 300) + " from the network"
		return &Ask{Request: approval.Request{Action: "fetch: " + cut(str("url"), 1000), Detail: str("prompt"), Kind: "network"}, Reason: reason}
	case tool == "WebSearch":
		reason := "it searches the web"
		return &Ask{Request: approval.Request{Action: "web search: " + cut(str("query"), 1000), Kind: "network"}, Reason: reason}
	case strings.HasPrefix(tool, "mcp__filepath__"), readOnly[tool]:
		return nil // filepath's own tools are scoped by the node's token
	}
	b, _ := json.Marshal(input)
	reason := "claude asks permission for its " + tool + " tool"
	return &Ask{Request: approval.Request{Action: tool + ": " + cut(string(b), 1000), Detail: reason, Kind: strings.ToLower(tool)}, Reason: reason}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// permissionAnswer is the control_response line for request id.
func permissionAnswer(id string, allow bool, input map[string]any, message string) []byte {
	var r map[string]any
	if allow {
		if input == nil {
			input = map[string]any{}
		}
		r = map[string]any{"behavior": "allow", "updatedInput": input}
	} else {
		r = map[string]any{"behavior": "deny", "message": message}
	}
	b, _ := json.Marshal(map[string]any{"type": "control_response",
		"response": map[string]any{"subtype": "success", "request_id": id, "response": r}})
	return b
}

// decide answers one can_use_tool request: at once, or after asking a
// person. It returns the control_response line, or nil when ctx ended
// first (the request was withdrawn or the CLI is going away).
func decide(ctx context.Context, log *slog.Logger, api *approval.Client, workspace string, c controlLine) []byte {
	ask := ClassifyClaude(c.Request.ToolName, c.Request.Input, workspace)
	if ask == nil {
		return permissionAnswer(c.RequestID, true, c.Request.Input, "")
	}
	req := ask.Request
	if id := c.Request.ToolUseID; id != "" {
		req.RequestID = "claude-" + id
	} else {
		req.RequestID = "claude-" + c.RequestID
	}
	a, err := api.Ask(ctx, req)
	if ctx.Err() != nil {
		// Withdrawn (Claude cancelled the prompt, or the adapter stops): the
		// inbox must not keep asking a person about it.
		if err := api.Abandon(ctx, a); err != nil {
			log.Warn("withdraw a cancelled permission request", "approval", a.ID, "err", err)
		}
		return nil
	}
	if err == nil && a.Status == "approved" {
		return permissionAnswer(c.RequestID, true, c.Request.Input, "")
	}
	return permissionAnswer(c.RequestID, false, nil, approval.Refusal(ask.Reason, a, err))
}

// parseControl reads a control line claude wrote: a can_use_tool request
// or a cancel. ok is false for any other line.
func parseControl(l []byte) (c controlLine, ok bool) {
	if !strings.Contains(string(l), `"control_`) {
		return c, false
	}
	if json.Unmarshal(l, &c) != nil {
		return c, false
	}
	switch {
	case c.Type == "control_request" && c.Request.Subtype == "can_use_tool":
		return c, true
	case c.Type == "control_cancel_request":
		return c, true
	}
	return c, false
}
