package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os/exec"
	"strings"
	"time"

	approvals "github.com/filepath-dev/filepath/adapters/internal/approval"
	"github.com/filepath-dev/filepath/protocol"
)

// Agent is one native agent: a tool loop against the gateway's chat
// completions endpoint that speaks FAP on stdin and stdout.
type Agent struct {
	cfg     Config
	persona persona
	llm     *llmClient
	tools   *toolbox
	out     *emitter
	log     *slog.Logger
	inbox   *inbox

	// Owned by the goroutine that calls Run.
	started   bool
	model     modelInfo
	msgs      []message // the conversation, system prompt first
	tokens    int       // context used after the last answer (its prompt and completion tokens)
	handedOff bool
	head      string   // git HEAD of the workspace, as last seen
	commits   []string // "hash subject" of the commits seen in this session
	lastCall  string   // name and canonical arguments of the last tool call
	repeats   int      // how many times in a row lastCall was made
}

// New builds an agent writing FAP events to stdout and logs to stderr.
func New(cfg Config, stdout, stderr io.Writer) (*Agent, error) {
	return newAgent(cfg, stdout, stderr, realClock())
}

func newAgent(cfg Config, stdout, stderr io.Writer, c clock) (*Agent, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	p, known := personaFor(cfg.AgentType)
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("agent", p.name)
	if !known {
		log.Warn("unknown FILEPATH_AGENT_TYPE, acting as shelley", "agent_type", cfg.AgentType)
	}
	ws, err := newWorkspace(cfg.Workspace)
	if err != nil {
		return nil, err
	}
	out := newEmitter(stdout, stderr)
	apiHTTP := &http.Client{}
	tb := &toolbox{
		ws:          ws,
		sh:          &shell{dir: ws.root, env: commandEnv(), clock: c, keepHead: 16 << 10, keepTail: 16 << 10},
		out:         out,
		tools:       map[string]tool{},
		bashTimeout: cfg.BashTimeout,
		bashMax:     cfg.BashMaxTimeout,
		agentType:   p.name,
		api: &apiClient{
			base:         strings.TrimSuffix(cfg.APIURL, "/") + "/api/v1",
			key:          cfg.APIKey,
			http:         apiHTTP,
			connectRetry: cfg.ConnectRetry,
			clock:        c,
		},
		asker: &approvals.Client{URL: cfg.APIURL, Token: cfg.APIKey, HTTP: apiHTTP},
		log:   log,
	}
	for _, n := range p.tools {
		tl := allTools[n]
		if n == "bash" {
			tl.spec.Description += fmt.Sprintf(" Default timeout %s, maximum %s.", cfg.BashTimeout, cfg.BashMaxTimeout)
		}
		tb.tools[n] = tl
		tb.names = append(tb.names, n)
	}
	return &Agent{
		cfg:     cfg,
		persona: p,
		llm: &llmClient{
			base:         strings.TrimSuffix(cfg.APIURL, "/") + "/openrouter/v1",
			key:          cfg.APIKey,
			http:         &http.Client{},
			idle:         cfg.IdleTimeout,
			connectRetry: cfg.ConnectRetry,
			clock:        c,
		},
		tools: tb,
		out:   out,
		log:   log,
		inbox: newInbox(),
	}, nil
}

// Run plays FILEPATH_TASK, then every message from stdin, until signal
// stop (or ctx ends), or stdin ends and nothing is left to do. A stop
// cancels the model request and the command in flight and Run returns at
// once. The goroutine that reads stdin ends when stdin does.
func (a *Agent) Run(ctx context.Context, stdin io.Reader) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go a.readInputs(stdin, cancel)

	if strings.TrimSpace(a.cfg.Task) != "" {
		a.inbox.put(protocol.MessageInput{From: protocol.FromUser, Content: a.cfg.Task})
	} else {
		a.out.status(protocol.StateIdle, nil)
	}
	a.head = a.gitHead(ctx)
	if a.cfg.StartMessage {
		// The task and the start's report make one first turn, however
		// late the report comes on stdin.
		want := 1
		if strings.TrimSpace(a.cfg.Task) != "" {
			want = 2
		}
		a.inbox.waitLen(ctx, want)
	}
	for {
		batch, ok := a.inbox.wait(ctx)
		if !ok {
			break
		}
		a.turn(ctx, batch)
		if ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		a.log.Info("stopping", "cause", context.Cause(ctx))
		a.out.status(protocol.StateIdle, a.pct())
		return nil
	}
	a.log.Info("stdin ended and no work is left; exiting")
	return nil
}

