package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/fakellm"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/runner"
)

// shelleyImage is the real image of the catalog's shelley (images/build.sh
// shelley): these tests spawn agent_type "shelley", as a user does.
const shelleyImage = "filepath/agent-shelley:latest"

// providerKey is the OpenRouter key the orchestrator holds; no container may
// ever see it.
const providerKey = "sk-or-e2e-5f1c0d2b9a7e4c3d8b6a"

// gatewayTimeout is the test server's --gateway-timeout: the upstream
// timeout case waits this long for its 504.
const gatewayTimeout = 4 * time.Second

// TestShelleyThroughGateway runs the real orchestrator (FUSE workspaces,
// agents without network) whose OpenRouter is a scripted fake upstream on
// loopback, and shelley nodes in their real image reaching it through the
// gateway at $FILEPATH_API_URL, one session per case, concurrently:
//   - fix: "add a failing test and fix it" on a cloned Go repository;
//   - stop: a stop while the upstream holds the stream open;
//   - upstream errors: a 500 and a timeout, each shown in the chat with its
//     status, and the node answering the next message;
//   - budget: over the session's budget the gateway answers 429, the chat
//     says why, and raising the budget lets the node go on;
//   - message during a turn: it reaches the model in the turn's next request;
//   - handoff: a node whose usage crosses 85 % of the context continues in a
//     fresh agent (issue 14);
//
// then the model list: served from the cache when the upstream is gone,
// then the last good list with a note, and the bundled list with its
// offline note on a server that never reached the upstream.
func TestShelleyThroughGateway(t *testing.T) {
	testkit.RequireFUSE(t)
	testkit.RequireImage(t, shelleyImage)
	testkit.RequireImage(t, "filepath/byo-echo:latest")
	for _, k := range []string{"FILEPATH_OPENROUTER_API_KEY", "FILEPATH_ANTHROPIC_API_KEY", "FILEPATH_OPENAI_API_KEY", "FILEPATH_SESSION_BUDGET_TOKENS", "FILEPATH_SESSION_BUDGET_USD"} {
		t.Setenv(k, "")
		unsetenv(t, k)
	}
	up := fakellm.New()
	defer up.Close()
	agents := &fakeAgents{scripts: map[string]func([]chatMsg) fakellm.Turn{}}
	up.Fallback(agents.answer)
	t.Setenv("FILEPATH_OPENROUTER_API_KEY", providerKey)
	t.Setenv("FILEPATH_OPENROUTER_BASE_URL", up.URL+"/v1")
	srv := startServer(t, testkit.DataDir(t), "--network", "none", "--git-allow-private", "--gateway-timeout", gatewayTimeout.String(), "--models-ttl", "2s")
	e := &shelleyEnv{c: newClient(t, srv), up: up, agents: agents}

	t.Run("agents", func(t *testing.T) {
		t.Run("fix a test", func(t *testing.T) { t.Parallel(); e.fixATest(t) })
		t.Run("stop mid-turn", func(t *testing.T) { t.Parallel(); e.stopMidTurn(t) })
		t.Run("upstream errors", func(t *testing.T) { t.Parallel(); e.upstreamErrors(t) })
		t.Run("budget", func(t *testing.T) { t.Parallel(); e.budget(t) })
		t.Run("message during a turn", func(t *testing.T) { t.Parallel(); e.messageDuringTurn(t) })
		t.Run("handoff", func(t *testing.T) { t.Parallel(); e.handoff(t) })
	})
	t.Run("model list", func(t *testing.T) { e.modelList(t, srv) })
	srv.stop(t)
}

// fakeAgents answers each agent by the first user message of its
// conversation (its task): a script per task prefix.
type fakeAgents struct {
	mu      sync.Mutex
	scripts map[string]func([]chatMsg) fakellm.Turn
}

func (f *fakeAgents) add(prefix string, script func([]chatMsg) fakellm.Turn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scripts[prefix] = script
}

func (f *fakeAgents) answer(r fakellm.Request) fakellm.Turn {
	msgs, err := chatMessages(r)
	if err != nil {
		return fakellm.Turn{Status: 400, ErrorMessage: err.Error()}
	}
	task := firstUser(msgs)
	f.mu.Lock()
	var script func([]chatMsg) fakellm.Turn
	for prefix, s := range f.scripts {
		if strings.HasPrefix(task, prefix) {
			script = s
		}
	}
	f.mu.Unlock()
	if script == nil {
		return fakellm.Turn{Status: 500, ErrorMessage: "fakellm: no script for the task " + task}
	}
	return script(msgs)
}

func chatMessages(r fakellm.Request) ([]chatMsg, error) {
	var req struct {
		Messages []chatMsg `json:"messages"`
	}
	err := r.JSON(&req)
	return req.Messages, err
}

