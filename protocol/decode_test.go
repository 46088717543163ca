package protocol

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit"
)

func ptr[T any](v T) *T { return &v }

func TestDecodeEvent(t *testing.T) {
	tests := []struct {
		name  string
		line  string
		want  Event
		field string // of the *DecodeError
		err   string // substring of the error
	}{
		{name: "text", line: `{"type":"text","content":"hi"}`, want: TextEvent{Type: "text", Content: "hi"}},
		{name: "tool", line: `{"type":"tool","name":"read","path":"/a","status":"done","output":"x"}`,
			want: ToolEvent{Type: "tool", Name: "read", Path: ptr("/a"), Status: "done", Output: ptr("x")}},
		{name: "command", line: `{"type":"command","cmd":"ls","status":"error","exit":2,"stdout":"","stderr":"e"}`,
			want: CommandEvent{Type: "command", Cmd: "ls", Status: "error", Exit: ptr(2.0), Stdout: ptr(""), Stderr: ptr("e")}},
		{name: "commit", line: `{"type":"commit","hash":"abc","message":"m"}`, want: CommitEvent{Type: "commit", Hash: "abc", Message: "m"}},
		{name: "spawn", line: `{"type":"spawn","name":"n","agent":"a","model":"m","task":"t"}`,
			want: SpawnEvent{Type: "spawn", Name: "n", Agent: "a", Model: "m", Task: ptr("t")}},
		{name: "workers", line: `{"type":"workers","workers":[{"name":"a","status":"idle"}]}`,
			want: WorkersEvent{Type: "workers", Workers: []Worker{{Name: "a", Status: "idle"}}}},
		{name: "empty workers", line: `{"type":"workers","workers":[]}`, want: WorkersEvent{Type: "workers", Workers: []Worker{}}},
		{name: "status", line: `{"type":"status","state":"thinking","context_pct":0.5}`,
			want: StatusEvent{Type: "status", State: "thinking", ContextPct: ptr(0.5)}},
		{name: "context_pct 0", line: `{"type":"status","state":"idle","context_pct":0}`, want: StatusEvent{Type: "status", State: "idle", ContextPct: ptr(0.0)}},
		{name: "context_pct 1", line: `{"type":"status","state":"idle","context_pct":1}`, want: StatusEvent{Type: "status", State: "idle", ContextPct: ptr(1.0)}},
		{name: "handoff", line: `{"type":"handoff","summary":"s"}`, want: HandoffEvent{Type: "handoff", Summary: "s"}},
		{name: "done", line: `{"type":"done"}`, want: DoneEvent{Type: "done"}},
		{name: "escapes", line: `{"type":"text","content":"a\nb\u00e9\ud83d\ude00\"\\\/"}`, want: TextEvent{Type: "text", Content: "a\nbé😀\"\\/"}},
		{name: "unknown fields", line: `{"x":{"y":[1,{"z":"}"}]},"type":"done","summary":"s","w":"]"}`, want: DoneEvent{Type: "done", Summary: ptr("s")}},

		{name: "invalid UTF-8", line: "{\"type\":\"text\",\"content\":\"\xff\"}", err: "not valid UTF-8 (first bad byte at column 27)"},
		{name: "not JSON", line: `{"type":`, err: "not JSON: the line ends before the JSON value is complete"},
		{name: "not JSON, with column", line: `{"type" "text"}`, err: "(column 9)"},
		{name: "empty", line: ``, err: "not JSON: the line is empty"},
		{name: "not an object", line: `[1]`, err: "not a JSON object (got array)"},
		{name: "missing type", line: `{}`, field: "type", err: `missing field "type"`},
		{name: "type not a string", line: `{"type":true}`, field: "type", err: `field "type" must be a string, got boolean`},
		{name: "unknown type", line: `{"type":"x"}`, field: "type", err: `unknown type "x" (known types: text, tool, command, commit, spawn, workers, status, handoff, done)`},
		{name: "type is case-sensitive", line: `{"type":"TEXT","content":"hi"}`, field: "type", err: `unknown type "TEXT"`},
		{name: "long unknown type is cut", line: `{"type":"` + strings.Repeat("x", 100) + `"}`, field: "type", err: `unknown type "` + strings.Repeat("x", 40) + `…"`},
		{name: "missing content", line: `{"type":"text"}`, field: "content", err: `missing field "content"`},
		{name: "null content", line: `{"type":"text","content":null}`, field: "content", err: `field "content" must be a string, got null`},
		{name: "bad state", line: `{"type":"status","state":"sleeping"}`, field: "state", err: `field "state" must be one of idle|thinking|running|done|error, got "sleeping"`},
		{name: "context_pct below", line: `{"type":"status","state":"idle","context_pct":-0.1}`, field: "context_pct", err: `field "context_pct" must be between 0 and 1, got -0.1`},
		{name: "context_pct above", line: `{"type":"status","state":"idle","context_pct":1.0000001}`, field: "context_pct", err: `must be between 0 and 1`},
		{name: "exit as string", line: `{"type":"command","cmd":"ls","status":"done","exit":"0"}`, field: "exit", err: `field "exit" must be a number, got string`},
		{name: "worker status", line: `{"type":"workers","workers":[{"name":"a","status":"idle"},{"name":"b","status":"zzz"}]}`,
			field: "workers[1].status", err: `field "workers[1].status" must be one of idle|thinking|running|done|error, got "zzz"`},
		{name: "miscased key", line: `{"type":"text","CONTENT":"hi"}`, field: "content", err: `missing field "content" (there is "CONTENT": field names are case-sensitive)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeEvent([]byte(tt.line))
			if tt.err == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("got %#v\nwant %#v", got, tt.want)
				}
				return
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v, want *DecodeError", err, err)
			}
			if !strings.Contains(de.Reason, tt.err) || de.Error() != de.Reason {
				t.Fatalf("reason %q, want it to contain %q", de.Reason, tt.err)
			}
			if de.Field != tt.field {
				t.Fatalf("field %q, want %q", de.Field, tt.field)
			}
		})
	}
}

// TestInvalidUTF8 covers what the schema corpus cannot: a JSON Schema
// validator only sees text that a JSON decoder already repaired (bad bytes
// become U+FFFD), so invalid UTF-8 is checked here, on the Go side only.
func TestInvalidUTF8(t *testing.T) {
	for _, line := range []string{
		"{\"type\":\"text\",\"content\":\"\xc3\"}",
		"{\"type\":\"text\",\"content\":\"ok\",\"x\":\"\xed\xa0\x80\"}", // an encoded surrogate
		"{\"type\":\"text\xff\",\"content\":\"hi\"}",
		"\xef\xbb\xbf{\"type\":\"done\"}" + "\xff",
	} {
		if _, err := DecodeEvent([]byte(line)); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("%q: error %v, want not valid UTF-8", line, err)
		}
		if _, err := DecodeInput([]byte(line)); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("%q: input error %v, want not valid UTF-8", line, err)
		}
	}
}

func TestDecodeInput(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Input
		err  string
	}{
		{name: "message", line: `{"type":"message","from":"parent","content":"go"}`, want: MessageInput{Type: "message", From: "parent", Content: "go"}},
		{name: "signal", line: `{"type":"signal","action":"pause"}`, want: SignalInput{Type: "signal", Action: "pause"}},
		{name: "bad from", line: `{"type":"message","from":"me","content":"go"}`, err: `field "from" must be one of user|parent|system, got "me"`},
		{name: "from node", line: `{"type":"message","from":"system","content":"done","from_node":{"id":"n1","name":"worker"}}`,
			want: MessageInput{Type: "message", From: "system", Content: "done", FromNode: &NodeRef{ID: "n1", Name: "worker"}}},
		{name: "from node not an object", line: `{"type":"message","from":"parent","content":"go","from_node":"n1"}`, err: `field "from_node" must be an object with the string fields "id" and "name", got "n1"`},
		{name: "from node without name", line: `{"type":"message","from":"parent","content":"go","from_node":{"id":"n1"}}`, err: `field "from_node" must be an object`},
		{name: "comment", line: `{"type":"message","from":"user","content":"quote","comment":{"path":"a.go","start_line":3,"end_line":4,"side":"new","section":"uncommitted"}}`,
			want: MessageInput{Type: "message", From: "user", Content: "quote", Comment: &DiffComment{Path: "a.go", StartLine: 3, EndLine: 4, Side: "new", Section: "uncommitted"}}},
		{name: "comment with lines backwards", line: `{"type":"message","from":"user","content":"q","comment":{"path":"a.go","start_line":4,"end_line":3,"side":"new"}}`, err: `field "comment" must be an object with "path"`},
		{name: "unknown field ignored", line: `{"type":"message","from":"user","content":"go","from_agent":1}`, want: MessageInput{Type: "message", From: "user", Content: "go"}},
		{name: "event", line: `{"type":"done"}`, err: `unknown type "done" (known types: message, signal; "done" is an event (stdout), not an input)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeInput([]byte(tt.line))
			if testkit.WantErr(t, err, tt.err) {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, %v; want %#v", got, err, tt.want)
			}
		})
	}
}

