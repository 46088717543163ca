// Package run is the part of the CLI adapter every vendor CLI shares: it
// reads FAP inputs on stdin and turns them into commands for the CLI's
// driver, writes the driver's events to stdout as FAP (adding a commit event
// whenever git HEAD in the workspace moves after a tool ran), keeps the
// state a restarted container needs to resume, and turns the CLI's end into
// a done event or an error exit.
package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/protocol"
)

// Config is the adapter's configuration, from flags and FILEPATH_* variables.
type Config struct {
	Agent     string   // claude-code, codex, amp or cursor
	Bin       string   // the CLI program; "" means the agent's usual name on PATH
	Args      []string // extra arguments for the CLI
	Workspace string   // the agent's working directory, /workspace
	StateDir  string   // where the CLI's session state lives (a per-node volume)
	Task      string   // FILEPATH_TASK: the first message, once per node
	Model     string   // FILEPATH_MODEL
	APIURL    string   // FILEPATH_API_URL: the agent-facing API (LLM gateway)
	APIKey    string   // FILEPATH_API_KEY: the node's token
	// Grace bounds a stop: the CLI gets this long to end its turn and exit
	// before it is killed.
	Grace time.Duration
	// Env is the environment the CLI starts from (os.Environ()).
	Env []string
	// Stderr receives the CLI's stderr and the adapter's log.
	Stderr io.Writer
	Log    *slog.Logger
}

// DefaultStateDir is where the adapter keeps the CLI's session state unless
// FILEPATH_STATE_DIR says otherwise. The orchestrator mounts a volume of the
// node there so that a restarted container resumes its conversation; it is
// deliberately not under /workspace, which the session's nodes share.
const DefaultStateDir = "/home/agent/.state"

// Op is what a Command asks.
type Op int

// The commands.
const (
	// Send gives the CLI a message; during a turn it joins the turn or waits
	// for its end, as the CLI allows.
	Send Op = iota
	// Interrupt ends the current turn; the CLI stays.
	Interrupt
	// Stop ends the turn and the CLI within Config.Grace.
	Stop
	// Finish lets the CLI end the work it has and then exit (stdin closed).
	Finish
)

// Command is one request to a driver.
type Command struct {
	Op   Op
	Text string // for Send
}

// Driver runs one vendor CLI.
type Driver interface {
	// Run starts the CLI (resuming its saved session when there is one) and
	// serves cmds, calling emit with the events it parses, until the CLI
	// ends. It returns nil after Stop or Finish, ctx.Err() when ctx ends
	// (the CLI is killed), and an *ExitError when the CLI exited by itself.
	Run(ctx context.Context, cmds <-chan Command, emit func(protocol.Event)) error
}

// Main runs the adapter: inputs from stdin, events to stdout, until the CLI
// ends. It returns the process exit code.
func Main(ctx context.Context, cfg Config, drv Driver, state *State, stdin io.Reader, stdout io.Writer) int {
	log := cfg.Log
	em := newEmitter(stdout, cfg.Workspace, log)
	inputs := readInputs(stdin, log)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	return loop(ctx, cfg, drv, state, em, inputs, sigs)
}

func loop(ctx context.Context, cfg Config, drv Driver, state *State, em *emitter, inputs <-chan protocol.Input, sigs <-chan os.Signal) int {
	log := cfg.Log
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmds := make(chan Command, 256)
	done := make(chan error, 1)
	go func() { done <- drv.Run(ctx, cmds, em.emit) }()

	send := func(text string) {
		em.thinking()
		select {
		case cmds <- Command{Op: Send, Text: text}:
		default:
			log.Error("too many messages waiting for the CLI; dropped one", "bytes", len(text))
		}
	}
	if strings.TrimSpace(cfg.Task) != "" && !state.TaskSent() {
		send(cfg.Task)
		if err := state.SetTaskSent(); err != nil {
			log.Warn("save the adapter state", "err", err)
		}
	}
	stopping := false
	var kill <-chan time.Time
	stop := func(why string) {
		if stopping {
			return
		}
		stopping = true
		log.Info("stopping the CLI", "why", why)
		cmds <- Command{Op: Stop}
		// The driver stops within Grace; past it (and a margin) the context
		// ends and the driver kills the CLI.
		kill = time.After(cfg.Grace + time.Second)
	}
	for {
		select {
		case in, ok := <-inputs:
			if !ok {
				inputs = nil
				if !stopping {
					cmds <- Command{Op: Finish}
				}
				continue
			}
			switch in := in.(type) {
			case protocol.MessageInput:
				if stopping {
					log.Warn("a message arrived while stopping; dropped", "from", in.From)
					continue
				}
				send(messageText(in))
			case protocol.SignalInput:
				switch in.Action {
				case protocol.ActionStop:
					stop("signal stop")
				default: // pause and resume: the orchestrator freezes the container
					log.Debug("signal", "action", in.Action)
				}
			}
		case sig := <-sigs:
			stop(sig.String())
		case <-kill:
			log.Warn("the CLI did not stop in time; killing it")
			cancel()
			kill = nil
		case err := <-done:
			return end(cfg, em, err, stopping)
		}
	}
}

// end turns the driver's return into the last events and the exit code.
func end(cfg Config, em *emitter, err error, stopping bool) int {
	var exit *ExitError
	switch {
	case stopping:
		em.emit(protocol.DoneEvent{Summary: summary("stopped")})
		return 0
	case err == nil:
		em.emit(protocol.DoneEvent{Summary: summary(em.lastText())})
		return 0
	case errors.As(err, &exit) && exit.Code == 0:
		em.emit(protocol.DoneEvent{Summary: summary(em.lastText())})
		return 0
	}
	// Written last to stderr, this is what the error record shows.
	fmt.Fprintf(cfg.Stderr, "filepath-cli-adapter: %v\n", err)
	em.emit(protocol.StatusEvent{State: protocol.StateError})
	if exit != nil && exit.Code > 0 && exit.Code < 126 {
		return exit.Code
	}
	return 1
}

func summary(s string) *string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	if r := []rune(s); len(r) > 500 {
		s = string(r[:500]) + "…"
	}
	return &s
}

// messageText is what the CLI is told for a message: a user's words as they
// are, a parent's or filepath's marked as such.
func messageText(m protocol.MessageInput) string {
	switch m.From {
	case protocol.FromParent:
		return "[message from your parent agent]\n" + m.Content
	case protocol.FromSystem:
		return "[message from filepath]\n" + m.Content
	}
	return m.Content
}

// readInputs decodes stdin into inputs until its end.
func readInputs(stdin io.Reader, log *slog.Logger) <-chan protocol.Input {
	out := make(chan protocol.Input)
	go func() {
		defer close(out)
		r := protocol.NewReader(stdin, 0)
		for {
			line, err := r.Next()
			var long *protocol.LineTooLongError
			switch {
			case errors.As(err, &long):
				log.Warn("skipped an input line over the limit", "bytes", long.Size)
				continue
			case errors.Is(err, io.EOF):
				return
			case err != nil:
				log.Warn("read stdin", "err", err)
				return
			}
			in, err := protocol.DecodeInput(line)
			if err != nil {
				log.Warn("skipped an input that is not FAP", "err", err)
				continue
			}
			out <- in
		}
	}()
	return out
}
