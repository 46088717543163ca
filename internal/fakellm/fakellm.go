// Package fakellm is a scripted fake LLM upstream for tests: it speaks the
// providers' real wire formats (OpenAI chat completions, Anthropic Messages,
// OpenAI Responses; streamed as SSE and not) on a loopback port, answers each
// request with the next scripted Turn, and records every request.
//
// The wire format follows the request path: .../chat/completions is OpenAI
// chat completions (OpenRouter's dialect: usage.cost when a Turn has a cost),
// .../messages is Anthropic Messages, .../messages/count_tokens its token
// counter, .../responses is OpenAI Responses, .../models the model list. A
// request streams when its JSON body has "stream": true.
package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// ToolCall is one tool call the model makes.
//
// A Name starting with CustomPrefix is a Responses custom tool call (a
// custom_tool_call item whose input is Arguments as plain text, as Codex's
// apply_patch takes it); in the other formats it is a function call of the
// name without the prefix.
type ToolCall struct {
	ID        string `json:"id,omitempty"` // "" → call_<n>
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitempty"` // a JSON object (custom: any text)
}

// CustomPrefix marks a ToolCall as a Responses custom tool call.
const CustomPrefix = "custom:"

// custom reports whether c is a custom tool call, and its name.
func (c ToolCall) custom() (string, bool) {
	return strings.CutPrefix(c.Name, CustomPrefix)
}

// name is the tool's name without CustomPrefix.
func (c ToolCall) name() string {
	n, _ := c.custom()
	return n
}

// Usage is what the upstream reports for one answer.
type Usage struct {
	Input      int     `json:"input,omitempty"`       // prompt tokens, not counting cache reads/writes
	Output     int     `json:"output,omitempty"`      // completion tokens
	CacheRead  int     `json:"cache_read,omitempty"`  // tokens read from the prompt cache
	CacheWrite int     `json:"cache_write,omitempty"` // tokens written to the prompt cache (Anthropic)
	Cost       float64 `json:"cost,omitempty"`        // USD, reported as usage.cost (OpenRouter) when > 0
}

