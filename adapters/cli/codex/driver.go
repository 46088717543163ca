package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/adapters/cli/run"
	"github.com/filepath-dev/filepath/adapters/internal/approval"
	"github.com/filepath-dev/filepath/protocol"
)

// Driver runs `codex app-server` for the node's whole life: one thread,
// resumed by id after a restart; a message starts a turn (turn/start) or,
// during one, joins it (turn/steer); stop interrupts the turn
// (turn/interrupt) and closes the server's stdin.
//
// Codex reads its configuration from CODEX_HOME/config.toml, which the
// driver writes on every start (CODEX_HOME is in the state directory): the
// gateway as the only model provider (Responses API, the node's token from
// FILEPATH_API_KEY), filepath's agent tools as an MCP server, approval
// policy "untrusted" (Codex asks before any command it does not know to be
// read-only, and the adapter answers: approvals.go) and no sandbox of its
// own (the container is the sandbox; Codex's needs namespaces a hardened
// container does not grant), and nothing else on the network: no update
// check, no analytics, no OpenTelemetry export, no plugin sync.
type Driver struct {
	cfg   run.Config
	state *run.State
	log   *slog.Logger
	bin   string
	// API asks a person for what Codex asks approval for.
	API *approval.Client
}

var _ run.Driver = (*Driver)(nil)

// New returns the Codex driver.
func New(cfg run.Config, state *run.State) *Driver {
	bin := cfg.Bin
	if bin == "" {
		bin = "codex"
	}
	return &Driver{cfg: cfg, state: state, log: cfg.Log, bin: bin, API: run.ApprovalClient(cfg)}
}

// Home is CODEX_HOME in the state directory.
func (d *Driver) Home() string { return filepath.Join(d.cfg.StateDir, "codex") }

