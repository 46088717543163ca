// Command filepath-fake-cli stands in for a vendor CLI in tests: it replays a
// transcript (a stream.jsonl of adapters/cli/testdata) the way the real CLI
// would, reading its stdin in the CLI's input mode, so the real adapter can
// be tested end to end, in a real container, where the CLI cannot run (Amp
// and Cursor need their vendors' services) or without an LLM (Claude Code,
// Codex).
//
// The CLI it plays is the name it is run as (amp, cursor-agent, claude,
// codex) or FILEPATH_FAKE_CLI; the transcript is FILEPATH_FAKE_TRANSCRIPT.
// It checks the arguments the adapter must pass and exits 2 when one is
// missing. A transcript is cut into turns after each result line (Claude,
// Amp, Cursor) or turn/completed notification (Codex); each message plays
// the next turn. Turns played are counted in a file under
// FILEPATH_FAKE_STATE (default: CLAUDE_CONFIG_DIR, CODEX_HOME or HOME), so a
// resumed session goes on where it stopped. Every message it is given is
// appended to inputs.jsonl there (one JSON string a line), for tests to
// check what reached the CLI. Lines starting with "#!" are directives:
//
//	#! hang        wait for an interrupt (Claude's control_request, Codex's
//	               turn/interrupt), then play the rest of the turn; Amp and
//	               Cursor wait for the end of stdin or a signal and exit
//	#! run SHELL   run a shell command in the working directory (to make the
//	               commit or the edit the transcript reports)
//	#! sleep MS    wait MS milliseconds
//	#! exit N MSG  write MSG to stderr and exit with code N
//	#! ask JSON    write JSON (Claude's can_use_tool control_request, a
//	               Codex approval request) and wait for its answer on stdin
//	               (a control_response with its request_id, a JSON-RPC
//	               response with its id); the answer is appended to
//	               answers.jsonl in the state directory; an interrupt while
//	               Claude waits withdraws it (control_cancel_request), the
//	               answer recorded as {"cancelled":true}
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	mode := os.Getenv("FILEPATH_FAKE_CLI")
	if mode == "" {
		mode = filepath.Base(os.Args[0])
	}
	f := &fake{mode: mode, args: os.Args[1:], out: bufio.NewWriter(os.Stdout)}
	os.Exit(f.main(os.Stdin))
}

type fake struct {
	mode   string
	args   []string
	out    *bufio.Writer
	turns  [][]string
	in     chan map[string]any // stdin messages; closed at EOF
	queue  []map[string]any    // messages read while a turn played
	state  string
	inputs string
}

func (f *fake) main(stdin io.Reader) int {
	path := os.Getenv("FILEPATH_FAKE_TRANSCRIPT")
	b, err := os.ReadFile(path)
	if err != nil {
		return f.fail(2, "fake %s: FILEPATH_FAKE_TRANSCRIPT: %v", f.mode, err)
	}
	f.turns = split(string(b), f.mode)
	f.state = f.stateFile()
	f.record("args.jsonl", f.args)
	if err := f.checkMCP(); err != nil {
		return f.fail(2, "fake %s: %v", f.mode, err)
	}
	switch f.mode {
	case "claude":
		return f.claude(stdin)
	case "codex":
		return f.codex(stdin)
	case "amp":
		return f.amp(stdin)
	case "cursor-agent", "cursor", "agent":
		return f.cursor()
	}
	return f.fail(2, "fake: unknown CLI %q (run as claude, codex, amp or cursor-agent, or set FILEPATH_FAKE_CLI)", f.mode)
}

func (f *fake) fail(code int, format string, a ...any) int {
	f.out.Flush()
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	return code
}

// split cuts a transcript into turns.
func split(s, mode string) [][]string {
	var turns [][]string
	var cur []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == "" || (strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "#!")) {
			continue
		}
		cur = append(cur, l)
		var m struct {
			Type   string `json:"type"`
			Method string `json:"method"`
		}
		json.Unmarshal([]byte(l), &m)
		if m.Type == "result" || m.Method == "turn/completed" {
			turns = append(turns, cur)
			cur = nil
		}
	}
	if len(cur) > 0 {
		turns = append(turns, cur)
	}
	return turns
}

