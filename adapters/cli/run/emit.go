package run

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/protocol"
)

// emitter writes events to stdout as FAP lines, one Write per line. The
// driver's goroutine and the main loop both emit, so a mutex orders them.
type emitter struct {
	mu   sync.Mutex // guards everything below
	w    *bufio.Writer
	enc  *protocol.Encoder
	git  *headWatcher
	log  *slog.Logger
	busy bool   // a message was sent and no idle status has followed
	text string // the last text event
}

func newEmitter(w io.Writer, workspace string, log *slog.Logger) *emitter {
	bw := bufio.NewWriterSize(w, 64<<10)
	return &emitter{w: bw, enc: protocol.NewEncoder(bw), git: newHeadWatcher(workspace), log: log}
}

// emit writes ev, then a commit event for each commit HEAD gained, looked
// for when ev ends a command or a tool that is not a file tool (one without
// a path: a sub-agent, an MCP tool, ...), and at the end of a turn. A file
// read or edit cannot commit; skipping them spares a git process per edit.
func (e *emitter) emit(ev protocol.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.write(ev)
	switch ev := ev.(type) {
	case protocol.TextEvent:
		e.text = ev.Content
	case protocol.StatusEvent:
		if ev.State == protocol.StateIdle {
			e.busy = false
			e.commits()
		}
	case protocol.ToolEvent:
		if ev.Status != protocol.StepStart && ev.Path == nil {
			e.commits()
		}
	case protocol.CommandEvent:
		if ev.Status != protocol.StepStart {
			e.commits()
		}
	}
	if err := e.w.Flush(); err != nil {
		e.log.Error("write to stdout", "err", err)
	}
}

func (e *emitter) write(ev protocol.Event) {
	if err := e.enc.Encode(ev); err != nil {
		e.log.Error("encode an event", "type", ev.EventType(), "err", err)
	}
}

func (e *emitter) commits() {
	for _, c := range e.git.check() {
		e.write(c)
	}
}

// thinking says the agent is working, once per stretch of work.
func (e *emitter) thinking() {
	e.mu.Lock()
	busy := e.busy
	e.busy = true
	e.mu.Unlock()
	if !busy {
		e.emit(protocol.StatusEvent{State: protocol.StateThinking})
	}
}

func (e *emitter) lastText() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.text
}

// maxCommits bounds the commit events for one move of HEAD (a rebase or a
// pull can bring thousands).
const maxCommits = 20

// headWatcher reports the commits HEAD gained since it last looked.
type headWatcher struct {
	dir  string
	head string // "" before the first commit (or outside a repository)
}

func newHeadWatcher(dir string) *headWatcher {
	w := &headWatcher{dir: dir}
	w.head, _ = w.git("rev-parse", "--verify", "-q", "HEAD")
	return w
}

func (w *headWatcher) git(args ...string) (string, bool) {
	if w.dir == "" {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", w.dir}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(out)), true
}

// check returns a commit event for each commit new since the last check,
// oldest first; an amend or a reset shows as the commit HEAD now names.
func (w *headWatcher) check() []protocol.Event {
	head, ok := w.git("rev-parse", "--verify", "-q", "HEAD")
	if !ok || head == w.head {
		return nil
	}
	args := []string{"log", "--format=%h%x00%s", "-n", strconv.Itoa(maxCommits)}
	switch _, descends := w.git("merge-base", "--is-ancestor", w.head, head); {
	case w.head == "":
		args = append(args, head)
	case descends:
		args = append(args, w.head+".."+head)
	default: // history rewritten: report where HEAD is now
		args = append(args[:2], "-n", "1", head)
	}
	w.head = head
	out, ok := w.git(args...)
	if !ok || out == "" {
		return nil
	}
	lines := strings.Split(out, "\n")
	evs := make([]protocol.Event, 0, len(lines))
	for i := len(lines) - 1; i >= 0; i-- { // git log is newest first
		hash, msg, _ := strings.Cut(lines[i], "\x00")
		evs = append(evs, protocol.CommitEvent{Hash: hash, Message: msg})
	}
	return evs
}
