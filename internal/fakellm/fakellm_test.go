package fakellm

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads an SSE body into (event name, data) pairs.
func events(t *testing.T, resp *http.Response) [][2]string {
	t.Helper()
	var out [][2]string
	name := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			out = append(out, [2]string{name, strings.TrimPrefix(line, "data: ")})
			name = ""
		}
	}
	return out
}

func TestChatStreamReassemblesToolCallAndReportsUsageOnlyWhenAsked(t *testing.T) {
	s := New()
	defer s.Close()
	s.Script(
		Turn{Text: "let me look", ToolCalls: []ToolCall{{Name: "read_file", Arguments: `{"path":"a.go"}`}}, Usage: Usage{Input: 10, Output: 5, Cost: 0.25}},
		Turn{Text: "done", Usage: Usage{Input: 20, Output: 2}},
	)
	resp := post(t, s.URL+"/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`)
	var text, args string
	var usage map[string]any
	evs := events(t, resp)
	if last := evs[len(evs)-1][1]; last != "[DONE]" {
		t.Fatalf("last data %q, want [DONE]", last)
	}
	for _, ev := range evs[:len(evs)-1] {
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Function struct{ Arguments string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev[1]), &c); err != nil {
			t.Fatalf("chunk %q: %v", ev[1], err)
		}
		for _, ch := range c.Choices {
			text += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				args += tc.Function.Arguments
			}
		}
		if c.Usage != nil {
			usage = c.Usage
		}
	}
	if text != "let me look" || args != `{"path":"a.go"}` {
		t.Fatalf("text %q args %q", text, args)
	}
	if usage["prompt_tokens"] != 10.0 || usage["completion_tokens"] != 5.0 || usage["cost"] != 0.25 {
		t.Fatalf("usage %v", usage)
	}
	// Without include_usage, no usage chunk (the gateway must add the option).
	resp = post(t, s.URL+"/v1/chat/completions", `{"model":"m","stream":true}`)
	for _, ev := range events(t, resp) {
		if strings.Contains(ev[1], `"usage"`) {
			t.Fatalf("usage sent without stream_options.include_usage: %s", ev[1])
		}
	}
}

func TestAnthropicStreamUsage(t *testing.T) {
	s := New()
	defer s.Close()
	s.Script(Turn{Text: "hi there", ToolCalls: []ToolCall{{Name: "Bash", Arguments: `{"command":"ls"}`}}, Usage: Usage{Input: 7, Output: 9, CacheRead: 3, CacheWrite: 4}})
	resp := post(t, s.URL+"/v1/messages", `{"model":"claude","stream":true}`)
	var names []string
	var in, out, cr float64
	var partial string
	for _, ev := range events(t, resp) {
		names = append(names, ev[0])
		var m map[string]any
		if err := json.Unmarshal([]byte(ev[1]), &m); err != nil {
			t.Fatal(err)
		}
		switch ev[0] {
		case "message_start":
			u := m["message"].(map[string]any)["usage"].(map[string]any)
			in, cr = u["input_tokens"].(float64), u["cache_read_input_tokens"].(float64)
		case "message_delta":
			out = m["usage"].(map[string]any)["output_tokens"].(float64)
		case "content_block_delta":
			if d := m["delta"].(map[string]any); d["type"] == "input_json_delta" {
				partial += d["partial_json"].(string)
			}
		}
	}
	if names[0] != "message_start" || names[len(names)-1] != "message_stop" {
		t.Fatalf("events %v", names)
	}
	if in != 7 || out != 9 || cr != 3 || partial != `{"command":"ls"}` {
		t.Fatalf("in %v out %v cache %v partial %q", in, out, cr, partial)
	}
}

