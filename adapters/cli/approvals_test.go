package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/adapters/cli/run"
	"github.com/filepath-dev/filepath/adapters/cli/streamjson"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/protocol"
)

// The CLIs' permission prompts against a fake agent API: the adapter
// answers what needs nobody at once, asks the approvals inbox for the rest
// (POST /api/v1/approvals, long polls by id, retries while the API is
// down), and gives the CLI the answer in its own shape. filepath-fake-cli
// plays the CLI's side (#! ask) and records each answer it got.

// fakeInbox is the approvals part of the agent API.
type fakeInbox struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	posts  []map[string]any // every POST, also those that failed
	gets   int
	status string // "" while pending
	// withdrawn counts the DELETEs of the request (a prompt Claude cancelled).
	withdrawn int
	// down makes the next requests fail as an orchestrator that is
	// restarting does: the connection dropped, then 503s.
	down int
	// slowDelete delays each DELETE's effect (a busy orchestrator)
	slowDelete time.Duration
}

func newFakeInbox(t *testing.T) *fakeInbox {
	f := &fakeInbox{t: t}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeInbox) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer fp_test" {
		f.t.Errorf("%s %s without the node's token: %q", r.Method, r.URL, r.Header.Get("Authorization"))
	}
	var body map[string]any
	if r.Method == http.MethodPost {
		json.NewDecoder(r.Body).Decode(&body)
	}
	f.mu.Lock()
	if body != nil {
		f.posts = append(f.posts, body) // every attempt, answered or not
	}
	if f.down > 0 {
		f.down--
		odd := f.down%2 == 1
		f.mu.Unlock()
		if odd { // the connection drops
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
			return
		}
		http.Error(w, `{"error":{"code":"unavailable","message":"shutting down"}}`, http.StatusServiceUnavailable)
		return
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/approvals":
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"id": "ap1", "status": "pending", "action": body["action"]})
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/approvals/ap1":
		if r.URL.Query().Get("wait") == "" {
			f.t.Errorf("GET %s without wait: the adapter should long poll", r.URL)
		}
		// The fake's long poll: the answer as soon as there is one, else
		// "pending" after 300 ms, like the API's (which waits on a channel).
		deadline := time.Now().Add(300 * time.Millisecond)
		for {
			f.mu.Lock()
			f.gets++
			st := f.status
			f.mu.Unlock()
			if st != "" {
				json.NewEncoder(w).Encode(map[string]any{"id": "ap1", "status": st, "answered_by": "ada@example.com"})
				return
			}
			if time.Now().After(deadline) {
				json.NewEncoder(w).Encode(map[string]any{"id": "ap1", "status": "pending"})
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	case r.Method == http.MethodDelete && r.URL.Path == "/api/v1/approvals/ap1":
		f.mu.Lock()
		slow := f.slowDelete
		f.mu.Unlock()
		time.Sleep(slow) // time is the point: a DELETE that takes a while
		f.mu.Lock()
		f.withdrawn++
		f.status = "denied"
		f.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"id": "ap1", "status": "denied", "answered_by": "agent"})
	default:
		f.t.Errorf("unexpected %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	}
}

func (f *fakeInbox) answer(status string) {
	f.mu.Lock()
	f.status = status
	f.mu.Unlock()
}

// waitPost waits for the adapter's request and returns the requests so far.
func (f *fakeInbox) waitPost(t *testing.T) []map[string]any {
	t.Helper()
	var posts []map[string]any
	testkit.Eventually(t, 20*time.Second, "the adapter to ask the inbox", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		posts = append([]map[string]any(nil), f.posts...)
		return len(posts) > 0 && f.gets > 0
	})
	return posts
}

// answers are what the fake CLI was answered, in order.
func (n *node) answers() []map[string]any {
	b, _ := os.ReadFile(filepath.Join(n.state, "fake", "answers.jsonl"))
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			n.t.Fatalf("answers.jsonl: %v", err)
		}
		out = append(out, m)
	}
	return out
}

func commandStatus(evs []protocol.Event, cmd string) string {
	var st string
	for _, ev := range evs {
		if c, ok := ev.(protocol.CommandEvent); ok && c.Cmd == cmd {
			st = c.Status
		}
	}
	return st
}

