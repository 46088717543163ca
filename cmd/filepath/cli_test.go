package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/fakellm"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/protocol"
)

// The real Claude Code and Codex CLIs, in their images, run by the real
// orchestrator (Docker, --network none) with their provider served by a
// scripted fake upstream through the gateway.

// cliImage puts this tree's filepath-cli-adapter into the agent's image
// (filepath/agent-<type>:latest, made by images/build.sh with the CLI the
// image pins), so the test runs the adapter it tests: the catalog names
// that tag, and other work on this machine may have built it from another
// tree.
func cliImage(t *testing.T, agent string) {
	t.Helper()
	image := "filepath/agent-" + agent + ":latest"
	testkit.RequireImage(t, image)
	testkit.Image(t, image, "FROM "+image+"\nCOPY filepath-cli-adapter /usr/local/bin/filepath-cli-adapter\n",
		map[string]string{"filepath-cli-adapter": testkit.Program(t, "../../adapters/cli")})
}

// convo is what the fake upstream reads of one request: the latest prompt
// (the last user message that is not a tool result), how many model turns
// followed it, and the whole request body (the history).
type convo struct {
	main   bool   // the agent's main loop (the request offers tools)
	prompt string // the text of the latest prompt
	steps  int    // model answers after the prompt
	body   string
}

