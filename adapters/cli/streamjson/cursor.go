package streamjson

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/adapters/cli/run"
	"github.com/filepath-dev/filepath/protocol"
)

// PerMessage runs Cursor's agent, which takes one prompt per process:
// `cursor-agent -p --output-format stream-json --force [--approve-mcps]
// [--resume ID] PROMPT`, filepath's agent tools in $HOME/.cursor/mcp.json
// (HOME is in the state directory). --force runs every command: Cursor's
// print mode has no way to ask the adapter for permission.
// Messages that arrive during a run wait and go together into the next one;
// the chat id of the first run is resumed by every later run and after a
// restart. Cursor talks to Cursor's service with the user's CURSOR_API_KEY
// (from the environment; the gateway does not meter it).
type PerMessage struct {
	cfg   run.Config
	state *run.State
	bin   string
}

var _ run.Driver = (*PerMessage)(nil)

// NewCursor returns the Cursor driver.
func NewCursor(cfg run.Config, state *run.State) *PerMessage {
	bin := cfg.Bin
	if bin == "" {
		bin = "cursor-agent"
	}
	return &PerMessage{cfg: cfg, state: state, bin: bin}
}

func (d *PerMessage) spec(prompt string) run.ChildSpec {
	args := []string{"-p", "--output-format", "stream-json", "--force"}
	home := filepath.Join(d.cfg.StateDir, "home")
	if p, err := run.WriteMCPConfig(d.cfg, filepath.Join(home, ".cursor", "mcp.json"), run.CursorMCPConfig); err != nil {
		d.cfg.Log.Warn("cursor-agent gets no filepath MCP server", "err", err)
	} else if p != "" {
		args = append(args, "--approve-mcps") // headless: nobody to approve the server
	}
	if m := d.cfg.Model; m != "" {
		args = append(args, "--model", m)
	}
	if id := d.state.Session(); id != "" {
		args = append(args, "--resume", id)
	}
	args = append(append(args, d.cfg.Args...), prompt)
	set := map[string]string{"HOME": home}
	return run.ChildSpec{Name: "cursor-agent", Path: d.bin, Args: args,
		Env: run.Env(d.cfg.Env, set, nil), Dir: d.cfg.Workspace, Stderr: d.cfg.Stderr, Log: d.cfg.Log}
}

// Run implements run.Driver.
func (d *PerMessage) Run(ctx context.Context, cmds <-chan run.Command, emit func(protocol.Event)) error {
	log := d.cfg.Log
	parser := NewParser(Cursor, d.cfg.Workspace)
	var (
		queue     []string
		child     *run.Child
		lines     <-chan []byte
		done      <-chan struct{}
		finishing bool
		stopping  bool
		killWait  <-chan time.Time
	)
	line := func(l []byte) {
		evs, note := parser.Parse(l)
		if note != "" {
			log.Debug(note, "cli", "cursor-agent")
		}
		if id := parser.SessionID(); id != "" && id != d.state.Session() {
			if err := d.state.SetSession(id); err != nil {
				log.Warn("save state", "err", err)
			}
		}
		for _, ev := range evs {
			emit(ev)
		}
	}
	// ended handles the end of a run: what it left open, and its failure.
	ended := func(why string) {
		if lines != nil {
			for l := range lines {
				line(l)
			}
		}
		exit := child.Exit()
		evs := parser.End(why)
		if exit != nil && !stopping {
			msg := "cursor-agent exited with code " + strconv.Itoa(exit.Code)
			if t := lastLine(exit.Tail); t != "" {
				msg += ": " + t
			}
			emit(protocol.TextEvent{Content: msg})
			if len(evs) == 0 {
				evs = []protocol.Event{protocol.StatusEvent{State: protocol.StateIdle}}
			}
		}
		for _, ev := range evs {
			emit(ev)
		}
		child.Close()
		child, lines, done = nil, nil, nil
	}
	defer func() {
		if child != nil {
			child.Close()
		}
	}()
	for {
		if child == nil && len(queue) > 0 && !stopping {
			c, err := run.StartChild(d.spec(strings.Join(queue, "\n\n")))
			if err != nil {
				return err
			}
			queue = nil
			child, lines, done = c, c.Lines(), c.Done()
		}
		if child == nil && (stopping || (finishing && len(queue) == 0)) {
			return nil
		}
		select {
		case <-ctx.Done():
			if child != nil {
				child.Kill(time.Second)
				stopping = true
				ended("the adapter was stopped")
			}
			return ctx.Err()
		case c := <-cmds:
			switch c.Op {
			case run.Send:
				if !stopping && !finishing {
					queue = append(queue, c.Text)
				}
			case run.Interrupt:
				if child != nil {
					go child.Kill(d.cfg.Grace)
				}
			case run.Stop:
				stopping, queue = true, nil
				if child != nil {
					child.Signal(syscall.SIGTERM)
					killWait = time.After(d.cfg.Grace)
				}
			case run.Finish:
				finishing = true
			}
		case l, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			line(l)
		case <-killWait:
			killWait = nil
			if child != nil {
				go child.Kill(0)
			}
		case <-done:
			ended("cursor-agent exited")
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