func firstUser(msgs []chatMsg) string {
	for _, m := range msgs {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// requestsOf are the chat completions the fake received for the agent
// whose task starts with prefix, in order.
func requestsOf(t *testing.T, up *fakellm.Server, prefix string) [][]chatMsg {
	t.Helper()
	var out [][]chatMsg
	for _, r := range up.Requests() {
		if r.Format != "chat" {
			continue
		}
		msgs, err := chatMessages(r)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(firstUser(msgs), prefix) {
			out = append(out, msgs)
		}
	}
	return out
}

type shelleyEnv struct {
	c      *client
	up     *fakellm.Server
	agents *fakeAgents
}

// session creates a session (with body's fields) that goes with the test.
func (e *shelleyEnv) session(t *testing.T, body map[string]any) (*client, string) {
	t.Helper()
	c := e.c.with(t)
	sid := c.session(body)
	t.Cleanup(func() { c.do("DELETE", "/api/v1/sessions/"+sid, nil, nil) })
	return c, sid
}

// spawnShelley creates a shelley node with its catalog defaults.
func spawnShelley(c *client, sid, name, task, parent string) nodeJSON {
	c.t.Helper()
	return c.spawn(sid, map[string]any{"name": name, "agent_type": "shelley", "task": task, "parent_id": parent})
}

// fapEvent is the fields of an event record the transcript shows.
type fapEvent struct {
	Type    string   `json:"type"`
	Content string   `json:"content"`
	Name    string   `json:"name"`
	Path    *string  `json:"path"`
	Status  string   `json:"status"`
	Cmd     string   `json:"cmd"`
	Exit    *float64 `json:"exit"`
	Stdout  *string  `json:"stdout"`
	Message string   `json:"message"`
	Hash    string   `json:"hash"`
	State   string   `json:"state"`
	Summary *string  `json:"summary"`
}

func eventOf(r rec) (fapEvent, bool) {
	var ev fapEvent
	if r.Kind != "event" || json.Unmarshal(r.Data, &ev) != nil {
		return ev, false
	}
	return ev, true
}

// transcript renders the node's agent events as short lines (the lines of
// adapters/native's tests).
func transcript(recs []rec) []string {
	var out []string
	for _, r := range recs {
		e, ok := eventOf(r)
		if !ok {
			continue
		}
		switch e.Type {
		case "text":
			out = append(out, "text "+e.Content)
		case "tool":
			p := ""
			if e.Path != nil {
				p = " " + *e.Path
			}
			out = append(out, "tool "+e.Name+" "+e.Status+p)
		case "command":
			s := "command " + e.Status + " " + e.Cmd
			if e.Exit != nil {
				s += fmt.Sprintf(" exit %v", *e.Exit)
			}
			out = append(out, s)
		case "commit":
			out = append(out, "commit "+e.Message)
		case "status":
			out = append(out, "status "+e.State)
		default:
			out = append(out, e.Type)
		}
	}
	return out
}

func countEvents(recs []rec, typ string) int {
	n := 0
	for _, r := range recs {
		if e, ok := eventOf(r); ok && e.Type == typ {
			n++
		}
	}
	return n
}

func hasEventText(recs []rec, parts ...string) bool {
	for _, r := range recs {
		e, ok := eventOf(r)
		if !ok || e.Type != "text" {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(e.Content, p)
		}
		if all {
			return true
		}
	}
	return false
}

// usageTokens is what the fake reports as a turn's tokens: prompt (cached or
// not) and completion, the gateway's count.
func usageTokens(u fakellm.Usage) int64 { return int64(u.Input + u.CacheRead + u.Output) }

// waitTokens waits until the node's metered tokens and cost reach what
// the fake reported, and checks they are exactly that.
func waitTokens(c *client, sid, nid string, tokens int64, cost float64) {
	c.t.Helper()
	testkit.EventuallyNil(c.t, 30*time.Second, "the node's tokens", func() error {
		n := c.node(sid, nid)
		if n.Tokens == tokens && math.Abs(n.CostUSD-cost) < 1e-9 {
			return nil
		}
		err := fmt.Errorf("node %s has %d tokens and $%v, the fake reported %d tokens and $%v", n.Name, n.Tokens, n.CostUSD, tokens, cost)
		if n.Tokens > tokens {
			c.t.Fatal(err)
		}
		return err
	})
}

// The project of "add a failing test and fix it": abs has a bug its test
// does not catch. It is shell, not Go: in a fresh container a cold go test
// builds the standard library first, minutes under load, past the bash
// tool's 2-minute timeout; the scenario is about the agent's loop through
// the gateway (edit, run the test, see it fail and pass), which sh proves as
// well (adapters/native's own test runs the Go version of it).
const (
	calcSh     = "# abs prints the absolute value of its argument.\nabs() {\n\techo \"$1\"\n}\n"
	testTail   = "[ \"$(abs 3)\" = 3 ] || { echo \"abs 3 = $(abs 3), want 3\"; exit 1; }\n"
	calcTestSh = "# The tests of calc.sh: each says what is wrong and fails.\n. ./calc.sh\n" + testTail
	newTest    = "[ \"$(abs -2)\" = 2 ] || { echo \"abs -2 = $(abs -2), want 2\"; exit 1; }\n"
	calcFix    = "\tcase $1 in\n\t-*) echo \"${1#-}\" ;;\n\t*) echo \"$1\" ;;\n\tesac\n"
	fixMessage = "abs: print the absolute value of negative numbers"
)

func toolArgs(args map[string]any) string {
	b, _ := json.Marshal(args)
	return string(b)
}

// fixTurns scripts "add a failing test and fix it": read both files, add the
// test, see it fail, fix abs, see it pass, commit, report. Each answer
// reports its usage (some of it cached, with a cost).
var fixTurns = []fakellm.Turn{
	{Text: "Let me look at the code first.", ToolCalls: []fakellm.ToolCall{
		{ID: "c1", Name: "read_file", Arguments: `{"path":"calc.sh"}`}, {ID: "c2", Name: "read_file", Arguments: `{"path":"/workspace/calc_test.sh"}`}},
		Usage: fakellm.Usage{Input: 1000, Output: 50, Cost: 0.0031}},
	{ToolCalls: []fakellm.ToolCall{{ID: "c3", Name: "edit_file", Arguments: toolArgs(map[string]any{"path": "calc_test.sh", "old_string": testTail, "new_string": testTail + newTest})}},
		Usage: fakellm.Usage{Input: 200, CacheRead: 1000, Output: 60, Cost: 0.0012}},
	{ToolCalls: []fakellm.ToolCall{{ID: "c4", Name: "bash", Arguments: `{"command":"sh calc_test.sh"}`}},
		Usage: fakellm.Usage{Input: 300, CacheRead: 1200, Output: 20, Cost: 0.0009}},
	{Text: "The new test fails: abs does not handle negative numbers.", ToolCalls: []fakellm.ToolCall{{ID: "c5", Name: "edit_file",
		Arguments: toolArgs(map[string]any{"path": "calc.sh", "old_string": "\techo \"$1\"\n", "new_string": calcFix})}},
		Usage: fakellm.Usage{Input: 400, CacheRead: 1500, Output: 70, Cost: 0.0014}},
	{ToolCalls: []fakellm.ToolCall{{ID: "c6", Name: "bash", Arguments: `{"command":"sh calc_test.sh"}`}},
		Usage: fakellm.Usage{Input: 150, CacheRead: 2000, Output: 20, Cost: 0.0008}},
	{ToolCalls: []fakellm.ToolCall{{ID: "c7", Name: "git", Arguments: `{"args":["add","-A"]}`}, {ID: "c8", Name: "git", Arguments: toolArgs(map[string]any{"args": []string{"commit", "-m", fixMessage}})}},
		Usage: fakellm.Usage{Input: 100, CacheRead: 2200, Output: 40, Cost: 0.0009}},
	{Text: "Added a test of abs -2, which failed, and fixed abs; the tests pass and the change is committed.",
		Usage: fakellm.Usage{Input: 120, CacheRead: 2300, Output: 30, Cost: 0.0010}},
}

// fixATest: shelley adds a failing test to a cloned repository and fixes
// it. The files are in the container's /workspace and in the session
// filesystem (API), the commit in git log and as a commit record linked to
// its command, the records are the agent's events in order (each line
// valid FAP), the node's tokens and cost are exactly what the fake
// reported, and the provider key is nowhere in the container: not in its
// configuration, not in any process's environment, not in any file.
func (e *shelleyEnv) fixATest(t *testing.T) {
	const task = "FIX: add a failing test and fix it"
	e.agents.add("FIX:", func(msgs []chatMsg) fakellm.Turn {
		if n := assistants(msgs); n < len(fixTurns) {
			return fixTurns[n]
		}
		return fakellm.Turn{Text: "Nothing more to do."}
	})
	repo := testkit.GitRepo(t, map[string]string{"calc.sh": calcSh, "calc_test.sh": calcTestSh})
	c, sid := e.session(t, map[string]any{"name": "fix a test", "git_repo_url": repo, "checks": []map[string]any{{"command": "test -f calc.sh"}}})
	node := spawnShelley(c, sid, "fixer", task, "")
	recs := c.waitRecords("the fix's done", sid, node.ID, 3*time.Minute, func(r []rec) bool { return countEvents(r, "done") > 0 })
	node = c.node(sid, node.ID)
	if node.Model != "anthropic/claude-sonnet-4" {
		t.Errorf("the node's model %q, want the catalog default anthropic/claude-sonnet-4", node.Model)
	}

	// The clone before the agent starts, then the agent's events.
	fixEvents := testkit.Lines(t, "testdata/fix-a-test/events.txt")
	want := append([]string{"command start git clone " + repo + " /workspace", "command done git clone " + repo + " /workspace exit 0"}, fixEvents...)
	if got := transcript(recs); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\n\nwant:\n%s\n\nrecords:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), records(recs))
	}
	for _, r := range recs {
		if r.Kind == "error" {
			t.Errorf("an error record (a line that is not FAP, or a failure): %s", r.Data)
		}
	}
	// The model saw the new test fail, in the container.
	reqs := requestsOf(t, e.up, "FIX:")
	if len(reqs) != len(fixTurns) {
		t.Fatalf("%d requests upstream, want %d", len(reqs), len(fixTurns))
	}
	failed := ""
	for _, m := range reqs[len(reqs)-1] {
		if m.Role == "tool" && m.ToolCallID == "c4" {
			failed = m.Content
		}
	}
	if !strings.Contains(failed, "exit code: 1") || !strings.Contains(failed, "abs -2 = -2, want 2") {
		t.Fatalf("the first test run's result as the model saw it:\n%s", failed)
	}
	if r := e.up.Requests(); r[0].Header.Get("Authorization") != "Bearer "+providerKey {
		t.Fatalf("upstream Authorization %q, want the provider key", r[0].Header.Get("Authorization"))
	}

	// The files: in the container's /workspace and in the session filesystem.
	id := node.ContainerID
	if got := docker(t, "", "exec", id, "cat", "/workspace/calc.sh"); !strings.Contains(got, calcFix) {
		t.Fatalf("calc.sh in the container:\n%s", got)
	}
	// The image's Go toolchain, which agents use on Go projects, runs.
	if got := docker(t, "", "exec", id, "go", "version"); !strings.HasPrefix(got, "go version go1.") {
		t.Fatalf("go version in the container: %s", got)
	}
	var file struct{ Content string }
	if c.do("GET", "/api/v1/sessions/"+sid+"/fs/calc.sh", nil, &file) != 200 || !strings.Contains(file.Content, calcFix) {
		t.Fatalf("calc.sh through the API:\n%s", file.Content)
	}
	if c.do("GET", "/api/v1/sessions/"+sid+"/fs/calc_test.sh", nil, &file) != 200 || !strings.HasSuffix(file.Content, testTail+newTest) {
		t.Fatalf("calc_test.sh through the API:\n%s", file.Content)
	}
	// The commit: on top of the clone, by shelley, the commit record's hash,
	// linked to the git commit's command record.
	log := docker(t, "", "exec", id, "git", "-C", "/workspace", "log", "--format=%H %an %s")
	lines := strings.Split(strings.TrimSpace(log), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], " shelley "+fixMessage) || !strings.HasSuffix(lines[1], " test initial") {
		t.Fatalf("git log:\n%s", log)
	}
	head, _, _ := strings.Cut(lines[0], " ")
	if st := docker(t, "", "exec", id, "git", "-C", "/workspace", "status", "--porcelain"); st != "" {
		t.Fatalf("uncommitted changes:\n%s", st)
	}
	var commitCmd int64
	for _, r := range recs {
		ev, _ := eventOf(r)
		switch {
		case ev.Type == "command" && ev.Status == "done" && strings.HasPrefix(ev.Cmd, "git commit"):
			commitCmd = r.Seq
		case ev.Type == "commit":
			if ev.Hash != head {
				t.Fatalf("commit record %s, HEAD %s", ev.Hash, head)
			}
			if commitCmd == 0 || r.Ref != commitCmd {
				t.Fatalf("the commit record refers to %d, want the git commit command %d", r.Ref, commitCmd)
			}
		}
	}

	// Tokens and cost: exactly what the fake reported, per node and session.
	var tokens int64
	var cost float64
	for _, turn := range fixTurns {
		tokens += usageTokens(turn.Usage)
		cost += turn.Usage.Cost
	}
	waitTokens(c, sid, node.ID, tokens, cost)
	var sess struct {
		TokensUsed int64 `json:"tokens_used"`
	}
	if c.do("GET", "/api/v1/sessions/"+sid, nil, &sess) != 200 || sess.TokensUsed != tokens {
		t.Fatalf("the session's tokens %d, want %d", sess.TokensUsed, tokens)
	}

	noProviderKey(t, id)
}