func (f *fake) stateFile() string {
	dir := os.Getenv("FILEPATH_FAKE_STATE")
	for _, k := range []string{"CLAUDE_CONFIG_DIR", "CODEX_HOME", "HOME"} {
		if dir == "" {
			dir = os.Getenv(k)
		}
	}
	if dir == "" {
		dir = os.TempDir()
	}
	os.MkdirAll(dir, 0o700)
	f.inputs = filepath.Join(dir, "inputs.jsonl")
	return filepath.Join(dir, ".filepath-fake-"+filepath.Base(f.mode)+"-turn")
}

// got records a message the CLI was given.
func (f *fake) got(text string) {
	b, _ := json.Marshal(text)
	fh, err := os.OpenFile(f.inputs, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake: %v\n", err)
		return
	}
	defer fh.Close()
	fh.Write(append(b, '\n'))
}

// textOf is the text of a message's content: a string or text blocks.
func textOf(content any) string {
	switch c := content.(type) {
	case string:
		return c
	case []any:
		var parts []string
		for _, b := range c {
			if m, ok := b.(map[string]any); ok {
				if t, ok := m["text"].(string); ok {
					parts = append(parts, t)
				}
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// next returns the next turn to play and counts it.
func (f *fake) next() ([]string, bool) {
	b, _ := os.ReadFile(f.state)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if n >= len(f.turns) {
		return nil, false
	}
	os.WriteFile(f.state, []byte(strconv.Itoa(n+1)), 0o600)
	return f.turns[n], true
}

func (f *fake) played() int {
	b, _ := os.ReadFile(f.state)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func (f *fake) emit(line string) {
	f.out.WriteString(line)
	f.out.WriteByte('\n')
	f.out.Flush()
}

// directive runs a "#!" line; it returns hang for "#! hang" and exit >= 0
// for "#! exit".
func (f *fake) directive(l string) (hang bool, exit int) {
	cmd, arg, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(l, "#!")), " ")
	switch cmd {
	case "hang":
		return true, -1
	case "run":
		c := exec.Command("sh", "-c", arg)
		c.Stdout, c.Stderr = os.Stderr, os.Stderr
		if err := c.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "fake: #! run %s: %v\n", arg, err)
		}
	case "sleep":
		ms, _ := strconv.Atoi(arg)
		time.Sleep(time.Duration(ms) * time.Millisecond)
	case "ask":
		f.ask(arg)
	case "exit":
		n, msg, _ := strings.Cut(arg, " ")
		code, _ := strconv.Atoi(n)
		f.out.Flush()
		fmt.Fprintln(os.Stderr, msg)
		return false, code
	}
	return false, -1
}

// play writes a turn's lines; at "#! hang" it calls wait, and stops when
// wait says so. It returns an exit code >= 0 when the turn says to exit.
func (f *fake) play(turn []string, wait func() bool) int {
	for _, l := range turn {
		if !strings.HasPrefix(l, "#!") {
			f.emit(l)
			continue
		}
		hang, exit := f.directive(l)
		if exit >= 0 {
			return exit
		}
		if hang && !wait() {
			return -1
		}
	}
	return -1
}

func (f *fake) readStdin(stdin io.Reader) {
	f.in = make(chan map[string]any, 64)
	go func() {
		defer close(f.in)
		sc := bufio.NewScanner(stdin)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				fmt.Fprintf(os.Stderr, "fake %s: stdin line is not JSON: %v\n", f.mode, err)
				continue
			}
			f.in <- m
		}
	}()
}

// recv returns the next stdin message (queued ones first); false at EOF.
func (f *fake) recv() (map[string]any, bool) {
	if len(f.queue) > 0 {
		m := f.queue[0]
		f.queue = f.queue[1:]
		return m, true
	}
	m, ok := <-f.in
	return m, ok
}

func (f *fake) need(flags ...string) error {
	for _, fl := range flags {
		if !slices.Contains(f.args, fl) {
			return fmt.Errorf("fake %s: the adapter did not pass %s (args: %q)", f.mode, fl, f.args)
		}
	}
	return nil
}