// readInputs reads FAP inputs: messages go to the inbox, signal stop
// cancels the run. pause and resume need nothing: the orchestrator freezes
// the container in between, and the timeouts do not count frozen time.
func (a *Agent) readInputs(stdin io.Reader, cancel context.CancelCauseFunc) {
	defer a.inbox.close()
	r := protocol.NewReader(stdin, 0)
	for {
		line, err := r.Next()
		var tooLong *protocol.LineTooLongError
		switch {
		case errors.As(err, &tooLong):
			a.log.Warn("input line over the limit, skipped", "line", tooLong.Line, "bytes", tooLong.Size)
			continue
		case errors.Is(err, io.EOF):
			return
		case err != nil:
			a.log.Error("read stdin", "err", err)
			return
		}
		in, err := protocol.DecodeInput(line)
		if err != nil {
			a.log.Warn("invalid input line, skipped", "line", r.Line(), "err", err)
			continue
		}
		switch in := in.(type) {
		case protocol.MessageInput:
			if !a.inbox.put(in) {
				a.log.Error("inbox full, message dropped", "from", in.From)
			}
		case protocol.SignalInput:
			a.log.Info("signal", "action", in.Action)
			if in.Action == protocol.ActionStop {
				cancel(errStopped)
				return
			}
		}
	}
}

// start learns the model's id and context length and writes the system
// prompt; once, before the first turn.
func (a *Agent) start(ctx context.Context) {
	a.started = true
	info, err := a.llm.lookupModel(ctx, a.cfg.Model, 10*time.Second)
	if err != nil {
		a.log.Warn("model list unavailable", "err", err)
	}
	if a.cfg.ContextWindow > 0 {
		info.ContextLength, info.Source = a.cfg.ContextWindow, "FILEPATH_CONTEXT_WINDOW"
	}
	a.model = info
	a.log.Info("model", "id", info.ID, "context_length", info.ContextLength, "from", info.Source)
	a.tools.addServerTools(ctx, a.persona.readOnly)
	a.msgs = []message{textMessage("system", a.persona.systemPrompt(a.cfg, info.ContextLength, a.tools.names))}
}

// turn answers a batch of messages: model calls and tool runs until the
// model answers without a tool call, the step limit, an error, a handoff
// or a stop.
func (a *Agent) turn(ctx context.Context, batch []protocol.MessageInput) {
	if !a.started {
		a.start(ctx)
	}
	a.appendInputs(batch)
	a.lastCall, a.repeats = "", 0
	for step := 1; ; step++ {
		// Messages that came during the turn join before the next call.
		a.appendInputs(a.inbox.take())
		if step > a.cfg.MaxSteps {
			a.out.text(fmt.Sprintf("I stopped this turn after %d model calls, the limit per turn (FILEPATH_MAX_STEPS). Send a message to continue.", a.cfg.MaxSteps))
			a.out.status(protocol.StateIdle, a.pct())
			return
		}
		a.out.status(protocol.StateThinking, a.pct())
		ans, err := a.llm.complete(ctx, a.request(""))
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			a.llmError(err)
			return
		}
		a.account(ans)
		a.msgs = append(a.msgs, assistantMessage(ans))
		text := strings.TrimSpace(ans.Text)
		if ans.Finish == "length" {
			text += "\n\n[the answer was cut: the model reached its output limit]"
		}
		if text != "" {
			a.out.text(text)
		}
		crossed := a.crossed()
		if len(ans.Calls) == 0 {
			a.out.status(protocol.StateIdle, a.pct())
			done := protocol.DoneEvent{}
			if text != "" {
				s := cut(text, maxSummary)
				done.Summary = &s
			}
			a.out.emit(done)
			if crossed {
				a.handoff(ctx)
			}
			return
		}
		a.out.status(protocol.StateRunning, a.pct())
		a.runCalls(ctx, ans.Calls)
		if ctx.Err() != nil {
			return
		}
		if crossed {
			a.handoff(ctx)
			return
		}
	}
}

