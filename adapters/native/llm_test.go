package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/fakellm"
	"github.com/filepath-dev/filepath/internal/testkit"
)

func TestReadStream(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   answer
		err    string
	}{
		{
			name: "text and usage",
			stream: `: OPENROUTER PROCESSING

data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"Hello "},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{"content":"there"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}

data: [DONE]

`,
			want: answer{Text: "Hello there", Finish: "stop", Usage: &usage{PromptTokens: 10, CompletionTokens: 3, TotalTokens: 13}},
		},
		{
			name: "tool calls in pieces, CRLF",
			stream: "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"pa\"}}]}}]}\r\n\r\n" +
				"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"c2\",\"function\":{\"name\":\"glob\",\"arguments\":\"{}\"}}]}}]}\r\n\r\n" +
				"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"th\\\":\\\"a\\\"}\"}}]}}]}\r\n\r\n" +
				"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\r\n\r\n" +
				"data: [DONE]\r\n\r\n",
			want: answer{Finish: "tool_calls", Calls: []toolCall{
				{ID: "c1", Type: "function", Function: functionCall{Name: "read_file", Arguments: `{"path":"a"}`}},
				{ID: "c2", Type: "function", Function: functionCall{Name: "glob", Arguments: "{}"}},
			}},
		},
		{
			name:   "finish without DONE",
			stream: "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n",
			want:   answer{Text: "ok", Finish: "stop"},
		},
		{
			name:   "data split over lines",
			stream: "data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n",
			want:   answer{Text: "x", Finish: "stop"},
		},
		{name: "cut short", stream: "data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n", err: "ended before the answer was complete"},
		{name: "empty", stream: "", err: "ended before the answer was complete"},
		{name: "not JSON", stream: "data: {oops\n\n", err: "malformed stream"},
		{name: "error in the stream", stream: "data: {\"error\":{\"message\":\"provider overloaded\",\"code\":502}}\n\n", err: "the stream reported an error: provider overloaded"},
		{name: "tool call without name", stream: "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n", err: "tool call 0 has no name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readStream(strings.NewReader(tt.stream))
			if testkit.WantErr(t, err, tt.err) {
				return
			}
			if got.Text != tt.want.Text || got.Finish != tt.want.Finish || len(got.Calls) != len(tt.want.Calls) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got.Calls {
				if got.Calls[i] != tt.want.Calls[i] {
					t.Fatalf("call %d: %+v, want %+v", i, got.Calls[i], tt.want.Calls[i])
				}
			}
			if (got.Usage == nil) != (tt.want.Usage == nil) || got.Usage != nil && *got.Usage != *tt.want.Usage {
				t.Fatalf("usage %+v, want %+v", got.Usage, tt.want.Usage)
			}
		})
	}
}

func testClient(url string) *llmClient {
	return &llmClient{base: url + "/openrouter/v1", key: "fp_node", http: &http.Client{}, idle: 5 * time.Second, connectRetry: 5 * time.Second, clock: realClock()}
}

