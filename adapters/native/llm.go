package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// The chat completions wire format (OpenAI's, as OpenRouter speaks it):
// only the fields this agent sends or reads.

type message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content,omitempty"` // nil only for an assistant message with tool calls and no text
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

func textMessage(role, content string) message { return message{Role: role, Content: &content} }

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type toolSpec struct {
	Type     string       `json:"type"`
	Function functionSpec `json:"function"`
}

type functionSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []message      `json:"messages"`
	Tools         []toolSpec     `json:"tools,omitempty"`
	ToolChoice    string         `json:"tool_choice,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// answer is one streamed assistant message, put together.
type answer struct {
	Text   string
	Calls  []toolCall
	Finish string // finish_reason of the last chunk that had one
	Usage  *usage // nil when the upstream reported none
}

// chunk is one streamed chat.completion.chunk (or an error object).
type chunk struct {
	Choices []struct {
		Delta struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage   `json:"usage"`
	Error *apiFail `json:"error"`
}

type apiFail struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// Bounds of what the agent reads from the upstream.
const (
	maxSSELine    = 4 << 20  // one line of the stream
	maxAnswer     = 8 << 20  // text and tool arguments of one answer
	maxErrorBody  = 64 << 10 // an error answer's body
	maxModelsBody = 32 << 20 // the model list
)

var (
	errIdle    = errors.New("no data from the LLM")
	errStopped = errors.New("stopped")
)

// llmClient talks to the gateway's OpenAI-compatible endpoints.
type llmClient struct {
	base         string // $FILEPATH_API_URL/openrouter/v1
	key          string
	http         *http.Client
	idle         time.Duration // longest silence of the upstream before the request fails
	connectRetry time.Duration // how long "connection refused" is retried
	clock        clock
}

// upstreamError is an answer with an HTTP error status, or an error object
// in the stream.
type upstreamError struct {
	Status  int // 0 for an error inside a stream
	Message string
}

func (e *upstreamError) Error() string {
	if e.Status == 0 {
		return "the stream reported an error: " + e.Message
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// do sends a request, retrying while the connection is refused (the
// agent-facing listener appears a few milliseconds after the container
// starts), for at most c.connectRetry.
func (c *llmClient) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	deadline := c.clock.now().Add(c.connectRetry)
	wait := 20 * time.Millisecond
	for {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+c.key)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "text/event-stream")
		}
		resp, err := c.http.Do(req)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || !c.clock.now().Before(deadline) {
			return resp, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// complete streams one chat completion. It fails when the upstream is
// silent for c.idle (headers or stream data), answers an error status, or
// sends a stream that does not parse.
func (c *llmClient) complete(ctx context.Context, req chatRequest) (answer, error) {
	req.Stream = true
	req.StreamOptions = &streamOptions{IncludeUsage: true}
	body, err := json.Marshal(req)
	if err != nil {
		return answer{}, fmt.Errorf("encode request: %w", err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	dog := startWatchdog(ctx, c.clock, c.idle, func() { cancel(fmt.Errorf("%w for %s", errIdle, c.idle)) })
	defer dog.Stop()

	resp, err := c.do(ctx, http.MethodPost, "/chat/completions", body)
	if err != nil {
		return answer{}, requestError(ctx, err)
	}
	defer resp.Body.Close()
	dog.Kick()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return answer{}, &upstreamError{Status: resp.StatusCode, Message: errorMessage(b)}
	}
	a, err := readStream(&kickReader{r: resp.Body, kick: dog.Kick})
	if err != nil {
		return answer{}, requestError(ctx, err)
	}
	return a, nil
}

// requestError names why a request failed: the cause of its context
// (stopped, idle) when it ended, else err itself.
func requestError(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	return err
}

// errorMessage reads an error body in OpenAI's shape, or Anthropic's, or
// returns it as text.
func errorMessage(b []byte) string {
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && len(body.Error) > 0 {
		var f apiFail
		if json.Unmarshal(body.Error, &f) == nil && f.Message != "" {
			return f.Message
		}
		var s string
		if json.Unmarshal(body.Error, &s) == nil && s != "" {
			return s
		}
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(empty body)"
	}
	return cut(s, 2000)
}

type kickReader struct {
	r    io.Reader
	kick func()
}

func (k *kickReader) Read(p []byte) (int, error) {
	n, err := k.r.Read(p)
	if n > 0 {
		k.kick()
	}
	return n, err
}

// readStream reads a chat completions SSE stream to its end ("data: [DONE]",
// or EOF after a finish_reason) and puts the answer together.
func readStream(r io.Reader) (answer, error) {
	var a answer
	var text strings.Builder
	type callParts struct {
		id, name string
		args     strings.Builder
	}
	var calls []*callParts
	size := 0
	done := false
	err := readSSE(r, func(data string) error {
		if data == "[DONE]" {
			done = true
			return errEndOfStream
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return fmt.Errorf("malformed stream: %v in %q", err, cut(data, 200))
		}
		if c.Error != nil {
			return &upstreamError{Message: c.Error.Message}
		}
		if c.Usage != nil {
			a.Usage = c.Usage
		}
		for _, ch := range c.Choices {
			d := ch.Delta
			text.WriteString(d.Content)
			size += len(d.Content)
			for _, tc := range d.ToolCalls {
				if tc.Index < 0 || tc.Index > 127 {
					return fmt.Errorf("malformed stream: tool call index %d", tc.Index)
				}
				for len(calls) <= tc.Index {
					calls = append(calls, &callParts{})
				}
				p := calls[tc.Index]
				if tc.ID != "" {
					p.id = tc.ID
				}
				p.name += tc.Function.Name
				p.args.WriteString(tc.Function.Arguments)
				size += len(tc.Function.Name) + len(tc.Function.Arguments)
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				a.Finish = *ch.FinishReason
			}
		}
		if size > maxAnswer {
			return fmt.Errorf("the answer is over %d bytes", maxAnswer)
		}
		return nil
	})
	if err != nil {
		return answer{}, err
	}
	if !done && a.Finish == "" {
		return answer{}, errors.New("malformed stream: it ended before the answer was complete")
	}
	a.Text = text.String()
	for i, p := range calls {
		if p.name == "" {
			return answer{}, fmt.Errorf("malformed stream: tool call %d has no name", i)
		}
		id := p.id
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		a.Calls = append(a.Calls, toolCall{ID: id, Type: "function", Function: functionCall{Name: p.name, Arguments: p.args.String()}})
	}
	return a, nil
}

var errEndOfStream = errors.New("end of stream")

// readSSE calls f with the data of each server-sent event of r until r ends
// or f returns an error (errEndOfStream: a clean end).
func readSSE(r io.Reader, f func(data string) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var data []string
	dispatch := func() error {
		if data == nil {
			return nil
		}
		d := strings.Join(data, "\n")
		data = nil
		return f(d)
	}
	for {
		line, err := readLine(br)
		if err == io.EOF {
			if e := dispatch(); e != nil && e != errEndOfStream {
				return e
			}
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case line == "":
			if e := dispatch(); e == errEndOfStream {
				return nil
			} else if e != nil {
				return e
			}
		case strings.HasPrefix(line, ":"):
			// a comment (OpenRouter sends ": OPENROUTER PROCESSING" while it waits)
		default:
			field, value, _ := strings.Cut(line, ":")
			if field == "data" {
				data = append(data, strings.TrimPrefix(value, " "))
			}
		}
	}
}

// readLine reads one line without its ending (\n or \r\n); a line over
// maxSSELine is an error.
func readLine(br *bufio.Reader) (string, error) {
	var buf []byte
	for {
		part, err := br.ReadSlice('\n')
		buf = append(buf, part...)
		if len(buf) > maxSSELine {
			return "", fmt.Errorf("malformed stream: a line over %d bytes", maxSSELine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(buf) > 0 {
			err = nil
		}
		if err != nil {
			return "", err
		}
		return strings.TrimSuffix(strings.TrimSuffix(string(buf), "\n"), "\r"), nil
	}
}

// modelInfo is what the agent learns about its model from the model list.
type modelInfo struct {
	ID            string // the id to send (a bare name resolved to provider/name)
	ContextLength int
	Source        string // "models", "table" or "default": where ContextLength came from
}

// knownModels is the fallback when the model list cannot be read: the
// catalog's default models and a few common ones, with OpenRouter ids.
var knownModels = map[string]modelInfo{
	"claude-sonnet-4":   {ID: "anthropic/claude-sonnet-4", ContextLength: 200000},
	"claude-opus-4":     {ID: "anthropic/claude-opus-4", ContextLength: 200000},
	"claude-3.7-sonnet": {ID: "anthropic/claude-3.7-sonnet", ContextLength: 200000},
	"o3":                {ID: "openai/o3", ContextLength: 200000},
	"o4-mini":           {ID: "openai/o4-mini", ContextLength: 200000},
	"gpt-4.1":           {ID: "openai/gpt-4.1", ContextLength: 1047576},
	"gpt-4o":            {ID: "openai/gpt-4o", ContextLength: 128000},
	"gemini-2.5-pro":    {ID: "google/gemini-2.5-pro", ContextLength: 1048576},
}

const defaultContextLength = 128000

// lookupModel resolves model against the gateway's model list (an exact id,
// else the one id ending in "/model"), then the table above, then keeps it
// as given with a 128k context.
func (c *llmClient) lookupModel(ctx context.Context, model string, timeout time.Duration) (modelInfo, error) {
	info := modelInfo{ID: model, ContextLength: defaultContextLength, Source: "default"}
	bare := model[strings.LastIndexByte(model, '/')+1:]
	if k, ok := knownModels[bare]; ok && (model == bare || model == k.ID) {
		info = modelInfo{ID: k.ID, ContextLength: k.ContextLength, Source: "table"}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := c.do(ctx, http.MethodGet, "/models", nil)
	if err != nil {
		return info, fmt.Errorf("read the model list: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return info, fmt.Errorf("read the model list: HTTP %d: %s", resp.StatusCode, errorMessage(b))
	}
	var list struct {
		Data []struct {
			ID            string `json:"id"`
			ContextLength int    `json:"context_length"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxModelsBody)).Decode(&list); err != nil {
		return info, fmt.Errorf("read the model list: %w", err)
	}
	var exact, suffix []modelInfo
	for _, m := range list.Data {
		switch {
		case m.ID == model:
			exact = append(exact, modelInfo{ID: m.ID, ContextLength: m.ContextLength, Source: "models"})
		case strings.HasSuffix(m.ID, "/"+model):
			suffix = append(suffix, modelInfo{ID: m.ID, ContextLength: m.ContextLength, Source: "models"})
		}
	}
	found := exact
	if len(found) == 0 {
		found = suffix
	}
	if len(found) != 1 {
		return info, nil
	}
	if found[0].ContextLength <= 0 {
		found[0].ContextLength, found[0].Source = info.ContextLength, info.Source
	}
	return found[0], nil
}