func (f *fake) flag(name string) string {
	for i, a := range f.args {
		if a == name && i+1 < len(f.args) {
			return f.args[i+1]
		}
	}
	return ""
}

// session is the session id the transcript carries.
func (f *fake) session() string {
	for _, t := range f.turns {
		for _, l := range t {
			var m struct {
				SessionID string `json:"session_id"`
			}
			if json.Unmarshal([]byte(l), &m) == nil && m.SessionID != "" {
				return m.SessionID
			}
		}
	}
	return ""
}

func (f *fake) claude(stdin io.Reader) int {
	if err := f.need("-p", "--verbose", "--input-format", "--output-format", "stream-json"); err != nil {
		return f.fail(2, "%v", err)
	}
	if f.flag("--permission-prompt-tool") != "stdio" || slices.Contains(f.args, "--dangerously-skip-permissions") {
		return f.fail(2, "fake claude: want --permission-prompt-tool stdio (permission prompts to the adapter), got %q", f.args)
	}
	if id := f.flag("--resume"); id != "" && id != f.session() {
		f.emit(`{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,"session_id":` + strconv.Quote(id) + `}`)
		return f.fail(1, "No conversation found with session ID: %s", id)
	}
	f.readStdin(stdin)
	for {
		m, ok := f.recv()
		if !ok {
			return f.done()
		}
		switch m["type"] {
		case "user":
			msg, _ := m["message"].(map[string]any)
			f.got(textOf(msg["content"]))
			turn, ok := f.next()
			if !ok {
				return f.fail(1, "fake claude: the transcript has no turn %d", f.played()+1)
			}
			code := f.play(turn, func() bool { return f.waitInterrupt("control_request") })
			if code >= 0 {
				return code
			}
		case "control_request":
			f.emit(`{"type":"control_response","response":{"subtype":"success","request_id":` + strconv.Quote(fmt.Sprint(m["request_id"])) + `,"response":{"still_queued":[]}}}`)
		}
	}
}

// waitInterrupt waits during "#! hang" for a message of type typ (other
// messages are queued); false at the end of stdin.
func (f *fake) waitInterrupt(typ string) bool {
	for {
		m, ok := <-f.in
		if !ok {
			return false
		}
		if m["type"] == typ || m["method"] == typ {
			if id, ok := m["id"]; ok && typ == "turn/interrupt" {
				b, _ := json.Marshal(map[string]any{"id": id, "result": map[string]any{}})
				f.emit(string(b))
			}
			return true
		}
		f.queue = append(f.queue, m)
	}
}

