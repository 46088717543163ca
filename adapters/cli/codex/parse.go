// Package codex runs OpenAI's Codex CLI through `codex app-server` (JSON-RPC
// 2.0 without the "jsonrpc" member, one JSON message a line on stdio) and
// translates its notifications into FAP events.
//
// Why app-server and not `codex exec --json` + `exec resume`: one long-lived
// process serves every message of the node; a message that arrives during a
// turn joins it (turn/steer) instead of waiting for a new process; stop
// interrupts the turn cleanly (turn/interrupt) instead of killing a process
// mid-write; and the notifications carry what exec's JSONL lacks (the exit
// code and output of a command while the turn runs, the context window with
// the token usage, thread/resume by id after a restart).
//
// Source of the format: the protocol of codex 0.169.0 itself, printed by
// `codex app-server generate-ts` and `generate-json-schema` (ServerNotification,
// ClientRequest, v2/ThreadItem, v2/Turn, v2/ThreadTokenUsage), and transcripts
// recorded from that version (testdata/codex); the protocol is described in
// codex-rs/app-server/README.md of github.com/openai/codex.
package codex

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/filepath-dev/filepath/adapters/cli/translate"
	"github.com/filepath-dev/filepath/protocol"
)

// Parser turns the app-server's output, line by line, into FAP events. It
// tracks the thread, the running turn, the items started and not completed
// and the last token usage. It does no I/O. Not safe for concurrent use.
type Parser struct {
	workspace string
	steps     translate.Steps
	thread    string
	turn      string
	context   float64
	window    float64
}

// NewParser returns a Parser; paths inside workspace are reported relative
// to it.
func NewParser(workspace string) *Parser { return &Parser{workspace: workspace} }

// Thread is the id of the thread the server reported last.
func (p *Parser) Thread() string { return p.thread }

// Turn is the id of the running turn, "" between turns.
func (p *Parser) Turn() string { return p.turn }

// message is a JSON-RPC message: a notification (method), a request from
// the server (id and method) or a response (id and result or error).
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// quiet are notifications that carry nothing for FAP (deltas of items that
// complete later, bookkeeping); they are skipped without a note.
var quiet = map[string]bool{
	"item/agentMessage/delta":                   true,
	"item/plan/delta":                           true,
	"item/reasoning/summaryTextDelta":           true,
	"item/reasoning/summaryPartAdded":           true,
	"item/reasoning/textDelta":                  true,
	"item/commandExecution/outputDelta":         true,
	"item/commandExecution/terminalInteraction": true,
	"item/fileChange/outputDelta":               true,
	"item/fileChange/patchUpdated":              true,
	"item/mcpToolCall/progress":                 true,
	"turn/diff/updated":                         true,
	"turn/plan/updated":                         true,
	"thread/status/changed":                     true,
	"thread/goal/updated":                       true,
	"thread/goal/cleared":                       true,
	"thread/name/updated":                       true,
	"thread/settings/updated":                   true,
	"account/rateLimits/updated":                true,
	"remoteControl/status/changed":              true,
	"serverRequest/resolved":                    true,
	"mcpServer/startupStatus/updated":           true,
	"skills/changed":                            true,
	"hook/started":                              true,
	"hook/completed":                            true,
}

// Parse translates one line of the app-server's stdout. It returns the
// events the line makes and, when it skipped something worth a debug log,
// a note saying what.
func (p *Parser) Parse(raw []byte) (events []protocol.Event, note string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, ""
	}
	var m message
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, "not a JSON message: " + err.Error()
	}
	switch {
	case m.Method == "" && len(m.ID) > 0:
		return nil, "" // a response: the driver's business
	case m.Method == "":
		return nil, "skipped a message without a method or an id"
	case len(m.ID) > 0:
		return nil, "server request " + m.Method + " (answered by the driver)"
	}
	switch m.Method {
	case "thread/started":
		var v struct {
			Thread struct {
				ID string `json:"id"`
			} `json:"thread"`
		}
		_ = json.Unmarshal(m.Params, &v)
		if v.Thread.ID != "" {
			p.thread = v.Thread.ID
		}
		return nil, ""
	case "turn/started":
		var v struct {
			Turn struct {
				ID string `json:"id"`
			} `json:"turn"`
		}
		_ = json.Unmarshal(m.Params, &v)
		p.turn = v.Turn.ID
		return nil, ""
	case "item/started":
		return p.itemStarted(m.Params)
	case "item/completed":
		return p.itemCompleted(m.Params)
	case "thread/tokenUsage/updated":
		var v struct {
			TokenUsage struct {
				Last struct {
					Total float64 `json:"totalTokens"`
				} `json:"last"`
				Window *float64 `json:"modelContextWindow"`
			} `json:"tokenUsage"`
		}
		_ = json.Unmarshal(m.Params, &v)
		p.context = v.TokenUsage.Last.Total
		if v.TokenUsage.Window != nil {
			p.window = *v.TokenUsage.Window
		}
		return nil, ""
	case "turn/completed":
		return p.turnCompleted(m.Params), ""
	case "error":
		var v struct {
			WillRetry bool `json:"willRetry"`
			Error     struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(m.Params, &v)
		if v.WillRetry {
			return nil, "codex will retry: " + errorMessage(v.Error.Message)
		}
		return nil, "" // the failed turn/completed says it
	}
	if quiet[m.Method] {
		return nil, ""
	}
	return nil, "skipped notification " + m.Method
}