func TestClaudePermissionPrompts(t *testing.T) {
	for _, tt := range []struct {
		name, transcript, answer string
		down                     int
		allow                    bool
	}{
		{name: "approved", transcript: "permission-allow", answer: "approved", allow: true},
		{name: "denied", transcript: "permission-deny", answer: "denied"},
		{name: "the API restarts while it waits", transcript: "permission-allow", answer: "approved", down: 4, allow: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inbox := newFakeInbox(t)
			inbox.down = tt.down
			n := newNode(t, "claude-code")
			a := n.start(tt.transcript, "Please do the task in README.md.", "FILEPATH_API_URL="+inbox.srv.URL)

			posts := inbox.waitPost(t)
			// The command inside the workspace was allowed without asking
			// anybody; the one reaching the network waits in the inbox.
			got := n.answers()
			if len(got) != 1 || got[0]["behavior"] != "allow" {
				t.Fatalf("answers before the inbox answered: %v, want go vet allowed at once", got)
			}
			if in, _ := got[0]["updatedInput"].(map[string]any); in["command"] != "go vet ./..." {
				t.Errorf("allow without updatedInput of the command: %v", got[0])
			}
			for _, p := range posts {
				if p["action"] != "bash: curl -s https://example.com" || p["kind"] != "bash" || p["request_id"] != "claude-toolu_2_0" {
					t.Errorf("approval request %v: want the command, kind bash, claude's tool_use_id as request_id", p)
				}
				if d, _ := p["detail"].(string); !strings.Contains(d, "curl reaches the network") || !strings.Contains(d, "Fetch the page") {
					t.Errorf("detail %q: want claude's description and why it asks", d)
				}
			}
			if tt.down > 0 && len(posts) < 2 {
				t.Errorf("%d POSTs: the one whose connection dropped should have been sent again (with the same request_id)", len(posts))
			}
			if tt.down == 0 && len(posts) != 1 {
				t.Errorf("%d POSTs, want 1", len(posts))
			}
			if len(n.answers()) != 1 {
				t.Fatal("the CLI was answered before the person answered")
			}

			if tt.down > 0 {
				// And down again while the adapter polls: its long polls fail
				// until the API is back, and the answer still arrives.
				inbox.mu.Lock()
				inbox.down = tt.down
				inbox.mu.Unlock()
				testkit.Eventually(t, 20*time.Second, "the adapter to poll through the API's downtime", func() bool {
					inbox.mu.Lock()
					defer inbox.mu.Unlock()
					return inbox.down == 0
				})
			}
			inbox.answer(tt.answer)
			evs := a.waitFor("idle", isIdle)
			got = n.answers()
			if len(got) != 2 {
				t.Fatalf("answers %v, want 2", got)
			}
			if tt.allow {
				in, _ := got[1]["updatedInput"].(map[string]any)
				if got[1]["behavior"] != "allow" || in["command"] != "curl -s https://example.com" {
					t.Errorf("answer %v, want allow with the command", got[1])
				}
				if st := commandStatus(evs, "curl -s https://example.com"); st != protocol.StepDone {
					t.Errorf("the approved command ended %q", st)
				}
			} else {
				msg, _ := got[1]["message"].(string)
				if got[1]["behavior"] != "deny" || !strings.Contains(msg, "curl reaches the network") || !strings.Contains(msg, "ada@example.com denied it") {
					t.Errorf("answer %v, want deny with why and who", got[1])
				}
				if st := commandStatus(evs, "curl -s https://example.com"); st != protocol.StepError {
					t.Errorf("the denied command ended %q, want error", st)
				}
			}
			a.finish()
		})
	}
}

// Without an agent API nobody can approve: the prompt is refused at once
// (and a command that needs nobody still runs).
func TestClaudePermissionWithoutAnAPIIsRefused(t *testing.T) {
	n := newNode(t, "claude-code")
	a := n.start("permission-deny", "Please do the task in README.md.", "FILEPATH_API_URL=")
	a.waitFor("idle", isIdle)
	got := n.answers()
	if len(got) != 2 || got[0]["behavior"] != "allow" || got[1]["behavior"] != "deny" {
		t.Fatalf("answers %v, want allow then deny", got)
	}
	if msg, _ := got[1]["message"].(string); !strings.Contains(msg, "nobody to ask") {
		t.Errorf("refusal %q does not say why", msg)
	}
	a.finish()
}