// noProviderKey checks that the provider key is in neither the container's
// configuration nor any of its processes' environments nor any of its
// files (the workspace included); a canary file shows the search sees
// files.
func noProviderKey(t *testing.T, id string) {
	t.Helper()
	if inspect := docker(t, "", "inspect", id); strings.Contains(inspect, providerKey) || !strings.Contains(inspect, "FILEPATH_API_KEY=") {
		t.Fatalf("docker inspect shows the provider key (or no env at all):\n%s", inspect)
	}
	env := docker(t, "", "exec", id, "sh", "-c", "cat /proc/[0-9]*/environ | tr '\\0' '\\n'")
	if strings.Contains(env, providerKey) || !strings.Contains(env, "FILEPATH_API_URL=") {
		t.Fatalf("the processes' environments hold the provider key (or could not be read):\n%s", env)
	}
	canary := "canary-" + strings.ReplaceAll(providerKey, "sk-or-", "")
	docker(t, "", "exec", id, "sh", "-c", "echo "+canary+" > /tmp/fp-canary")
	// The container's files as it sees them (its image, /tmp, /workspace),
	// read from the host through its root, by root with every capability:
	// inside, root without capabilities cannot read everything.
	pid := strings.TrimSpace(docker(t, "", "inspect", "--format", "{{.State.Pid}}", id))
	root := "/proc/" + pid + "/root"
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-rlF", "-e", providerKey, "-e", canary}
	for _, d := range entries {
		if n := d.Name(); n != "proc" && n != "sys" && n != "dev" {
			args = append(args, root+"/"+n)
		}
	}
	grep := exec.Command("grep", append(args, root+"/dev/shm")...)
	var stderr strings.Builder
	grep.Stderr = &stderr
	out, err := grep.Output()
	found := strings.TrimSpace(strings.ReplaceAll(string(out), root, ""))
	if err != nil || stderr.Len() > 0 || found != "/tmp/fp-canary" {
		t.Fatalf("files of the container holding the provider key or the canary, want only the canary /tmp/fp-canary (grep: %v):\n%s\n%s", err, found, stderr.String())
	}
}

