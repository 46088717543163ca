package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/fakellm"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/gateway"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
)

const nodeToken = "fp_node_secret_token"

type env struct {
	st       *store.Store
	sessions *sessions.Store
	pub      *storetest.Recorder
	up       *fakellm.Server
	gw       *gateway.Gateway
	srv      *httptest.Server
	caller   orchestrator.Caller
	user     identity.User
	clock    *testkit.Clock // of the spend cache
}

type envOpts struct {
	cfg          func(*gateway.Config)
	writeTimeout time.Duration // of the listener in front of the gateway
}

// newEnv starts a fake upstream, a store with one user, session and node,
// and the gateway behind a listener that, like the agent-facing one, turns
// the node's token (Bearer or x-api-key) into the request's Caller.
func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{pub: &storetest.Recorder{}, up: fakellm.New(), clock: testkit.NewClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))}
	t.Cleanup(e.up.Close)
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(t.TempDir(), "f.db"), Publisher: e.pub})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.st, e.sessions = st, sessions.New(st, sessions.Config{})
	e.user, _ = identity.New(st).CreateUser(ctx, "alice", false)
	sess, _ := e.sessions.CreateSession(ctx, e.user.ID, sessions.NewSession{Name: "s"})
	n, err := e.sessions.CreateNode(ctx, e.user.ID, sess.ID, sessions.NewNode{AgentType: "shelley"})
	if err != nil {
		t.Fatal(err)
	}
	e.caller = orchestrator.Caller{UserID: e.user.ID, SessionID: sess.ID, NodeID: n.ID}
	cfg := gateway.Config{
		OpenRouter: gateway.Upstream{APIKey: "or-key", BaseURL: e.up.URL + "/api/v1"},
		Anthropic:  gateway.Upstream{APIKey: "ant-key", BaseURL: e.up.URL},
		OpenAI:     gateway.Upstream{APIKey: "oai-key", BaseURL: e.up.URL + "/v1"},
		Store:      e.sessions,
		Log:        st,
		Now:        e.clock.Now,
		Logger:     slog.New(slog.DiscardHandler),
	}
	if os.Getenv("GATEWAY_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	e.gw = gw
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if tok == "" {
			tok = r.Header.Get("X-Api-Key")
		}
		if tok == nodeToken {
			r = r.WithContext(orchestrator.WithCaller(r.Context(), e.caller))
		}
		gw.ServeHTTP(w, r)
	}))
	e.srv.Config.WriteTimeout = o.writeTimeout
	e.srv.Start()
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) post(t *testing.T, path, body string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+nodeToken)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// usage flushes the gateway and returns the session's metered requests.
func (e *env) usage(t *testing.T) []sessions.Usage {
	t.Helper()
	e.gw.Flush()
	us, err := e.sessions.SessionUsage(context.Background(), e.caller.SessionID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return us
}

func (e *env) node(t testing.TB) sessions.Node {
	t.Helper()
	n, err := e.sessions.NodeByID(context.Background(), e.caller.NodeID)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// lastRequest is the last request the fake upstream received.
func (e *env) lastRequest(t *testing.T) fakellm.Request {
	t.Helper()
	rs := e.up.Requests()
	if len(rs) == 0 {
		t.Fatal("the upstream received no request")
	}
	return rs[len(rs)-1]
}

// noSecretsUpstream checks that the node's token went nowhere upstream.
func noSecretsUpstream(t *testing.T, r fakellm.Request) {
	t.Helper()
	for k, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, nodeToken) {
				t.Fatalf("the node token went upstream in %s: %q", k, v)
			}
		}
	}
	if strings.Contains(string(r.Body), nodeToken) {
		t.Fatal("the node token went upstream in the body")
	}
}

