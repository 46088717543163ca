package runner

import (
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/filepath-dev/filepath/protocol"
)

func TestDetectChecks(t *testing.T) {
	goChecks := []protocol.Check{{Command: "go build -o /dev/null ./..."}, {Command: "go vet ./..."}}
	tests := []struct {
		name  string
		files map[string]string
		want  []protocol.Check
	}{
		{"empty", nil, nil},
		{"go module", map[string]string{"go.mod": "module x\n", "main.go": "package main"}, goChecks},
		{"go workspace", map[string]string{"go.work": "go 1.22\n"}, goChecks},
		{"go.mod only in a subdirectory", map[string]string{"sub/go.mod": "module x\n"}, nil},
		{"go.mod is a directory", map[string]string{"go.mod/x": ""}, nil},
		{"node build and test", map[string]string{"package.json": `{"scripts": {"build": "vite build", "test": "vitest run"}}`},
			[]protocol.Check{{Command: "npm run build"}, {Command: "npm test"}}},
		{"node test only", map[string]string{"package.json": `{"scripts": {"test": "jest", "lint": "eslint ."}}`}, []protocol.Check{{Command: "npm test"}}},
		{"npm init's placeholder test", map[string]string{"package.json": `{"scripts": {"test": "echo \"Error: no test specified\" && exit 1"}}`}, nil},
		{"no scripts", map[string]string{"package.json": `{"name": "x"}`}, nil},
		{"blank script", map[string]string{"package.json": `{"scripts": {"build": "  "}}`}, nil},
		{"broken package.json", map[string]string{"package.json": `{"scripts": `}, nil},
		{"go and node", map[string]string{"go.mod": "module x", "package.json": `{"scripts": {"build": "tsc"}}`},
			append(append([]protocol.Check(nil), goChecks...), protocol.Check{Command: "npm run build"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, content := range tt.files {
				fsys[name] = &fstest.MapFile{Data: []byte(content)}
			}
			if got := DetectChecks(fsys); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("DetectChecks = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestFirstMessage: the one system message an agent session reads first
// says, in this order, why it starts, what the health checks found (a
// failing check's output), and the memories; a first start with nothing to
// report has none.
func TestFirstMessage(t *testing.T) {
	zero, one := 0, 1
	noChecks := protocol.SystemData{Type: protocol.SystemCheck, Text: "No health checks: none"}
	passed := protocol.SystemData{Type: protocol.SystemCheck, Command: "go build ./...", Exit: &zero, Output: "quiet", Text: "go build ./... passed in 1s"}
	vet := protocol.SystemData{Type: protocol.SystemCheck, Command: "go vet ./...", Exit: &one, Output: "./a.go:3: bad\nexit status 1", Text: "go vet ./... failed with exit code 1 after 2s"}
	rescue := &protocol.CommitEvent{Hash: "0123456789abcdef", Message: "filepath: rescue"}
	mems := []Memory{{Key: "tests", Text: "run make test, not go test"}}
	tests := []struct {
		name  string
		rep   startReport
		want  []string // in this order
		never []string
	}{
		{name: "first start, nothing found", rep: startReport{kind: startFirst, checks: []protocol.SystemData{noChecks}}},
		{name: "first start with checks", rep: startReport{kind: startFirst, checks: []protocol.SystemData{passed, vet}},
			want:  []string{"Health checks", "go build ./... passed", "go vet ./... failed", "| ./a.go:3: bad", "| exit status 1", "does not stop you"},
			never: []string{"quiet", ResumeMessage}},
		{name: "first start with memories only", rep: startReport{kind: startFirst, checks: []protocol.SystemData{noChecks}, memories: mems},
			want: []string{"Memories", "- tests: run make test"}, never: []string{"Health checks"}},
		{name: "restart", rep: startReport{kind: startRestart, generation: 1, checks: []protocol.SystemData{noChecks}},
			want: []string{ResumeMessage, "Health checks", "No health checks"}, never: []string{"handoff summary"}},
		{name: "restart of a continuation", rep: startReport{kind: startRestart, generation: 3, summary: "parser done", checks: []protocol.SystemData{noChecks}},
			want: []string{ResumeMessage, "(generation 3) started from this handoff summary:\nparser done", "Health checks"}},
		{name: "continuation", rep: startReport{kind: startContinuation, generation: 2, summary: "parser half done", rescue: rescue,
			checks: []protocol.SystemData{vet}, memories: mems},
			want: []string{ContinuationMessage, "(generation 2)", "parser half done", "Health checks", "committed them: 0123456789ab \"filepath: rescue\"",
				"go vet ./... failed", "| ./a.go:3: bad", "Memories", "- tests: run make test"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.rep.message()
			if len(tt.want) == 0 && got != "" {
				t.Fatalf("message %q, want none", got)
			}
			at := 0
			for _, w := range tt.want {
				i := strings.Index(got[at:], w)
				if i < 0 {
					t.Fatalf("message lacks %q after byte %d (in order):\n%s", w, at, got)
				}
				at += i + len(w)
			}
			for _, n := range tt.never {
				if strings.Contains(got, n) {
					t.Fatalf("message has %q:\n%s", n, got)
				}
			}
		})
	}
}
