package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	approvals "github.com/filepath-dev/filepath/adapters/internal/approval"
	"github.com/filepath-dev/filepath/protocol"
)

// tool is one function the model may call.
type tool struct {
	spec functionSpec
	run  func(ctx context.Context, t *toolbox, args json.RawMessage) string
}

// toolbox runs the model's tool calls and reports each as FAP events. It is
// used by the agent's loop goroutine only.
type toolbox struct {
	ws          *workspace
	sh          *shell
	out         *emitter
	tools       map[string]tool
	names       []string // in the order they are offered
	bashTimeout time.Duration
	bashMax     time.Duration
	agentType   string   // the default agent of a spawn
	changed     []string // files written or edited in this session (for a composed handoff)
	api         *apiClient
	asker       *approvals.Client // the approvals of the agent API
	policies    map[string]string // the node's approvals policy by kind, read once (policy)
	log         *slog.Logger
}

// catalogAgents are the agent types a spawn may name (the orchestrator's
// catalog, besides custom).
var catalogAgents = []string{"shelley", "pi", "claude-code", "codex", "cursor", "amp"}

func schema(s string) json.RawMessage { return json.RawMessage(s) }

// allTools lists every tool; a persona offers a subset.
var allTools = map[string]tool{
	"read_file": {spec: functionSpec{Name: "read_file",
		Description: fmt.Sprintf("Read a text file of the workspace. Lines come numbered (number, tab, text). At most %d lines per call; use offset (1-based first line) and limit to page through long files.", readMaxLines),
		Parameters: schema(`{"type":"object","properties":{
"path":{"type":"string","description":"relative to /workspace, or absolute under it"},
"offset":{"type":"integer","description":"first line to show, 1-based (default 1)"},
"limit":{"type":"integer","description":"how many lines to show (default and maximum 2000)"}},
"required":["path"],"additionalProperties":false}`)},
		run: runReadFile},
	"write_file": {spec: functionSpec{Name: "write_file",
		Description: "Create a file with the given content, or replace a whole file you have read in this session. Parent directories are created.",
		Parameters: schema(`{"type":"object","properties":{
"path":{"type":"string","description":"relative to /workspace, or absolute under it"},
"content":{"type":"string","description":"the complete new content"}},
"required":["path","content"],"additionalProperties":false}`)},
		run: runWriteFile},
	"edit_file": {spec: functionSpec{Name: "edit_file",
		Description: "Replace exact text in a file you have read in this session. old_string must match the file exactly (whitespace included) and occur once, unless replace_all is true.",
		Parameters: schema(`{"type":"object","properties":{
"path":{"type":"string","description":"relative to /workspace, or absolute under it"},
"old_string":{"type":"string","description":"the exact text to replace"},
"new_string":{"type":"string","description":"the text to put in its place"},
"replace_all":{"type":"boolean","description":"replace every occurrence (default false)"}},
"required":["path","old_string","new_string"],"additionalProperties":false}`)},
		run: runEditFile},
	"bash": {spec: functionSpec{Name: "bash",
		Description: "Run a command with bash -c in /workspace. No terminal and no stdin: nothing interactive. Output is cut in the middle when long. Commands that run past the timeout are killed with everything they started.",
		Parameters: schema(`{"type":"object","properties":{
"command":{"type":"string","description":"the command line"},
"timeout":{"type":"integer","description":"seconds before the command is killed (the default and maximum are in the tool's description)"}},
"required":["command"],"additionalProperties":false}`)},
		run: runBash},
	"glob": {spec: functionSpec{Name: "glob",
		Description: fmt.Sprintf("List the paths under /workspace that match a pattern: * and ? within a name, [abc] classes, ** for any number of directories (e.g. **/*.go, src/**/test_*.py). Directories end with /. .git is skipped unless the pattern names it. At most %d results.", globMaxResults),
		Parameters: schema(`{"type":"object","properties":{
"pattern":{"type":"string","description":"a glob relative to /workspace"}},
"required":["pattern"],"additionalProperties":false}`)},
		run: runGlob},
	"grep": {spec: functionSpec{Name: "grep",
		Description: fmt.Sprintf("Search file contents for a regular expression (Go RE2 syntax, e.g. func \\w+Handler, (?i)todo). Prints path:line: text for each matching line, at most %d. Binary files and .git are skipped.", grepMaxMatches),
		Parameters: schema(`{"type":"object","properties":{
"pattern":{"type":"string","description":"the regular expression"},
"path":{"type":"string","description":"a file or directory to search (default: the whole workspace)"}},
"required":["pattern"],"additionalProperties":false}`)},
		run: runGrep},
	"git": {spec: functionSpec{Name: "git",
		Description: "Run git in /workspace with the given arguments (no pager, no editor: commit with -m). Example: {\"args\": [\"commit\", \"-am\", \"fix the parser\"]}.",
		Parameters: schema(`{"type":"object","properties":{
"args":{"type":"array","items":{"type":"string"},"description":"the arguments after git, one per item"}},
"required":["args"],"additionalProperties":false}`)},
		run: runGit},
	"spawn": {spec: functionSpec{Name: "spawn",
		Description: "Start a child agent in its own container on the same workspace, with a task. It works in parallel; when it finishes you get a system message \"NAME finished: SUMMARY\" (or use wait_for_children). Agents: " + strings.Join(catalogAgents, ", ") + " (default: your own kind).",
		Parameters: schema(`{"type":"object","properties":{
"name":{"type":"string","description":"a short name for the child (empty: one is made up)"},
"agent":{"type":"string","description":"the child's agent type (default: your own)"},
"model":{"type":"string","description":"the child's model (default: the agent type's default)"},
"task":{"type":"string","description":"what the child is to do, self-contained: it does not see your conversation"}},
"required":["name","task"],"additionalProperties":false}`)},
		run: runSpawn},
}