// anthropicConvo reads an Anthropic Messages request.
func anthropicConvo(r fakellm.Request) convo {
	var req struct {
		Tools    []json.RawMessage `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = r.JSON(&req)
	c := convo{main: len(req.Tools) > 0, body: string(r.Body)}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role == "assistant" {
			c.steps++
			continue
		}
		var parts []struct{ Type, Text string }
		if json.Unmarshal(m.Content, &parts) != nil {
			var s string
			json.Unmarshal(m.Content, &s)
			parts = append(parts, struct{ Type, Text string }{"text", s})
		}
		tool := false
		var text []string
		for _, p := range parts {
			tool = tool || p.Type == "tool_result"
			if p.Type == "text" {
				text = append(text, p.Text)
			}
		}
		if !tool {
			c.prompt = strings.Join(text, "\n")
			break
		}
	}
	return c
}

// responsesConvo reads an OpenAI Responses request (Codex's).
func responsesConvo(r fakellm.Request) convo {
	var req struct {
		Tools []json.RawMessage `json:"tools"`
		Input []struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct{ Type, Text string }
		} `json:"input"`
	}
	_ = r.JSON(&req)
	c := convo{main: len(req.Tools) > 0, body: string(r.Body)}
	for i := len(req.Input) - 1; i >= 0; i-- {
		it := req.Input[i]
		switch {
		case it.Type == "function_call" || it.Type == "custom_tool_call" || it.Type == "message" && it.Role == "assistant":
			c.steps++
		case it.Type == "message" && it.Role == "user":
			var text []string
			for _, p := range it.Content {
				text = append(text, p.Text)
			}
			c.prompt = strings.Join(text, "\n")
			return c
		}
	}
	return c
}

// upstreamLog remembers each answer the fake gave and the requests of the
// agent's main loop.
type upstreamLog struct {
	mu     sync.Mutex
	tokens int64
	main   []convo
}

func (l *upstreamLog) answer(c convo, t fakellm.Turn) fakellm.Turn {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.Status == 0 {
		u := t.Usage
		l.tokens += int64(u.Input + u.Output + u.CacheRead + u.CacheWrite)
	}
	if c.main {
		l.main = append(l.main, c)
	}
	return t
}

// lastMain is the latest request of the main loop whose prompt contains s.
func (l *upstreamLog) lastMain(s string) (convo, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.main) - 1; i >= 0; i-- {
		if strings.Contains(l.main[i].prompt, s) {
			return l.main[i], true
		}
	}
	return convo{}, false
}

func (l *upstreamLog) total() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tokens
}

// cliScript is what the model does for each prompt of the test, per CLI.
type cliScript struct {
	agent, provider string
	convo           func(fakellm.Request) convo
	write           fakellm.ToolCall // turns README.md into "hello world\n"
	shell           func(cmd string) fakellm.ToolCall
	// toolName and shellName are the FAP names the adapter gives them.
	writeTool string
}

const (
	taskPrompt   = "TASK: make README.md say hello world and commit it"
	secondPrompt = "SECOND: what did you change?"
	sleepPrompt  = "SLEEP: wait a while"
	afterPrompt  = "AFTER: still there?"
	commitCmd    = "git init -q && git add -A && git commit -qm 'Say hello world'"
	// waitCmd runs until stopped (Claude Code refuses a plain long sleep).
	waitCmd = "until [ -e /tmp/never ]; do sleep 1; done"
)

func (s cliScript) answer(log *upstreamLog) func(fakellm.Request) fakellm.Turn {
	return func(r fakellm.Request) fakellm.Turn {
		c := s.convo(r)
		usage := fakellm.Usage{Input: 100 + len(r.Body)%97, Output: 10 + c.steps, CacheRead: 7}
		turn := fakellm.Turn{Text: "OK.", Usage: usage}
		if !c.main {
			return log.answer(c, fakellm.Turn{Text: "A title", Usage: fakellm.Usage{Input: 3, Output: 2}})
		}
		switch {
		case strings.Contains(c.prompt, taskPrompt):
			switch c.steps {
			case 0:
				turn = fakellm.Turn{ToolCalls: []fakellm.ToolCall{s.write}, Usage: usage}
			case 1:
				turn = fakellm.Turn{ToolCalls: []fakellm.ToolCall{s.shell(commitCmd)}, Usage: usage}
			default:
				turn.Text = "README.md says hello world; committed."
			}
		case strings.Contains(c.prompt, secondPrompt):
			turn.Text = "I changed README.md to say hello world."
		case strings.Contains(c.prompt, sleepPrompt):
			if c.steps == 0 {
				turn = fakellm.Turn{ToolCalls: []fakellm.ToolCall{s.shell(waitCmd)}, Usage: usage}
			} else {
				turn.Text = "Slept."
			}
		case strings.Contains(c.prompt, afterPrompt):
			turn.Text = "Still here, with README.md saying hello world."
		}
		return log.answer(c, turn)
	}
}

func TestClaudeCodeEndToEnd(t *testing.T) {
	testCLIEndToEnd(t, cliScript{
		agent: "claude-code", provider: "anthropic", convo: anthropicConvo,
		write: fakellm.ToolCall{ID: "toolu_write", Name: "Write",
			Arguments: `{"file_path":"/workspace/README.md","content":"hello world\n"}`},
		shell: func(cmd string) fakellm.ToolCall {
			b, _ := json.Marshal(map[string]any{"command": cmd, "description": "run it"})
			return fakellm.ToolCall{ID: "toolu_" + fmt.Sprint(len(cmd)), Name: "Bash", Arguments: string(b)}
		},
		writeTool: "Write",
	})
}

func TestCodexEndToEnd(t *testing.T) {
	testCLIEndToEnd(t, cliScript{
		agent: "codex", provider: "openai", convo: responsesConvo,
		write: fakellm.ToolCall{ID: "call_patch", Name: fakellm.CustomPrefix + "apply_patch",
			Arguments: "*** Begin Patch\n*** Add File: README.md\n+hello world\n*** End Patch\n"},
		shell: func(cmd string) fakellm.ToolCall {
			b, _ := json.Marshal(map[string]any{"cmd": cmd})
			return fakellm.ToolCall{ID: "call_" + fmt.Sprint(len(cmd)), Name: "exec_command", Arguments: string(b)}
		},
		writeTool: "add file", // the adapter names a fileChange by its kind
	})
}

// events decodes the event records after seq.
func cliEvents(t *testing.T, recs []rec, after int64) []protocol.Event {
	t.Helper()
	var out []protocol.Event
	for _, r := range recs {
		if r.Kind != "event" || r.Seq <= after {
			continue
		}
		ev, err := protocol.DecodeEvent(r.Data)
		if err != nil {
			t.Fatalf("record %d: %v", r.Seq, err)
		}
		out = append(out, ev)
	}
	return out
}

// idleAfter reports whether an idle status follows seq.
func idleAfter(seq int64) func([]rec) bool {
	return func(recs []rec) bool {
		for _, r := range recs {
			if r.Seq > seq && r.Kind == "event" && strings.Contains(string(r.Data), `"state":"idle"`) {
				return true
			}
		}
		return false
	}
}

// validateAll runs `filepath validate` over event lines and wants every
// one valid.
func validateAll(t *testing.T, what string, lines []string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, strings.Join(lines, "\n")+"\n", "validate")
	if want := fmt.Sprintf("%d valid, 0 invalid\n", len(lines)); code != 0 || !strings.HasSuffix(stdout, want) {
		t.Errorf("filepath validate on %s: exit %d\n%s%s", what, code, stdout, stderr)
	}
}

// TestValidateAcceptsTheCLIAdaptersGoldenFAP: what the CLI adapter's
// parsers make of every transcript of the four CLIs (their golden FAP,
// checked against the parsers by adapters/cli's tests) passes `filepath
// validate`; the end-to-end tests above validate what the adapter emitted
// around it (status, commit, done) for Claude Code and Codex.
func TestValidateAcceptsTheCLIAdaptersGoldenFAP(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "adapters", "cli", "testdata", "*", "*", "want.jsonl"))
	if err != nil || len(files) < 30 {
		t.Fatalf("golden files: %d, %v", len(files), err)
	}
	for _, f := range files {
		validateAll(t, f, testkit.Lines(t, f))
	}
}