// Config is the config.toml the driver writes.
func (d *Driver) Config() string {
	model := strings.TrimPrefix(d.cfg.Model, "openai/")
	base := strings.TrimSuffix(d.cfg.APIURL, "/") + "/openai/v1"
	var b strings.Builder
	b.WriteString("# Written by filepath-cli-adapter on every start; edits are lost.\n")
	if model != "" {
		fmt.Fprintf(&b, "model = %s\n", tomlString(model))
	}
	b.WriteString(`model_provider = "filepath"
approval_policy = "on-request"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[otel]
metrics_exporter = "none"

[features]
plugins = false

[model_providers.filepath]
name = "filepath gateway"
`)
	fmt.Fprintf(&b, "base_url = %s\n", tomlString(base))
	b.WriteString(`env_key = "FILEPATH_API_KEY"
wire_api = "responses"
`)
	if u := d.cfg.MCPURL(); u != "" {
		// filepath's agent tools; wait_for_children and request_approval
		// may wait 10 minutes.
		fmt.Fprintf(&b, "\n[mcp_servers.%s]\nurl = %s\n", run.MCPServerName, tomlString(u))
		b.WriteString(`bearer_token_env_var = "FILEPATH_API_KEY"
tool_timeout_sec = 660
`)
	}
	return b.String()
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func (d *Driver) spec() (run.ChildSpec, error) {
	home := d.Home()
	if err := os.MkdirAll(home, 0o700); err != nil {
		return run.ChildSpec{}, fmt.Errorf("CODEX_HOME: %w", err)
	}
	if d.cfg.APIURL == "" {
		d.log.Warn("FILEPATH_API_URL is not set: codex has no gateway to talk to")
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(d.Config()), 0o600); err != nil {
		return run.ChildSpec{}, fmt.Errorf("write codex config: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(home, "rules"), 0o700); err != nil {
		return run.ChildSpec{}, fmt.Errorf("codex rules: %w", err)
	}
	if err := os.WriteFile(filepath.Join(home, "rules", "filepath.rules"), []byte(Rules()), 0o600); err != nil {
		return run.ChildSpec{}, fmt.Errorf("write codex rules: %w", err)
	}
	set := map[string]string{"CODEX_HOME": home, "FILEPATH_API_KEY": d.cfg.APIKey}
	return run.ChildSpec{Name: "codex", Path: d.bin, Args: append([]string{"app-server"}, d.cfg.Args...),
		Env: run.Env(d.cfg.Env, set, nil), Dir: d.cfg.Workspace, Stderr: d.cfg.Stderr, Log: d.cfg.Log}, nil
}

// request kinds, to know what a response answers.
type pending struct {
	method string
	texts  []string // turn/start and turn/steer: the messages it carries
}

// conn is one app-server process and what the driver knows of it.
type conn struct {
	d       *Driver
	child   *run.Child
	parser  *Parser
	emit    func(protocol.Event)
	next    int
	pending map[int]pending

	thread   string              // "" until thread/start or thread/resume answers
	starting bool                // a turn/start is in flight
	queue    []string            // messages waiting for the thread or a turn
	changes  map[string][]string // the paths of fileChange items, by item id
	answers  chan reply          // approval requests decided
	askCtx   context.Context
	// asking are the approval requests waiting in the inbox, by Codex's
	// request id; cancelling one withdraws it (see serverRequest).
	asking    map[int]context.CancelFunc
	askers    sync.WaitGroup
	stopping  bool
	finishing bool
	closed    bool
}

// Run implements run.Driver.
func (d *Driver) Run(ctx context.Context, cmds <-chan run.Command, emit func(protocol.Event)) error {
	spec, err := d.spec()
	if err != nil {
		return err
	}
	child, err := run.StartChild(spec)
	if err != nil {
		return err
	}
	defer child.Close()
	askCtx, askClose := context.WithCancel(ctx)
	c := &conn{d: d, child: child, parser: NewParser(d.cfg.Workspace), emit: emit, pending: map[int]pending{},
		changes: map[string][]string{}, answers: make(chan reply), askCtx: askCtx, asking: map[int]context.CancelFunc{}}
	// Codex is gone: what it asked is withdrawn from the inbox before the
	// adapter (and its process) ends.
	defer func() {
		askClose()
		c.askers.Wait()
	}()
	c.call("initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "filepath", "title": "filepath", "version": "1"},
		"capabilities": map[string]any{"experimentalApi": false},
	}, nil)
	lines := child.Lines()
	var stopWait, killWait <-chan time.Time
	closeInput := func() {
		if !c.closed {
			c.closed = true
			child.CloseInput()
			killWait = time.After(d.cfg.Grace / 2)
		}
	}
	for {
		select {
		case <-ctx.Done():
			child.Kill(time.Second)
			c.drain(lines)
			c.end("the adapter was stopped")
			return ctx.Err()
		case cmd := <-cmds:
			switch cmd.Op {
			case run.Send:
				if c.stopping || c.finishing {
					d.log.Warn("a message after stop; dropped")
					continue
				}
				c.queue = append(c.queue, cmd.Text)
				c.flush()
			case run.Interrupt:
				c.interrupt()
			case run.Stop:
				c.stopping, c.queue = true, nil
				if c.parser.Turn() != "" || c.starting {
					c.interrupt()
					stopWait = time.After(d.cfg.Grace / 2)
				} else {
					closeInput()
				}
			case run.Finish:
				c.finishing = true
			}
		case l, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			c.line(l)
		case r := <-c.answers:
			// Unless Codex stopped waiting for it meanwhile.
			if _, ok := c.asking[r.id]; ok {
				delete(c.asking, r.id)
				c.write(map[string]any{"id": r.id, "result": r.result})
			}
		case <-stopWait:
			stopWait = nil
			closeInput()
		case <-killWait:
			killWait = nil
			d.log.Warn("codex did not exit after its input closed; killing it")
			go child.Kill(500 * time.Millisecond)
		case <-child.Done():
			c.drain(lines)
			c.end("codex exited")
			if c.stopping || c.finishing {
				return nil
			}
			if exit := child.Exit(); exit != nil {
				return exit
			}
			return &run.ExitError{CLI: "codex", Code: 0, Tail: child.Tail()}
		}
		// Between turns with nothing queued, a stop or a finish closes the
		// server's input; it exits.
		if (c.stopping || c.finishing) && c.idle() && len(c.queue) == 0 {
			closeInput()
		}
	}
}

func (c *conn) idle() bool { return c.parser.Turn() == "" && !c.starting }

func (c *conn) drain(lines <-chan []byte) {
	if lines == nil {
		return
	}
	for l := range lines {
		c.line(l)
	}
}

func (c *conn) end(reason string) {
	for _, ev := range c.parser.End(reason) {
		c.emit(ev)
	}
}

func (c *conn) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.d.log.Error("encode a request", "err", err)
		return
	}
	if err := c.child.Send(b); err != nil {
		c.d.log.Warn("write to codex", "err", err)
	}
}

func (c *conn) call(method string, params any, texts []string) {
	c.next++
	c.pending[c.next] = pending{method: method, texts: texts}
	c.write(map[string]any{"id": c.next, "method": method, "params": params})
}

func input(texts []string) []any {
	in := make([]any, len(texts))
	for i, t := range texts {
		in[i] = map[string]any{"type": "text", "text": t}
	}
	return in
}

// flush gives the queued messages to the thread: a new turn, or the
// running one.
func (c *conn) flush() {
	if c.thread == "" || len(c.queue) == 0 || c.starting {
		return
	}
	texts := c.queue
	c.queue = nil
	if turn := c.parser.Turn(); turn != "" {
		c.call("turn/steer", map[string]any{"threadId": c.thread, "expectedTurnId": turn, "input": input(texts)}, texts)
		return
	}
	c.starting = true
	c.call("turn/start", map[string]any{"threadId": c.thread, "input": input(texts)}, texts)
}

func (c *conn) interrupt() {
	if turn := c.parser.Turn(); turn != "" && c.thread != "" {
		c.call("turn/interrupt", map[string]any{"threadId": c.thread, "turnId": turn}, nil)
	}
}

func (c *conn) threadParams() map[string]any {
	return map[string]any{"cwd": c.d.cfg.Workspace, "approvalPolicy": "on-request", "sandbox": "danger-full-access"}
}