// TestOpenRouterStream: a streamed chat completion passes through, the
// gateway asks for the usage chunk, swaps the token for the key, forwards
// only the whitelisted headers, and meters the usage and cost on the node,
// which the UI sees as a node record.
func TestOpenRouterStream(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.up.Script(fakellm.Turn{Text: "hello there world", Usage: fakellm.Usage{Input: 100, Output: 20, CacheRead: 30, Cost: 0.0125}})
	resp := e.post(t, "/openrouter/v1/chat/completions", `{"model":"anthropic/claude-sonnet-4","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		"X-Title", "filepath-test", "Cookie", "a=b", "OpenAI-Organization", "org-evil", "X-Api-Key", "also-not-forwarded")
	body := readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if !strings.Contains(body, `"usage":{`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream lacks the usage chunk or [DONE]: %s", body)
	}

	up := e.lastRequest(t)
	noSecretsUpstream(t, up)
	if up.Path != "/api/v1/chat/completions" || up.Header.Get("Authorization") != "Bearer or-key" {
		t.Fatalf("upstream got %s with Authorization %q", up.Path, up.Header.Get("Authorization"))
	}
	if up.Header.Get("X-Title") != "filepath-test" || up.Header.Get("Cookie") != "" || up.Header.Get("OpenAI-Organization") != "" ||
		up.Header.Get("X-Api-Key") != "" {
		t.Fatalf("upstream headers: %v", up.Header)
	}
	var sent struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Model string `json:"model"`
	}
	if err := up.JSON(&sent); err != nil || !sent.StreamOptions.IncludeUsage || sent.Model != "anthropic/claude-sonnet-4" {
		t.Fatalf("upstream body %s (%v)", up.Body, err)
	}

	us := e.usage(t)
	if len(us) != 1 {
		t.Fatalf("%d usage rows, want 1", len(us))
	}
	u := us[0]
	if u.Provider != "openrouter" || u.Endpoint != "chat/completions" || u.Model != "anthropic/claude-sonnet-4" ||
		u.InputTokens != 100 || u.CacheReadTokens != 30 || u.OutputTokens != 20 || u.CostUSD == nil || *u.CostUSD != 0.0125 ||
		u.Status != 200 || !u.Streamed || u.TTFB == nil || u.Note != "" || u.UserID != e.user.ID || u.NodeID != e.caller.NodeID {
		t.Fatalf("usage row %+v", u)
	}
	n := e.node(t)
	if n.Tokens != 150 || n.CostUSD != 0.0125 {
		t.Fatalf("node tokens %d cost %v, want 150 and 0.0125", n.Tokens, n.CostUSD)
	}
	var seen bool
	for _, r := range e.pub.All() {
		var c protocol.NodeChange
		if r.Kind == protocol.KindNode && json.Unmarshal(r.Data, &c) == nil && c.Op == protocol.OpUpdated && c.Node.Tokens == 150 && c.Node.CostUSD == 0.0125 {
			seen = true
		}
	}
	if !seen {
		t.Fatal("no node record with the new tokens and cost was published")
	}
}

// TestRequestBodyUnchanged: a request that already asks for usage, or does
// not stream, reaches the upstream byte for byte.
func TestRequestBodyUnchanged(t *testing.T) {
	e := newEnv(t, envOpts{})
	for _, body := range []string{
		`{"model":"m",  "stream":true, "stream_options":{"include_usage":true},"messages":[]}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}]}`,
	} {
		e.up.Script(fakellm.Turn{Text: "ok", Usage: fakellm.Usage{Input: 3, Output: 1}})
		resp := e.post(t, "/openai/v1/chat/completions", body)
		readAll(t, resp)
		up := e.lastRequest(t)
		if string(up.Body) != body || up.Header.Get("Authorization") != "Bearer oai-key" || up.Path != "/v1/chat/completions" {
			t.Fatalf("upstream got %s %q (auth %q), want the body unchanged", up.Path, up.Body, up.Header.Get("Authorization"))
		}
	}
	us := e.usage(t)
	if len(us) != 2 || us[0].InputTokens != 3 || us[1].InputTokens != 3 || us[0].Streamed == us[1].Streamed || us[0].Provider != "openai" {
		t.Fatalf("usage %+v", us)
	}
}

// TestAnthropic: Messages streamed and not, and count_tokens: the key goes
// in x-api-key, anthropic-version and anthropic-beta and the query pass,
// usage from message_start and message_delta (output not summed).
func TestAnthropic(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.up.Script(
		fakellm.Turn{Text: "streamed answer here", Usage: fakellm.Usage{Input: 40, Output: 9, CacheRead: 100, CacheWrite: 7}},
		fakellm.Turn{Text: "json answer", Usage: fakellm.Usage{Input: 5, Output: 2}},
	)
	hdr := []string{"Authorization", "", "X-Api-Key", nodeToken, "Anthropic-Version", "2023-06-01", "Anthropic-Beta", "prompt-caching-2024-07-31"}
	resp := e.post(t, "/anthropic/v1/messages?beta=true", `{"model":"claude-sonnet-4","stream":true,"max_tokens":10,"messages":[]}`, hdr...)
	if body := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(body, "event: message_stop") {
		t.Fatalf("stream: %d %s", resp.StatusCode, body)
	}
	up := e.lastRequest(t)
	noSecretsUpstream(t, up)
	if up.Path != "/v1/messages" || up.Header.Get("X-Api-Key") != "ant-key" || up.Header.Get("Authorization") != "" ||
		up.Header.Get("Anthropic-Version") != "2023-06-01" || up.Header.Get("Anthropic-Beta") != "prompt-caching-2024-07-31" {
		t.Fatalf("upstream request %s %v", up.Path, up.Header)
	}
	resp = e.post(t, "/anthropic/v1/messages", `{"model":"claude-sonnet-4","max_tokens":10,"messages":[]}`, hdr...)
	readAll(t, resp)
	resp = e.post(t, "/anthropic/v1/messages/count_tokens", `{"model":"claude-sonnet-4","messages":[]}`, hdr...)
	if body := readAll(t, resp); !strings.Contains(body, "input_tokens") {
		t.Fatalf("count_tokens: %s", body)
	}
	us := e.usage(t)
	if len(us) != 3 {
		t.Fatalf("%d rows", len(us))
	}
	if u := us[0]; u.InputTokens != 40 || u.OutputTokens != 9 || u.CacheReadTokens != 100 || u.CacheWriteTokens != 7 || !u.Streamed || u.CostUSD != nil || u.Endpoint != "v1/messages" {
		t.Fatalf("streamed row %+v", u)
	}
	if u := us[1]; u.InputTokens != 5 || u.OutputTokens != 2 || u.Streamed {
		t.Fatalf("JSON row %+v", u)
	}
	if u := us[2]; u.Endpoint != "v1/messages/count_tokens" || u.Tokens() != 0 || u.Status != 200 || u.Note != "" {
		t.Fatalf("count_tokens row %+v", u)
	}
	if n := e.node(t); n.Tokens != 156+7 {
		t.Fatalf("node tokens %d, want %d", n.Tokens, 163)
	}
}

// TestResponses: OpenAI Responses streamed and not; usage from
// response.completed with cached tokens split out.
func TestResponses(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.up.Script(
		fakellm.Turn{Text: "a b c", Reasoning: "think", Usage: fakellm.Usage{Input: 10, Output: 4, CacheRead: 6}},
		fakellm.Turn{Text: "x", Usage: fakellm.Usage{Input: 1, Output: 1}},
	)
	resp := e.post(t, "/openai/v1/responses", `{"model":"o3","stream":true,"input":"hi"}`)
	if body := readAll(t, resp); !strings.Contains(body, "response.completed") {
		t.Fatalf("stream %s", body)
	}
	if up := e.lastRequest(t); up.Path != "/v1/responses" || up.Header.Get("Authorization") != "Bearer oai-key" || up.Body == nil ||
		string(up.Body) != `{"model":"o3","stream":true,"input":"hi"}` {
		t.Fatalf("upstream %s %q %q", up.Path, up.Header.Get("Authorization"), up.Body)
	}
	readAll(t, e.post(t, "/openai/v1/responses", `{"model":"o3","input":"hi"}`))
	us := e.usage(t)
	if len(us) != 2 || us[0].InputTokens != 10 || us[0].CacheReadTokens != 6 || us[0].OutputTokens != 4 || !us[0].Streamed ||
		us[1].InputTokens != 1 || us[1].OutputTokens != 1 || us[1].Streamed {
		t.Fatalf("usage %+v", us)
	}
}

// TestModelsPassThrough: GET .../models reaches the upstream with the key.
func TestModelsPassThrough(t *testing.T) {
	e := newEnv(t, envOpts{})
	for _, p := range []string{"/openrouter/v1/models", "/openai/v1/models"} {
		req, _ := http.NewRequest("GET", e.srv.URL+p, nil)
		req.Header.Set("Authorization", "Bearer "+nodeToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		resp.Body.Close()
		if resp.StatusCode != 200 || body != string(fakellm.DefaultModels) {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, body)
		}
	}
	if up := e.lastRequest(t); up.Path != "/v1/models" || up.Header.Get("Authorization") != "Bearer oai-key" {
		t.Fatalf("upstream %s %v", up.Path, up.Header)
	}
	if us := e.usage(t); len(us) != 2 || us[0].Endpoint != "models" || us[0].Status != 200 || us[0].Note != "" {
		t.Fatalf("usage %+v", us)
	}
}

// TestPassThroughByteForByte: what the upstream writes, in whatever pieces,
// reaches the agent unchanged, and the usage is read from the same bytes.
func TestPassThroughByteForByte(t *testing.T) {
	pieces := []string{
		": comment line\r\n",
		"retry: 100\n\nda", "ta: {\"choices\":[{\"delta\":{\"content\":\"\\u00e9 caf\xc3\xa9\"}}]}\r\n\r\n",
		"event: odd\ndata: not json at all\n\n",
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"cost\":0.001}}\n\n",
		"data: [DONE]\n\n",
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("X-Request-Id", "req-123")
		w.Header().Set("Set-Cookie", "__cf=1")
		for _, p := range pieces {
			io.WriteString(w, p)
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	e := newEnv(t, envOpts{cfg: func(c *gateway.Config) { c.OpenRouter.BaseURL = up.URL }})
	resp := e.post(t, "/openrouter/v1/chat/completions", `{"model":"m","stream":true}`)
	if got := readAll(t, resp); got != strings.Join(pieces, "") {
		t.Fatalf("agent got %q\nwant %q", got, strings.Join(pieces, ""))
	}
	if resp.Header.Get("X-Request-Id") != "req-123" || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("response headers %v", resp.Header)
	}
	us := e.usage(t)
	if len(us) != 1 || us[0].InputTokens != 7 || us[0].OutputTokens != 3 || *us[0].CostUSD != 0.001 || us[0].Note != "" {
		t.Fatalf("usage %+v", us)
	}
}

// sseEvents reads data lines from a stream, sending each with its arrival
// time.
func sseEvents(r io.Reader) <-chan time.Time {
	ch := make(chan time.Time, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				ch <- time.Now()
			}
		}
	}()
	return ch
}

// TestStreamUnbuffered: each event reaches the agent when the upstream sends
// it, not when the answer ends.
func TestStreamUnbuffered(t *testing.T) {
	e := newEnv(t, envOpts{})
	const gap = 150 * time.Millisecond
	e.up.Script(fakellm.Turn{Text: "one two three four", ChunkDelay: gap, Usage: fakellm.Usage{Input: 1, Output: 4}})
	resp := e.post(t, "/openrouter/v1/chat/completions", `{"model":"m","stream":true}`)
	var at []time.Time
	for ts := range sseEvents(resp.Body) {
		at = append(at, ts)
	}
	// role, 4 words, finish, usage, [DONE]: each sent gap after the one before.
	if len(at) < 6 {
		t.Fatalf("%d events", len(at))
	}
	for i := 1; i < len(at); i++ {
		if d := at[i].Sub(at[i-1]); d < gap/2 {
			t.Fatalf("events %d and %d arrived %v apart; the upstream sent them %v apart (buffered?)", i-1, i, d, gap)
		}
	}
}

// TestClientAbortMidStream: the upstream sends message_start and then holds
// the stream; the agent gets that first event at once, goes away, and the
// input tokens reported so far are metered with status 499.
func TestClientAbortMidStream(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.up.Script(fakellm.Turn{Text: "never sent", Hang: true, Usage: fakellm.Usage{Input: 1234, Output: 50}})
	// The deadline fails a gateway that holds back even the headers.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/anthropic/v1/messages", strings.NewReader(`{"model":"c","stream":true,"messages":[]}`))
	req.Header.Set("X-Api-Key", nodeToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make(chan string, 1)
	go func() {
		br := bufio.NewReader(resp.Body)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if strings.HasPrefix(l, "data: ") {
				got <- l
				return
			}
		}
	}()
	if l := testkit.Recv(t, got, 10*time.Second, "the first event while the upstream holds the stream (else the gateway buffers)"); !strings.Contains(l, "message_start") {
		t.Fatalf("first event %q", l)
	}
	cancel()
	testkit.Eventually(t, 10*time.Second, "the aborted request to be metered", func() bool { return len(e.usage(t)) == 1 })
	if u := e.usage(t)[0]; u.Status != gateway.StatusClientClosed || u.InputTokens != 1234 || u.OutputTokens != 1 || !strings.Contains(u.Note, "went away") {
		t.Fatalf("usage after abort %+v", u)
	}
}

func errorBody(t *testing.T, resp *http.Response, anthropic bool) (typ, msg string) {
	t.Helper()
	body := readAll(t, resp)
	if anthropic {
		var v struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil || v.Type != "error" || v.Error.Message == "" {
			t.Fatalf("not an Anthropic error: %s", body)
		}
		return v.Error.Type, v.Error.Message
	}
	var v struct {
		Error struct{ Type, Message, Code string }
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Error.Message == "" || v.Error.Code == "" {
		t.Fatalf("not an OpenAI error: %s", body)
	}
	return v.Error.Type, v.Error.Message
}

func TestErrors(t *testing.T) {
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := closed.Addr().String()
	closed.Close()
	tests := []struct {
		name    string
		cfg     func(*gateway.Config)
		turn    *fakellm.Turn
		path    string
		body    string
		hdr     []string
		status  int
		msg     string // in the error message
		noRetry bool
	}{
		{name: "no token", path: "/openrouter/v1/chat/completions", body: `{}`, hdr: []string{"Authorization", ""}, status: 401, msg: "FILEPATH_API_KEY", noRetry: true},
		{name: "wrong token, anthropic shape", path: "/anthropic/v1/messages", body: `{}`, hdr: []string{"Authorization", "", "X-Api-Key", "nope"}, status: 401, msg: "FILEPATH_API_KEY", noRetry: true},
		{name: "no key configured", cfg: func(c *gateway.Config) { c.Anthropic.APIKey = "" }, path: "/anthropic/v1/messages", body: `{}`,
			status: 503, msg: "FILEPATH_ANTHROPIC_API_KEY", noRetry: true},
		{name: "unknown path", path: "/openai/v1/embeddings", body: `{}`, status: 404, msg: "/openai/v1/embeddings", noRetry: true},
		{name: "body too large", cfg: func(c *gateway.Config) { c.MaxBody = 100 }, path: "/openai/v1/responses",
			body: `{"input":"` + strings.Repeat("x", 200) + `"}`, status: 413, msg: "100 bytes", noRetry: true},
		{name: "upstream unreachable", cfg: func(c *gateway.Config) { c.OpenAI.BaseURL = "http://" + deadAddr + "/v1" }, path: "/openai/v1/responses",
			body: `{"model":"o3"}`, status: 502, msg: deadAddr},
		{name: "upstream timeout", cfg: func(c *gateway.Config) { c.Timeout = 200 * time.Millisecond }, turn: &fakellm.Turn{Delay: 5 * time.Second},
			path: "/openrouter/v1/chat/completions", body: `{"model":"m"}`, status: 504, msg: "did not answer within 200ms"},
		{name: "upstream error passes through", turn: &fakellm.Turn{Status: 529, ErrorMessage: "Overloaded"},
			path: "/anthropic/v1/messages", body: `{"model":"c"}`, status: 529, msg: "Overloaded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOpts{cfg: tt.cfg})
			if tt.turn != nil {
				e.up.Script(*tt.turn)
			}
			before := len(e.up.Requests())
			resp := e.post(t, tt.path, tt.body, tt.hdr...)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, readAll(t, resp))
			}
			_, msg := errorBody(t, resp, strings.HasPrefix(tt.path, "/anthropic/"))
			if !strings.Contains(msg, tt.msg) {
				t.Fatalf("message %q does not name %q", msg, tt.msg)
			}
			if got := resp.Header.Get("X-Should-Retry") == "false"; got != tt.noRetry {
				t.Fatalf("x-should-retry false: %v, want %v", got, tt.noRetry)
			}
			if tt.status == 401 || tt.status == 503 || tt.status == 413 || tt.status == 404 {
				if n := len(e.up.Requests()); n != before {
					t.Fatal("a refused request reached the upstream")
				}
			}
			// Every request of a known node is metered, refused or not.
			us := e.usage(t)
			switch tt.status {
			case 401, 404:
				if len(us) != 0 {
					t.Fatalf("metered without a node: %+v", us)
				}
			default:
				if len(us) != 1 || us[0].Status != tt.status || us[0].Tokens() != 0 {
					t.Fatalf("usage %+v, want one row with status %d", us, tt.status)
				}
			}
		})
	}
}

// TestUpstreamSilenceCutsTheStream: a stream that stops sending for longer
// than the timeout is cut; what was reported until then is metered.
func TestUpstreamSilenceCutsTheStream(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *gateway.Config) { c.Timeout = 300 * time.Millisecond }})
	e.up.Script(fakellm.Turn{Text: "x", Hang: true, Usage: fakellm.Usage{Input: 77}})
	resp := e.post(t, "/anthropic/v1/messages", `{"model":"c","stream":true}`, "Authorization", "", "X-Api-Key", nodeToken)
	body := readAll(t, resp) // ends when the gateway cuts it
	if !strings.Contains(body, "message_start") {
		t.Fatalf("body %q", body)
	}
	us := e.usage(t)
	if len(us) != 1 || us[0].InputTokens != 77 || us[0].Status != 200 || !strings.Contains(us[0].Note, "sent nothing for 300ms") {
		t.Fatalf("usage %+v", us)
	}
}

// TestBudget: over the session's budget, requests get 429 naming the budget
// and how to raise it, never reach the upstream, and the node's chat gets
// one error record per budget; raising the budget lets requests through.
func TestBudget(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envOpts{})
	if _, err := e.sessions.SetSessionBudget(ctx, e.user.ID, e.caller.SessionID, sessions.BudgetPatch{SetTokens: true, Tokens: ptr(int64(100))}); err != nil {
		t.Fatal(err)
	}
	e.up.Fallback(func(fakellm.Request) fakellm.Turn {
		return fakellm.Turn{Text: "ok", Usage: fakellm.Usage{Input: 90, Output: 60}}
	})
	chat := func() *http.Response {
		return e.post(t, "/openrouter/v1/chat/completions", `{"model":"m","stream":true}`)
	}
	if resp := chat(); resp.StatusCode != 200 {
		t.Fatalf("under budget: %d", resp.StatusCode)
	} else {
		readAll(t, resp)
	}
	e.gw.Flush()
	upstreamCalls := len(e.up.Requests())
	for i := range 3 {
		resp := chat()
		if resp.StatusCode != 429 {
			t.Fatalf("over budget, try %d: %d", i, resp.StatusCode)
		}
		_, msg := errorBody(t, resp, false)
		for _, want := range []string{"150 of 100 tokens", "budget_tokens", "PATCH /api/v1/sessions/" + e.caller.SessionID} {
			if !strings.Contains(msg, want) {
				t.Fatalf("429 message %q lacks %q", msg, want)
			}
		}
		if resp.Header.Get("X-Should-Retry") != "false" {
			t.Fatal("429 invites a retry")
		}
	}
	// The anthropic shape too.
	if resp := e.post(t, "/anthropic/v1/messages", `{"model":"c"}`); resp.StatusCode != 429 {
		t.Fatalf("anthropic over budget: %d", resp.StatusCode)
	} else if typ, _ := errorBody(t, resp, true); typ != "rate_limit_error" {
		t.Fatalf("anthropic error type %q", typ)
	}
	if n := len(e.up.Requests()); n != upstreamCalls {
		t.Fatalf("refused requests reached the upstream (%d calls, want %d)", n, upstreamCalls)
	}
	notices := func() []map[string]string {
		var out []map[string]string
		for _, r := range e.pub.All() {
			if r.Kind == protocol.KindError && r.NodeID == e.caller.NodeID {
				var d map[string]string
				_ = json.Unmarshal(r.Data, &d)
				out = append(out, d)
			}
		}
		return out
	}
	if ns := notices(); len(ns) != 1 || ns[0]["source"] != "gateway" || !strings.Contains(ns[0]["message"], "budget_tokens") {
		t.Fatalf("error records %v, want one from the gateway", ns)
	}
	if us := e.usage(t); len(us) != 5 || us[4].Status != 429 || us[4].Tokens() != 0 {
		t.Fatalf("refusals are metered as requests: %+v", us)
	}

	// Raised: through again once the gateway reads the budget again (within
	// its SpendTTL); used up again: one more notice.
	if _, err := e.sessions.SetSessionBudget(ctx, e.user.ID, e.caller.SessionID, sessions.BudgetPatch{SetTokens: true, Tokens: ptr(int64(200))}); err != nil {
		t.Fatal(err)
	}
	if resp := chat(); resp.StatusCode != 429 {
		t.Fatalf("within the spend TTL: %d", resp.StatusCode)
	}
	e.clock.Advance(gateway.DefaultSpendTTL)
	if resp := chat(); resp.StatusCode != 200 {
		t.Fatalf("after raising: %d", resp.StatusCode)
	} else {
		readAll(t, resp)
	}
	e.gw.Flush()
	if resp := chat(); resp.StatusCode != 429 {
		t.Fatalf("used up again (the gateway counts what it metered at once): %d", resp.StatusCode)
	}
	if ns := notices(); len(ns) != 2 {
		t.Fatalf("%d notices, want 2", len(ns))
	}

	// A dollar budget.
	if _, err := e.sessions.SetSessionBudget(ctx, e.user.ID, e.caller.SessionID, sessions.BudgetPatch{SetTokens: true, SetUSD: true, USD: ptr(0.0)}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(gateway.DefaultSpendTTL)
	resp := chat()
	if _, msg := errorBody(t, resp, false); resp.StatusCode != 429 || !strings.Contains(msg, "budget_usd") {
		t.Fatalf("usd budget: %d %s", resp.StatusCode, msg)
	}
}

func ptr[T any](v T) *T { return &v }

// TestConcurrentMeteringExact: many streams at once, every token metered.
func TestConcurrentMeteringExact(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.up.Fallback(func(r fakellm.Request) fakellm.Turn {
		n := numberOf(r)
		return fakellm.Turn{Text: "a b", Usage: fakellm.Usage{Input: n, Output: 2 * n, CacheRead: 1}}
	})
	const n = 60
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := []string{"/openrouter/v1/chat/completions", "/anthropic/v1/messages", "/openai/v1/responses"}[i%3]
			req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(`{"model":"m","stream":true,"n":`+itoa(i)+`}`))
			req.Header.Set("Authorization", "Bearer "+nodeToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	wg.Wait()
	us := e.usage(t)
	var want int64
	for i := 1; i <= n; i++ {
		want += int64(3*i + 1)
	}
	var got int64
	for _, u := range us {
		got += u.Tokens()
	}
	if len(us) != n || got != want || e.node(t).Tokens != want {
		t.Fatalf("%d rows, %d tokens metered, node %d; want %d rows, %d tokens", len(us), got, e.node(t).Tokens, n, want)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestCloseWritesEverything: requests metered before Close are stored by
// it; requests that end after it are stored at once.
func TestCloseWritesEverything(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.up.Fallback(func(fakellm.Request) fakellm.Turn { return fakellm.Turn{Text: "x", Usage: fakellm.Usage{Input: 1}} })
	for range 5 {
		readAll(t, e.post(t, "/openai/v1/responses", `{"model":"o3"}`))
	}
	if err := e.gw.Close(); err != nil {
		t.Fatal(err)
	}
	readAll(t, e.post(t, "/openai/v1/responses", `{"model":"o3"}`))
	e.gw.Flush() // the agent may read the answer before it is metered
	if err := e.gw.Close(); err != nil {
		t.Fatal(err)
	}
	us, _ := e.sessions.SessionUsage(context.Background(), e.caller.SessionID, 0, 0)
	if len(us) != 6 {
		t.Fatalf("%d rows after Close, want 6", len(us))
	}
}

func TestConfig(t *testing.T) {
	for _, bad := range []string{"ftp://x", "not a url", "http://", "https://h/v1?x=1", "/relative"} {
		err := gateway.Config{OpenAI: gateway.Upstream{BaseURL: bad}}.Validate()
		if err == nil || !strings.Contains(err.Error(), "FILEPATH_OPENAI_BASE_URL") {
			t.Errorf("base URL %q: %v", bad, err)
		}
	}
	if err := (gateway.Config{Anthropic: gateway.Upstream{BaseURL: "https://proxy.example/anthropic/"}}).Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := gateway.New(gateway.Config{}); err == nil {
		t.Fatal("New without a store")
	}
	e := newEnv(t, envOpts{cfg: func(c *gateway.Config) { c.OpenAI.APIKey = "" }})
	if err := e.gw.Configured(gateway.OpenAI); err == nil || !strings.Contains(err.Error(), "FILEPATH_OPENAI_API_KEY") {
		t.Fatalf("Configured(openai) = %v", err)
	}
	if err := e.gw.Configured(gateway.OpenRouter); err != nil {
		t.Fatal(err)
	}
}

// TestCompleteAnswerNotAborted: an answer the agent received whole is
// metered as it was answered, even when the agent closes the connection
// before the gateway has seen the upstream's end.
func TestCompleteAnswerNotAborted(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.up.Fallback(func(fakellm.Request) fakellm.Turn {
		return fakellm.Turn{Text: "x", Usage: fakellm.Usage{Input: 2, Output: 1}}
	})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	const n = 30
	for range n {
		req, _ := http.NewRequest("POST", e.srv.URL+"/openai/v1/responses", strings.NewReader(`{"model":"o3"}`))
		req.Header.Set("Authorization", "Bearer "+nodeToken)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close() // closes the connection at once
	}
	for _, u := range e.usage(t) {
		if u.Status != 200 || u.Note != "" || u.Tokens() != 3 {
			t.Fatalf("a complete answer metered as %+v", u)
		}
	}
}

// TestLongAnswerOutlivesWriteTimeout: a listener's write timeout does not
// cut an answer that takes longer (the model decides how long it writes).
func TestLongAnswerOutlivesWriteTimeout(t *testing.T) {
	e := newEnv(t, envOpts{writeTimeout: 200 * time.Millisecond})
	e.up.Script(
		fakellm.Turn{Text: "a b c d e", ChunkDelay: 100 * time.Millisecond, Usage: fakellm.Usage{Input: 1, Output: 5}},
		fakellm.Turn{Text: "late", Delay: 400 * time.Millisecond, Usage: fakellm.Usage{Input: 1, Output: 1}},
	)
	resp := e.post(t, "/openrouter/v1/chat/completions", `{"model":"m","stream":true}`)
	if body := readAll(t, resp); !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream cut: %q", body)
	}
	resp = e.post(t, "/openrouter/v1/chat/completions", `{"model":"m"}`)
	if body := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(body, "late") {
		t.Fatalf("slow JSON answer: %d %q", resp.StatusCode, body)
	}
}

func TestWriteError(t *testing.T) {
	for _, tt := range []struct {
		path      string
		status    int
		anthropic bool
		noRetry   bool
	}{
		{"/anthropic/v1/messages", 401, true, true},
		{"/openrouter/v1/chat/completions", 401, false, true},
		{"/openai/v1/responses", 503, false, false},
	} {
		w := httptest.NewRecorder()
		gateway.WriteError(w, httptest.NewRequest("POST", tt.path, nil), tt.status, "token expired")
		resp := w.Result()
		if resp.StatusCode != tt.status || (resp.Header.Get("X-Should-Retry") == "false") != tt.noRetry {
			t.Fatalf("%s: %d, x-should-retry %q", tt.path, resp.StatusCode, resp.Header.Get("X-Should-Retry"))
		}
		if _, msg := errorBody(t, resp, tt.anthropic); msg != "token expired" {
			t.Fatalf("%s: message %q", tt.path, msg)
		}
	}
}

// numberOf is the "n" of a request's JSON body, where the tests number their
// requests (0 without one).
func numberOf(r fakellm.Request) int {
	var body struct {
		N int `json:"n"`
	}
	_ = r.JSON(&body)
	return body.N
}