func testCLIEndToEnd(t *testing.T, s cliScript) {
	testkit.RequireDocker(t)
	cliImage(t, s.agent)
	up := fakellm.New()
	defer up.Close()
	log := &upstreamLog{}
	up.Fallback(s.answer(log))
	prov := strings.ToUpper(s.provider)
	t.Setenv("FILEPATH_"+prov+"_API_KEY", "sk-test-"+s.provider)
	base := up.URL
	if s.provider == "openai" {
		base += "/v1"
	}
	t.Setenv("FILEPATH_"+prov+"_BASE_URL", base)
	data := t.TempDir()
	srv := startServer(t, data, "--workspace", "dir", "--network", "none")
	c := newClient(t, srv)
	sid := c.session(map[string]any{"name": s.agent})
	nid := c.spawn(sid, map[string]any{"agent_type": s.agent, "task": taskPrompt}).ID
	t.Cleanup(func() { exec.Command("docker", "volume", "rm", "-f", "filepath-state-"+nid).Run() })
	defer func() {
		if t.Failed() {
			logs := testkit.Request(t, nil, "GET", srv.base+"/api/v1/sessions/"+sid+"/nodes/"+nid+"/logs?tail=60", c.key, nil)
			t.Logf("the node's stderr:\n%s", logs.Body)
			for _, r := range up.Requests() {
				t.Logf("upstream %s %s %.300s", r.Method, r.Path, r.Body)
			}
		}
	}()

	// 1. The task: a file write, a shell command that commits, a text.
	recs := c.waitRecords("the first turn", sid, nid, 3*time.Minute, idleAfter(0))
	evs := cliEvents(t, recs, 0)
	var order []string
	var commitRef int64
	bySeq := map[int64]rec{}
	for _, r := range recs {
		bySeq[r.Seq] = r
	}
	for _, r := range recs {
		if r.Kind != "event" {
			continue
		}
		ev, _ := protocol.DecodeEvent(r.Data)
		switch ev := ev.(type) {
		case protocol.ToolEvent:
			order = append(order, "tool "+ev.Name+" "+ev.Status)
			if ev.Status == protocol.StepDone && (ev.Path == nil || *ev.Path != "README.md") {
				t.Errorf("the write's path: %s", r.Data)
			}
		case protocol.CommandEvent:
			order = append(order, "command "+ev.Status)
			if !strings.Contains(ev.Cmd, "git commit") {
				t.Errorf("command %s", r.Data)
			}
		case protocol.CommitEvent:
			order = append(order, "commit "+ev.Message)
			commitRef = r.Ref
		case protocol.TextEvent:
			order = append(order, "text "+ev.Content)
		case protocol.StatusEvent:
			order = append(order, "status "+ev.State)
		}
	}
	want := []string{"status thinking", "tool " + s.writeTool + " start", "tool " + s.writeTool + " done",
		"command start", "command done", "commit Say hello world", "text README.md says hello world; committed.", "status idle"}
	if strings.Join(order, "\n") != strings.Join(want, "\n") {
		t.Errorf("the first turn's events:\n%s\nwant\n%s", strings.Join(order, "\n"), strings.Join(want, "\n"))
	}
	// The commit links to the command during which HEAD moved.
	if ref, ok := bySeq[commitRef]; !ok || !strings.Contains(string(ref.Data), `"type":"command"`) || !strings.Contains(string(ref.Data), "git commit") {
		t.Errorf("the commit's ref %d is %s, want the command that committed", commitRef, ref.Data)
	}
	if b, err := os.ReadFile(filepath.Join(data, "nodes", nid, "README.md")); err != nil || string(b) != "hello world\n" {
		t.Errorf("README.md in the workspace: %q, %v", b, err)
	}
	_ = evs

	// 2. A second message continues the conversation: its request carries
	// the first turn.
	last := recs[len(recs)-1].Seq
	c.send(sid, nid, secondPrompt)
	recs = c.waitRecords("the second turn", sid, nid, 3*time.Minute, idleAfter(last))
	if !hasCLIText(recs, last, "I changed README.md to say hello world.") {
		t.Errorf("no answer to the second message")
	}
	if cv, ok := log.lastMain(secondPrompt); !ok || !strings.Contains(cv.body, taskPrompt) || !strings.Contains(cv.body, "Say hello world") {
		t.Errorf("the second message's request does not carry the first turn: %.2000s", cv.body)
	}

	// 3. Stop during a command: the agent ends within the grace.
	last = recs[len(recs)-1].Seq
	c.send(sid, nid, sleepPrompt)
	recs = c.waitRecords("the sleep command", sid, nid, 3*time.Minute, func(r []rec) bool { return hasRecordAfter(r, last, `"type":"command"`, `"status":"start"`, waitCmd) })
	at := time.Now()
	if code := c.do("POST", "/api/v1/sessions/"+sid+"/nodes/"+nid+"/signal", map[string]any{"action": "stop"}, nil); code != 202 {
		t.Fatalf("stop: %d", code)
	}
	recs = c.waitRecords("the stop", sid, nid, 3*time.Minute, func(r []rec) bool { return hasRecordAfter(r, last, `"type":"done"`) })
	if took := time.Since(at); took > 20*time.Second {
		t.Errorf("the stop took %v", took)
	}
	if !hasRecordAfter(recs, last, `"type":"done"`, `"summary":"stopped"`) {
		t.Errorf("the stop's done record is not stopped")
	}
	// The container has exited when the node has its exit code (a message
	// before that would go to the agent that is ending). The done answering
	// the stop does not make it done: it was stopped (issue 27).
	testkit.Eventually(t, time.Minute, "the node's exit", func() bool {
		n := c.node(sid, nid)
		return n.Status == "stopped" && n.ExitCode != nil
	})

	// 4. A message to the stopped node starts a new container, which
	// resumes the conversation from the node's state volume.
	last = recs[len(recs)-1].Seq
	c.send(sid, nid, afterPrompt)
	recs = c.waitRecords("the turn after the restart", sid, nid, 3*time.Minute, func(r []rec) bool {
		return hasCLIText(r, last, "Still here, with README.md saying hello world.") && idleAfter(last)(r)
	})
	if cv, ok := log.lastMain(afterPrompt); !ok || !strings.Contains(cv.body, taskPrompt) || !strings.Contains(cv.body, secondPrompt) {
		t.Errorf("the request after the restart does not carry the conversation: %.2000s", cv.body)
	}

	// Tokens: the node's are what the fake reported.
	testkit.EventuallyNil(t, 30*time.Second, "the node's tokens", func() error {
		if tree := c.tree(sid); len(tree) != 1 || tree[0].Tokens != log.total() {
			return fmt.Errorf("node tokens %+v, want %d (what the fake reported)", tree, log.total())
		}
		return nil
	})
	if log.total() == 0 {
		t.Error("the fake reported no tokens")
	}

	// Everything the adapter emitted passes `filepath validate`.
	var lines []string
	for _, r := range c.records(sid, nid) {
		if r.Kind == "event" {
			lines = append(lines, string(r.Data))
		}
	}
	validateAll(t, s.agent+"'s events", lines)
	c.do("DELETE", "/api/v1/sessions/"+sid, nil, nil)
	srv.stop(t)
}

func hasCLIText(recs []rec, after int64, text string) bool {
	b, _ := json.Marshal(text)
	return hasRecordAfter(recs, after, `"type":"text"`, `"content":`+string(b))
}

// TestSecretsKey: serve makes its secrets key once (0600, beside the
// database), reads the same one on later starts, and refuses a damaged one
// with an error naming the file.
func TestSecretsKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.key")
	k1, err := loadSecretsKey(path)
	if err != nil || len(k1) != 32 {
		t.Fatalf("first start: %x, %v", k1, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v, %v", fi.Mode(), err)
	}
	k2, err := loadSecretsKey(path)
	if err != nil || string(k1) != string(k2) {
		t.Fatalf("second start read another key (%v)", err)
	}
	os.WriteFile(path, []byte("not hex\n"), 0o600)
	if _, err := loadSecretsKey(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("a damaged key: %v", err)
	}
}