func (c *conn) line(l []byte) {
	var m struct {
		ID     *int            `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(l, &m) == nil {
		switch {
		case m.ID != nil && m.Method != "":
			c.serverRequest(*m.ID, m.Method, m.Params)
		case m.ID != nil:
			c.response(*m.ID, m.Result, m.Error)
		}
	}
	evs, note := c.parser.Parse(l)
	if note != "" {
		c.d.log.Debug(note, "cli", "codex")
	}
	for _, ev := range evs {
		c.emit(ev)
	}
	if m.Method == "item/started" {
		c.noteChanges(m.Params)
	}
	switch m.Method {
	case "turn/started":
		c.starting = false
		if c.stopping {
			c.interrupt()
		}
		c.flush()
	case "turn/completed":
		// Codex clears what the turn asked (serverRequest/resolved says so;
		// a server without it ends them with the turn all the same).
		c.withdrawAll()
		c.starting = false
		c.flush()
	case "serverRequest/resolved":
		c.resolved(m.Params)
	}
}

// resolved withdraws the approval request Codex no longer waits for
// (serverRequest/resolved {threadId, requestId}: answered, or cleared when
// its turn was interrupted or ended).
func (c *conn) resolved(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	var id int
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p.RequestID, &id) != nil {
		return
	}
	if cancel, ok := c.asking[id]; ok {
		delete(c.asking, id)
		cancel()
	}
}

// withdrawAll withdraws every approval request waiting in the inbox.
func (c *conn) withdrawAll() {
	for id, cancel := range c.asking {
		delete(c.asking, id)
		cancel()
	}
}

func (c *conn) serverRequest(id int, method string, params json.RawMessage) {
	ask, ok := c.classify(method, params)
	if !ok {
		c.write(map[string]any{"id": id, "error": map[string]any{"code": -32601, "message": "filepath does not handle " + method}})
		return
	}
	if ask.Request.Action == "" {
		c.write(map[string]any{"id": id, "result": decision(method, true)})
		return
	}
	c.d.log.Info("codex asks approval", "method", method, "action", ask.Request.Action)
	if cancel, ok := c.asking[id]; ok {
		cancel() // an id Codex uses again no longer waits for the old answer
	}
	ctx, cancel := context.WithCancel(c.askCtx)
	c.asking[id] = cancel
	c.askers.Add(1)
	go func() {
		defer c.askers.Done()
		defer cancel()
		a, err := c.d.API.Ask(ctx, ask.Request)
		if ctx.Err() != nil {
			// Codex no longer waits (it resolved the request, its turn was
			// interrupted or ended, or the adapter stops): the inbox must not
			// keep asking a person about it.
			if err := c.d.API.Abandon(ctx, a); err != nil {
				c.d.log.Warn("withdraw an approval request codex no longer waits for", "approval", a.ID, "err", err)
			}
			return
		}
		ok := err == nil && a.Status == "approved"
		if !ok {
			c.d.log.Info("codex's request was not approved", "why", approval.Refusal(ask.Reason, a, err))
		}
		select {
		case c.answers <- reply{id: id, result: decision(method, ok)}:
		case <-ctx.Done():
		}
	}()
}

func (c *conn) response(id int, result json.RawMessage, rpcErr *struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}) {
	p, ok := c.pending[id]
	if !ok {
		return
	}
	delete(c.pending, id)
	if rpcErr != nil {
		c.d.log.Warn("codex refused a request", "method", p.method, "code", rpcErr.Code, "err", rpcErr.Message)
	}
	switch p.method {
	case "initialize":
		if rpcErr != nil {
			return // the server exits or ignores us; its stderr says why
		}
		c.write(map[string]any{"method": "initialized"})
		if id := c.d.state.Session(); id != "" {
			params := c.threadParams()
			params["threadId"], params["excludeTurns"] = id, true
			c.call("thread/resume", params, nil)
			return
		}
		c.call("thread/start", c.threadParams(), nil)
	case "thread/resume", "thread/start":
		if rpcErr != nil {
			if p.method == "thread/resume" {
				c.d.log.Warn("codex could not resume its thread; starting a new one", "thread", c.d.state.Session())
				c.call("thread/start", c.threadParams(), nil)
			}
			return
		}
		var v struct {
			Thread struct {
				ID string `json:"id"`
			} `json:"thread"`
		}
		_ = json.Unmarshal(result, &v)
		c.thread = v.Thread.ID
		if err := c.d.state.SetSession(c.thread); err != nil {
			c.d.log.Warn("save state", "err", err)
		}
		c.flush()
	case "turn/start":
		// The turn counts as started at turn/started, which follows.
		if rpcErr != nil {
			c.starting = false
			c.emit(protocol.TextEvent{Content: "codex refused the message: " + rpcErr.Message})
			c.emit(protocol.StatusEvent{State: protocol.StateIdle})
			c.flush()
		}
	case "turn/steer":
		if rpcErr != nil {
			// The turn ended before the steer reached it: the messages
			// start the next turn.
			c.queue = append(p.texts, c.queue...)
			c.flush()
		}
	}
}
