package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/filepath-dev/filepath/protocol"
)

// Bounds of what goes into one FAP event, well under the 1 MiB line limit
// even when JSON escaping grows a string six-fold.
const (
	maxTextEvent  = 64 << 10 // one text event; longer answers are split
	maxToolOutput = 16 << 10 // output of a tool event, stdout or stderr of a command event
	maxSummary    = 4 << 10  // done and handoff summaries
)

// emitter writes FAP events to stdout, one line per event, each in one Write.
type emitter struct {
	mu  sync.Mutex
	enc *protocol.Encoder
	log io.Writer
}

func newEmitter(w, log io.Writer) *emitter {
	return &emitter{enc: protocol.NewEncoder(w), log: log}
}

func (e *emitter) emit(ev protocol.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.enc.Encode(ev); err != nil {
		fmt.Fprintf(e.log, "native: write event: %v\n", err)
	}
}

// text emits an assistant message as one text event, or as several when it
// is longer than maxTextEvent (split at a line break when there is one).
func (e *emitter) text(s string) {
	for _, part := range splitText(s, maxTextEvent) {
		e.emit(protocol.TextEvent{Content: part})
	}
}

func (e *emitter) status(state string, pct *float64) {
	e.emit(protocol.StatusEvent{State: state, ContextPct: pct})
}

func (e *emitter) tool(name, path, status, output string) {
	ev := protocol.ToolEvent{Name: name, Status: status}
	if path != "" {
		ev.Path = &path
	}
	if output != "" {
		out := cut(output, maxToolOutput)
		ev.Output = &out
	}
	e.emit(ev)
}

// splitText cuts s into parts of at most n bytes, at the last newline of
// each part when there is one in its second half, never inside a rune.
func splitText(s string, n int) []string {
	var parts []string
	for len(s) > n {
		i := runeStart(s, n)
		if j := strings.LastIndexByte(s[:i], '\n'); j >= i/2 {
			i = j + 1
		}
		parts = append(parts, s[:i])
		s = s[i:]
	}
	if s != "" {
		parts = append(parts, s)
	}
	return parts
}

// runeStart returns the largest i <= n at which a rune of s starts.
func runeStart(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// cut returns s when it fits in n bytes, else its first part and a note of
// how much was left out.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	note := fmt.Sprintf("\n[… %d more bytes not shown]", len(s)-n)
	return s[:runeStart(s, max(0, n-len(note)))] + note
}
