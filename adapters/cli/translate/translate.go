// Package translate holds what the CLI parsers share when they turn a vendor
// stream into FAP events: bounded text, workspace-relative paths, and the
// table of tool calls that have started and not yet finished.
package translate

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/filepath-dev/filepath/protocol"
)

// MaxField bounds every text field of an emitted event (tool output, command
// stdout and stderr, text): a tool that reads a large file must not make a
// line that the relay cuts. Longer text keeps its head and says how much was
// left out.
const MaxField = 16 << 10

// Cut returns s bounded to MaxField bytes, cut on a rune boundary.
func Cut(s string) string {
	if len(s) <= MaxField {
		return s
	}
	i := MaxField
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + fmt.Sprintf("\n… (%d more bytes)", len(s)-i)
}

// Str returns a pointer to the bounded s, or nil when s is empty.
func Str(s string) *string {
	if s == "" {
		return nil
	}
	c := Cut(s)
	return &c
}

// Num returns a pointer to f.
func Num(f float64) *float64 { return &f }

// Rel returns p relative to the workspace root ws when it lies inside it
// ("/workspace/a/b.go" → "a/b.go"), else p unchanged.
func Rel(ws, p string) string {
	if ws == "" || p == "" {
		return p
	}
	ws = strings.TrimSuffix(ws, "/")
	if p == ws {
		return "."
	}
	if rest, ok := strings.CutPrefix(p, ws+"/"); ok && rest != "" {
		return rest
	}
	return p
}

// Ratio returns used/window bounded to [0, 1], or nil when either is unknown.
func Ratio(used, window float64) *float64 {
	if used <= 0 || window <= 0 {
		return nil
	}
	return Num(min(1, used/window))
}

// Step is a tool call or shell command between its start and its result.
// Exactly one of Tool and Command is set: the start event that was emitted.
type Step struct {
	Tool    *protocol.ToolEvent
	Command *protocol.CommandEvent
}

// Start returns the start event of the step.
func (s Step) Start() protocol.Event {
	if s.Command != nil {
		return *s.Command
	}
	return *s.Tool
}

// Done returns the step's end event: status done, or error when failed,
// with the output (tools) or stdout, stderr and exit code (commands). exit
// is ignored for tools and left out when nil.
func (s Step) Done(failed bool, output, stdout, stderr string, exit *float64) protocol.Event {
	status := protocol.StepDone
	if failed {
		status = protocol.StepError
	}
	if s.Command != nil {
		return protocol.CommandEvent{Cmd: s.Command.Cmd, Status: status, Exit: exit, Stdout: Str(stdout), Stderr: Str(stderr)}
	}
	return protocol.ToolEvent{Name: s.Tool.Name, Path: s.Tool.Path, Status: status, Output: Str(output)}
}

// ToolStep starts a tool step; path "" means none.
func ToolStep(name, path string) Step {
	t := protocol.ToolEvent{Name: name, Status: protocol.StepStart}
	if path != "" {
		t.Path = &path
	}
	return Step{Tool: &t}
}

// CommandStep starts a command step.
func CommandStep(cmd string) Step {
	return Step{Command: &protocol.CommandEvent{Cmd: Cut(cmd), Status: protocol.StepStart}}
}

// Steps is the table of started steps by the CLI's id for them. The zero
// value is ready to use.
type Steps struct {
	m     map[string]Step
	order []string
}

// Add records a started step and returns its start event.
func (t *Steps) Add(id string, s Step) protocol.Event {
	if t.m == nil {
		t.m = map[string]Step{}
	}
	if _, ok := t.m[id]; !ok {
		t.order = append(t.order, id)
	}
	t.m[id] = s
	return s.Start()
}

// Take removes and returns the step with id.
func (t *Steps) Take(id string) (Step, bool) {
	s, ok := t.m[id]
	if ok {
		delete(t.m, id)
		if i := slices.Index(t.order, id); i >= 0 {
			t.order = slices.Delete(t.order, i, i+1)
		}
	}
	return s, ok
}

// Len is the number of steps still open.
func (t *Steps) Len() int { return len(t.m) }

// Abandon ends every open step with an error carrying reason (for a turn
// that ended without their results, e.g. interrupted), oldest first.
func (t *Steps) Abandon(reason string) []protocol.Event {
	if len(t.m) == 0 {
		return nil
	}
	var out []protocol.Event
	for _, id := range append([]string(nil), t.order...) {
		s, _ := t.Take(id)
		if s.Command != nil {
			out = append(out, s.Done(true, "", "", reason, nil))
		} else {
			out = append(out, s.Done(true, reason, "", "", nil))
		}
	}
	return out
}