func TestCompleteAgainstFake(t *testing.T) {
	f := fakellm.New()
	defer f.Close()
	f.Script(fakellm.Turn{Text: "I will read it.", ToolCalls: []fakellm.ToolCall{{ID: "t1", Name: "read_file", Arguments: `{"path":"go.mod"}`}}, Usage: fakellm.Usage{Input: 100, Output: 20}},
		fakellm.Turn{Status: 503, ErrorMessage: "provider key not configured: FILEPATH_OPENROUTER_API_KEY"})
	c := testClient(f.URL)
	a, err := c.complete(context.Background(), chatRequest{Model: "m", Messages: []message{textMessage("user", "hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Text != "I will read it." || len(a.Calls) != 1 || a.Calls[0].Function.Arguments != `{"path":"go.mod"}` || a.Usage == nil || a.Usage.PromptTokens != 100 {
		t.Fatalf("%+v", a)
	}
	req := f.Requests()[0]
	var body struct {
		Stream        bool `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	req.JSON(&body)
	if req.Path != "/openrouter/v1/chat/completions" || req.Header.Get("Authorization") != "Bearer fp_node" || !body.Stream || !body.StreamOptions.IncludeUsage {
		t.Fatalf("request %s %v %+v", req.Path, req.Header, body)
	}
	_, err = c.complete(context.Background(), chatRequest{Model: "m"})
	var ue *upstreamError
	if !errors.As(err, &ue) || ue.Status != 503 || !strings.Contains(err.Error(), "HTTP 503 Service Unavailable: provider key not configured: FILEPATH_OPENROUTER_API_KEY") {
		t.Fatalf("err = %v", err)
	}
}

func TestCompleteIdleTimeout(t *testing.T) {
	f := fakellm.New()
	defer f.Close()
	f.Script(fakellm.Turn{Text: "never", Hang: true})
	c := testClient(f.URL)
	c.idle = 200 * time.Millisecond
	start := time.Now()
	_, err := c.complete(context.Background(), chatRequest{Model: "m"})
	if !errors.Is(err, errIdle) {
		t.Fatalf("err = %v, want the idle timeout", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("took %s", el)
	}
}

func TestConnectionRefusedIsRetried(t *testing.T) {
	// A port nobody listens on yet.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var refused atomic.Int32
	c := testClient("http://" + addr)
	c.http = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, a)
		if err != nil {
			refused.Add(1)
		}
		return conn, err
	}}}
	type result struct {
		info modelInfo
		err  error
	}
	done := make(chan result)
	go func() {
		info, err := c.lookupModel(context.Background(), "claude-sonnet-4", 10*time.Second)
		done <- result{info, err}
	}()
	testkit.Eventually(t, 5*time.Second, "a refused connection", func() bool { return refused.Load() > 0 })
	// The listener appears late, as the agent-facing one does in a container.
	f := fakellm.NewAt(addr)
	defer f.Close()
	r := <-done
	if r.err != nil || r.info.ID != "anthropic/claude-sonnet-4" || r.info.ContextLength != 200000 || r.info.Source != "models" {
		t.Fatalf("%+v", r)
	}
}

func TestConnectionRefusedGivesUp(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c := testClient("http://" + addr)
	c.connectRetry = 300 * time.Millisecond
	start := time.Now()
	_, err := c.complete(context.Background(), chatRequest{Model: "m"})
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v", err)
	}
	if el := time.Since(start); el < 300*time.Millisecond || el > 3*time.Second {
		t.Fatalf("gave up after %s", el)
	}
}

func TestLookupModel(t *testing.T) {
	f := fakellm.New()
	defer f.Close()
	c := testClient(f.URL)
	tests := []struct {
		name, model, models string
		want                modelInfo
		listErr             bool
	}{
		{name: "exact id", model: "openai/gpt-4.1", want: modelInfo{ID: "openai/gpt-4.1", ContextLength: 1047576, Source: "models"}},
		{name: "bare name resolved", model: "claude-sonnet-4", want: modelInfo{ID: "anthropic/claude-sonnet-4", ContextLength: 200000, Source: "models"}},
		{name: "unknown model", model: "acme/x", want: modelInfo{ID: "acme/x", ContextLength: defaultContextLength, Source: "default"}},
		{name: "ambiguous bare name", model: "m", models: `{"data":[{"id":"a/m","context_length":1000},{"id":"b/m","context_length":2000}]}`,
			want: modelInfo{ID: "m", ContextLength: defaultContextLength, Source: "default"}},
		{name: "list unreadable, table", model: "o3", models: `not json`, listErr: true,
			want: modelInfo{ID: "openai/o3", ContextLength: 200000, Source: "table"}},
		{name: "list unreadable, default", model: "acme/y", models: `{"data":`, listErr: true,
			want: modelInfo{ID: "acme/y", ContextLength: defaultContextLength, Source: "default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.SetModels(nil)
			if tt.models != "" {
				f.SetModels([]byte(tt.models))
			}
			got, err := c.lookupModel(context.Background(), tt.model, 5*time.Second)
			if (err != nil) != tt.listErr || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v (error %v)", got, err, tt.want, tt.listErr)
			}
		})
	}
}