// stopMidTurn: a stop while the upstream holds its stream open ends the
// agent promptly (its container is gone within 5 s, under a second on an
// idle machine); the chat has the stop and the agent's last status, and no
// error.
func (e *shelleyEnv) stopMidTurn(t *testing.T) {
	e.agents.add("STOP:", func([]chatMsg) fakellm.Turn {
		return fakellm.Turn{Text: "never sent", Hang: true}
	})
	c, sid := e.session(t, map[string]any{"name": "stop"})
	node := spawnShelley(c, sid, "stopper", "STOP: think for a long time", "")
	c.waitRecords("a request upstream", sid, node.ID, 2*time.Minute, func([]rec) bool { return len(requestsOf(t, e.up, "STOP:")) > 0 })
	id := c.node(sid, node.ID).ContainerID
	start := time.Now()
	if code := c.do("POST", "/api/v1/sessions/"+sid+"/nodes/"+node.ID+"/signal", map[string]any{"action": "stop"}, nil); code != 202 {
		t.Fatalf("signal stop: %d", code)
	}
	testkit.Eventually(t, 5*time.Second, "the container to end after signal stop", func() bool { return !containerRunning(id) })
	took := time.Since(start)
	recs := c.waitRecords("the node to stop", sid, node.ID, 30*time.Second, func([]rec) bool {
		s := c.node(sid, node.ID).Status
		return s != "running" && s != "thinking"
	})
	n := c.node(sid, node.ID)
	if n.Status == "error" {
		t.Fatalf("after a stop the node is %s; records:\n%s", n.Status, records(recs))
	}
	// In the chat: the stop, then the agent's idle; no LLM error.
	stopAt := int64(-1)
	for _, r := range recs {
		if r.Kind == "input" && strings.Contains(string(r.Data), `"action":"stop"`) {
			stopAt = r.Seq
		}
	}
	idleAfter := false
	for _, r := range recs {
		if ev, ok := eventOf(r); ok && r.Seq > stopAt && ev.Type == "status" && ev.State == "idle" {
			idleAfter = true
		}
	}
	if stopAt < 0 || !idleAfter || hasEventText(recs, "LLM error") || hasRecord(recs, "error") {
		t.Fatalf("the chat after a stop (stop at %d, idle after %v):\n%s", stopAt, idleAfter, records(recs))
	}
	t.Logf("the container ended %s after signal stop; the node is %s", took, n.Status)
}

