package streamjson

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/adapters/cli/run"
	"github.com/filepath-dev/filepath/adapters/internal/approval"
	"github.com/filepath-dev/filepath/protocol"
)

// cli is what differs between the CLIs that take messages on stdin for as
// long as they run (Claude Code, Amp).
type cli struct {
	name    string
	dialect Dialect
	// spec is how to start the CLI, resuming session id resume ("" for a
	// new session).
	spec func(resume string) run.ChildSpec
	// user is the stdin line for a message.
	user func(text string) []byte
	// interrupt is the stdin line that ends the current turn, nil when the
	// CLI has none (then an interrupt restarts it on the same session).
	interrupt func(n int) []byte
	// permissions: the CLI asks for permission with can_use_tool control
	// requests (Claude Code's --permission-prompt-tool stdio).
	permissions bool
}

// Long runs a CLI that reads messages on stdin for as long as it runs and
// writes stream-json on stdout: one process for the node's whole life,
// resumed by session id after a restart.
type Long struct {
	cli   cli
	cfg   run.Config
	state *run.State
	log   *slog.Logger
	// API asks a person for the permissions the CLI asks for.
	API *approval.Client
}

var _ run.Driver = (*Long)(nil)

// NewClaude returns the driver of Claude Code: `claude -p --input-format
// stream-json --output-format stream-json --verbose --permission-prompt-tool
// stdio` (its permission prompts come to the adapter, which answers them or
// asks the approvals inbox: permission.go), filepath's agent tools as an MCP
// server (--mcp-config, written to the state directory), its LLM traffic
// sent to the gateway's Anthropic endpoint with the node's token, its state
// (CLAUDE_CONFIG_DIR) in the state directory, and nothing else sent
// anywhere.
func NewClaude(cfg run.Config, state *run.State) *Long {
	bin := cfg.Bin
	if bin == "" {
		bin = "claude"
	}
	c := cli{name: "claude", dialect: Claude, permissions: true}
	c.spec = func(resume string) run.ChildSpec {
		args := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
			"--permission-prompt-tool", "stdio"}
		if p, err := run.WriteMCPConfig(cfg, filepath.Join(cfg.StateDir, "claude-mcp.json"), run.ClaudeMCPConfig); err != nil {
			cfg.Log.Warn("claude gets no filepath MCP server", "err", err)
		} else if p != "" {
			args = append(args, "--mcp-config", p)
		}
		if m := strings.TrimPrefix(cfg.Model, "anthropic/"); m != "" {
			args = append(args, "--model", m)
		}
		if resume != "" {
			args = append(args, "--resume", resume)
		}
		set := map[string]string{
			"CLAUDE_CONFIG_DIR": filepath.Join(cfg.StateDir, "claude"),
			// Off: telemetry, error reports, the auto-updater, feedback
			// surveys; what is left talks to ANTHROPIC_BASE_URL only.
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
			"DISABLE_TELEMETRY":                        "1",
			"DISABLE_ERROR_REPORTING":                  "1",
			"DISABLE_AUTOUPDATER":                      "1",
		}
		// wait_for_children and request_approval wait up to 10 minutes.
		defaults := map[string]string{"MCP_TOOL_TIMEOUT": run.MCPToolTimeoutMS}
		if cfg.APIURL != "" {
			defaults["ANTHROPIC_BASE_URL"] = strings.TrimSuffix(cfg.APIURL, "/") + "/anthropic"
		}
		if cfg.APIKey != "" {
			defaults["ANTHROPIC_API_KEY"] = cfg.APIKey
		}
		return run.ChildSpec{Name: "claude", Path: bin, Args: append(args, cfg.Args...),
			Env: run.Env(cfg.Env, set, defaults), Dir: cfg.Workspace, Stderr: cfg.Stderr, Log: cfg.Log}
	}
	c.user = func(text string) []byte {
		b, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}})
		return b
	}
	c.interrupt = func(n int) []byte {
		return fmt.Appendf(nil, `{"type":"control_request","request_id":"fp-%d","request":{"subtype":"interrupt"}}`, n)
	}
	return &Long{cli: c, cfg: cfg, state: state, log: cfg.Log, API: run.ApprovalClient(cfg)}
}