// record appends v as a JSON line to the file name in the state directory.
func (f *fake) record(name string, v any) {
	b, _ := json.Marshal(v)
	fh, err := os.OpenFile(filepath.Join(filepath.Dir(f.inputs), name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake: %v\n", err)
		return
	}
	defer fh.Close()
	fh.Write(append(b, '\n'))
}

// checkMCP checks the MCP servers the CLI was given, as the CLI would
// read them: Claude Code's --mcp-config (a file of {"mcpServers": ...}),
// Amp's --mcp-config (JSON of the servers by name), Cursor's
// $HOME/.cursor/mcp.json (which needs --approve-mcps to be used
// headless). Each remote server needs a url; Claude's a type too.
func (f *fake) checkMCP() error {
	var doc map[string]map[string]struct {
		Type    string            `json:"type"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	var raw []byte
	switch f.mode {
	case "claude":
		if p := f.flag("--mcp-config"); p != "" {
			b, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("--mcp-config: %v", err)
			}
			raw = b
		}
	case "amp":
		if j := f.flag("--mcp-config"); j != "" {
			raw = []byte(`{"mcpServers":` + j + `}`)
		}
	case "cursor-agent", "cursor", "agent":
		b, err := os.ReadFile(filepath.Join(os.Getenv("HOME"), ".cursor", "mcp.json"))
		if err != nil {
			return nil
		}
		if !slices.Contains(f.args, "--approve-mcps") {
			return fmt.Errorf("~/.cursor/mcp.json without --approve-mcps: its servers wait for an approval nobody gives")
		}
		raw = b
	}
	if raw == nil {
		return nil
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("MCP config: %v", err)
	}
	for name, s := range doc["mcpServers"] {
		if s.URL == "" || (f.mode == "claude" && s.Type != "http") {
			return fmt.Errorf("MCP server %s: want a url (and type http for claude): %s", name, raw)
		}
	}
	f.record("mcp.jsonl", doc["mcpServers"])
	return nil
}

// ask writes a permission request and waits for its answer.
func (f *fake) ask(line string) {
	var req struct {
		RequestID string          `json:"request_id"`
		ID        json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal([]byte(line), &req); err != nil {
		fmt.Fprintf(os.Stderr, "fake: #! ask: %v\n", err)
		return
	}
	f.emit(line)
	for {
		m, ok := <-f.in
		if !ok {
			return
		}
		var answer any
		switch {
		case m["type"] == "control_response":
			r, _ := m["response"].(map[string]any)
			if r["request_id"] == req.RequestID {
				answer = r["response"]
			}
		case m["type"] == "control_request" && req.RequestID != "":
			// An interrupt while the prompt waits: Claude withdraws it.
			if r, _ := m["request"].(map[string]any); r["subtype"] == "interrupt" {
				f.emit(`{"type":"control_cancel_request","request_id":` + strconv.Quote(req.RequestID) + `}`)
				f.emit(`{"type":"control_response","response":{"subtype":"success","request_id":` + strconv.Quote(fmt.Sprint(m["request_id"])) + `,"response":{}}}`)
				answer = map[string]any{"cancelled": true}
			}
		case len(req.ID) > 0 && m["method"] == nil && m["id"] != nil:
			if id, _ := json.Marshal(m["id"]); string(id) == string(req.ID) {
				answer = m["result"]
				if answer == nil {
					answer = map[string]any{"error": m["error"]}
				}
			}
		}
		if answer == nil {
			f.queue = append(f.queue, m)
			continue
		}
		b, _ := json.Marshal(answer)
		fh, err := os.OpenFile(filepath.Join(filepath.Dir(f.inputs), "answers.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fh.Write(append(b, '\n'))
			fh.Close()
		}
		return
	}
}

func (f *fake) done() int {
	f.out.Flush()
	return 0
}

func (f *fake) amp(stdin io.Reader) int {
	if err := f.need("--execute", "--stream-json", "--stream-json-input"); err != nil {
		return f.fail(2, "%v", err)
	}
	resume := ""
	if i := slices.Index(f.args, "continue"); i > 0 && f.args[i-1] == "threads" && i+1 < len(f.args) {
		resume = f.args[i+1]
		if resume != f.session() {
			return f.fail(1, "Error: thread %s not found", resume)
		}
	}
	// The first turn holds the init line: say it at start, once per process.
	if len(f.turns) > 0 && len(f.turns[0]) > 0 && strings.Contains(f.turns[0][0], `"subtype":"init"`) {
		f.emit(f.turns[0][0])
		f.turns[0] = f.turns[0][1:]
	}
	f.readStdin(stdin)
	for {
		m, ok := f.recv()
		if !ok {
			return f.done()
		}
		msg, _ := m["message"].(map[string]any)
		content, _ := msg["content"].([]any)
		if m["type"] != "user" || len(content) == 0 {
			return f.fail(2, "fake amp: stdin line is not a user message with content blocks: %v", m)
		}
		f.got(textOf(content))
		turn, ok := f.next()
		if !ok {
			return f.fail(1, "fake amp: the transcript has no turn %d", f.played()+1)
		}
		if code := f.play(turn, func() bool { // hang until the end of stdin
			for range f.in {
			}
			return false
		}); code >= 0 {
			return code
		}
	}
}

func (f *fake) cursor() int {
	if err := f.need("-p", "--output-format", "stream-json", "--force"); err != nil {
		return f.fail(2, "%v", err)
	}
	if len(f.args) == 0 || strings.HasPrefix(f.args[len(f.args)-1], "-") {
		return f.fail(2, "fake cursor-agent: no prompt (the last argument)")
	}
	if f.played() > 0 && f.flag("--resume") != f.session() {
		return f.fail(2, "fake cursor-agent: run %d without --resume %s (args: %q)", f.played()+1, f.session(), f.args)
	}
	f.got(f.args[len(f.args)-1])
	turn, ok := f.next()
	if !ok {
		return f.fail(1, "fake cursor-agent: the transcript has no run %d", f.played()+1)
	}
	if code := f.play(turn, func() bool { select {} }); code >= 0 {
		return code
	}
	return f.done()
}

func (f *fake) codex(stdin io.Reader) int {
	if len(f.args) == 0 || f.args[0] != "app-server" {
		return f.fail(2, "fake codex: want `codex app-server`, got %q", f.args)
	}
	// The recorded thread object (from the thread/start response) and the
	// notifications of each turn.
	var thread json.RawMessage
	var turns [][]string
	for _, t := range f.turns {
		var keep []string
		for _, l := range t {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Result struct {
					Thread json.RawMessage `json:"thread"`
				} `json:"result"`
			}
			json.Unmarshal([]byte(l), &m)
			switch {
			case len(m.Result.Thread) > 0 && thread == nil:
				thread = m.Result.Thread
			case strings.HasPrefix(l, "#!") || (len(m.ID) == 0 && m.Method != "" && m.Method != "thread/started" && m.Method != "remoteControl/status/changed"):
				keep = append(keep, l)
			}
		}
		if len(keep) > 0 {
			turns = append(turns, keep)
		}
	}
	f.turns = turns
	var th struct {
		ID string `json:"id"`
	}
	json.Unmarshal(thread, &th)
	reply := func(id any, result any) {
		b, _ := json.Marshal(map[string]any{"id": id, "result": result})
		f.emit(string(b))
	}
	f.readStdin(stdin)
	initialized := false
	current := ""
	for {
		m, ok := f.recv()
		if !ok {
			return f.done()
		}
		method, _ := m["method"].(string)
		params, _ := m["params"].(map[string]any)
		id := m["id"]
		if method != "initialize" && method != "initialized" && !initialized {
			return f.fail(2, "fake codex: %s before initialize", method)
		}
		switch method {
		case "initialize":
			initialized = true
			reply(id, map[string]any{"userAgent": "fake-codex", "codexHome": os.Getenv("CODEX_HOME"), "platformFamily": "unix", "platformOs": "linux"})
		case "initialized":
		case "thread/start":
			reply(id, map[string]any{"thread": thread})
			b, _ := json.Marshal(map[string]any{"method": "thread/started", "params": map[string]any{"thread": thread}})
			f.emit(string(b))
		case "thread/resume":
			if params["threadId"] != th.ID {
				b, _ := json.Marshal(map[string]any{"id": id, "error": map[string]any{"code": -32600, "message": fmt.Sprintf("no rollout found for thread id %v", params["threadId"])}})
				f.emit(string(b))
				continue
			}
			reply(id, map[string]any{"thread": thread})
		case "turn/start", "turn/steer":
			f.got(textOf(params["input"]))
		}
		switch method {
		case "turn/start":
			turn, ok := f.next()
			if !ok {
				return f.fail(1, "fake codex: the transcript has no turn %d", f.played()+1)
			}
			current = turnID(turn)
			reply(id, map[string]any{"turn": map[string]any{"id": current, "items": []any{}, "status": "inProgress", "error": nil}})
			if code := f.play(turn, func() bool { return f.waitInterrupt("turn/interrupt") }); code >= 0 {
				return code
			}
		case "turn/steer":
			reply(id, map[string]any{"turnId": current})
		case "turn/interrupt":
			reply(id, map[string]any{})
		default:
			if id != nil {
				b, _ := json.Marshal(map[string]any{"id": id, "error": map[string]any{"code": -32601, "message": "fake codex: " + method}})
				f.emit(string(b))
			}
		}
	}
}

func turnID(turn []string) string {
	for _, l := range turn {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Turn struct {
					ID string `json:"id"`
				} `json:"turn"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Method == "turn/started" {
			return m.Params.Turn.ID
		}
	}
	return ""
}
