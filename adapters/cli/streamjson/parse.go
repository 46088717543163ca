// Package streamjson translates the "stream-json" output of Claude Code, Amp
// and Cursor into FAP events. The three share one shape (system init,
// assistant and user messages with content blocks, a result per turn); they
// differ in their tool names and in how Cursor reports tool calls (a
// tool_call event instead of tool_use and tool_result blocks), which a
// Dialect says.
//
// Sources of the formats:
//   - Claude Code: SDKMessage in sdk.d.ts of npm @anthropic-ai/claude-agent-sdk@0.3.330
//     (the SDK of @anthropic-ai/claude-code@2.1.330), tool inputs and outputs in
//     sdk-tools.d.ts of @anthropic-ai/claude-code@2.1.330, and transcripts recorded
//     from that CLI (testdata/claude).
//   - Amp: StreamMessage in dist/types.d.ts of npm @sourcegraph/amp-sdk@0.1.0-20260126121723-gc94da34.
//   - Cursor: https://cursor.com/docs/cli/reference/output-format ("Stream JSON format").
package streamjson

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/filepath-dev/filepath/adapters/cli/translate"
	"github.com/filepath-dev/filepath/protocol"
)

// Dialect is the vendor whose stream a Parser reads.
type Dialect int

// The dialects.
const (
	Claude Dialect = iota
	Amp
	Cursor
)

func (d Dialect) String() string {
	switch d {
	case Amp:
		return "amp"
	case Cursor:
		return "cursor"
	}
	return "claude"
}

// Parser turns one CLI's stream, line by line, into FAP events. It keeps what
// spans lines: the tool calls started and not yet answered, the session id,
// the context used by the last model call. It does no I/O. Not safe for
// concurrent use.
type Parser struct {
	dialect   Dialect
	workspace string
	steps     translate.Steps
	session   string
	model     string
	lastText  string  // the last text emitted in this turn
	inTurn    bool    // a turn has begun and its result has not come
	context   float64 // tokens in the context window after the last main-thread model call
}

// NewParser returns a Parser of dialect d; paths inside workspace are
// reported relative to it.
func NewParser(d Dialect, workspace string) *Parser {
	return &Parser{dialect: d, workspace: workspace}
}

// SessionID is the CLI's session (Claude, Cursor) or thread (Amp) id, once
// a line has carried it.
func (p *Parser) SessionID() string { return p.session }

// line is the union of the fields this package reads from any message.
type line struct {
	Type            string          `json:"type"`
	Subtype         string          `json:"subtype"`
	SessionID       string          `json:"session_id"`
	Model           string          `json:"model"`
	ParentToolUseID *string         `json:"parent_tool_use_id"`
	Message         *apiMessage     `json:"message"`
	ToolUseResult   json.RawMessage `json:"tool_use_result"`
	IsError         bool            `json:"is_error"`
	Result          json.RawMessage `json:"result"`
	Error           json.RawMessage `json:"error"`
	ModelUsage      map[string]struct {
		ContextWindow float64 `json:"contextWindow"`
	} `json:"modelUsage"`
	// Cursor's tool_call events.
	CallID   string                     `json:"call_id"`
	ToolCall map[string]json.RawMessage `json:"tool_call"`
}

type apiMessage struct {
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
	Usage   *struct {
		Input         float64 `json:"input_tokens"`
		CacheRead     float64 `json:"cache_read_input_tokens"`
		CacheCreation float64 `json:"cache_creation_input_tokens"`
		Output        float64 `json:"output_tokens"`
	} `json:"usage"`
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// Parse translates one line of the stream. It returns the events the line
// makes (none for most bookkeeping lines) and, when the line was skipped or
// only partly understood, a note saying why, for a debug log.
func (p *Parser) Parse(raw []byte) (events []protocol.Event, note string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, ""
	}
	var l line
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, "not a JSON message: " + err.Error()
	}
	if l.SessionID != "" {
		p.session = l.SessionID
	}
	switch l.Type {
	case "assistant", "user", "tool_call":
		p.inTurn = true
	}
	switch l.Type {
	case "system":
		if l.Subtype == "init" {
			if l.Model != "" {
				p.model = l.Model
			}
			return nil, ""
		}
		return nil, "skipped system/" + l.Subtype
	case "assistant":
		return p.assistant(l)
	case "user":
		return p.user(l)
	case "tool_call":
		return p.toolCall(l)
	case "result":
		return p.result(l), ""
	case "":
		return nil, "skipped a message without a type"
	}
	return nil, "skipped message type " + strconv.Quote(l.Type)
}