func init() {
	for n, tl := range collabTools {
		allTools[n] = tl
	}
}

// specs returns the function tools offered to the model.
func (t *toolbox) specs() []toolSpec {
	out := make([]toolSpec, 0, len(t.names))
	for _, n := range t.names {
		out = append(out, toolSpec{Type: "function", Function: t.tools[n].spec})
	}
	return out
}

// call runs one tool call and returns the result for the model. Every path
// returns a result, also for an unknown tool or bad arguments.
func (t *toolbox) call(ctx context.Context, c toolCall) string {
	tl, ok := t.tools[c.Function.Name]
	if !ok {
		msg := fmt.Sprintf("error: there is no tool %q; the tools are %s", c.Function.Name, strings.Join(t.names, ", "))
		t.out.tool(c.Function.Name, "", protocol.StepError, msg)
		return msg
	}
	args := json.RawMessage(c.Function.Arguments)
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		msg := fmt.Sprintf("error: the arguments of %s are not valid JSON: %s", c.Function.Name, cut(c.Function.Arguments, 500))
		t.out.tool(c.Function.Name, "", protocol.StepError, msg)
		return msg
	}
	return tl.run(ctx, t, args)
}

// decodeArgs decodes a tool's arguments strictly (unknown fields are an
// error the model can correct).
func decodeArgs(args json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(args))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("bad arguments: %v", err)
	}
	return nil
}

// fileTool runs a file tool between tool start and done (or error) events.
func (t *toolbox) fileTool(name, path string, f func() (rel, out string, err error)) string {
	t.out.tool(name, path, protocol.StepStart, "")
	rel, out, err := f()
	if rel == "" {
		rel = path
	}
	if err != nil {
		msg := "error: " + err.Error()
		t.out.tool(name, rel, protocol.StepError, msg)
		return msg
	}
	if (name == "write_file" || name == "edit_file") && !slices.Contains(t.changed, rel) {
		t.changed = append(t.changed, rel)
	}
	t.out.tool(name, rel, protocol.StepDone, out)
	return out
}

func argsError(t *toolbox, name string, err error) string {
	msg := "error: " + err.Error()
	t.out.tool(name, "", protocol.StepError, msg)
	return msg
}

func runReadFile(_ context.Context, t *toolbox, args json.RawMessage) string {
	var a struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return argsError(t, "read_file", err)
	}
	return t.fileTool("read_file", a.Path, func() (string, string, error) { return t.ws.readFile(a.Path, a.Offset, a.Limit) })
}

func runWriteFile(_ context.Context, t *toolbox, args json.RawMessage) string {
	var a struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return argsError(t, "write_file", err)
	}
	if a.Content == nil {
		return argsError(t, "write_file", errors.New("content is required (it may be empty)"))
	}
	return t.fileTool("write_file", a.Path, func() (string, string, error) { return t.ws.writeFile(a.Path, *a.Content) })
}

func runEditFile(_ context.Context, t *toolbox, args json.RawMessage) string {
	var a struct {
		Path       string `json:"path"`
		OldString  string `json:"old_string"`
		NewString  string `json:"new_string"`
		ReplaceAll bool   `json:"replace_all"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return argsError(t, "edit_file", err)
	}
	return t.fileTool("edit_file", a.Path, func() (string, string, error) {
		return t.ws.editFile(a.Path, a.OldString, a.NewString, a.ReplaceAll)
	})
}

func runGlob(_ context.Context, t *toolbox, args json.RawMessage) string {
	var a struct {
		Pattern string `json:"pattern"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return argsError(t, "glob", err)
	}
	return t.fileTool("glob", a.Pattern, func() (string, string, error) {
		out, err := t.ws.glob(a.Pattern)
		return a.Pattern, out, err
	})
}

func runGrep(_ context.Context, t *toolbox, args json.RawMessage) string {
	var a struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return argsError(t, "grep", err)
	}
	return t.fileTool("grep", a.Path, func() (string, string, error) { return t.ws.grep(a.Pattern, a.Path) })
}

