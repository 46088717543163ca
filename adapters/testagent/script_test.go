package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		want    []Step
		wantErr string
	}{
		{name: "empty", script: " \n ; ", want: nil},
		{name: "echo keeps the rest", script: "echo hello  world", want: []Step{{Op: "echo", Args: []string{"hello  world"}}}},
		{name: "plain text is echoed", script: "hello there", want: []Step{{Op: "echo", Args: []string{"hello there"}}}},
		{name: "separators", script: "flood 3; sleep 10\ndone all good", want: []Step{
			{Op: "flood", Args: []string{"3"}, N: 3},
			{Op: "sleep", Args: []string{"10"}, N: 10},
			{Op: "done", Args: []string{"all good"}},
		}},
		{name: "done without summary", script: "done", want: []Step{{Op: "done", Args: []string{""}}}},
		{name: "spawn with agent", script: "spawn 2 shelley", want: []Step{{Op: "spawn", Args: []string{"2", "shelley"}, N: 2}}},
		{name: "tree", script: "tree 3 2", want: []Step{{Op: "tree", Args: []string{"3", "2"}, N: 3, W: 2}}},
		{name: "status with pct", script: "status thinking 0.5", want: []Step{{Op: "status", Args: []string{"thinking", "0.5"}}}},
		{name: "flood needs a number", script: "flood many", wantErr: `flood: argument 1 must be a non-negative integer, got "many"`},
		{name: "crash needs an argument", script: "crash", wantErr: `crash: want 1 number argument(s)`},
		{name: "negative", script: "huge -1", wantErr: "non-negative"},
		{name: "too many", script: "bad 1", wantErr: "too many arguments"},
		{name: "status needs a state", script: "status", wantErr: "status: want a state"},
		{name: "status pct must be a number", script: "status idle x", wantErr: "context_pct must be a number"},
		{name: "tree needs width", script: "tree 2", wantErr: "want 2 number argument(s)"},
		{name: "rate", script: "rate 10 1000", want: []Step{{Op: "rate", Args: []string{"10", "1000"}, N: 10, W: 1000}}},
		{name: "rate needs a rate", script: "rate 10", wantErr: "rate: want 2 number argument(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.script)
			if testkit.WantErr(t, err, tt.wantErr) {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse(%q) = %#v, want %#v", tt.script, got, tt.want)
			}
		})
	}
}

func TestHugeLine(t *testing.T) {
	for _, n := range []int{0, 5, 28, 29, 1000, 100 << 10} {
		line := hugeLine(n)
		if len(line) != n+1 || line[n] != '\n' {
			t.Fatalf("hugeLine(%d) has %d bytes", n, len(line))
		}
		if n >= 28 && !json.Valid(line) {
			t.Fatalf("hugeLine(%d) is not JSON: %.40q", n, line)
		}
	}
}

// TestRun plays a session through stdin and checks the events written.
func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		task     string
		stdin    string
		wantCode int
		want     []string // expected stdout lines
	}{
		{
			name:  "task then messages then eof",
			task:  "echo hi",
			stdin: `{"type":"message","from":"user","content":"flood 2"}` + "\n" + `{"type":"signal","action":"pause"}` + "\n",
			want: []string{
				`{"content":"hi","type":"text"}`,
				`{"content":"flood 1","type":"text"}`,
				`{"content":"flood 2","type":"text"}`,
			},
		},
		{
			name:     "done exits",
			task:     "done bye; echo never",
			want:     []string{`{"summary":"bye","type":"done"}`},
			wantCode: 0,
		},
		{
			name:     "crash code",
			task:     "crash 3",
			wantCode: 3,
		},
		{
			name: "spawn and workers",
			task: "spawn 1 pi; workers",
			want: []string{
				`{"agent":"pi","model":"","name":"child-1","task":"echo hello from child-1; done","type":"spawn"}`,
				`{"type":"workers","workers":[{"name":"child-1","status":"running"}]}`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("FILEPATH_MODEL", "")
			var out, errb bytes.Buffer
			a := &agent{out: bufioWriter(&out), errw: &errb, exit: func(int) { t.Fatal("unexpected exit") }}
			code := a.run(strings.NewReader(tt.stdin), tt.task)
			if code != tt.wantCode {
				t.Fatalf("exit code %d, want %d (stderr %q)", code, tt.wantCode, errb.String())
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				if l == "" {
					continue
				}
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("bad output line %q: %v", l, err)
				}
				b, _ := json.Marshal(m) // sorted keys
				got = append(got, string(b))
			}
			// pause arrives while scripts run; only compare the script output.
			var filtered []string
			for _, g := range got {
				if !strings.Contains(g, `"type":"status"`) {
					filtered = append(filtered, g)
				}
			}
			if !reflect.DeepEqual(filtered, tt.want) {
				t.Fatalf("events\n got %q\nwant %q", filtered, tt.want)
			}
		})
	}
}

// TestRate checks that rate stamps each event with its emit time, in order,
// and paces them: 20 events at 1,000/s take at least 19 ms.
func TestRate(t *testing.T) {
	tests := []struct {
		name    string
		n, rate int
		minTook time.Duration
	}{
		{name: "unpaced", n: 100, rate: 0},
		{name: "paced", n: 20, rate: 1000, minTook: 19 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			a := &agent{out: bufioWriter(&out), errw: &errb, exit: func(int) { t.Fatal("unexpected exit") }}
			before := time.Now().UnixNano()
			a.rate(tt.n, tt.rate)
			after := time.Now().UnixNano()
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != tt.n {
				t.Fatalf("%d lines, want %d", len(lines), tt.n)
			}
			prev, first := before, int64(0)
			for i, l := range lines {
				var ev struct{ Type, Content string }
				if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Type != "text" {
					t.Fatalf("line %d %q: not a text event (%v)", i+1, l, err)
				}
				var ns int64
				var idx int
				if _, err := fmt.Sscanf(ev.Content, "t %d %d", &ns, &idx); err != nil || idx != i+1 {
					t.Fatalf("line %d content %q: want \"t <ns> %d\" (%v)", i+1, ev.Content, i+1, err)
				}
				if ns < prev || ns > after {
					t.Fatalf("line %d stamp %d outside [%d, %d]", i+1, ns, prev, after)
				}
				if i == 0 {
					first = ns
				}
				prev = ns
			}
			if took := time.Duration(prev - first); took < tt.minTook {
				t.Fatalf("%d events at %d/s took %v, want at least %v", tt.n, tt.rate, took, tt.minTook)
			}
		})
	}
}

func bufioWriter(w *bytes.Buffer) *bufio.Writer { return bufio.NewWriter(w) }