// NewAmp returns the driver of Amp: `amp [threads continue ID] --execute
// --stream-json --stream-json-input --dangerously-allow-all --mcp-config
// JSON` (filepath's agent tools). Amp's permission prompts stay off: its
// stream-json mode has no way to ask the adapter. Amp talks to
// Amp's own service with the user's AMP_API_KEY (from the environment; the
// gateway does not meter it). Amp has no interrupt on stdin: an interrupt
// restarts it on the same thread.
func NewAmp(cfg run.Config, state *run.State) *Long {
	bin := cfg.Bin
	if bin == "" {
		bin = "amp"
	}
	c := cli{name: "amp", dialect: Amp}
	c.spec = func(resume string) run.ChildSpec {
		var args []string
		if resume != "" {
			args = append(args, "threads", "continue", resume)
		}
		args = append(args, "--execute", "--stream-json", "--stream-json-input", "--dangerously-allow-all")
		// Amp takes the servers as JSON on the command line (its manual's
		// form); the token is in the container's environment anyway.
		if cfg.MCPURL() != "" {
			if b, err := run.AmpMCPConfig(cfg); err == nil {
				args = append(args, "--mcp-config", string(b))
			}
		}
		set := map[string]string{"HOME": filepath.Join(cfg.StateDir, "home")}
		return run.ChildSpec{Name: "amp", Path: bin, Args: append(args, cfg.Args...),
			Env: run.Env(cfg.Env, set, nil), Dir: cfg.Workspace, Stderr: cfg.Stderr, Log: cfg.Log}
	}
	c.user = func(text string) []byte {
		b, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "text", "text": text}}}})
		return b
	}
	return &Long{cli: c, cfg: cfg, state: state, log: cfg.Log}
}

// Run implements run.Driver.
func (d *Long) Run(ctx context.Context, cmds <-chan run.Command, emit func(protocol.Event)) error {
	resume := d.state.Session()
	var replay []string
	for {
		s := &longRun{d: d, resume: resume, cmds: cmds, emit: emit}
		err := s.run(ctx, replay)
		switch {
		case s.resumeFailed:
			d.log.Warn("the CLI could not resume its session; starting a new one", "cli", d.cli.name, "session", resume)
			if err := d.state.SetSession(""); err != nil {
				d.log.Warn("save state", "err", err)
			}
			resume, replay = "", s.unanswered
		case s.restart:
			resume, replay = d.state.Session(), s.unanswered
		default:
			return err
		}
	}
}

// longRun is one process of the CLI.
type longRun struct {
	d      *Long
	resume string
	cmds   <-chan run.Command
	emit   func(protocol.Event)

	child      *run.Child
	parser     *Parser
	busy       bool     // a message is being worked on
	answered   bool     // the CLI said something in this process
	unanswered []string // messages sent before it said anything
	stopping   bool
	finishing  bool
	closed     bool // stdin closed
	requests   int

	held         []protocol.Event // events of a resumed session before it answered
	resumeFailed bool             // exited at once on a resumed session
	restart      bool             // ended for an interrupt; start again on the same session

	// Permission requests being decided, by control request id, and
	// their answers for the CLI.
	asking   map[string]context.CancelFunc
	answers  chan answer
	askCtx   context.Context
	askClose context.CancelFunc
	// asks counts the goroutines deciding requests: run waits for them
	// (each withdraws its request when cancelled, within
	// approval.WithdrawWithin) before it returns
	asks sync.WaitGroup
}

func (s *longRun) send(line []byte) {
	if err := s.child.Send(line); err != nil {
		s.d.log.Warn("write to the CLI", "cli", s.d.cli.name, "err", err)
	}
}

func (s *longRun) closeInput() (kill <-chan time.Time) {
	if !s.closed {
		s.closed = true
		s.child.CloseInput()
	}
	return time.After(s.d.cfg.Grace / 2)
}