// Turn is one scripted answer.
type Turn struct {
	Text      string     `json:"text,omitempty"`       // the assistant's text
	Reasoning string     `json:"reasoning,omitempty"`  // optional reasoning text (Responses: a reasoning item)
	ToolCalls []ToolCall `json:"tool_calls,omitempty"` // tool calls after the text
	Usage     Usage      `json:"usage"`
	// Status, when not 0 or 200, makes the answer an error with this HTTP
	// status and ErrorMessage, in the format's error shape.
	Status       int    `json:"status,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
	// Delay waits before the first byte; ChunkDelay between stream events.
	Delay      time.Duration `json:"delay,omitempty"`
	ChunkDelay time.Duration `json:"chunk_delay,omitempty"`
	// Hang holds the request open until the client goes away (a stuck
	// upstream), after sending the headers and, when streaming, the first
	// event.
	Hang bool `json:"hang,omitempty"`
	// Chunks splits Text into this many deltas when streaming (default:
	// one per word).
	Chunks int `json:"chunks,omitempty"`
}

// Request is one request the fake received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// Format is "chat", "anthropic", "responses", "count_tokens" or "models".
	Format string
	Stream bool
	At     time.Time
}

// JSON decodes the request body into v.
func (r Request) JSON(v any) error { return json.Unmarshal(r.Body, v) }

// Server is the fake upstream. Build it with New; Close it when done.
type Server struct {
	URL string // http://127.0.0.1:<port>, without a trailing slash

	srv *httptest.Server

	mu       sync.Mutex
	script   []Turn
	fallback func(Request) Turn
	reqs     []Request
	models   []byte
	calls    int
}

// New starts a fake upstream on a free loopback port.
func New() *Server { return NewAt("127.0.0.1:0") }

// NewAt starts a fake upstream listening on addr (a loopback address).
func NewAt(addr string) *Server {
	s := &Server{}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		panic(fmt.Sprintf("fakellm: listen on %s: %v", addr, err))
	}
	s.srv.Listener = ln
	s.srv.Start()
	s.URL = s.srv.URL
	return s
}

// Close stops the server, ending requests still open.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Script queues turns; each request that asks for an answer takes the next.
func (s *Server) Script(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, turns...)
}

// Fallback answers requests that find the script empty (nil: a 500 error
// saying the script ran out).
func (s *Server) Fallback(f func(Request) Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = f
}

// SetModels sets the body of GET .../models (default: a small OpenRouter-style list).
func (s *Server) SetModels(body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = body
}

// Requests returns a copy of every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Remaining is the number of scripted turns not yet used.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

func formatOf(path string) string {
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return "chat"
	case strings.HasSuffix(path, "/messages/count_tokens"):
		return "count_tokens"
	case strings.HasSuffix(path, "/messages"):
		return "anthropic"
	case strings.HasSuffix(path, "/responses"):
		return "responses"
	case strings.HasSuffix(path, "/models"):
		return "models"
	}
	return ""
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Format: formatOf(r.URL.Path), At: time.Now()}
	var probe struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &probe)
	req.Stream = probe.Stream
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()

	switch req.Format {
	case "models":
		s.mu.Lock()
		m := s.models
		s.mu.Unlock()
		if m == nil {
			m = DefaultModels
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(m)
		return
	case "count_tokens":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"input_tokens":%d}`, max(1, len(body)/4))
		return
	case "":
		http.Error(w, `{"error":{"message":"fakellm: unknown path `+r.URL.Path+`"}}`, http.StatusNotFound)
		return
	}

	turn, ok := s.next(req)
	if !ok {
		turn = Turn{Status: http.StatusInternalServerError, ErrorMessage: "fakellm: the script ran out of turns"}
	}
	if turn.Delay > 0 {
		select {
		case <-time.After(turn.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if turn.Status != 0 && turn.Status != http.StatusOK {
		writeError(w, req.Format, turn.Status, turn.ErrorMessage)
		return
	}
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	a := answer{turn: turn, n: n, req: req}
	if req.Stream {
		a.stream(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(a.body())
	if turn.Hang {
		<-r.Context().Done()
	}
}

func (s *Server) next(req Request) (Turn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.script) > 0 {
		t := s.script[0]
		s.script = s.script[1:]
		return t, true
	}
	if s.fallback != nil {
		f := s.fallback
		s.mu.Unlock()
		t := f(req)
		s.mu.Lock()
		return t, true
	}
	return Turn{}, false
}

func writeError(w http.ResponseWriter, format string, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var b []byte
	if format == "anthropic" {
		b, _ = json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}})
	} else {
		b, _ = json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "code": status}})
	}
	w.Write(b)
}

// answer renders one turn in one wire format.
type answer struct {
	turn Turn
	n    int
	req  Request
}

func (a answer) model() string {
	var m struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(a.req.Body, &m)
	if m.Model == "" {
		return "fake-model"
	}
	return m.Model
}

func (a answer) callID(i int) string {
	if id := a.turn.ToolCalls[i].ID; id != "" {
		return id
	}
	return fmt.Sprintf("call_%d_%d", a.n, i)
}

func (a answer) args(i int) string {
	if s := a.turn.ToolCalls[i].Arguments; s != "" {
		return s
	}
	return "{}"
}

// deltas splits the text into stream deltas.
func (a answer) deltas() []string {
	t := a.turn.Text
	if t == "" {
		return nil
	}
	if a.turn.Chunks > 0 {
		n := a.turn.Chunks
		size := (len(t) + n - 1) / n
		var out []string
		for len(t) > 0 {
			k := min(size, len(t))
			out = append(out, t[:k])
			t = t[k:]
		}
		return out
	}
	var out []string
	for len(t) > 0 {
		i := strings.IndexByte(t[1:], ' ')
		if i < 0 {
			out = append(out, t)
			break
		}
		out = append(out, t[:i+1])
		t = t[i+1:]
	}
	return out
}