// item is the union of the ThreadItem fields this package reads.
type item struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	Text             string          `json:"text"`
	Command          string          `json:"command"`
	Status           string          `json:"status"`
	AggregatedOutput *string         `json:"aggregatedOutput"`
	ExitCode         *float64        `json:"exitCode"`
	Changes          []change        `json:"changes"`
	Server           string          `json:"server"`
	Tool             json.RawMessage `json:"tool"`
	Namespace        *string         `json:"namespace"`
	Result           *struct {
		Content []json.RawMessage `json:"content"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	ContentItems []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"contentItems"`
	Success *bool   `json:"success"`
	Query   string  `json:"query"`
	Path    string  `json:"path"`
	Prompt  *string `json:"prompt"`
}

type change struct {
	Path string `json:"path"`
	Kind struct {
		Type string `json:"type"`
	} `json:"kind"`
	Diff string `json:"diff"`
}

func decodeItem(params json.RawMessage) (item, bool) {
	var v struct {
		Item item `json:"item"`
	}
	if json.Unmarshal(params, &v) != nil || v.Item.Type == "" {
		return item{}, false
	}
	return v.Item, true
}

// starts returns the steps an item opens, each with its own key.
func (p *Parser) starts(it item) (keys []string, steps []translate.Step) {
	switch it.Type {
	case "commandExecution":
		return []string{it.ID}, []translate.Step{translate.CommandStep(unwrapShell(it.Command))}
	case "fileChange":
		for i, c := range it.Changes {
			keys = append(keys, it.ID+"#"+strconv.Itoa(i))
			steps = append(steps, translate.ToolStep(changeName(c.Kind.Type), translate.Rel(p.workspace, c.Path)))
		}
		return keys, steps
	case "mcpToolCall":
		return []string{it.ID}, []translate.Step{translate.ToolStep("mcp: "+it.Server+"/"+stringOf(it.Tool), "")}
	case "dynamicToolCall":
		name := stringOf(it.Tool)
		if it.Namespace != nil && *it.Namespace != "" {
			name = *it.Namespace + "/" + name
		}
		return []string{it.ID}, []translate.Step{translate.ToolStep(name, "")}
	case "collabAgentToolCall":
		return []string{it.ID}, []translate.Step{translate.ToolStep("agent: "+stringOf(it.Tool), "")}
	case "webSearch":
		return []string{it.ID}, []translate.Step{translate.ToolStep("web_search", "")}
	case "imageView":
		return []string{it.ID}, []translate.Step{translate.ToolStep("view_image", translate.Rel(p.workspace, it.Path))}
	case "imageGeneration":
		return []string{it.ID}, []translate.Step{translate.ToolStep("image_generation", "")}
	}
	return nil, nil
}

func changeName(kind string) string {
	switch kind {
	case "add":
		return "add file"
	case "delete":
		return "delete file"
	}
	return "edit file"
}

func (p *Parser) itemStarted(params json.RawMessage) ([]protocol.Event, string) {
	it, ok := decodeItem(params)
	if !ok {
		return nil, "skipped item/started without an item"
	}
	keys, steps := p.starts(it)
	var out []protocol.Event
	for i, k := range keys {
		out = append(out, p.steps.Add(k, steps[i]))
	}
	return out, ""
}

func (p *Parser) itemCompleted(params json.RawMessage) ([]protocol.Event, string) {
	it, ok := decodeItem(params)
	if !ok {
		return nil, "skipped item/completed without an item"
	}
	if it.Type == "agentMessage" {
		if strings.TrimSpace(it.Text) == "" {
			return nil, ""
		}
		return []protocol.Event{protocol.TextEvent{Content: translate.Cut(it.Text)}}, ""
	}
	keys, fresh := p.starts(it)
	var out []protocol.Event
	for i, k := range keys {
		s, ok := p.steps.Take(k)
		if !ok { // completed without a start we saw: it still happened
			s = fresh[i]
			out = append(out, s.Start())
		}
		out = append(out, p.done(it, i, s))
	}
	return out, ""
}