func TestCodexApprovalRequests(t *testing.T) {
	for _, tt := range []struct {
		name, transcript, answer, want string
	}{
		{name: "approved", transcript: "approval-accept", answer: "approved", want: "accept"},
		{name: "denied", transcript: "approval-decline", answer: "denied", want: "decline"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inbox := newFakeInbox(t)
			n := newNode(t, "codex")
			a := n.start(tt.transcript, "Please do the task in README.md.", "FILEPATH_API_URL="+inbox.srv.URL)
			posts := inbox.waitPost(t)
			// The command and the patch inside the workspace were accepted
			// without asking; the command reaching the network waits.
			got := n.answers()
			if len(got) != 2 || got[0]["decision"] != "accept" || got[1]["decision"] != "accept" {
				t.Fatalf("answers before the inbox answered: %v, want two accepts", got)
			}
			if len(posts) != 1 {
				t.Fatalf("%d approval requests, want 1: %v", len(posts), posts)
			}
			p := posts[0]
			if p["action"] != "bash: curl -s https://example.com" || p["kind"] != "bash" || p["request_id"] != "codex-call_3_0" {
				t.Errorf("approval request %v: want the command unwrapped from bash -lc, kind bash, codex's item id", p)
			}
			if d, _ := p["detail"].(string); !strings.Contains(d, "fetch the page") || !strings.Contains(d, "curl reaches the network") {
				t.Errorf("detail %q: want codex's reason and why it asks", d)
			}
			inbox.answer(tt.answer)
			a.waitFor("idle", isIdle)
			got = n.answers()
			if len(got) != 3 || got[2]["decision"] != tt.want {
				t.Fatalf("answers %v, want the third %q", got, tt.want)
			}
			a.finish()
		})
	}
}

