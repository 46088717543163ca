package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/fakellm"
	"github.com/filepath-dev/filepath/protocol"
)

// fakeAgentAPI serves the agent API's routes a test needs next to the fake
// LLM upstream, on one base URL as FILEPATH_API_URL is.
type fakeAgentAPI struct {
	t   *testing.T
	srv *httptest.Server
	mu  sync.Mutex
	// reqs are "METHOD path body" of every agent-API request.
	reqs     []string
	policy   map[string]string
	answer   func(n int) (status string, by string) // the answer to the nth approval poll
	polls    int
	dropNext bool // the next poll's connection is cut (an orchestrator restart)
	routes   map[string]http.HandlerFunc
}

func newFakeAgentAPI(t *testing.T, llm *fakellm.Server) *fakeAgentAPI {
	f := &fakeAgentAPI{t: t, policy: map[string]string{}, routes: map[string]http.HandlerFunc{}}
	up, _ := url.Parse(llm.URL)
	proxy := httputil.NewSingleHostReverseProxy(up)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/v1/") {
			proxy.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer fp_test" {
			http.Error(w, `{"error":{"code":"unauthorized","message":"bad token"}}`, 401)
			return
		}
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		key := r.Method + " " + r.URL.Path
		if h, ok := f.routes[key]; ok {
			h(w, r)
			return
		}
		switch {
		case key == "GET /api/v1/self":
			f.mu.Lock()
			json.NewEncoder(w).Encode(map[string]any{"id": "n1", "name": "me", "approvals": f.policy})
			f.mu.Unlock()
		case key == "POST /api/v1/approvals":
			var in map[string]string
			json.Unmarshal(b, &in)
			if in["kind"] != "bash" || in["request_id"] == "" || !strings.HasPrefix(in["action"], "bash: ") {
				t.Errorf("approval request %s", b)
			}
			w.WriteHeader(201)
			json.NewEncoder(w).Encode(map[string]any{"id": "a1", "status": "pending"})
		case key == "GET /api/v1/approvals/a1":
			f.mu.Lock()
			drop := f.dropNext
			f.dropNext = false
			f.polls++
			n := f.polls
			f.mu.Unlock()
			if drop {
				conn, _, _ := w.(http.Hijacker).Hijack()
				conn.Close()
				return
			}
			status, by := f.answer(n)
			json.NewEncoder(w).Encode(map[string]any{"id": "a1", "status": status, "answered_by": by})
		default:
			w.WriteHeader(404)
			w.Write([]byte(`{"error":{"code":"not_found","message":"no route ` + key + ` on the agent API"}}`))
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAgentAPI) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reqs...)
}

func toolResultOf(t *testing.T, f *fakellm.Server, id string) string {
	t.Helper()
	for _, req := range chatRequests(t, f) {
		for _, m := range req.Messages {
			if m.Role == "tool" && m.ToolCallID == id {
				return content(m)
			}
		}
	}
	t.Fatalf("no tool result for %s", id)
	return ""
}

// TestBashApprovals: a command that reaches the network waits for a
// person's answer through the agent API (re-polling across a dropped
// connection); approved, it runs; denied, it does not, and the model reads
// who denied it; an ordinary command never asks; policy allow runs and
// deny refuses without asking.
func TestBashApprovals(t *testing.T) {
	tests := []struct {
		name      string
		policy    string
		answer    string
		by        string
		drop      bool
		ran       bool
		asked     bool
		inResult  string
		wantPolls int
	}{
		{name: "approved after a dropped poll", answer: "approved", by: "alice", drop: true, ran: true, asked: true, inResult: "exit code: 0", wantPolls: 3},
		{name: "denied", answer: "denied", by: "alice", asked: true, inResult: "alice denied it", wantPolls: 2},
		{name: "timed out", answer: "denied", by: "timeout", asked: true, inResult: "nobody answered", wantPolls: 2},
		{name: "policy allow", policy: "allow", ran: true, inResult: "exit code: 0"},
		{name: "policy deny", policy: "deny", inResult: "policy denies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			llm := fakellm.New()
			defer llm.Close()
			llm.SetModels(fakeModels)
			api := newFakeAgentAPI(t, llm)
			if tt.policy != "" {
				api.policy["bash"] = tt.policy
			}
			api.dropNext = tt.drop
			api.answer = func(n int) (string, string) {
				if n < tt.wantPolls {
					return "pending", ""
				}
				return tt.answer, tt.by
			}
			dir := t.TempDir()
			// The command names a URL; it only writes a file, so that
			// running it is visible without a network.
			cmd := `echo https://example.com > fetched.txt`
			llm.Script(
				fakellm.Turn{ToolCalls: []fakellm.ToolCall{call("c1", "bash", jsonArgs(map[string]string{"command": "ls"})), call("c2", "bash", jsonArgs(map[string]string{"command": cmd}))}},
				fakellm.Turn{Text: "done"},
			)
			cfg := testConfig(api.srv.URL, dir)
			cfg.Task = "fetch it"
			h := startAgent(t, cfg)
			evs := h.waitFor("done", 1, isType(protocol.TypeDone))
			_, err := os.Stat(filepath.Join(dir, "fetched.txt"))
			if ran := err == nil; ran != tt.ran {
				t.Fatalf("ran %v, want %v; events:\n%s", ran, tt.ran, strings.Join(transcriptOf(evs), "\n"))
			}
			if got := toolResultOf(t, llm, "c2"); !strings.Contains(got, tt.inResult) {
				t.Fatalf("result %q, want %q", got, tt.inResult)
			}
			if got := toolResultOf(t, llm, "c1"); !strings.Contains(got, "exit code: 0") {
				t.Fatalf("ls: %q", got)
			}
			asked := false
			for _, r := range api.requests() {
				asked = asked || strings.HasPrefix(r, "POST /api/v1/approvals")
			}
			if asked != tt.asked {
				t.Fatalf("asked %v, want %v: %v", asked, tt.asked, api.requests())
			}
			if !tt.ran {
				found := false
				for _, e := range evs {
					c, ok := e.(protocol.CommandEvent)
					found = found || ok && c.Cmd == cmd && c.Status == protocol.StepError && c.Stderr != nil && strings.HasPrefix(*c.Stderr, "not run: ")
				}
				if !found {
					t.Fatalf("no failed command event for the refusal:\n%s", strings.Join(transcriptOf(evs), "\n"))
				}
			}
		})
	}
}