// upstreamErrors: an upstream 500, then an upstream that does not answer
// within --gateway-timeout: each shows in the chat with its HTTP status,
// the node keeps its container and answers the next message.
func (e *shelleyEnv) upstreamErrors(t *testing.T) {
	e.agents.add("UPSTREAM:", func(msgs []chatMsg) fakellm.Turn {
		users := 0
		for _, m := range msgs {
			if m.Role == "user" {
				users++
			}
		}
		switch users {
		case 1:
			return fakellm.Turn{Status: 500, ErrorMessage: "fake upstream exploded"}
		case 2:
			return fakellm.Turn{Text: "too late", Delay: time.Minute}
		}
		return fakellm.Turn{Text: "Back to work: the upstream answers again.", Usage: fakellm.Usage{Input: 40, Output: 9}}
	})
	c, sid := e.session(t, map[string]any{"name": "upstream errors"})
	node := spawnShelley(c, sid, "survivor", "UPSTREAM: say hello", "")
	recs := c.waitRecords("the 500 in the chat", sid, node.ID, 2*time.Minute, func(r []rec) bool { return hasEventText(r, "LLM error") })
	if !hasEventText(recs, "LLM error: HTTP 500 Internal Server Error: fake upstream exploded") {
		t.Fatalf("the chat after an upstream 500:\n%s", records(recs))
	}
	id := c.node(sid, node.ID).ContainerID

	c.send(sid, node.ID, "try again")
	start := time.Now()
	recs = c.waitRecords("the timeout in the chat", sid, node.ID, time.Minute, func(r []rec) bool { return hasEventText(r, "HTTP 504") })
	host := strings.TrimPrefix(e.up.URL, "http://")
	if !hasEventText(recs, "LLM error: HTTP 504 Gateway Timeout: upstream "+host+" (openrouter) did not answer within "+gatewayTimeout.String()) {
		t.Fatalf("the chat after an upstream timeout:\n%s", records(recs))
	}
	if took := time.Since(start); took < gatewayTimeout-time.Second || took > gatewayTimeout+20*time.Second {
		t.Fatalf("the timeout showed %s after the message, want about %s", took, gatewayTimeout)
	}

	c.send(sid, node.ID, "once more")
	recs = c.waitRecords("the answer after the errors", sid, node.ID, time.Minute, func(r []rec) bool { return countEvents(r, "done") > 0 })
	if !hasEventText(recs, "Back to work") {
		t.Fatalf("records:\n%s", records(recs))
	}
	if n := c.node(sid, node.ID); n.ContainerID != id || !containerRunning(id) {
		t.Fatalf("the node changed or lost its container: %q → %q", id, n.ContainerID)
	}
	if reqs := requestsOf(t, e.up, "UPSTREAM:"); len(reqs) != 3 {
		t.Fatalf("%d requests upstream, want 3 (no retries behind the agent's back)", len(reqs))
	}
}