// TestUnescapeMatchesEncodingJSON compares the string decoder with
// encoding/json on escapes, surrogates and broken surrogates.
func TestUnescapeMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		`""`, `"plain"`, `"\n\t\r\b\f\/\\\""`, `"\u0041\u00e9\u4e2d"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`,
		`"\ud83dx"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, `"\uD83D\uDE00"`, `"a\u0000b"`, `"日本\u8a9e"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		if got := unquote([]byte(s)); got != want {
			t.Errorf("%s: got %q, want %q", s, got, want)
		}
	}
}

func TestDecimalCompare(t *testing.T) {
	tests := []struct {
		num  string
		ref  string
		want int
	}{
		{"0", "0", 0}, {"-0", "0", 0}, {"0.000e5", "0", 0}, {"-1e-400", "0", -1}, {"1e-400", "0", 1},
		{"1", "1", 0}, {"1.0", "1", 0}, {"10e-1", "1", 0}, {"0.1e1", "1", 0}, {"100", "1", 1}, {"0.99999999999999999999", "1", -1},
		{"1.00000000000000000001", "1", 1}, {"1e0", "1", 0}, {"-1", "1", -1}, {"2", "1", 1}, {"0.5", "1", -1}, {"100", "1e2", 0},
		{"179769313486231570e291", "1.7976931348623157e308", 0}, {"1.79769313486231570814e308", "1.7976931348623157e308", 1},
		{"-1.7976931348623158e308", "-1.7976931348623157e308", -1}, {"1e99999999999999999999999", "1", 1}, {"1e-99999999999999999999999", "1", -1},
	}
	for _, tt := range tests {
		if got := parseDecimal([]byte(tt.num)).cmp(parseDecimal([]byte(tt.ref))); got != tt.want {
			t.Errorf("cmp(%s, %s) = %d, want %d", tt.num, tt.ref, got, tt.want)
		}
	}
}