func assistantMessage(ans answer) message {
	m := message{Role: "assistant", ToolCalls: ans.Calls}
	if ans.Text != "" || len(ans.Calls) == 0 {
		m.Content = &ans.Text
	}
	return m
}

// appendInputs adds messages to the conversation: the user's as user
// messages, the parent's as user messages that say so, filepath's as
// system messages.
func (a *Agent) appendInputs(batch []protocol.MessageInput) {
	for _, m := range batch {
		switch m.From {
		case protocol.FromParent:
			who := "your parent agent"
			if m.FromNode != nil && m.FromNode.Name != "" {
				who = fmt.Sprintf("%s (%s)", who, m.FromNode.Name)
			}
			a.msgs = append(a.msgs, textMessage("user", "Message from "+who+":\n\n"+m.Content))
		case protocol.FromSystem:
			a.msgs = append(a.msgs, textMessage("system", m.Content))
		default:
			a.msgs = append(a.msgs, textMessage("user", m.Content))
		}
	}
}

// maxRepeats is how many identical tool calls in a row are run; the next
// one is refused.
const maxRepeats = 2

// runCalls answers every tool call of an assistant message, in order. A
// call is refused when it repeats the previous one (same tool, same
// arguments) a third time; after a stop the rest get a "not run" result.
func (a *Agent) runCalls(ctx context.Context, calls []toolCall) {
	for _, c := range calls {
		var result string
		key := c.Function.Name + "\x00" + canonicalJSON(c.Function.Arguments)
		if key == a.lastCall {
			a.repeats++
		} else {
			a.lastCall, a.repeats = key, 1
		}
		switch {
		case ctx.Err() != nil:
			result = "not run: the agent was stopped"
		case a.repeats > maxRepeats:
			result = fmt.Sprintf("refused: this is call %d in a row of %s with the same arguments, and its result would not change. Use the result you have, or do something different.", a.repeats, c.Function.Name)
			a.out.tool(c.Function.Name, "", protocol.StepError, result)
		default:
			result = a.tools.call(ctx, c)
			if n := c.Function.Name; (n == "bash" || n == "git") && ctx.Err() == nil {
				a.checkCommits(ctx)
			}
		}
		a.msgs = append(a.msgs, message{Role: "tool", ToolCallID: c.ID, Content: &result})
	}
}