// budget: a session over its token budget gets 429 from the gateway without
// a request upstream; the node's chat says why (the gateway's record and
// the agent's error); raised through the API, the node goes on.
func (e *shelleyEnv) budget(t *testing.T) {
	e.agents.add("BUDGET:", func(msgs []chatMsg) fakellm.Turn {
		if assistants(msgs) == 0 {
			return fakellm.Turn{Text: "First answer.", Usage: fakellm.Usage{Input: 1400, Output: 100}}
		}
		return fakellm.Turn{Text: "Answer after the raise.", Usage: fakellm.Usage{Input: 10, Output: 5}}
	})
	c, sid := e.session(t, map[string]any{"name": "budget"})
	if code := c.do("PATCH", "/api/v1/sessions/"+sid, map[string]any{"budget_tokens": 1000}, nil); code != 200 {
		t.Fatalf("set the budget: %d", code)
	}
	node := spawnShelley(c, sid, "spender", "BUDGET: answer twice", "")
	c.waitRecords("the first answer", sid, node.ID, 2*time.Minute, func(r []rec) bool { return countEvents(r, "done") > 0 })
	waitTokens(c, sid, node.ID, 1500, 0)

	c.send(sid, node.ID, "and more")
	why := "this session's LLM budget is used up: 1500 of 1000 tokens used (budget_tokens)"
	recs := c.waitRecords("the budget error", sid, node.ID, time.Minute, func(r []rec) bool { return hasEventText(r, "LLM error") })
	if !hasEventText(recs, "LLM error: HTTP 429 Too Many Requests: "+why) || !hasRecord(recs, "error", why, `"source":"gateway"`, "PATCH /api/v1/sessions/"+sid) {
		t.Fatalf("the chat over the budget:\n%s", records(recs))
	}
	if reqs := requestsOf(t, e.up, "BUDGET:"); len(reqs) != 1 {
		t.Fatalf("%d requests upstream, want 1: the one over the budget never leaves the gateway", len(reqs))
	}

	if code := c.do("PATCH", "/api/v1/sessions/"+sid, map[string]any{"budget_tokens": nil}, nil); code != 200 {
		t.Fatalf("clear the budget: %d", code)
	}
	// Time is the point: the gateway reads a session's budget at most once
	// a second (gateway.DefaultSpendTTL), so the raise counts a second on.
	time.Sleep(1100 * time.Millisecond)
	c.send(sid, node.ID, "go on")
	recs = c.waitRecords("the answer after the raise", sid, node.ID, time.Minute, func(r []rec) bool { return countEvents(r, "done") > 1 })
	if !hasEventText(recs, "Answer after the raise.") {
		t.Fatalf("records:\n%s", records(recs))
	}
	waitTokens(c, sid, node.ID, 1515, 0)
}

// messageDuringTurn: a message sent while the agent runs a command reaches
// the model in the same turn's next request, after the command's result.
func (e *shelleyEnv) messageDuringTurn(t *testing.T) {
	const cmd = "sleep 4; echo slept"
	e.agents.add("MIDTURN:", func(msgs []chatMsg) fakellm.Turn {
		if assistants(msgs) == 0 {
			return fakellm.Turn{ToolCalls: []fakellm.ToolCall{{ID: "s1", Name: "bash", Arguments: toolArgs(map[string]any{"command": cmd})}}}
		}
		return fakellm.Turn{Text: "Noted: " + lastMsg(msgs).Content}
	})
	c, sid := e.session(t, map[string]any{"name": "message during a turn"})
	node := spawnShelley(c, sid, "listener", "MIDTURN: wait a bit", "")
	c.waitRecords("the command to start", sid, node.ID, 2*time.Minute, func(r []rec) bool {
		return hasRecord(r, "event", `"type":"command"`, `"status":"start"`, "sleep 4")
	})
	c.send(sid, node.ID, "also mention the README")
	recs := c.waitRecords("the turn's end", sid, node.ID, time.Minute, func(r []rec) bool { return countEvents(r, "done") > 0 })
	if countEvents(recs, "done") != 1 || !hasEventText(recs, "Noted: also mention the README") {
		t.Fatalf("records:\n%s", records(recs))
	}
	reqs := requestsOf(t, e.up, "MIDTURN:")
	if len(reqs) != 2 {
		t.Fatalf("%d requests upstream, want 2 (one turn)", len(reqs))
	}
	msgs := reqs[1]
	n := len(msgs)
	if n < 2 || msgs[n-1].Role != "user" || msgs[n-1].Content != "also mention the README" ||
		msgs[n-2].Role != "tool" || msgs[n-2].ToolCallID != "s1" || !strings.Contains(msgs[n-2].Content, "slept") {
		t.Fatalf("the turn's second request ends with %+v", msgs[max(0, n-3):])
	}
}

// handoffPrompt starts the native agent's last request before a handoff
// (adapters/native handoffPrompt).
const handoffPrompt = "The conversation is close to the model's context limit"