// Codex is told to ask (approval_policy "on-request" and "prompt" rules for
// the heuristic's command words) and given filepath's MCP server with the
// node's token from its environment.
func TestCodexConfigAsksAndNamesTheMCPServer(t *testing.T) {
	n := newNode(t, "codex")
	a := n.start("plain", "hi", "FILEPATH_API_URL=http://127.0.0.1:9/")
	a.waitFor("idle", isIdle)
	a.finish()
	b, err := os.ReadFile(filepath.Join(n.state, "codex", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(filepath.Join(n.state, "codex", "rules", "filepath.rules"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`prefix_rule(pattern = ["curl"], decision = "prompt"`, `prefix_rule(pattern = ["git", "push"], decision = "prompt"`,
		`prefix_rule(pattern = ["npm", "install"], decision = "prompt"`} {
		if !strings.Contains(string(rules), want) {
			t.Errorf("filepath.rules lacks %q:\n%s", want, rules)
		}
	}
	for _, want := range []string{`approval_policy = "on-request"`, "[mcp_servers.filepath]\nurl = \"http://127.0.0.1:9/mcp\"\nbearer_token_env_var = \"FILEPATH_API_KEY\"\ntool_timeout_sec = 660\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config.toml lacks %q:\n%s", want, b)
		}
	}
}

// Each CLI is given filepath's MCP server, in its own format, with the
// node's token; the fake CLI checks it as the CLI reads it and records it.
func TestEachCLIIsGivenFilepathsMCPServer(t *testing.T) {
	for _, agent := range []string{"claude-code", "amp", "cursor"} {
		t.Run(agent, func(t *testing.T) {
			n := newNode(t, agent)
			a := n.start("plain", "hi", "FILEPATH_API_URL=http://127.0.0.1:9")
			a.waitFor("idle", isIdle)
			a.finish()
			b, err := os.ReadFile(filepath.Join(n.state, "fake", "mcp.jsonl"))
			if err != nil {
				t.Fatalf("the CLI was given no MCP server: %v", err)
			}
			var servers map[string]struct {
				URL     string            `json:"url"`
				Headers map[string]string `json:"headers"`
			}
			first, _, _ := strings.Cut(string(b), "\n")
			if err := json.Unmarshal([]byte(first), &servers); err != nil {
				t.Fatal(err)
			}
			s := servers["filepath"]
			if s.URL != "http://127.0.0.1:9/mcp" || s.Headers["Authorization"] != "Bearer fp_test" {
				t.Errorf("servers %s: want filepath at $FILEPATH_API_URL/mcp with the node's token", b)
			}
		})
	}
}

// An interrupt while a permission prompt waits: Claude withdraws the prompt
// (control_cancel_request, as claude 2.1.330 does) and the adapter stops
// polling for its answer and withdraws it from the inbox.
func TestClaudeWithdrawnPromptStopsPolling(t *testing.T) {
	inbox := newFakeInbox(t)
	n, drv := permissionClaude(t, inbox)
	cmds := make(chan run.Command, 8)
	done := make(chan error, 1)
	go func() { done <- drv.Run(context.Background(), cmds, func(protocol.Event) {}) }()
	cmds <- run.Command{Op: run.Send, Text: "go"}
	inbox.waitPost(t)
	cmds <- run.Command{Op: run.Interrupt}
	testkit.Eventually(t, 20*time.Second, "the prompt withdrawn", func() bool {
		a := n.answers()
		return len(a) == 2 && a[1]["cancelled"] == true
	})
	time.Sleep(400 * time.Millisecond) // time is the point: a long poll under way ends (300 ms)
	inbox.mu.Lock()
	before := inbox.gets
	inbox.mu.Unlock()
	time.Sleep(time.Second) // time is the point: no poll within a second
	inbox.mu.Lock()
	after := inbox.gets
	inbox.mu.Unlock()
	if after != before {
		t.Errorf("the adapter still polls a withdrawn prompt (%d polls in 1 s)", after-before)
	}
	// ...and the inbox no longer asks a person about it.
	inbox.mu.Lock()
	withdrawn := inbox.withdrawn
	inbox.mu.Unlock()
	if withdrawn != 1 {
		t.Errorf("the withdrawn prompt was withdrawn from the inbox %d times, want 1", withdrawn)
	}
	cmds <- run.Command{Op: run.Finish}
	testkit.Recv(t, done, 20*time.Second, "the driver to end")
}

// A stopped adapter withdraws the prompt Claude was waiting on before it
// exits: Run returns only after the DELETE has been answered, so the
// process (and its container) do not end with the request still pending.
func TestClaudeStopWithdrawsBeforeRunReturns(t *testing.T) {
	inbox := newFakeInbox(t)
	inbox.slowDelete = 300 * time.Millisecond
	_, drv := permissionClaude(t, inbox)
	cmds := make(chan run.Command, 8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- drv.Run(ctx, cmds, func(protocol.Event) {}) }()
	cmds <- run.Command{Op: run.Send, Text: "go"}
	inbox.waitPost(t)
	cancel() // the adapter stops (SIGTERM)
	testkit.Recv(t, done, 20*time.Second, "the driver to end")
	inbox.mu.Lock()
	withdrawn := inbox.withdrawn
	inbox.mu.Unlock()
	if withdrawn != 1 {
		t.Fatalf("when Run returned the pending prompt had been withdrawn %d times, want 1", withdrawn)
	}
}

// permissionClaude is the Claude driver over the fake CLI replaying the
// permission-allow transcript, asking the fake inbox: its node and driver.
func permissionClaude(t *testing.T, inbox *fakeInbox) (*node, *streamjson.Long) {
	t.Helper()
	n := newNode(t, "claude-code")
	tr, _ := filepath.Abs(filepath.Join("testdata", "claude", "permission-allow", "stream.jsonl"))
	env := append(gitEnv(), "FILEPATH_FAKE_TRANSCRIPT="+tr, "FILEPATH_FAKE_CLI=claude",
		"FILEPATH_FAKE_STATE="+filepath.Join(n.state, "fake"), "FILEPATH_API_URL="+inbox.srv.URL, "FILEPATH_API_KEY=fp_test")
	cfg, err := parseConfig([]string{"--agent", "claude-code", "--bin", testkit.Program(t, "./fakecli"), "--workspace", n.ws, "--state", n.state}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	state, err := run.OpenState(n.state, "claude-code")
	if err != nil {
		t.Fatal(err)
	}
	return n, streamjson.NewClaude(cfg, state)
}
