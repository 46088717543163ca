package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	approvals "github.com/filepath-dev/filepath/adapters/internal/approval"
	"github.com/filepath-dev/filepath/protocol"
)

// The tools that reach the agent API: the agent's children, its parent,
// its memories. Each is a tool event pair in the chat; the result the model
// reads is the API's answer, compacted.

var collabTools = map[string]tool{
	"list_children": {spec: functionSpec{Name: "list_children",
		Description: "List your child agents: id, name, agent, model, status (idle, thinking, running, done, error), whether they are finished, done/total leaves of their subtrees, tokens used.",
		Parameters:  schema(`{"type":"object","properties":{},"additionalProperties":false}`)},
		run: runListChildren},
	"read_child_messages": {spec: functionSpec{Name: "read_child_messages",
		Description: "Read what a child (or any descendant) did: its messages, tool calls, commands, commits and status, oldest first, one line each. Page with after = the next_after it prints.",
		Parameters: schema(`{"type":"object","properties":{
"child":{"type":"string","description":"the child's id or name"},
"after":{"type":"integer","description":"only records after this seq (default 0: from the start)"},
"limit":{"type":"integer","description":"records per page, at most 1000 (default 100)"}},
"required":["child"],"additionalProperties":false}`)},
		run: runReadChildMessages},
	"send_message": {spec: functionSpec{Name: "send_message",
		Description: "Send a message to a child or any descendant (it reads it as from its parent; a stopped one starts again), or to your own parent with to = \"parent\" (it reads it as your report).",
		Parameters: schema(`{"type":"object","properties":{
"to":{"type":"string","description":"a descendant's id or name, or \"parent\""},
"content":{"type":"string","description":"the message"}},
"required":["to","content"],"additionalProperties":false}`)},
		run: runSendMessage},
	"wait_for_children": {spec: functionSpec{Name: "wait_for_children",
		Description: "Wait until every child has finished (done, error, or exited), at most timeout seconds; then see their states. Use it instead of polling list_children.",
		Parameters: schema(`{"type":"object","properties":{
"timeout":{"type":"integer","description":"seconds to wait at most (default 300, at most 600)"}},
"additionalProperties":false}`)},
		run: runWaitForChildren},
	"memory_store": {spec: functionSpec{Name: "memory_store",
		Description: "Keep a learning about this repository for later agents of this user: how to build and test, conventions, pitfalls. Storing the same key again replaces it.",
		Parameters: schema(`{"type":"object","properties":{
"key":{"type":"string","description":"a short name for the learning"},
"text":{"type":"string","description":"the learning itself, one fact or practice"}},
"required":["key","text"],"additionalProperties":false}`)},
		run: runMemoryStore},
	"memory_search": {spec: functionSpec{Name: "memory_search",
		Description: "Find kept learnings about this repository by words, best matches first.",
		Parameters: schema(`{"type":"object","properties":{
"query":{"type":"string","description":"words to look for"}},
"required":["query"],"additionalProperties":false}`)},
		run: runMemorySearch},
	"memory_list": {spec: functionSpec{Name: "memory_list",
		Description: "List the kept learnings about this repository, newest first.",
		Parameters:  schema(`{"type":"object","properties":{},"additionalProperties":false}`)},
		run: runMemoryList},
}

// apiTool runs a call of the agent API between tool start and done (or
// error) events; path is shown in the event.
func (t *toolbox) apiTool(name, path string, f func() (string, error)) string {
	t.out.tool(name, path, protocol.StepStart, "")
	if t.api == nil {
		msg := "error: FILEPATH_API_URL is not set: there is no agent API"
		t.out.tool(name, path, protocol.StepError, msg)
		return msg
	}
	out, err := f()
	if err != nil {
		msg := "error: " + apiMessage(err)
		t.out.tool(name, path, protocol.StepError, msg)
		return msg
	}
	out = cut(out, maxToolOutput)
	t.out.tool(name, path, protocol.StepDone, out)
	return out
}

func apiMessage(err error) string {
	var ae *approvals.APIError
	if errors.As(err, &ae) {
		return ae.Message
	}
	return err.Error()
}

type child struct {
	ID       string  `json:"id"`
	Name     string  `json:"name"`
	Agent    string  `json:"agent"`
	Model    string  `json:"model"`
	Status   string  `json:"status"`
	Running  bool    `json:"running"`
	Finished bool    `json:"finished"`
	Done     int     `json:"done"`
	Total    int     `json:"total"`
	Tokens   int64   `json:"tokens"`
	CostUSD  float64 `json:"cost_usd"`
}