// handoff (issue 14): a shelley node under a parent that has finished
// stores a memory, leaves a file uncommitted, and crosses 85 % of its
// model's context (anthropic/claude-sonnet-4: 200,000 tokens in the
// fake's model list); it hands off. The continuation, generation 2 in the
// same node, starts with the summary, the rescue commit of the file, the
// failing check's output and the memory in its first input, in that
// order, as the upstream received it; the chat has the divider between
// both generations; tokens roll up to the parent and the session.
func (e *shelleyEnv) handoff(t *testing.T) {
	const summary = "HANDOFF NOTE: the parser handles lists; maps are half done, see notes.txt; next: finish maps"
	const memory = "the parser's grammar is in parse.go; run go vet before committing"
	const lintOut = "lint: notes.txt: TODO left in the notes"
	turns := []fakellm.Turn{
		{ToolCalls: []fakellm.ToolCall{
			{ID: "m1", Name: "memory_store", Arguments: toolArgs(map[string]any{"key": "parser", "text": memory})},
			{ID: "w1", Name: "write_file", Arguments: toolArgs(map[string]any{"path": "notes.txt", "content": "maps: half done\n"})}},
			Usage: fakellm.Usage{Input: 2000, Output: 100, Cost: 0.01}},
		// 175,200 of 200,000 tokens: over 85 %.
		{ToolCalls: []fakellm.ToolCall{{ID: "g1", Name: "bash", Arguments: `{"command":"git status --short"}`}},
			Usage: fakellm.Usage{Input: 175000, Output: 200, Cost: 0.53}},
	}
	summaryTurn := fakellm.Turn{Text: summary, Usage: fakellm.Usage{Input: 175300, Output: 90, Cost: 0.53}}
	gen2 := fakellm.Turn{Text: "Picking up from the handoff note: finishing maps.", Usage: fakellm.Usage{Input: 3000, Output: 40, Cost: 0.01}}
	e.agents.add("HANDOFF:", func(msgs []chatMsg) fakellm.Turn {
		if last := lastMsg(msgs); last.Role == "user" && strings.HasPrefix(last.Content, handoffPrompt) {
			return summaryTurn
		}
		if n := assistants(msgs); n < len(turns) {
			return turns[n]
		}
		return fakellm.Turn{Status: 500, ErrorMessage: "fakellm: the first generation went on after its handoff"}
	})
	e.agents.add("HANDOFF NOTE:", func([]chatMsg) fakellm.Turn { return gen2 })

	repo := testkit.GitRepo(t, map[string]string{"parse.go": "package parse\n"})
	c, sid := e.session(t, map[string]any{"name": "handoff", "git_repo_url": repo,
		"checks": []map[string]any{{"command": "echo '" + lintOut + "' >&2; exit 2"}}})
	// The parent clones the repository and finishes: the rescue commit
	// happens only while no other agent of the session runs.
	lead := c.spawn(sid, map[string]any{"name": "lead", "agent_type": "custom", "image": "filepath/byo-echo:latest", "task": "/done"})
	c.waitRecords("the lead to finish", sid, lead.ID, 2*time.Minute, func([]rec) bool { return c.node(sid, lead.ID).Status == "done" })
	node := spawnShelley(c, sid, "worker", "HANDOFF: teach the parser maps", lead.ID)

	recs := c.waitRecords("the continuation's answer", sid, node.ID, 3*time.Minute, func(r []rec) bool { return hasEventText(r, "Picking up from the handoff note") })
	if n := c.node(sid, node.ID); n.Generation != 2 {
		t.Fatalf("generation %d, want 2", n.Generation)
	}

	// The chat: the first generation, the handoff, the divider, the rescue
	// commit, the failing check, the memory, the first message, then the
	// second generation.
	var rescue fapEvent
	steps := []struct {
		what  string
		match func(r rec) bool
	}{
		{"the first generation's memory_store", func(r rec) bool {
			ev, ok := eventOf(r)
			return ok && ev.Type == "tool" && ev.Name == "memory_store" && ev.Status == "done"
		}},
		{"the handoff", func(r rec) bool { ev, ok := eventOf(r); return ok && ev.Type == "handoff" }},
		{"the continuation divider", func(r rec) bool {
			return r.Kind == "system" && strings.Contains(string(r.Data), `"type":"continuation"`) && strings.Contains(string(r.Data), `"generation":2`) &&
				strings.Contains(string(r.Data), summary)
		}},
		{"the rescue commit", func(r rec) bool {
			ev, ok := eventOf(r)
			if ok && ev.Type == "commit" && strings.Contains(ev.Message, "rescue uncommitted work") {
				rescue = ev
				return true
			}
			return false
		}},
		{"the failing check", func(r rec) bool {
			return r.Kind == "system" && strings.Contains(string(r.Data), `"type":"check"`) && strings.Contains(string(r.Data), `"exit":2`) && strings.Contains(string(r.Data), lintOut)
		}},
		{"the memory", func(r rec) bool {
			return r.Kind == "system" && strings.Contains(string(r.Data), `"type":"memory"`) && strings.Contains(string(r.Data), memory)
		}},
		{"the first message", func(r rec) bool {
			return r.Kind == "input" && strings.Contains(string(r.Data), `"from":"system"`) && strings.Contains(string(r.Data), runner.ContinuationMessage)
		}},
		{"the second generation's answer", func(r rec) bool {
			ev, ok := eventOf(r)
			return ok && ev.Type == "text" && strings.HasPrefix(ev.Content, "Picking up")
		}},
	}
	i := 0
	for _, r := range recs {
		if i < len(steps) && steps[i].match(r) {
			i++
		}
	}
	if i < len(steps) {
		t.Fatalf("no %s (in order) in the chat:\n%s", steps[i].what, records(recs))
	}
	// The rescue commit holds the file the first generation left.
	id := c.node(sid, node.ID).ContainerID
	if files := strings.TrimSpace(docker(t, "", "exec", id, "git", "-C", "/workspace", "show", "--name-only", "--format=", rescue.Hash)); files != "notes.txt" {
		t.Fatalf("the rescue commit %s holds %q, want notes.txt", rescue.Hash, files)
	}

	// What the continuation's model got first: the summary as its task,
	// then one system message with the summary, the rescue, the check's
	// output and the memory, in that order.
	reqs := requestsOf(t, e.up, "HANDOFF NOTE:")
	if len(reqs) != 1 {
		t.Fatalf("%d requests of the continuation, want 1", len(reqs))
	}
	first := reqs[0]
	if len(first) < 3 || first[0].Role != "system" || first[1].Role != "user" || first[1].Content != summary {
		t.Fatalf("the continuation's first request starts with %+v", first[:min(3, len(first))])
	}
	var input string
	for _, m := range first[2:] {
		if m.Role == "system" && strings.HasPrefix(m.Content, runner.ContinuationMessage) {
			input = m.Content
		}
	}
	at := 0
	for _, w := range []string{summary, rescue.Hash[:12], "failed with exit code 2", lintOut, memory} {
		k := strings.Index(input[at:], w)
		if k < 0 {
			t.Fatalf("the continuation's first input lacks %q (in order):\n%s\n\nall of the request: %+v", w, input, first)
		}
		at += k + len(w)
	}

	// Tokens and cost roll up: the node (both generations), its parent's
	// subtree, the session.
	var tokens int64
	var cost float64
	for _, u := range []fakellm.Usage{turns[0].Usage, turns[1].Usage, summaryTurn.Usage, gen2.Usage} {
		tokens += usageTokens(u)
		cost += u.Cost
	}
	waitTokens(c, sid, node.ID, tokens, cost)
	if p := c.node(sid, lead.ID); p.Tokens != 0 || p.SubtreeTokens != tokens || math.Abs(p.SubtreeCostUSD-cost) > 1e-9 {
		t.Fatalf("the parent: %d tokens, subtree %d tokens $%v; want 0, %d, $%v", p.Tokens, p.SubtreeTokens, p.SubtreeCostUSD, tokens, cost)
	}
	var sess struct {
		TokensUsed int64   `json:"tokens_used"`
		CostUSD    float64 `json:"cost_usd"`
	}
	if c.do("GET", "/api/v1/sessions/"+sid, nil, &sess) != 200 || sess.TokensUsed != tokens || math.Abs(sess.CostUSD-cost) > 1e-9 {
		t.Fatalf("the session: %d tokens $%v, want %d $%v", sess.TokensUsed, sess.CostUSD, tokens, cost)
	}
}