func (a answer) body() []byte {
	var v any
	u := a.turn.Usage
	switch a.req.Format {
	case "chat":
		msg := map[string]any{"role": "assistant", "content": nilIfEmpty(a.turn.Text)}
		finish := "stop"
		if len(a.turn.ToolCalls) > 0 {
			finish = "tool_calls"
			var calls []any
			for i, c := range a.turn.ToolCalls {
				calls = append(calls, map[string]any{"id": a.callID(i), "type": "function", "function": map[string]any{"name": c.name(), "arguments": a.args(i)}})
			}
			msg["tool_calls"] = calls
		}
		v = map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", a.n), "object": "chat.completion", "created": time.Now().Unix(), "model": a.model(),
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   chatUsage(u),
		}
	case "anthropic":
		var content []any
		if a.turn.Text != "" {
			content = append(content, map[string]any{"type": "text", "text": a.turn.Text})
		}
		stop := "end_turn"
		for i, c := range a.turn.ToolCalls {
			stop = "tool_use"
			content = append(content, map[string]any{"type": "tool_use", "id": a.toolUseID(i), "name": c.name(), "input": json.RawMessage(a.args(i))})
		}
		if content == nil {
			content = []any{}
		}
		v = map[string]any{
			"id": fmt.Sprintf("msg_%d", a.n), "type": "message", "role": "assistant", "model": a.model(),
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": anthropicUsage(u, u.Output),
		}
	case "responses":
		v = a.responseObject("completed")
	}
	b, _ := json.Marshal(v)
	return b
}

func (a answer) toolUseID(i int) string {
	if id := a.turn.ToolCalls[i].ID; id != "" {
		return id
	}
	return fmt.Sprintf("toolu_%d_%d", a.n, i)
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func chatUsage(u Usage) map[string]any {
	m := map[string]any{
		"prompt_tokens": u.Input + u.CacheRead, "completion_tokens": u.Output, "total_tokens": u.Input + u.CacheRead + u.Output,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.CacheRead},
	}
	if u.Cost > 0 {
		m["cost"] = u.Cost
	}
	return m
}

func anthropicUsage(u Usage, output int) map[string]any {
	return map[string]any{
		"input_tokens": u.Input, "output_tokens": output,
		"cache_creation_input_tokens": u.CacheWrite, "cache_read_input_tokens": u.CacheRead,
	}
}

func (a answer) responseOutput() []any {
	var out []any
	if a.turn.Reasoning != "" {
		out = append(out, map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%d", a.n),
			"summary": []any{map[string]any{"type": "summary_text", "text": a.turn.Reasoning}}})
	}
	if a.turn.Text != "" {
		out = append(out, a.messageItem("completed", a.turn.Text))
	}
	for i := range a.turn.ToolCalls {
		out = append(out, a.functionItem(i, "completed", a.args(i)))
	}
	if out == nil {
		out = []any{}
	}
	return out
}

func (a answer) messageItem(status, text string) map[string]any {
	content := []any{}
	if status == "completed" {
		content = []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}
	}
	return map[string]any{"type": "message", "id": fmt.Sprintf("msg_%d", a.n), "status": status, "role": "assistant", "content": content}
}

// functionItem is the Responses item of tool call i: a function_call, or a
// custom_tool_call whose input is args.
func (a answer) functionItem(i int, status, args string) map[string]any {
	c := a.turn.ToolCalls[i]
	if name, ok := c.custom(); ok {
		return map[string]any{"type": "custom_tool_call", "id": fmt.Sprintf("ctc_%d_%d", a.n, i), "call_id": a.callID(i),
			"name": name, "input": args, "status": status}
	}
	return map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d_%d", a.n, i), "call_id": a.callID(i),
		"name": c.Name, "arguments": args, "status": status}
}

func (a answer) responseObject(status string) map[string]any {
	u := a.turn.Usage
	r := map[string]any{
		"id": fmt.Sprintf("resp_%d", a.n), "object": "response", "created_at": time.Now().Unix(), "status": status,
		"model": a.model(), "output": []any{},
	}
	if status == "completed" {
		r["output"] = a.responseOutput()
		r["usage"] = map[string]any{
			"input_tokens": u.Input + u.CacheRead, "input_tokens_details": map[string]any{"cached_tokens": u.CacheRead},
			"output_tokens": u.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens": u.Input + u.CacheRead + u.Output,
		}
	}
	return r
}