func renderChildren(kids []child) string {
	if len(kids) == 0 {
		return "no children"
	}
	var b strings.Builder
	for _, k := range kids {
		state := k.Status
		if k.Finished {
			state += ", finished"
		} else if k.Running {
			state += ", running"
		}
		fmt.Fprintf(&b, "%s (id %s): %s %s, %s, %d/%d done, %d tokens", k.Name, k.ID, k.Agent, k.Model, state, k.Done, k.Total, k.Tokens)
		if k.CostUSD > 0 {
			fmt.Fprintf(&b, ", $%.4f", k.CostUSD)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func runListChildren(ctx context.Context, t *toolbox, args json.RawMessage) string {
	if err := decodeArgs(args, &struct{}{}); err != nil {
		return argsError(t, "list_children", err)
	}
	return t.apiTool("list_children", "", func() (string, error) {
		var page struct{ Data []child }
		if err := t.api.get(ctx, "/children", nil, &page); err != nil {
			return "", err
		}
		return renderChildren(page.Data), nil
	})
}

// record is a session log record as the API sends it.
type record struct {
	Seq  int64           `json:"seq"`
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
}

// renderRecord is one record as one line.
func renderRecord(r record) string {
	var d map[string]any
	_ = json.Unmarshal(r.Data, &d)
	s := func(k string) string { v, _ := d[k].(string); return strings.Join(strings.Fields(v), " ") }
	var line string
	switch r.Kind {
	case "event":
		switch s("type") {
		case "text":
			line = "said: " + s("content")
		case "tool":
			line = fmt.Sprintf("tool %s %s %s", s("name"), s("status"), s("path"))
			if o := s("output"); o != "" && s("status") != "start" {
				line += ": " + cut(o, 300)
			}
		case "command":
			line = fmt.Sprintf("command %s: %s", s("status"), s("cmd"))
			if e, ok := d["exit"].(float64); ok {
				line += fmt.Sprintf(" (exit %v)", e)
			}
		case "commit":
			line = fmt.Sprintf("commit %s %s", cut(s("hash"), 12), s("message"))
		case "status":
			line = "status " + s("state")
		case "done":
			line = "done: " + s("summary")
		default:
			line = s("type") + " " + cut(string(r.Data), 300)
		}
	case "input":
		if s("type") == "message" {
			line = fmt.Sprintf("message from %s: %s", s("from"), s("content"))
		} else {
			line = "signal " + s("action")
		}
	case "error":
		line = "error: " + s("message")
	case "system":
		line = s("type") + ": " + s("text")
	default:
		line = r.Kind + " " + s("op")
	}
	return strconv.FormatInt(r.Seq, 10) + " " + cut(line, 1000)
}

func runReadChildMessages(ctx context.Context, t *toolbox, args json.RawMessage) string {
	var a struct {
		Child string `json:"child"`
		After int64  `json:"after"`
		Limit int    `json:"limit"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return argsError(t, "read_child_messages", err)
	}
	return t.apiTool("read_child_messages", a.Child, func() (string, error) {
		q := url.Values{"after": {strconv.FormatInt(max(a.After, 0), 10)}}
		if a.Limit > 0 {
			q.Set("limit", strconv.Itoa(a.Limit))
		}
		var page struct {
			Data      []record `json:"data"`
			NextAfter int64    `json:"next_after"`
		}
		if err := t.api.get(ctx, "/nodes/"+url.PathEscape(a.Child)+"/messages", q, &page); err != nil {
			return "", err
		}
		var b strings.Builder
		for _, r := range page.Data {
			if r.Kind == "node" || r.Kind == "file" {
				continue
			}
			b.WriteString(renderRecord(r) + "\n")
		}
		fmt.Fprintf(&b, "(%d records; next_after %d)\n", len(page.Data), page.NextAfter)
		return b.String(), nil
	})
}

func runSendMessage(ctx context.Context, t *toolbox, args json.RawMessage) string {
	var a struct {
		To      string `json:"to"`
		Content string `json:"content"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return argsError(t, "send_message", err)
	}
	return t.apiTool("send_message", a.To, func() (string, error) {
		var sent struct {
			Name string `json:"name"`
			From string `json:"from"`
		}
		if err := t.api.call(ctx, http.MethodPost, "/nodes/"+url.PathEscape(a.To)+"/messages", map[string]string{"content": a.Content}, &sent); err != nil {
			return "", err
		}
		if sent.From == protocol.FromSystem {
			return "reported to your parent " + sent.Name, nil
		}
		return "sent to " + sent.Name, nil
	})
}

func runWaitForChildren(ctx context.Context, t *toolbox, args json.RawMessage) string {
	var a struct {
		Timeout int `json:"timeout"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return argsError(t, "wait_for_children", err)
	}
	return t.apiTool("wait_for_children", "", func() (string, error) {
		q := url.Values{}
		if a.Timeout > 0 {
			q.Set("timeout", strconv.Itoa(a.Timeout))
		}
		var w struct {
			AllFinished bool    `json:"all_finished"`
			TimedOut    bool    `json:"timed_out"`
			Children    []child `json:"children"`
		}
		if err := t.api.get(ctx, "/children/wait", q, &w); err != nil {
			return "", err
		}
		head := "all children finished:\n"
		if !w.AllFinished {
			head = "timed out; not every child has finished:\n"
		}
		return head + renderChildren(w.Children), nil
	})
}

type memory struct {
	Key  string `json:"key"`
	Text string `json:"text"`
}

func renderMemories(ms []memory) string {
	if len(ms) == 0 {
		return "no memories"
	}
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "- %s: %s\n", m.Key, m.Text)
	}
	return b.String()
}

func runMemoryStore(ctx context.Context, t *toolbox, args json.RawMessage) string {
	var a memory
	if err := decodeArgs(args, &a); err != nil {
		return argsError(t, "memory_store", err)
	}
	return t.apiTool("memory_store", a.Key, func() (string, error) {
		var m struct {
			Repo string `json:"repo"`
		}
		if err := t.api.call(ctx, http.MethodPost, "/memories", a, &m); err != nil {
			return "", err
		}
		scope := m.Repo
		if scope == "" {
			scope = "sessions without a repository"
		}
		return fmt.Sprintf("stored %q for %s", a.Key, scope), nil
	})
}

func runMemorySearch(ctx context.Context, t *toolbox, args json.RawMessage) string {
	var a struct {
		Query string `json:"query"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return argsError(t, "memory_search", err)
	}
	return t.memories(ctx, "memory_search", a.Query)
}

func runMemoryList(ctx context.Context, t *toolbox, args json.RawMessage) string {
	if err := decodeArgs(args, &struct{}{}); err != nil {
		return argsError(t, "memory_list", err)
	}
	return t.memories(ctx, "memory_list", "")
}

func (t *toolbox) memories(ctx context.Context, name, query string) string {
	return t.apiTool(name, query, func() (string, error) {
		var page struct{ Data []memory }
		if err := t.api.get(ctx, "/memories", url.Values{"q": {query}}, &page); err != nil {
			return "", err
		}
		return renderMemories(page.Data), nil
	})
}

// gate decides whether a command may run: "" runs it, anything else is
// the refusal the model reads (also shown as a failed command). A command
// the heuristic (approvals.Reason) flags runs when the node's bash policy is
// allow, is refused when it is deny, and otherwise (ask, the default)
// waits for a person's answer through the agent API.
func (t *toolbox) gate(ctx context.Context, display, command string) string {
	reason := approvals.Reason(command)
	if reason == "" {
		return ""
	}
	refuse := func(msg string) string {
		msg = "not run: " + msg
		t.out.emit(protocol.CommandEvent{Cmd: display, Status: protocol.StepError, Stderr: &msg})
		return msg + "\n"
	}
	switch t.policy(ctx) {
	case policyAllow:
		return ""
	case policyDeny:
		return refuse(reason + ", and this agent's approvals policy denies such commands (config approvals.bash = deny)")
	}
	a, err := t.asker.Ask(ctx, approvals.Request{Action: "bash: " + cut(display, 1000), Detail: reason, Kind: "bash", RequestID: newRequestID()})
	switch {
	case err != nil && ctx.Err() != nil:
		// Stopped while it waited: the inbox must not keep asking a
		// person about a command that will not run.
		if err := t.asker.Abandon(ctx, a); err != nil {
			t.log.Warn("withdraw the request for approval of a stopped command", "approval", a.ID, "err", err)
		}
		return refuse("the agent was stopped while it waited for approval")
	case errors.Is(err, approvals.ErrNoAPI):
		return refuse(reason + ", and without FILEPATH_API_URL there is nobody to ask for approval")
	case err != nil:
		return refuse(reason + "; asking for approval failed: " + apiMessage(err))
	case a.Status == "approved":
		if a.Always {
			t.policies["bash"] = policyAllow
		}
		return ""
	case a.AnsweredBy == "timeout":
		return refuse(reason + "; nobody answered the request for approval in time, so it was denied. Do not retry it; find another way, or end your turn and say what you need")
	default:
		return refuse(fmt.Sprintf("%s; %s denied it. Do not try to get around this: find another way, or end your turn and say what you need", reason, orSomeone(a.AnsweredBy)))
	}
}

func orSomeone(who string) string {
	switch who {
	case "":
		return "the user"
	case "policy":
		return "this agent's policy"
	}
	return who
}

// Approval policies of a kind (config approvals.<kind>).
const (
	policyAsk   = "ask"
	policyAllow = "allow"
	policyDeny  = "deny"
)

// policy is the node's bash policy, read once from GET /self (ask when it
// cannot be read).
func (t *toolbox) policy(ctx context.Context) string {
	if t.policies == nil {
		t.policies = map[string]string{}
		if t.api != nil {
			var s self
			if err := t.api.get(ctx, "/self", nil, &s); err == nil {
				for k, v := range s.Approvals {
					t.policies[k] = v
				}
			}
		}
	}
	switch p := t.policies["bash"]; p {
	case policyAllow, policyDeny:
		return p
	}
	return policyAsk
}