type modelsAnswer struct {
	Providers []struct {
		Name   string `json:"name"`
		Models []struct {
			ID string `json:"id"`
		} `json:"models"`
	} `json:"providers"`
	Offline   bool       `json:"offline"`
	Note      string     `json:"note"`
	FetchedAt *time.Time `json:"fetched_at"`
}

func (m modelsAnswer) has(id string) bool {
	for _, p := range m.Providers {
		for _, x := range p.Models {
			if x.ID == id {
				return true
			}
		}
	}
	return false
}

// modelList: GET /api/v1/models is OpenRouter's list (here the fake's,
// which alone has fake/no-tools); with the upstream gone it is served from
// the cache, then, past --models-ttl, as the last good list with a note;
// a server that never reached the upstream serves the bundled list with
// its offline note.
func (e *shelleyEnv) modelList(t *testing.T, srv *server) {
	c := e.c.with(t)
	get := func(c *client) modelsAnswer {
		t.Helper()
		var m modelsAnswer
		if code := c.do("GET", "/api/v1/models", nil, &m); code != 200 {
			t.Fatalf("GET /api/v1/models: %d", code)
		}
		return m
	}
	live := get(c)
	if live.Offline || live.Note != "" || live.FetchedAt == nil || !live.has("fake/no-tools") || !live.has("anthropic/claude-sonnet-4") {
		t.Fatalf("the live list: %+v", live)
	}
	host := strings.TrimPrefix(e.up.URL, "http://")
	e.up.Close()
	if cached := get(c); cached.Note != "" || cached.FetchedAt == nil || !cached.FetchedAt.Equal(*live.FetchedAt) || !cached.has("fake/no-tools") {
		t.Fatalf("with the upstream gone, within the TTL: %+v", cached)
	}
	var stale modelsAnswer
	testkit.Eventually(t, 30*time.Second, "a note after the upstream went away", func() bool { stale = get(c); return stale.Note != "" })
	if !strings.Contains(stale.Note, "could not refresh the list from "+host) || !stale.has("fake/no-tools") || stale.FetchedAt == nil || !stale.FetchedAt.Equal(*live.FetchedAt) {
		t.Fatalf("past the TTL with the upstream gone, want the last good list with a note: %+v", stale)
	}

	offline := startServer(t, t.TempDir(), "--workspace", "dir")
	bundled := get(newClient(t, offline))
	if !bundled.Offline || !strings.HasPrefix(bundled.Note, "offline list: could not reach "+host) || bundled.FetchedAt != nil ||
		bundled.has("fake/no-tools") || !bundled.has("anthropic/claude-sonnet-4") {
		t.Fatalf("a server that never reached its upstream: %+v", bundled)
	}
	offline.stop(t)
}