// sse writes server-sent events, flushing each.
type sse struct {
	w     http.ResponseWriter
	r     *http.Request
	delay time.Duration
	sent  int
}

func (e *sse) event(name string, v any) bool {
	if e.sent > 0 && e.delay > 0 {
		select {
		case <-time.After(e.delay):
		case <-e.r.Context().Done():
			return false
		}
	}
	var buf bytes.Buffer
	if name != "" {
		fmt.Fprintf(&buf, "event: %s\n", name)
	}
	switch d := v.(type) {
	case string:
		fmt.Fprintf(&buf, "data: %s\n\n", d)
	default:
		b, _ := json.Marshal(v)
		fmt.Fprintf(&buf, "data: %s\n\n", b)
	}
	e.sent++
	if _, err := e.w.Write(buf.Bytes()); err != nil {
		return false
	}
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
	return e.r.Context().Err() == nil
}

func (a answer) stream(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	e := &sse{w: w, r: r, delay: a.turn.ChunkDelay}
	hang := func() {
		if a.turn.Hang {
			<-r.Context().Done()
		}
	}
	switch a.req.Format {
	case "chat":
		a.streamChat(e, hang)
	case "anthropic":
		a.streamAnthropic(e, hang)
	case "responses":
		a.streamResponses(e, hang)
	}
}

func (a answer) streamChat(e *sse, hang func()) {
	id, created, model := fmt.Sprintf("chatcmpl-%d", a.n), time.Now().Unix(), a.model()
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	if !e.event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return
	}
	hang()
	for _, d := range a.deltas() {
		if !e.event("", chunk(map[string]any{"content": d}, nil)) {
			return
		}
	}
	for i, c := range a.turn.ToolCalls {
		args := a.args(i)
		half := len(args) / 2
		first := map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": a.callID(i), "type": "function",
			"function": map[string]any{"name": c.name(), "arguments": args[:half]}}}}
		if !e.event("", chunk(first, nil)) {
			return
		}
		rest := map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": args[half:]}}}}
		if !e.event("", chunk(rest, nil)) {
			return
		}
	}
	finish := "stop"
	if len(a.turn.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	if !e.event("", chunk(map[string]any{}, finish)) {
		return
	}
	var opts struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(a.req.Body, &opts)
	if opts.StreamOptions.IncludeUsage {
		u := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{}, "usage": chatUsage(a.turn.Usage)}
		if !e.event("", u) {
			return
		}
	}
	e.event("", "[DONE]")
}

func (a answer) streamAnthropic(e *sse, hang func()) {
	u := a.turn.Usage
	start := map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_%d", a.n), "type": "message", "role": "assistant", "model": a.model(), "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(u, 1),
	}}
	if !e.event("message_start", start) {
		return
	}
	hang()
	if !e.event("ping", map[string]any{"type": "ping"}) {
		return
	}
	idx := 0
	if a.turn.Text != "" {
		if !e.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}}) {
			return
		}
		for _, d := range a.deltas() {
			if !e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": d}}) {
				return
			}
		}
		if !e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx}) {
			return
		}
		idx++
	}
	stop := "end_turn"
	for i, c := range a.turn.ToolCalls {
		stop = "tool_use"
		if !e.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx,
			"content_block": map[string]any{"type": "tool_use", "id": a.toolUseID(i), "name": c.name(), "input": map[string]any{}}}) {
			return
		}
		args := a.args(i)
		half := len(args) / 2
		for _, part := range []string{args[:half], args[half:]} {
			if !e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}}) {
				return
			}
		}
		if !e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx}) {
			return
		}
		idx++
	}
	if !e.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.Output}}) {
		return
	}
	e.event("message_stop", map[string]any{"type": "message_stop"})
}