func blocks(raw json.RawMessage) []block {
	var bs []block
	if len(raw) > 0 && raw[0] == '[' {
		if json.Unmarshal(raw, &bs) == nil {
			return bs
		}
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return []block{{Type: "text", Text: s}}
	}
	return nil
}

func (p *Parser) assistant(l line) ([]protocol.Event, string) {
	if l.Message == nil {
		return nil, "skipped an assistant message without a message"
	}
	sub := l.ParentToolUseID != nil && *l.ParentToolUseID != ""
	if !sub {
		if m := l.Message.Model; m != "" && !strings.HasPrefix(m, "<") {
			p.model = m
		}
		// Claude repeats the usage of an API call on every content block of
		// it: take the latest, never a sum.
		if u := l.Message.Usage; u != nil {
			if used := u.Input + u.CacheRead + u.CacheCreation + u.Output; used > 0 {
				p.context = used
			}
		}
	}
	var out []protocol.Event
	for _, b := range blocks(l.Message.Content) {
		switch b.Type {
		case "text":
			// A sub-agent's prose is its own; its report reaches the user
			// through its tool's result.
			if sub || strings.TrimSpace(b.Text) == "" {
				continue
			}
			out = append(out, protocol.TextEvent{Content: translate.Cut(b.Text)})
			p.lastText = b.Text
		case "tool_use", "server_tool_use":
			out = append(out, p.steps.Add(b.ID, p.step(b.Name, b.Input)))
		}
	}
	return out, ""
}

// inputs are the tool input fields the dialects use.
type inputs struct {
	Command      string `json:"command"`
	Cmd          string `json:"cmd"`
	FilePath     string `json:"file_path"`
	NotebookPath string `json:"notebook_path"`
	Path         string `json:"path"`
	Description  string `json:"description"`
}

// step classifies a tool_use block as a command or a tool.
func (p *Parser) step(name string, raw json.RawMessage) translate.Step {
	var in inputs
	_ = json.Unmarshal(raw, &in)
	switch {
	case p.dialect == Claude && name == "Bash":
		return translate.CommandStep(in.Command)
	case p.dialect == Amp && name == "Bash":
		return translate.CommandStep(in.Cmd)
	case p.dialect == Claude && (name == "Task" || name == "Agent"):
		n := name
		if in.Description != "" {
			n += ": " + in.Description
		}
		return translate.ToolStep(n, "")
	}
	path := in.FilePath
	if path == "" {
		path = in.NotebookPath
	}
	if path == "" {
		path = in.Path
	}
	return translate.ToolStep(name, translate.Rel(p.workspace, path))
}

func (p *Parser) user(l line) ([]protocol.Event, string) {
	if l.Message == nil {
		return nil, "skipped a user message without a message"
	}
	var out []protocol.Event
	var notes []string
	for _, b := range blocks(l.Message.Content) {
		if b.Type != "tool_result" {
			continue
		}
		s, ok := p.steps.Take(b.ToolUseID)
		if !ok {
			notes = append(notes, "skipped the result of unknown tool call "+strconv.Quote(b.ToolUseID))
			continue
		}
		out = append(out, p.toolResult(s, b, l.ToolUseResult))
	}
	return out, strings.Join(notes, "; ")
}

var exitCodeRe = regexp.MustCompile(`^Exit code (-?\d+)\n?`)