func TestEncoder(t *testing.T) {
	var b strings.Builder
	enc := NewEncoder(&b)
	for _, v := range []any{
		TextEvent{Type: TypeText, Content: "<a href=\"x\">&</a>"},
		WorkersEvent{Type: TypeWorkers},
		DoneEvent{},
		SignalInput{Action: ActionStop},
		MessageInput{Type: "x", From: FromUser, Content: "hi"},
	} {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"type":"text","content":"<a href=\"x\">&</a>"}` + "\n" +
		`{"type":"workers","workers":[]}` + "\n" +
		`{"type":"done"}` + "\n" +
		`{"type":"signal","action":"stop"}` + "\n" +
		`{"type":"message","from":"user","content":"hi"}` + "\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

var benchLines = []struct{ name, line string }{
	{"text", `{"type":"text","content":"I'll start by reading the repository layout and the failing test."}`},
	{"text_escaped", `{"type":"text","content":"line one\nline two\n\tindented \"quoted\""}`},
	{"tool", `{"type":"tool","name":"read","path":"/workspace/protocol/decode.go","status":"done","output":"package protocol"}`},
	{"status", `{"type":"status","state":"thinking","context_pct":0.42}`},
	{"workers", `{"type":"workers","workers":[{"name":"a","status":"idle"},{"name":"b","status":"running"},{"name":"c","status":"done"}]}`},
}

// benchEachLine runs decode on each of benchLines as a sub-benchmark.
func benchEachLine(b *testing.B, decode func(line []byte) error) {
	for _, bl := range benchLines {
		line := []byte(bl.line)
		b.Run(bl.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				if err := decode(line); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeEvent(b *testing.B) {
	benchEachLine(b, func(line []byte) error {
		_, err := DecodeEvent(line)
		return err
	})
}

// BenchmarkUnmarshalBaseline is encoding/json into the typed struct, for
// comparison (it matches keys case-insensitively, so FAP cannot use it).
func BenchmarkUnmarshalBaseline(b *testing.B) {
	benchEachLine(b, func(line []byte) error {
		var v struct {
			Type       string   `json:"type"`
			Content    string   `json:"content"`
			Name       string   `json:"name"`
			Path       *string  `json:"path"`
			Status     string   `json:"status"`
			Output     *string  `json:"output"`
			State      string   `json:"state"`
			ContextPct *float64 `json:"context_pct"`
			Workers    []Worker `json:"workers"`
		}
		return json.Unmarshal(line, &v)
	})
}

func TestDecodeSpawnWorkspace(t *testing.T) {
	ev, err := DecodeEvent([]byte(`{"type":"spawn","name":"n","agent":"a","model":"m","workspace":"fork"}`))
	if err != nil {
		t.Fatal(err)
	}
	if sp := ev.(SpawnEvent); sp.Workspace == nil || *sp.Workspace != WorkspaceFork {
		t.Fatalf("workspace: %+v", sp)
	}
	ev, err = DecodeEvent([]byte(`{"type":"spawn","name":"n","agent":"a","model":"m"}`))
	if err != nil || ev.(SpawnEvent).Workspace != nil {
		t.Fatalf("absent workspace: %+v %v", ev, err)
	}
	_, err = DecodeEvent([]byte(`{"type":"spawn","name":"n","agent":"a","model":"m","workspace":"copy"}`))
	if err == nil || !strings.Contains(err.Error(), `field "workspace" must be one of shared|fork, got "copy"`) {
		t.Fatalf("bad workspace: %v", err)
	}
}