func (a answer) streamResponses(e *sse, hang func()) {
	seq := 0
	ev := func(name string, v map[string]any) bool {
		v["type"] = name
		v["sequence_number"] = seq
		seq++
		return e.event(name, v)
	}
	if !ev("response.created", map[string]any{"response": a.responseObject("in_progress")}) {
		return
	}
	hang()
	if !ev("response.in_progress", map[string]any{"response": a.responseObject("in_progress")}) {
		return
	}
	out := 0
	if a.turn.Reasoning != "" {
		item := map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%d", a.n), "summary": []any{}}
		done := map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%d", a.n),
			"summary": []any{map[string]any{"type": "summary_text", "text": a.turn.Reasoning}}}
		if !ev("response.output_item.added", map[string]any{"output_index": out, "item": item}) ||
			!ev("response.output_item.done", map[string]any{"output_index": out, "item": done}) {
			return
		}
		out++
	}
	if a.turn.Text != "" {
		itemID := fmt.Sprintf("msg_%d", a.n)
		if !ev("response.output_item.added", map[string]any{"output_index": out, "item": a.messageItem("in_progress", "")}) ||
			!ev("response.content_part.added", map[string]any{"item_id": itemID, "output_index": out, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}}) {
			return
		}
		for _, d := range a.deltas() {
			if !ev("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": out, "content_index": 0, "delta": d}) {
				return
			}
		}
		if !ev("response.output_text.done", map[string]any{"item_id": itemID, "output_index": out, "content_index": 0, "text": a.turn.Text}) ||
			!ev("response.content_part.done", map[string]any{"item_id": itemID, "output_index": out, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": a.turn.Text, "annotations": []any{}}}) ||
			!ev("response.output_item.done", map[string]any{"output_index": out, "item": a.messageItem("completed", a.turn.Text)}) {
			return
		}
		out++
	}
	for i, c := range a.turn.ToolCalls {
		args := a.args(i)
		itemID, kind, field := fmt.Sprintf("fc_%d_%d", a.n, i), "function_call_arguments", "arguments"
		if _, ok := c.custom(); ok {
			itemID, kind, field = fmt.Sprintf("ctc_%d_%d", a.n, i), "custom_tool_call_input", "input"
		}
		if !ev("response.output_item.added", map[string]any{"output_index": out, "item": a.functionItem(i, "in_progress", "")}) ||
			!ev("response."+kind+".delta", map[string]any{"item_id": itemID, "output_index": out, "delta": args}) ||
			!ev("response."+kind+".done", map[string]any{"item_id": itemID, "output_index": out, field: args}) ||
			!ev("response.output_item.done", map[string]any{"output_index": out, "item": a.functionItem(i, "completed", args)}) {
			return
		}
		out++
	}
	ev("response.completed", map[string]any{"response": a.responseObject("completed")})
}

// DefaultModels is the body of GET .../models unless SetModels changes it:
// OpenRouter's shape (data[].id, name, context_length, pricing, supported_parameters).
var DefaultModels = []byte(`{"data":[
{"id":"anthropic/claude-sonnet-4","name":"Anthropic: Claude Sonnet 4","context_length":200000,"pricing":{"prompt":"0.000003","completion":"0.000015"},"supported_parameters":["tools","tool_choice","max_tokens"]},
{"id":"openai/gpt-4.1","name":"OpenAI: GPT-4.1","context_length":1047576,"pricing":{"prompt":"0.000002","completion":"0.000008"},"supported_parameters":["tools","tool_choice"]},
{"id":"fake/no-tools","name":"Fake: No Tools","context_length":8192,"pricing":{"prompt":"0","completion":"0"},"supported_parameters":["max_tokens"]}
]}`)

// LastUserText returns the text of the last user message of a chat
// completions, Anthropic Messages or Responses request ("" if none).
func LastUserText(r Request) string {
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return ""
	}
	type msg = struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	msgs := body.Messages
	if len(body.Input) > 0 {
		var s string
		if json.Unmarshal(body.Input, &s) == nil {
			return s
		}
		var items []msg
		_ = json.Unmarshal(body.Input, &items)
		msgs = items
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		if t := contentText(msgs[i].Content); t != "" {
			return t
		}
	}
	return ""
}

// contentText reads a message content that is a string or a list of parts
// with text ({type: text|input_text, text}).
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		if p.Text != "" && (p.Type == "text" || p.Type == "input_text") {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}