// done is the end event of step i of a completed item.
func (p *Parser) done(it item, i int, s translate.Step) protocol.Event {
	failed := it.Status == "failed" || it.Status == "declined"
	switch it.Type {
	case "commandExecution":
		out := ""
		if it.AggregatedOutput != nil {
			out = *it.AggregatedOutput
		}
		if it.Status == "declined" && out == "" {
			out = "declined"
		}
		if failed {
			// The output of a failed command is stdout and stderr together.
			return s.Done(true, "", "", out, it.ExitCode)
		}
		return s.Done(false, "", out, "", it.ExitCode)
	case "fileChange":
		return s.Done(failed, it.Changes[i].Diff, "", "", nil)
	case "mcpToolCall":
		if it.Error != nil {
			return s.Done(true, it.Error.Message, "", "", nil)
		}
		var parts []string
		if it.Result != nil {
			for _, c := range it.Result.Content {
				var b struct {
					Type string `json:"type"`
					Text string `json:"text"`
				}
				if json.Unmarshal(c, &b) == nil && b.Type == "text" {
					parts = append(parts, b.Text)
				}
			}
		}
		return s.Done(failed, strings.Join(parts, "\n"), "", "", nil)
	case "dynamicToolCall":
		var parts []string
		for _, c := range it.ContentItems {
			if c.Type == "inputText" {
				parts = append(parts, c.Text)
			}
		}
		return s.Done(failed || (it.Success != nil && !*it.Success), strings.Join(parts, "\n"), "", "", nil)
	case "webSearch":
		return s.Done(failed, it.Query, "", "", nil)
	case "collabAgentToolCall":
		out := ""
		if it.Prompt != nil {
			out = *it.Prompt
		}
		return s.Done(failed, out, "", "", nil)
	}
	return s.Done(failed, "", "", "", nil)
}

// End returns the events that close a stream that stopped (the server
// exited or was stopped) during a turn: its open steps fail, and the agent is
// idle. Nothing between turns.
func (p *Parser) End(reason string) []protocol.Event {
	if p.turn == "" && p.steps.Len() == 0 {
		return nil
	}
	p.turn = ""
	return append(p.steps.Abandon(reason), protocol.StatusEvent{State: protocol.StateIdle})
}

func (p *Parser) turnCompleted(params json.RawMessage) []protocol.Event {
	var v struct {
		Turn struct {
			Status string `json:"status"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		} `json:"turn"`
	}
	_ = json.Unmarshal(params, &v)
	p.turn = ""
	reason := "the turn ended before the item completed"
	if v.Turn.Status == "interrupted" {
		reason = "interrupted"
	}
	out := p.steps.Abandon(reason)
	if v.Turn.Status == "failed" && v.Turn.Error != nil && v.Turn.Error.Message != "" {
		out = append(out, protocol.TextEvent{Content: translate.Cut("Error: " + errorMessage(v.Turn.Error.Message))})
	}
	return append(out, protocol.StatusEvent{State: protocol.StateIdle, ContextPct: translate.Ratio(p.context, p.window)})
}

// errorMessage is the message inside an upstream error body that Codex
// passes on whole, e.g. {"error":{"message":"...","type":"..."}}.
func errorMessage(s string) string {
	var v struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if strings.HasPrefix(s, "{") && json.Unmarshal([]byte(s), &v) == nil && v.Error.Message != "" {
		return v.Error.Message
	}
	return s
}

func stringOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.Trim(string(raw), `"`)
}

var shellWrapper = regexp.MustCompile(`^(?:/[\w/.-]*/)?(?:ba|z|da)?sh -l?c (.+)$`)

// unwrapShell shows the command codex ran through a shell the way the
// model wrote it: "/bin/bash -lc 'cat a.go'" → "cat a.go". Anything that is
// not one shell word after the wrapper is returned unchanged.
func unwrapShell(cmd string) string {
	m := shellWrapper.FindStringSubmatch(cmd)
	if m == nil {
		return cmd
	}
	if w, ok := oneWord(m[1]); ok {
		return w
	}
	return cmd
}

// oneWord parses s as exactly one POSIX shell word (quotes and backslashes).
func oneWord(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", false
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return "", false
			}
		case '\\':
			if i+1 >= len(s) {
				return "", false
			}
			i++
			b.WriteByte(s[i])
		case ' ', '\t', '\n', ';', '&', '|', '<', '>', '(', ')', '$', '`':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}