func runBash(ctx context.Context, t *toolbox, args json.RawMessage) string {
	var a struct {
		Command string   `json:"command"`
		Timeout *float64 `json:"timeout"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return argsError(t, "bash", err)
	}
	if strings.TrimSpace(a.Command) == "" {
		return argsError(t, "bash", errors.New("command is required"))
	}
	timeout, note := t.bashTimeout, ""
	if a.Timeout != nil && *a.Timeout > 0 {
		timeout = time.Duration(*a.Timeout * float64(time.Second))
		if timeout > t.bashMax {
			timeout, note = t.bashMax, fmt.Sprintf("(timeout lowered to the maximum, %s)\n", t.bashMax)
		}
	}
	if refusal := t.gate(ctx, a.Command, a.Command); refusal != "" {
		return note + refusal
	}
	return note + t.command(ctx, a.Command, []string{"bash", "-c", a.Command}, timeout)
}

func runGit(ctx context.Context, t *toolbox, args json.RawMessage) string {
	var a struct {
		Args json.RawMessage `json:"args"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return argsError(t, "git", err)
	}
	var list []string
	if err := json.Unmarshal(a.Args, &list); err != nil {
		// Some models send one string; split it like a shell would.
		var s string
		if json.Unmarshal(a.Args, &s) != nil {
			return argsError(t, "git", errors.New("args must be an array of strings"))
		}
		var err error
		if list, err = splitArgs(s); err != nil {
			return argsError(t, "git", fmt.Errorf("args: %v", err))
		}
	}
	if len(list) > 0 && list[0] == "git" {
		list = list[1:]
	}
	if len(list) == 0 {
		return argsError(t, "git", errors.New("args is empty: give a git command, e.g. [\"status\"]"))
	}
	argv := append([]string{"git", "--no-pager", "-c", "core.editor=true", "-c", "core.pager=cat"}, list...)
	display := "git " + shellQuote(list)
	if refusal := t.gate(ctx, display, display); refusal != "" {
		return refusal
	}
	return t.command(ctx, display, argv, t.bashTimeout)
}

// command runs argv between command start and done (or error) events.
func (t *toolbox) command(ctx context.Context, display string, argv []string, timeout time.Duration) string {
	t.out.emit(protocol.CommandEvent{Cmd: display, Status: protocol.StepStart})
	r := t.sh.run(ctx, argv, timeout)
	ev := protocol.CommandEvent{Cmd: display, Status: protocol.StepDone}
	if r.Err != nil || r.TimedOut || r.Stopped {
		ev.Status = protocol.StepError
	}
	exit := float64(r.Exit)
	ev.Exit = &exit
	stdout, stderr := cut(r.Stdout, maxToolOutput), cut(r.Stderr, maxToolOutput)
	switch {
	case r.Err != nil:
		stderr = r.Err.Error()
	case r.TimedOut:
		stderr = cut(stderr+fmt.Sprintf("\n[timed out after %s: killed]", timeout), maxToolOutput)
	case r.Stopped:
		stderr = cut(stderr+"\n[stopped]", maxToolOutput)
	}
	if stdout != "" {
		ev.Stdout = &stdout
	}
	if stderr != "" {
		ev.Stderr = &stderr
	}
	t.out.emit(ev)
	return r.report(timeout)
}

// shellQuote joins args for display, quoting those that need it.
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

const maxSpawnTask = 32 << 10

func runSpawn(ctx context.Context, t *toolbox, args json.RawMessage) string {
	var a struct {
		Name  string `json:"name"`
		Agent string `json:"agent"`
		Model string `json:"model"`
		Task  string `json:"task"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return argsError(t, "spawn", err)
	}
	switch {
	case len(a.Name) > 100:
		return argsError(t, "spawn", errors.New("name is over 100 characters"))
	case strings.TrimSpace(a.Task) == "":
		return argsError(t, "spawn", errors.New("task is required: the child knows only what it says"))
	case len(a.Task) > maxSpawnTask:
		return argsError(t, "spawn", fmt.Errorf("task is %d bytes, over %d: shorten it, or write the details to a file in the workspace and point to it", len(a.Task), maxSpawnTask))
	}
	if a.Agent == "" {
		a.Agent = t.agentType
	}
	// Through the agent API the child exists when the call returns (and
	// its id is known); without one, as a spawn event on stdout.
	if t.api != nil {
		var c child
		err := t.api.call(ctx, http.MethodPost, "/children", a, &c)
		switch {
		case err == nil && c.Status == "error":
			return fmt.Sprintf("spawned %s (id %s), but it failed to start: read_child_messages shows why.", c.Name, c.ID)
		case err == nil:
			return fmt.Sprintf("spawned %s (id %s, %s). It works in parallel on the same /workspace; you get a system message when it finishes, or use wait_for_children.", c.Name, c.ID, c.Agent)
		case !errors.Is(err, approvals.ErrNotServed):
			msg := "error: spawn failed: " + apiMessage(err)
			t.out.tool("spawn", a.Name, protocol.StepError, msg)
			return msg
		}
	}
	task := a.Task
	t.out.emit(protocol.SpawnEvent{Name: a.Name, Agent: a.Agent, Model: a.Model, Task: &task})
	name := a.Name
	if name == "" {
		name = "the child"
	}
	return fmt.Sprintf("spawn requested: filepath starts %s (%s) with this task. It works in parallel on the same /workspace; you get a system message when it finishes.", name, a.Agent)
}