// toolResult pairs a tool_result block with its step.
func (p *Parser) toolResult(s translate.Step, b block, extra json.RawMessage) protocol.Event {
	text := resultText(b.Content)
	if s.Command == nil {
		if out, ok := taskReport(extra); ok {
			text = out
		}
		if b.IsError {
			text = cleanError(text)
		}
		return s.Done(b.IsError, text, "", "", nil)
	}
	if p.dialect == Amp {
		return ampCommandResult(s, b.IsError, text)
	}
	// Claude: a command that ran reports {stdout, stderr} in
	// tool_use_result; one that failed reports "Exit code N\n" and its
	// output (stdout and stderr together) as an error.
	if !b.IsError {
		var r struct {
			Stdout      *string `json:"stdout"`
			Stderr      string  `json:"stderr"`
			Interrupted bool    `json:"interrupted"`
		}
		if json.Unmarshal(extra, &r) == nil && r.Stdout != nil {
			if r.Interrupted {
				return s.Done(true, "", *r.Stdout, r.Stderr, nil)
			}
			return s.Done(false, "", *r.Stdout, r.Stderr, translate.Num(0))
		}
		return s.Done(false, "", text, "", translate.Num(0))
	}
	if m := exitCodeRe.FindStringSubmatch(text); m != nil {
		code, _ := strconv.ParseFloat(m[1], 64)
		return s.Done(true, "", "", text[len(m[0]):], translate.Num(code))
	}
	return s.Done(true, "", "", cleanError(text), nil)
}

// ampCommandResult reads Amp's Bash result: a JSON object with the output
// and the exit code, or an error text.
func ampCommandResult(s translate.Step, isError bool, text string) protocol.Event {
	var r struct {
		Output   string   `json:"output"`
		ExitCode *float64 `json:"exitCode"`
	}
	if strings.HasPrefix(strings.TrimSpace(text), "{") && json.Unmarshal([]byte(text), &r) == nil && r.ExitCode != nil {
		return s.Done(isError || *r.ExitCode != 0, "", r.Output, "", r.ExitCode)
	}
	if isError {
		return s.Done(true, "", "", text, nil)
	}
	return s.Done(false, "", text, "", nil)
}