// canonicalJSON re-encodes a JSON value with sorted keys and no spaces, so
// that equal arguments compare equal.
func canonicalJSON(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// request is the next chat request; with extra, a last user message is
// added and no tool may be called (the handoff summary).
func (a *Agent) request(extra string) chatRequest {
	req := chatRequest{Model: a.model.ID, Messages: a.msgs, Tools: a.tools.specs()}
	if extra != "" {
		req.Messages = append(append([]message(nil), a.msgs...), textMessage("user", extra))
		req.ToolChoice = "none"
	}
	return req
}

// account notes how full the context is after an answer: the prompt and
// the completion, which the next request carries. Without reported usage
// it estimates four bytes per token.
func (a *Agent) account(ans answer) {
	if u := ans.Usage; u != nil && u.PromptTokens+u.CompletionTokens > 0 {
		a.tokens = u.PromptTokens + u.CompletionTokens
		return
	}
	n := 0
	for _, m := range a.msgs {
		if m.Content != nil {
			n += len(*m.Content)
		}
		for _, c := range m.ToolCalls {
			n += len(c.Function.Name) + len(c.Function.Arguments)
		}
	}
	a.tokens = (n+len(ans.Text))/4 + 1
}

// pct is the share of the context window in use (nil before the first
// answer).
func (a *Agent) pct() *float64 {
	if a.tokens == 0 || a.model.ContextLength <= 0 {
		return nil
	}
	p := math.Round(float64(a.tokens)/float64(a.model.ContextLength)*1000) / 1000
	p = min(p, 1)
	return &p
}

// crossed reports, once, that the context passed the handoff threshold.
func (a *Agent) crossed() bool {
	p := a.pct()
	if a.handedOff || p == nil || *p < a.cfg.HandoffAt {
		return false
	}
	a.handedOff = true
	return true
}

const handoffPrompt = `The conversation is close to the model's context limit, so the work will be handed over to a fresh agent that does not see this conversation. Write the handoff note for it: the goal, what is done (files changed, commits), what remains and the next step, and anything surprising you learned. Plain text, at most 300 words. Do not call tools.`

// handoff asks the model for a summary (or composes one when that fails)
// and emits it as a handoff event; the turn ends after it.
func (a *Agent) handoff(ctx context.Context) {
	a.log.Info("context nearly full: handing off", "tokens", a.tokens, "context_length", a.model.ContextLength)
	a.out.status(protocol.StateThinking, a.pct())
	ans, err := a.llm.complete(ctx, a.request(handoffPrompt))
	if ctx.Err() != nil {
		return
	}
	summary := strings.TrimSpace(ans.Text)
	if err != nil {
		a.log.Warn("handoff summary call failed; composing one", "err", err)
	}
	if err != nil || summary == "" {
		summary = a.composeSummary()
	}
	a.out.emit(protocol.HandoffEvent{Summary: cut(summary, maxSummary)})
	a.out.status(protocol.StateIdle, a.pct())
}

// composeSummary is the handoff note when the model cannot write one.
func (a *Agent) composeSummary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Context nearly full (%d of %d tokens).", a.tokens, a.model.ContextLength)
	for _, m := range a.msgs {
		if m.Role == "user" && m.Content != nil {
			fmt.Fprintf(&b, "\nTask: %s", cut(*m.Content, 1000))
			break
		}
	}
	for i := len(a.msgs) - 1; i >= 0; i-- {
		if m := a.msgs[i]; m.Role == "assistant" && m.Content != nil && *m.Content != "" {
			fmt.Fprintf(&b, "\nLast answer: %s", cut(*m.Content, 1500))
			break
		}
	}
	if len(a.tools.changed) > 0 {
		fmt.Fprintf(&b, "\nFiles changed: %s", strings.Join(a.tools.changed, ", "))
	}
	if len(a.commits) > 0 {
		fmt.Fprintf(&b, "\nCommits: %s", strings.Join(a.commits, "; "))
	}
	return b.String()
}

// llmError shows a failed model call in the chat (a text event and status
// error); the agent then waits for the next message.
func (a *Agent) llmError(err error) {
	a.log.Error("model call failed", "err", err)
	msg := err.Error()
	if errors.Is(err, errIdle) {
		msg = fmt.Sprintf("no answer from the model for %s; the request was canceled", a.cfg.IdleTimeout)
	}
	a.out.text("LLM error: " + msg + ". Send a message to try again.")
	a.out.status(protocol.StateError, a.pct())
}

// gitHead is the workspace's HEAD commit ("" when it is not a repository
// or has no commit).
func (a *Agent) gitHead(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := a.git(ctx, "rev-parse", "--verify", "-q", "HEAD")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

func (a *Agent) git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"--no-pager"}, args...)...)
	cmd.Dir = a.tools.ws.root
	cmd.Env = a.tools.sh.env
	b, err := cmd.Output()
	return string(b), err
}

// maxCommitEvents bounds the commit events for one move of HEAD.
const maxCommitEvents = 20

// checkCommits emits a commit event for each commit HEAD moved forward by
// (oldest first; at most maxCommitEvents), or for the new HEAD when there
// was none before. A HEAD that moved back (reset) emits nothing.
func (a *Agent) checkCommits(ctx context.Context) {
	head := a.gitHead(ctx)
	old := a.head
	a.head = head
	if head == "" || head == old {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	format := "--format=%H%x00%s"
	out, err := "", error(nil)
	if old != "" {
		out, err = a.git(ctx, "log", "--reverse", fmt.Sprintf("-n%d", maxCommitEvents), format, old+".."+head)
	}
	if old == "" || err != nil {
		out, err = a.git(ctx, "log", "-n1", format, head)
	}
	if err != nil {
		a.log.Warn("read new commits", "err", err)
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		hash, subject, ok := strings.Cut(line, "\x00")
		if !ok {
			continue
		}
		a.commits = append(a.commits, hash[:min(len(hash), 12)]+" "+subject)
		a.out.emit(protocol.CommitEvent{Hash: hash, Message: subject})
	}
}
