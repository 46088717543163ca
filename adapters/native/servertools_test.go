package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/internal/fakellm"
	"github.com/filepath-dev/filepath/protocol"
)

// serveTools has the fake agent API list tools and answer their calls.
func serveTools(api *fakeAgentAPI) {
	api.routes["GET /api/v1/tools"] = func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"data":[
{"name":"file_read_text","description":"Read lines.","read_only":true,"input_schema":{"type":"object","properties":{"id":{"type":"string"},"start_line":{"type":"integer"}},"required":["id"]}},
{"name":"file_replace_lines","description":"Replace lines.","read_only":false,"input_schema":{"type":"object","properties":{"id":{"type":"string"},"start_line":{"type":"integer"},"end_line":{"type":"integer"},"content":{"type":"string"},"if_match":{"type":"string"}},"required":["id","start_line","end_line","content"]}},
{"name":"read_file","description":"a name the agent has","read_only":true,"input_schema":{"type":"object"}},
{"name":"bad tool","description":"not a name","read_only":true,"input_schema":{"type":"object"}}]}`))
	}
	api.routes["POST /api/v1/tools/file_read_text"] = func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"content":"total,3\n","total_lines":2,"start_line":2,"end_line":2,"hash":"h1"}`))
	}
	api.routes["POST /api/v1/tools/file_replace_lines"] = func(w http.ResponseWriter, r *http.Request) {
		// the fake has read the body already: it is the last request's
		reqs := api.requests()
		var in map[string]any
		_, body, _ := strings.Cut(reqs[len(reqs)-1], " {")
		json.Unmarshal([]byte("{"+body), &in)
		if in["if_match"] != "h1" {
			w.WriteHeader(412)
			w.Write([]byte(`{"error":{"code":"precondition_failed","message":"/data.csv has changed since it was read: its hash is now h2"}}`))
			return
		}
		w.Write([]byte(`{"ok":true,"size":9,"total_lines":2,"hash":"h2"}`))
	}
}

// shelley offers the orchestrator's tools with their schemas and runs them
// through the agent API; pi gets only the read-only ones.
func TestServerTools(t *testing.T) {
	llm := fakellm.New()
	defer llm.Close()
	llm.SetModels(fakeModels)
	api := newFakeAgentAPI(t, llm)
	serveTools(api)
	llm.Script(
		fakellm.Turn{ToolCalls: []fakellm.ToolCall{
			call("r", "file_read_text", `{"id":"/workspace/data.csv","start_line":2}`),
			call("w", "file_replace_lines", `{"id":"/data.csv","start_line":2,"end_line":2,"content":"total,4","if_match":"h1"}`),
			call("x", "file_replace_lines", `{"id":"/data.csv","start_line":2,"end_line":2,"content":"total,5","if_match":"h0"}`),
		}},
		fakellm.Turn{Text: "updated"},
	)
	cfg := testConfig(api.srv.URL, t.TempDir())
	cfg.Task = "update the total"
	h := startAgent(t, cfg)
	evs := h.waitFor("done", 1, isType(protocol.TypeDone))
	reqs := chatRequests(t, llm)
	names := toolNames(reqs[0])
	if !slices.Contains(names, "file_read_text") || !slices.Contains(names, "file_replace_lines") || slices.Contains(names, "bad tool") ||
		strings.Count(strings.Join(names, ","), "read_file") != 1 {
		t.Fatalf("tools offered: %v", names)
	}
	if sys := content(reqs[0].Messages[0]); !strings.Contains(sys, "file_read_text") || !strings.Contains(sys, "if_match") {
		t.Fatalf("system prompt: %s", sys)
	}
	for id, want := range map[string]string{
		"r": `"content":"total,3\n"`,
		"w": `"hash":"h2"`,
		"x": "error: /data.csv has changed since it was read: its hash is now h2",
	} {
		if got := toolResultOf(t, llm, id); !strings.Contains(got, want) {
			t.Errorf("tool %s: %q, want %q", id, got, want)
		}
	}
	if got := strings.Join(transcriptOf(evs), "\n"); !strings.Contains(got, "tool file_read_text done data.csv") || !strings.Contains(got, "tool file_replace_lines error data.csv") {
		t.Errorf("events:\n%s", got)
	}
	if reqs := strings.Join(api.requests(), "\n"); !strings.Contains(reqs, `POST /api/v1/tools/file_replace_lines {"id":"/data.csv","start_line":2,"end_line":2,"content":"total,4","if_match":"h1"}`) {
		t.Errorf("requests:\n%s", reqs)
	}

	// pi: the read-only ones only
	llm2 := fakellm.New()
	defer llm2.Close()
	llm2.SetModels(fakeModels)
	api2 := newFakeAgentAPI(t, llm2)
	serveTools(api2)
	llm2.Script(fakellm.Turn{Text: "looked"})
	cfg2 := testConfig(api2.srv.URL, t.TempDir())
	cfg2.AgentType, cfg2.Task = "pi", "look"
	startAgent(t, cfg2).waitFor("done", 1, isType(protocol.TypeDone))
	names = toolNames(chatRequests(t, llm2)[0])
	if !slices.Contains(names, "file_read_text") || slices.Contains(names, "file_replace_lines") {
		t.Fatalf("pi's tools: %v", names)
	}
}