// taskReport is the final report of a Claude sub-agent: the text blocks of
// its tool_use_result, without the harness's tags.
func taskReport(extra json.RawMessage) (string, bool) {
	var r struct {
		Content []block `json:"content"`
	}
	if len(extra) == 0 || extra[0] != '{' || json.Unmarshal(extra, &r) != nil || len(r.Content) == 0 {
		return "", false
	}
	var parts []string
	for _, b := range r.Content {
		if t := strings.TrimSpace(b.Text); b.Type == "text" && t != "" && !strings.HasPrefix(t, "<") {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n"), len(parts) > 0
}

// resultText is the text of a tool_result's content: a string or text blocks.
func resultText(raw json.RawMessage) string {
	var parts []string
	for _, b := range blocks(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// cleanError drops the <tool_use_error> wrapper Claude puts around a tool's
// error message.
func cleanError(s string) string {
	s = strings.TrimSpace(s)
	if t, ok := strings.CutPrefix(s, "<tool_use_error>"); ok {
		s = strings.TrimSpace(strings.TrimSuffix(t, "</tool_use_error>"))
	}
	return s
}

// End returns the events that close a stream that stopped (the CLI exited or
// was stopped) in the middle of a turn: its open steps fail, and the agent
// is idle. Nothing when no turn was running.
func (p *Parser) End(reason string) []protocol.Event {
	if !p.inTurn && p.steps.Len() == 0 {
		return nil
	}
	p.inTurn, p.lastText = false, ""
	return append(p.steps.Abandon(reason), protocol.StatusEvent{State: protocol.StateIdle})
}

func (p *Parser) result(l line) []protocol.Event {
	p.inTurn = false
	out := p.steps.Abandon("the turn ended before the tool answered")
	// An error the CLI did not already say as assistant text (Claude says
	// most of them that way; Amp and Cursor put them on the result).
	if l.IsError {
		msg := stringOf(l.Result)
		if msg == "" {
			msg = stringOf(l.Error)
		}
		if msg != "" && msg != p.lastText {
			out = append(out, protocol.TextEvent{Content: translate.Cut("Error: " + msg)})
		}
	}
	st := protocol.StatusEvent{State: protocol.StateIdle}
	if p.dialect == Claude {
		st.ContextPct = translate.Ratio(p.context, p.contextWindow(l))
	}
	p.lastText = ""
	return append(out, st)
}

// contextWindow is the main model's window from the result's modelUsage
// (the largest one when the main model is not listed).
func (p *Parser) contextWindow(l line) float64 {
	if u, ok := l.ModelUsage[p.model]; ok && u.ContextWindow > 0 {
		return u.ContextWindow
	}
	w := 0.0
	for _, u := range l.ModelUsage {
		w = max(w, u.ContextWindow)
	}
	return w
}

func stringOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	return ""
}

// toolCall reads Cursor's tool_call events: {"subtype": "started" or
// "completed", "call_id", "tool_call": {"<kind>ToolCall": {"args", "result"}}}.
func (p *Parser) toolCall(l line) ([]protocol.Event, string) {
	kind, body, ok := single(l.ToolCall)
	if !ok {
		return nil, "skipped a tool_call without one tool"
	}
	var c struct {
		Args   json.RawMessage            `json:"args"`
		Result map[string]json.RawMessage `json:"result"`
		// "function" tool calls
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	_ = json.Unmarshal(body, &c)
	switch l.Subtype {
	case "started":
		return []protocol.Event{p.steps.Add(l.CallID, p.cursorStep(kind, c.Name, c.Args))}, ""
	case "completed":
		s, ok := p.steps.Take(l.CallID)
		if !ok {
			// A completed call whose start we did not see still happened.
			s = p.cursorStep(kind, c.Name, c.Args)
		}
		return []protocol.Event{cursorResult(s, c.Result)}, ""
	}
	return nil, "skipped tool_call/" + l.Subtype
}

func single(m map[string]json.RawMessage) (string, json.RawMessage, bool) {
	for k, v := range m {
		if len(m) == 1 {
			return k, v, true
		}
		// Later versions add fields beside the tool; the tool is the key
		// ending in ToolCall.
		if strings.HasSuffix(k, "ToolCall") || k == "function" {
			return k, v, true
		}
	}
	return "", nil, false
}

func (p *Parser) cursorStep(kind, fnName string, raw json.RawMessage) translate.Step {
	var a struct {
		Command         string `json:"command"`
		Path            string `json:"path"`
		TargetDirectory string `json:"targetDirectory"`
		ToolName        string `json:"toolName"`
		Server          string `json:"providerIdentifier"`
	}
	_ = json.Unmarshal(raw, &a)
	if kind == "shellToolCall" {
		return translate.CommandStep(a.Command)
	}
	name := strings.TrimSuffix(kind, "ToolCall")
	switch {
	case kind == "function":
		name = fnName
	case kind == "mcpToolCall" && a.ToolName != "":
		name = "mcp: " + strings.TrimPrefix(a.Server+"/", "/") + a.ToolName
	}
	path := a.Path
	if path == "" {
		path = a.TargetDirectory
	}
	return translate.ToolStep(name, translate.Rel(p.workspace, path))
}

// cursorResult reads a completed tool call's result: {"success": {...}},
// {"failure": {...}}, {"rejected": {...}} or {"error": {...}}.
func cursorResult(s translate.Step, result map[string]json.RawMessage) protocol.Event {
	var r struct {
		ExitCode *float64 `json:"exitCode"`
		Stdout   string   `json:"stdout"`
		Stderr   string   `json:"stderr"`
		Content  string   `json:"content"`
		Message  string   `json:"message"`
		Error    string   `json:"error"`
		Reason   string   `json:"reason"`
	}
	outcome := "unknown result"
	for _, k := range []string{"success", "failure", "rejected", "error"} {
		if body, ok := result[k]; ok {
			outcome = k
			_ = json.Unmarshal(body, &r)
			break
		}
	}
	failed := outcome != "success"
	if s.Command != nil {
		if r.ExitCode != nil && *r.ExitCode != 0 {
			failed = true
		}
		stderr := r.Stderr
		if failed && stderr == "" {
			stderr = firstOf(r.Message, r.Error, r.Reason, outcome)
		}
		return s.Done(failed, "", r.Stdout, stderr, r.ExitCode)
	}
	if failed {
		return s.Done(true, firstOf(r.Message, r.Error, r.Reason, outcome), "", "", nil)
	}
	return s.Done(false, r.Content, "", "", nil)
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