func TestResponsesCompletedCarriesUsageAndOutput(t *testing.T) {
	s := New()
	defer s.Close()
	s.Script(Turn{Text: "ok", ToolCalls: []ToolCall{{Name: "shell", Arguments: `{"cmd":["ls"]}`}}, Usage: Usage{Input: 11, Output: 6}})
	resp := post(t, s.URL+"/v1/responses", `{"model":"gpt","stream":true}`)
	evs := events(t, resp)
	last := evs[len(evs)-1]
	if last[0] != "response.completed" {
		t.Fatalf("last event %q", last[0])
	}
	var c struct {
		Response struct {
			Usage  struct{ InputTokens, OutputTokens int } `json:"usage"`
			Output []map[string]any                        `json:"output"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(last[1]), &c); err != nil {
		t.Fatal(err)
	}
	// Go matches untagged fields case-insensitively but not across "_".
	var u map[string]any
	json.Unmarshal([]byte(last[1]), &u)
	usage := u["response"].(map[string]any)["usage"].(map[string]any)
	if usage["input_tokens"] != 11.0 || usage["output_tokens"] != 6.0 || len(c.Response.Output) != 2 {
		t.Fatalf("usage %v output %v", usage, c.Response.Output)
	}
}

func TestErrorsAndExhaustedScript(t *testing.T) {
	s := New()
	defer s.Close()
	s.Script(Turn{Status: 529, ErrorMessage: "overloaded"})
	resp := post(t, s.URL+"/v1/messages", `{}`)
	var e struct {
		Type  string `json:"type"`
		Error struct{ Message string }
	}
	json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != 529 || e.Type != "error" || e.Error.Message != "overloaded" {
		t.Fatalf("status %d body %+v", resp.StatusCode, e)
	}
	resp = post(t, s.URL+"/chat/completions", `{}`)
	if resp.StatusCode != 500 {
		t.Fatalf("exhausted script: status %d, want 500", resp.StatusCode)
	}
	if n := len(s.Requests()); n != 2 {
		t.Fatalf("recorded %d requests, want 2", n)
	}
}

func TestLastUserText(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"chat string", `{"messages":[{"role":"user","content":"one"},{"role":"assistant","content":"x"},{"role":"user","content":"two"}]}`, "two"},
		{"anthropic blocks", `{"messages":[{"role":"user","content":[{"type":"tool_result","content":"r"},{"type":"text","text":"hey"}]}]}`, "hey"},
		{"responses string", `{"input":"plain"}`, "plain"},
		{"responses items", `{"input":[{"role":"user","content":[{"type":"input_text","text":"item"}]}]}`, "item"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LastUserText(Request{Body: []byte(tc.body)}); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestResponsesCustomToolCall: a "custom:" tool call is the custom_tool_call
// item Codex's apply_patch expects (input as text, streamed as
// custom_tool_call_input events), and a function call in chat completions.
func TestResponsesCustomToolCall(t *testing.T) {
	s := New()
	defer s.Close()
	patch := "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n"
	turn := Turn{ToolCalls: []ToolCall{{ID: "call_p", Name: CustomPrefix + "apply_patch", Arguments: patch}}}
	s.Script(turn, turn, turn)
	evs := events(t, post(t, s.URL+"/v1/responses", `{"model":"gpt","stream":true}`))
	var names []string
	var done map[string]any
	for _, e := range evs {
		names = append(names, e[0])
		if e[0] == "response.output_item.done" {
			var v struct{ Item map[string]any }
			json.Unmarshal([]byte(e[1]), &v)
			done = v.Item
		}
	}
	if got := strings.Join(names, " "); !strings.Contains(got, "response.custom_tool_call_input.delta response.custom_tool_call_input.done response.output_item.done") ||
		strings.Contains(got, "function_call") {
		t.Errorf("events %s", got)
	}
	if done["type"] != "custom_tool_call" || done["name"] != "apply_patch" || done["input"] != patch || done["call_id"] != "call_p" {
		t.Errorf("item %v", done)
	}
	var body struct{ Output []map[string]any }
	if err := json.NewDecoder(post(t, s.URL+"/v1/responses", `{"model":"gpt"}`).Body).Decode(&body); err != nil || len(body.Output) != 1 ||
		body.Output[0]["type"] != "custom_tool_call" || body.Output[0]["input"] != patch {
		t.Errorf("non-streamed output %v, %v", body.Output, err)
	}
	var chat struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	if err := json.NewDecoder(post(t, s.URL+"/v1/chat/completions", `{"model":"c"}`).Body).Decode(&chat); err != nil || len(chat.Choices) != 1 ||
		len(chat.Choices[0].Message.ToolCalls) != 1 || chat.Choices[0].Message.ToolCalls[0].Function.Name != "apply_patch" {
		t.Errorf("chat %+v, %v", chat, err)
	}
}
