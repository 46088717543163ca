package codex

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/filepath-dev/filepath/adapters/internal/approval"
)

// Codex's approval requests. Codex 0.169 has no sandbox here (the container
// is the sandbox: danger-full-access) and refuses approval_policy
// "untrusted"; with "on-request" it asks its client before a command its
// execpolicy rules mark "prompt". The adapter writes those rules
// (CODEX_HOME/rules/filepath.rules, Rules) from the approval heuristic's
// command words: network tools, git's remote subcommands, package installs.
// It cannot see URLs or paths outside /workspace in other commands (rules
// match an argv's prefix), so those run without asking.
//
// A request is item/commandExecution/requestApproval {itemId, command,
// cwd, reason} or item/fileChange/requestApproval {itemId, reason,
// grantRoot} (the paths are in the fileChange item started before); v1
// servers send execCommandApproval and applyPatchApproval. The answer is
// {"decision": "accept"|"decline"} ("approved"|"denied" in v1).
//
// The adapter accepts at once what needs nobody (a command the heuristic
// lets through, a patch of files in /workspace or /tmp) and asks the rest
// through the agent API's approvals inbox, with Codex's item id as the
// request id. A declined command is not run and Codex's model is told.
//
// A request Codex no longer waits for is withdrawn from the inbox
// (approval.Client.Abandon: DELETE, answered by "agent"). Codex clears a
// pending request when its turn ends and says so with serverRequest/resolved
// {threadId, requestId} (the request's JSON-RPC id); codex 0.169.0,
// interrupted while a request waits, answers the interrupt, sends
// turn/completed "interrupted" and then serverRequest/resolved. Either
// withdraws the request (turn/completed every one still asked), as do a stop
// and the end of the adapter; Run returns only when those DELETEs are done
// (approval.WithdrawWithin bounds them). An answer that comes after is not
// given to Codex.

// reply is a decided approval request.
type reply struct {
	id     int
	result any
}

// Ask is what Codex asked that the adapter decides: Request.Action == ""
// means accept at once.
type Ask struct {
	Request approval.Request
	Reason  string
}

func decision(method string, ok bool) map[string]any {
	v1 := method == "execCommandApproval" || method == "applyPatchApproval"
	switch {
	case v1 && ok:
		return map[string]any{"decision": "approved"}
	case v1:
		return map[string]any{"decision": "denied"}
	case ok:
		return map[string]any{"decision": "accept"}
	}
	return map[string]any{"decision": "decline"}
}

// noteChanges remembers the paths of a fileChange item as it starts.
func (c *conn) noteChanges(params json.RawMessage) {
	it, ok := decodeItem(params)
	if !ok || it.Type != "fileChange" {
		return
	}
	var paths []string
	for _, ch := range it.Changes {
		paths = append(paths, ch.Path)
	}
	c.changes[it.ID] = paths
}

// classify decides an approval request of the server; ok is false for a
// request that is not one.
func (c *conn) classify(method string, params json.RawMessage) (Ask, bool) {
	var p struct {
		ItemID      string          `json:"itemId"`
		CallID      string          `json:"callId"`
		Command     json.RawMessage `json:"command"`
		Cwd         string          `json:"cwd"`
		Reason      string          `json:"reason"`
		GrantRoot   string          `json:"grantRoot"`
		FileChanges map[string]any  `json:"fileChanges"`
	}
	_ = json.Unmarshal(params, &p)
	id := p.ItemID
	if id == "" {
		id = p.CallID
	}
	ws := c.d.cfg.Workspace
	switch method {
	case "item/commandExecution/requestApproval", "execCommandApproval":
		cmd := commandText(p.Command)
		reason := approval.Reason(cmd)
		if cmd == "" {
			reason = "codex asks to run a command"
		}
		if p.Cwd != "" && !approval.WritablePath(p.Cwd) && reason == "" {
			reason = "it runs in " + p.Cwd + ", outside /workspace and /tmp"
		}
		if reason == "" {
			return Ask{}, true
		}
		detail := reason
		if p.Reason != "" {
			detail = p.Reason + " (" + reason + ")"
		}
		return Ask{Request: approval.Request{Action: "bash: " + cut(cmd, 1000), Detail: detail, Kind: "bash", RequestID: "codex-" + id}, Reason: reason}, true
	case "item/fileChange/requestApproval", "applyPatchApproval":
		paths := c.changes[p.ItemID]
		for f := range p.FileChanges {
			paths = append(paths, f)
		}
		sort.Strings(paths)
		var outside []string
		for _, f := range paths {
			if !path.IsAbs(f) {
				f = path.Join(ws, f)
			}
			if !approval.WritablePath(f) {
				outside = append(outside, f)
			}
		}
		if p.GrantRoot != "" && !approval.WritablePath(p.GrantRoot) {
			outside = append(outside, p.GrantRoot)
		}
		if len(outside) == 0 && len(paths) > 0 {
			return Ask{}, true
		}
		reason := "it writes " + strings.Join(outside, ", ") + ", outside /workspace and /tmp"
		if len(paths) == 0 {
			reason = "codex asks to change files it does not name"
		}
		detail := reason
		if p.Reason != "" {
			detail = p.Reason + " (" + reason + ")"
		}
		action := "edit: " + strings.Join(paths, ", ")
		if len(paths) == 0 {
			action = "edit files"
		}
		return Ask{Request: approval.Request{Action: cut(action, 1000), Detail: detail, Kind: "edit", RequestID: "codex-" + id}, Reason: reason}, true
	}
	return Ask{}, false
}

// commandText is a request's command: a string (v2) or an argv (v1), a
// `bash -lc SCRIPT` unwrapped to its script.
func commandText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return unwrapShell(s)
	}
	var argv []string
	if json.Unmarshal(raw, &argv) == nil {
		if len(argv) >= 3 && (path.Base(argv[0]) == "bash" || path.Base(argv[0]) == "sh" || path.Base(argv[0]) == "zsh") && strings.HasPrefix(argv[1], "-") {
			return argv[len(argv)-1]
		}
		return strings.Join(argv, " ")
	}
	return ""
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Rules are Codex's execpolicy rules the adapter writes: a "prompt" rule for
// each command prefix the approval heuristic asks about.
func Rules() string {
	var b strings.Builder
	b.WriteString("# Written by filepath-cli-adapter on every start; edits are lost.\n")
	b.WriteString("# Codex asks before these commands; the adapter asks the approvals inbox.\n")
	prefixes, why := approval.CommandPrefixes()
	for i, p := range prefixes {
		words := make([]string, len(p))
		for j, w := range p {
			words[j] = tomlString(w) // a Starlark string literal too
		}
		fmt.Fprintf(&b, "prefix_rule(pattern = [%s], decision = \"prompt\", justification = %s)\n", strings.Join(words, ", "), tomlString(why[i]))
	}
	return b.String()
}
