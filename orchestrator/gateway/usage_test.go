package gateway

import (
	"encoding/json"
	"strings"
	"testing"
)

func f64(v float64) *float64 { return &v }

func TestUsageReader(t *testing.T) {
	big := strings.Repeat("x", maxEvent+1000)
	tests := []struct {
		name string
		wire wire
		sse  bool
		in   string
		want tally
	}{
		{name: "chat stream with usage and cost", wire: wireChat, sse: true, in: "" +
			"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n" +
			"data: {\"choices\":[],\"model\":\"m/x\",\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":30},\"cost\":0.0125}}\n\n" +
			"data: [DONE]\n\n",
			want: tally{input: 70, cacheRead: 30, output: 7, cost: f64(0.0125), model: "m/x", seen: true}},
		{name: "chat stream, usage null in every chunk then real", wire: wireChat, sse: true, in: "" +
			"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n" +
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n",
			want: tally{input: 5, output: 2, seen: true}},
		{name: "chat stream without usage", wire: wireChat, sse: true, in: "data: {\"choices\":[]}\n\ndata: [DONE]\n\n",
			want: tally{}},
		{name: "chat cache writes (OpenRouter)", wire: wireChat, in: `{"usage":{"prompt_tokens":50,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":10,"cache_write_tokens":15}}}`,
			want: tally{input: 25, cacheRead: 10, cacheWrite: 15, output: 1, seen: true}},
		{name: "chat numbers as strings", wire: wireChat, in: `{"usage":{"prompt_tokens":"12","completion_tokens":3,"cost":"0.5"}}`,
			want: tally{input: 12, output: 3, cost: f64(0.5), seen: true}},
		{name: "chat negative count is malformed, the rest counts", wire: wireChat, in: `{"usage":{"prompt_tokens":-5,"completion_tokens":3}}`,
			want: tally{output: 3, seen: true, malformed: 1}},
		{name: "anthropic stream: output is cumulative, never summed", wire: wireAnthropic, sse: true, in: "" +
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1,\"cache_creation_input_tokens\":5,\"cache_read_input_tokens\":3}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"usage\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":20}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":42}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			want: tally{input: 10, cacheWrite: 5, cacheRead: 3, output: 42, model: "claude-x", seen: true}},
		{name: "anthropic message_delta with input totals", wire: wireAnthropic, sse: true, in: "" +
			"data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
			"data: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":12,\"output_tokens\":9,\"cache_read_input_tokens\":4}}\n\n",
			want: tally{input: 12, cacheRead: 4, output: 9, seen: true}},
		{name: "anthropic JSON", wire: wireAnthropic, in: `{"type":"message","model":"c","content":[],"usage":{"input_tokens":8,"output_tokens":2,"cache_creation_input_tokens":0,"cache_read_input_tokens":6}}`,
			want: tally{input: 8, cacheRead: 6, output: 2, model: "c", seen: true}},
		{name: "responses stream: usage from response.completed", wire: wireResponses, sse: true, in: "" +
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"model\":\"gpt\",\"usage\":null}}\n\n" +
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"model\":\"gpt\",\"output\":[],\"usage\":{\"input_tokens\":100,\"input_tokens_details\":{\"cached_tokens\":40},\"output_tokens\":7}}}\n\n",
			want: tally{input: 60, cacheRead: 40, output: 7, model: "gpt", seen: true}},
		{name: "responses JSON", wire: wireResponses, in: `{"object":"response","usage":{"input_tokens":9,"output_tokens":1}}`,
			want: tally{input: 9, output: 1, seen: true}},
		{name: "CRLF lines and multi-line data", wire: wireChat, sse: true,
			in:   "data: {\"usage\":\r\ndata: {\"prompt_tokens\":4,\"completion_tokens\":2}}\r\n\r\n",
			want: tally{input: 4, output: 2, seen: true}},
		{name: "no blank line before EOF", wire: wireChat, sse: true,
			in:   "data: {\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}",
			want: tally{input: 4, output: 2, seen: true}},
		{name: "malformed event among good ones", wire: wireChat, sse: true, in: "" +
			"data: {\"usage\": {oops\n\n" +
			"data: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n",
			want: tally{input: 1, output: 1, seen: true, malformed: 1}},
		{name: "huge final event: usage read from its tail", wire: wireResponses, sse: true,
			in: "data: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"text\":\"" + big +
				"\"}],\"usage\":{\"input_tokens\":11,\"output_tokens\":22},\"user\":null}}\n\n",
			want: tally{input: 11, output: 22, seen: true}},
		{name: "huge JSON body", wire: wireChat,
			in:   `{"choices":[{"message":{"content":"` + big + `"}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
			want: tally{input: 3, output: 4, seen: true}},
		{name: "no usage expected", wire: wireNone, in: `{"usage":{"prompt_tokens":3}}`, want: tally{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Whole, and one byte at a time: reads split events anywhere.
			for _, step := range []int{len(tt.in), 1, 7} {
				if step == 1 && len(tt.in) > 100000 {
					step = 4093
				}
				r := newUsageReader(tt.wire, tt.sse)
				for i := 0; i < len(tt.in); i += step {
					r.Write([]byte(tt.in[i:min(i+step, len(tt.in))]))
				}
				got := r.Close()
				if !sameTally(got, tt.want) {
					t.Fatalf("step %d: got %s, want %s", step, show(got), show(tt.want))
				}
			}
		})
	}
}

func sameTally(a, b tally) bool {
	if (a.cost == nil) != (b.cost == nil) || (a.cost != nil && *a.cost != *b.cost) {
		return false
	}
	a.cost, b.cost = nil, nil
	return a == b
}

func show(t tally) string {
	c := "nil"
	if t.cost != nil {
		b, _ := json.Marshal(*t.cost)
		c = string(b)
	}
	t.cost = nil
	b, _ := json.Marshal(struct {
		In, Out, CR, CW int64
		Cost            string
		Model           string
		Seen            bool
		Malformed       int
	}{t.input, t.output, t.cacheRead, t.cacheWrite, c, t.model, t.seen, t.malformed})
	return string(b)
}

func TestWithIncludeUsage(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"absent", `{"model":"m","stream":true,"messages":[]}`, `{"stream_options":{"include_usage":true},"model":"m","stream":true,"messages":[]}`},
		{"absent, spaces", "{ \n \"stream\": true }", "{\"stream_options\":{\"include_usage\":true}, \n \"stream\": true }"},
		{"false", `{"stream":true,"stream_options":{"include_usage":false},"x":1}`, `{"stream":true,"stream_options":{"include_usage":true},"x":1}`},
		{"other members kept", `{"stream":true,"stream_options": {"foo":"bar"}}`, `{"stream":true,"stream_options": {"foo":"bar","include_usage":true}}`},
		{"null", `{"stream":true,"stream_options":null}`, `{"stream":true,"stream_options":{"include_usage":true}}`},
		{"last of duplicates", `{"stream_options":{},"stream":true,"stream_options":null}`, `{"stream_options":{},"stream":true,"stream_options":{"include_usage":true}}`},
		{"nested key of the same name untouched", `{"messages":[{"stream_options":1}],"stream":true}`, `{"stream_options":{"include_usage":true},"messages":[{"stream_options":1}],"stream":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := withIncludeUsage([]byte(tt.in))
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %s, %v; want %s", got, err, tt.want)
			}
			if !inspect(got).wantsUsage() {
				t.Fatalf("result does not ask for usage: %s", got)
			}
		})
	}
	if _, err := withIncludeUsage([]byte(`[1]`)); err == nil {
		t.Fatal("a JSON array: no error")
	}
	if _, err := withIncludeUsage([]byte(`{"stream":tru`)); err == nil {
		t.Fatal("broken JSON: no error")
	}
}