func (s *longRun) run(ctx context.Context, replay []string) error {
	child, err := run.StartChild(s.d.cli.spec(s.resume))
	if err != nil {
		return err
	}
	defer child.Close()
	s.child, s.parser = child, NewParser(s.d.cli.dialect, s.d.cfg.Workspace)
	s.asking, s.answers = map[string]context.CancelFunc{}, make(chan answer)
	s.askCtx, s.askClose = context.WithCancel(ctx)
	defer s.asks.Wait() // after askClose (deferred next): withdrawals are sent
	defer s.askClose()
	for _, t := range replay {
		s.message(t)
	}
	cmds, lines := s.cmds, child.Lines()
	var stopWait, killWait <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			child.Kill(time.Second)
			s.drain(lines)
			s.flushHeld()
			s.end("the adapter was stopped")
			return ctx.Err()
		case c := <-cmds:
			switch c.Op {
			case run.Send:
				if s.stopping || s.finishing {
					s.d.log.Warn("a message after stop; dropped", "cli", s.d.cli.name)
					continue
				}
				s.message(c.Text)
			case run.Interrupt:
				if !s.busy {
					continue
				}
				if s.d.cli.interrupt == nil {
					s.restart = true
					killWait = s.closeInput()
					continue
				}
				s.requests++
				s.send(s.d.cli.interrupt(s.requests))
			case run.Stop:
				s.stopping = true
				if s.busy && s.d.cli.interrupt != nil {
					s.requests++
					s.send(s.d.cli.interrupt(s.requests))
					stopWait = time.After(s.d.cfg.Grace / 2)
				} else {
					killWait = s.closeInput()
				}
			case run.Finish:
				s.finishing = true
				s.closeInput()
			}
		case l, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			s.line(l)
			if s.stopping && !s.busy && !s.closed {
				killWait = s.closeInput()
			}
		case a := <-s.answers:
			delete(s.asking, a.id)
			s.send(a.line)
		case <-stopWait:
			stopWait = nil
			killWait = s.closeInput()
		case <-killWait:
			killWait = nil
			s.d.log.Warn("the CLI did not exit after its input closed; killing it", "cli", s.d.cli.name)
			go child.Kill(500 * time.Millisecond)
		case <-child.Done():
			s.drain(lines)
			exit := child.Exit()
			asked := s.stopping || s.finishing || s.restart
			if exit != nil && s.resume != "" && !s.answered && !asked {
				s.resumeFailed = true // what it said is dropped with it
				return nil
			}
			s.flushHeld()
			if s.restart {
				s.end("interrupted")
			} else {
				s.end(s.d.cli.name + " exited")
			}
			switch {
			case asked:
				return nil
			case exit == nil:
				return &run.ExitError{CLI: s.d.cli.name, Code: 0, Tail: child.Tail()}
			}
			return exit
		}
	}
}

func (s *longRun) message(text string) {
	s.busy = true
	if !s.answered {
		s.unanswered = append(s.unanswered, text)
	}
	s.send(s.d.cli.user(text))
}

func (s *longRun) drain(lines <-chan []byte) {
	if lines == nil {
		return
	}
	for l := range lines {
		s.line(l)
	}
}

func (s *longRun) line(l []byte) {
	if s.d.cli.permissions {
		if c, ok := parseControl(l); ok {
			s.permission(c)
			return
		}
	}
	evs, note := s.parser.Parse(l)
	if note != "" {
		s.d.log.Debug(note, "cli", s.d.cli.name)
	}
	if id := s.parser.SessionID(); id != "" && id != s.d.state.Session() && !s.restart {
		if err := s.d.state.SetSession(id); err != nil {
			s.d.log.Warn("save state", "err", err)
		}
	}
	for _, ev := range evs {
		switch ev := ev.(type) {
		case protocol.StatusEvent:
			if ev.State == protocol.StateIdle {
				s.busy = false
			}
		default:
			s.answered, s.unanswered = true, nil
		}
		// Until a resumed session answers, what it says may be the error of
		// a session it no longer has: hold it back.
		if s.resume != "" && !s.answered {
			s.held = append(s.held, ev)
			continue
		}
		s.flushHeld()
		s.emit(ev)
	}
}

func (s *longRun) flushHeld() {
	for _, ev := range s.held {
		s.emit(ev)
	}
	s.held = nil
}

// end closes what a stream cut mid-turn left open.
func (s *longRun) end(reason string) {
	for _, ev := range s.parser.End(reason) {
		s.emit(ev)
	}
}

// permission starts deciding a can_use_tool request (its answer comes back
// through s.answers), or withdraws one the CLI cancelled.
func (s *longRun) permission(c controlLine) {
	if c.Type == "control_cancel_request" {
		if cancel, ok := s.asking[c.RequestID]; ok {
			cancel()
			delete(s.asking, c.RequestID)
		}
		return
	}
	ctx, cancel := context.WithCancel(s.askCtx)
	s.asking[c.RequestID] = cancel
	s.d.log.Info("claude asks permission", "tool", c.Request.ToolName, "request", c.RequestID)
	s.asks.Add(1)
	go func() {
		defer s.asks.Done()
		defer cancel()
		b := decide(ctx, s.d.log, s.d.API, s.d.cfg.Workspace, c)
		if b == nil {
			return
		}
		select {
		case s.answers <- answer{c.RequestID, b}:
		case <-ctx.Done():
		}
	}()
}

// answer is a decided permission request.
type answer struct {
	id   string
	line []byte
}