// TestCollabTools: the children, message and memory tools call the agent
// API and give the model compact answers; spawn through the API answers
// the child's id; a message from the parent names it.
func TestCollabTools(t *testing.T) {
	llm := fakellm.New()
	defer llm.Close()
	llm.SetModels(fakeModels)
	api := newFakeAgentAPI(t, llm)
	kid := map[string]any{"id": "k1", "name": "tests", "agent": "shelley", "model": "m", "status": "running", "running": true, "done": 0, "total": 1, "tokens": 42}
	api.routes["POST /api/v1/children"] = func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(kid)
	}
	api.routes["GET /api/v1/children"] = func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"data": []any{kid}})
	}
	api.routes["GET /api/v1/nodes/tests/messages"] = func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"data":[{"seq":7,"kind":"event","data":{"type":"text","content":"working on it"}},
{"seq":8,"kind":"event","data":{"type":"command","cmd":"go test","status":"done","exit":0}},
{"seq":9,"kind":"input","data":{"type":"message","from":"parent","content":"hurry"}}],"next_after":9}`))
	}
	api.routes["POST /api/v1/nodes/tests/messages"] = func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(202)
		w.Write([]byte(`{"to":"k1","name":"tests","from":"parent","seq":10}`))
	}
	api.routes["GET /api/v1/children/wait"] = func(w http.ResponseWriter, r *http.Request) {
		done := map[string]any{"id": "k1", "name": "tests", "agent": "shelley", "model": "m", "status": "done", "finished": true, "done": 1, "total": 1}
		json.NewEncoder(w).Encode(map[string]any{"all_finished": true, "timed_out": false, "children": []any{done}})
	}
	api.routes["POST /api/v1/memories"] = func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"id":"m1","repo":"github.com/o/r","key":"tests","text":"x"}`))
	}
	api.routes["GET /api/v1/memories"] = func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"data":[{"key":"tests","text":"run with -race"}]}`))
	}
	llm.Script(
		fakellm.Turn{ToolCalls: []fakellm.ToolCall{
			call("s", "spawn", `{"name":"tests","task":"write tests"}`),
			call("l", "list_children", `{}`),
			call("r", "read_child_messages", `{"child":"tests","after":6}`),
			call("m", "send_message", `{"to":"tests","content":"hurry"}`),
			call("w", "wait_for_children", `{"timeout":60}`),
			call("ms", "memory_store", `{"key":"tests","text":"run with -race"}`),
			call("q", "memory_search", `{"query":"race"}`),
		}},
		fakellm.Turn{Text: "all done"},
	)
	cfg := testConfig(api.srv.URL, t.TempDir())
	cfg.Task = "coordinate"
	h := startAgent(t, cfg)
	evs := h.waitFor("done", 1, isType(protocol.TypeDone))
	for _, e := range evs {
		if _, ok := e.(protocol.SpawnEvent); ok {
			t.Fatal("spawn went to stdout although the agent API took it")
		}
	}
	for id, want := range map[string]string{
		"s":  "spawned tests (id k1",
		"l":  "tests (id k1): shelley m, running, running, 0/1 done, 42 tokens",
		"r":  "7 said: working on it\n8 command done: go test (exit 0)\n9 message from parent: hurry\n(3 records; next_after 9)",
		"m":  "sent to tests",
		"w":  "all children finished:\ntests (id k1): shelley m, done, finished",
		"ms": `stored "tests" for github.com/o/r`,
		"q":  "- tests: run with -race",
	} {
		if got := toolResultOf(t, llm, id); !strings.Contains(got, want) {
			t.Errorf("tool %s: %q, want %q", id, got, want)
		}
	}
	reqs := strings.Join(api.requests(), "\n")
	for _, want := range []string{
		`POST /api/v1/children {"name":"tests","agent":"shelley","model":"","task":"write tests"}`,
		"GET /api/v1/nodes/tests/messages?after=6 ",
		`POST /api/v1/nodes/tests/messages {"content":"hurry"}`,
		"GET /api/v1/children/wait?timeout=60 ",
		"GET /api/v1/memories?q=race ",
	} {
		if !strings.Contains(reqs, want) {
			t.Errorf("no request %q in:\n%s", want, reqs)
		}
	}
	got := transcriptOf(evs)
	for _, want := range []string{"tool list_children done", "tool read_child_messages done tests", "tool wait_for_children done", "tool memory_store done tests"} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("no %q event in:\n%s", want, strings.Join(got, "\n"))
		}
	}

	// A message from the parent names it.
	// The answer is scripted before the message is sent: the agent may
	// call its model at once.
	llm.Script(fakellm.Turn{Text: "fine"})
	h.send(protocol.MessageInput{Type: "message", From: "parent", Content: "status?", FromNode: &protocol.NodeRef{ID: "p", Name: "lead"}})
	h.waitFor("second done", 2, isType(protocol.TypeDone))
	reqsLLM := chatRequests(t, llm)
	msgs := reqsLLM[len(reqsLLM)-1].Messages
	if got := content(msgs[len(msgs)-1]); got != "Message from your parent agent (lead):\n\nstatus?" {
		t.Fatalf("parent message %q", got)
	}
}

// TestBashApprovalWithdrawnOnStop: a stop while a command waits for a
// person's answer withdraws the request from the inbox (DELETE, answered by
// the agent) instead of leaving it there until its timeout; the command does
// not run and the agent ends at once.
func TestBashApprovalWithdrawnOnStop(t *testing.T) {
	llm := fakellm.New()
	defer llm.Close()
	llm.SetModels(fakeModels)
	api := newFakeAgentAPI(t, llm)
	polling := make(chan struct{}, 1)
	withdrawn := make(chan struct{})
	var once sync.Once
	// The long poll waits as the real one does: until the request is
	// answered (here: withdrawn) or the client gives up.
	api.routes["GET /api/v1/approvals/a1"] = func(w http.ResponseWriter, r *http.Request) {
		select {
		case polling <- struct{}{}:
		default:
		}
		select {
		case <-withdrawn:
			json.NewEncoder(w).Encode(map[string]any{"id": "a1", "status": "denied", "answered_by": "agent"})
		case <-r.Context().Done():
		}
	}
	api.routes["DELETE /api/v1/approvals/a1"] = func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(withdrawn) })
		json.NewEncoder(w).Encode(map[string]any{"id": "a1", "status": "denied", "answered_by": "agent"})
	}
	dir := t.TempDir()
	cmd := `echo https://example.com > fetched.txt`
	llm.Script(fakellm.Turn{ToolCalls: []fakellm.ToolCall{call("c1", "bash", jsonArgs(map[string]string{"command": cmd}))}})
	cfg := testConfig(api.srv.URL, dir)
	cfg.Task = "fetch it"
	h := startAgent(t, cfg)
	select {
	case <-polling:
	case <-time.After(30 * time.Second):
		t.Fatalf("the agent never waited for the answer: %v", api.requests())
	}
	h.stop()
	h.ended(2*time.Second, "the agent to end within 2 s of signal stop")
	var deletes []string
	for _, r := range api.requests() {
		if strings.HasPrefix(r, "DELETE ") {
			deletes = append(deletes, r)
		}
	}
	if len(deletes) != 1 || !strings.HasPrefix(deletes[0], "DELETE /api/v1/approvals/a1 ") {
		t.Fatalf("withdrawals %q, want one DELETE /api/v1/approvals/a1; requests: %v", deletes, api.requests())
	}
	if _, err := os.Stat(filepath.Join(dir, "fetched.txt")); err == nil {
		t.Fatal("the command ran although the agent was stopped before it was approved")
	}
	h.waitFor("the stopped command's refusal", 1, func(e protocol.Event) bool {
		c, ok := e.(protocol.CommandEvent)
		return ok && c.Cmd == cmd && c.Status == protocol.StepError && c.Stderr != nil && strings.Contains(*c.Stderr, "stopped while it waited for approval")
	})
}
