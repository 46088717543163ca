package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// Memory is one learning of the memory store, as an agent is given it.
type Memory struct {
	Key  string
	Text string
}

// Memories is the memory store as the runner needs it: the memories of a
// user and repository (repoURL "" for a session without one) relevant to
// a task, at most limit, most relevant first.
type Memories interface {
	Relevant(ctx context.Context, userID, repoURL, query string, limit int) ([]Memory, error)
}

// DefaultMemoryLimit is how many memories an agent session gets at most.
const DefaultMemoryLimit = 8

// startKind says which agent session of a node starts.
type startKind int

const (
	startFirst        startKind = iota // the node's first agent: FILEPATH_TASK is its task
	startRestart                       // a new agent after one exited: ResumeMessage
	startContinuation                  // a new agent after one handed off: the summary
)

// startPlan is one start of a node's agent: what the synchronous part
// decided, for the part that runs the health checks and starts the agent.
type startPlan struct {
	kind  startKind
	sess  protocol.Session
	node  sessions.Node
	image string
	// vendorEnv gives an agent that runs on its vendor's service its key.
	vendorEnv map[string]string
	dir       string // the workspace, as the host sees it
	task      string // FILEPATH_TASK: the task (first start) or the summary (continuation)
	summary   string // the handoff summary the node's current generation started from
	query     string // what the memories are looked up for: the task, or the summary
	id        string // the created container
	cursor    string
	cloned    bool // the workspace was cloned for this start: nothing to rescue
	memories  []Memory
	// startMessage: the agent's first stdin line will be a system message
	// about this start (FILEPATH_START_MESSAGE=1), known before the
	// container is created.
	startMessage bool
}

// why names the agent session, for a person (a rescue commit's message).
func (p *startPlan) why() string {
	switch p.kind {
	case startContinuation:
		return fmt.Sprintf("continuation (generation %d)", p.node.Generation)
	case startRestart:
		return "restart"
	}
	return "start"
}

// startReport is what happened before an agent session: the message it
// reads first is composed from it.
type startReport struct {
	kind       startKind
	generation int
	summary    string
	rescue     *protocol.CommitEvent
	checks     []protocol.SystemData // check blocks, the rescue's failure included
	memories   []Memory
}

// message is the one system message an agent session reads first on its
// stdin, in this order: why it starts (resume text, or the handoff summary
// it continues from), the health checks' results, the memories. A first
// start with nothing to report has none ("").
func (s startReport) message() string {
	var b strings.Builder
	switch s.kind {
	case startRestart:
		b.WriteString(ResumeMessage)
		if s.summary != "" {
			fmt.Fprintf(&b, "\n\nThis node's current agent session (generation %d) started from this handoff summary:\n%s", s.generation, s.summary)
		}
	case startContinuation:
		fmt.Fprintf(&b, "%s (generation %d). The previous agent's handoff summary:\n%s", ContinuationMessage, s.generation, s.summary)
	}
	ran := s.rescue != nil
	for _, c := range s.checks {
		ran = ran || c.Command != ""
	}
	if ran || s.kind != startFirst {
		section(&b, "Health checks run in /workspace before this session started:")
		if s.rescue != nil {
			fmt.Fprintf(&b, "\n- The previous session left uncommitted changes; filepath committed them: %.12s %q.", s.rescue.Hash, s.rescue.Message)
		}
		for _, c := range s.checks {
			b.WriteString("\n- " + c.Text + ".")
			if c.Exit != nil && *c.Exit == 0 || strings.TrimSpace(c.Output) == "" {
				continue
			}
			b.WriteString(" Its output ends with:")
			for _, l := range strings.Split(strings.TrimRight(c.Output, "\n"), "\n") {
				b.WriteString("\n  | " + l)
			}
		}
		if failed(s.checks) {
			b.WriteString("\nA failing check does not stop you: fix what it reports if it is in your way, or say why not.")
		}
	}
	if len(s.memories) > 0 {
		section(&b, "Memories of this user and repository relevant to the task:")
		for _, m := range s.memories {
			fmt.Fprintf(&b, "\n- %s: %s", m.Key, m.Text)
		}
	}
	return b.String()
}

func section(b *strings.Builder, title string) {
	if b.Len() > 0 {
		b.WriteString("\n\n")
	}
	b.WriteString(title)
}

func failed(checks []protocol.SystemData) bool {
	for _, c := range checks {
		if c.Command != "" && (c.Exit == nil || *c.Exit != 0) {
			return true
		}
	}
	return false
}

// saidNoChecks reports whether the node's chat already says that no health
// check was found: its last check block is that one.
func (r *Runner) saidNoChecks(ctx context.Context, node sessions.Node) bool {
	rec, err := r.st.LastRecordOf(ctx, node.SessionID, node.ID, protocol.KindSystem, protocol.SystemCheck)
	if err != nil {
		return false
	}
	var d protocol.SystemData
	return json.Unmarshal(rec.Data, &d) == nil && d.Command == ""
}

// ContinuationMessage begins the first message of a continuation.
const ContinuationMessage = "This agent continues the work of this node's previous agent, which handed off when its context was nearly full"

// prepare runs what precedes an agent session (the rescue commit, the
// health checks, the memories), each shown in the chat as it ends, then
// appends the first system message, starts the container and attaches its
// relay.
func (r *Runner) prepare(ctx context.Context, p *startPlan) error {
	rep := startReport{kind: p.kind, generation: p.node.Generation, summary: p.summary}
	show := func(rec protocol.Record) error {
		if _, err := r.st.Append(ctx, p.node.SessionID, rec); err != nil {
			return fmt.Errorf("append what ran before the agent: %w", err)
		}
		return nil
	}
	commit, failure := r.rescue(ctx, p)
	if commit != nil {
		rep.rescue = commit
		if err := show(r.eventRecord(p.node, commit)); err != nil {
			return err
		}
	}
	if failure != nil {
		rep.checks = append(rep.checks, *failure)
		if err := show(systemRecord(p.node, *failure)); err != nil {
			return err
		}
	}
	err := r.runChecks(ctx, p, func(c protocol.SystemData) error {
		rep.checks = append(rep.checks, c)
		if c.Command == "" && r.saidNoChecks(ctx, p.node) {
			return nil // the chat says so once; the agent reads it every time
		}
		return show(systemRecord(p.node, c))
	})
	if err != nil {
		return err
	}
	rep.memories = p.memories
	if len(rep.memories) > 0 {
		d := protocol.SystemData{Type: protocol.SystemMemory, Text: fmt.Sprintf("%d memories given to the agent", len(rep.memories))}
		if len(rep.memories) == 1 {
			d.Text = "1 memory given to the agent"
		}
		for _, m := range rep.memories {
			d.Memories = append(d.Memories, protocol.Memory{Key: m.Key, Text: m.Text})
		}
		if err := show(systemRecord(p.node, d)); err != nil {
			return err
		}
	}
	msg := rep.message()
	if msg == "" && p.startMessage {
		msg = "Nothing to report before this start." // the agent waits for a first message
	}
	if msg != "" {
		// After the cursor's last input: the relay writes it to stdin
		// before anything delivered to it, as it writes any input a crash
		// caught between its append and its write.
		data, _ := json.Marshal(protocol.MessageInput{Type: protocol.TypeMessage, From: protocol.FromSystem, Content: msg})
		if err := show(protocol.Record{NodeID: p.node.ID, Kind: protocol.KindInput, Data: data}); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The listener first, in the namespace the container will join: the
	// agent reaches FILEPATH_API_URL from its first instruction.
	pre := p.node
	pre.ContainerID = p.id
	r.openAPI(pre)
	if err := r.rt.Start(ctx, p.id); err != nil {
		r.closeAPI(p.node.ID)
		return err
	}
	node, err := r.sessions.PatchNode(ctx, p.node.SessionID, p.node.ID, sessions.NodePatch{MarkStarted: true})
	if err != nil {
		return err
	}
	return r.attach(node, p.cursor)
}

func (r *Runner) memories(ctx context.Context, p *startPlan) []Memory {
	if r.cfg.Memories == nil {
		return nil
	}
	repo := ""
	if p.sess.GitRepoURL != nil {
		repo = *p.sess.GitRepoURL
	}
	query := p.query
	limit := r.cfg.MemoryLimit
	if limit <= 0 {
		limit = DefaultMemoryLimit
	}
	ms, err := r.cfg.Memories.Relevant(ctx, p.sess.UserID, repo, query, limit)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			r.log.Warn("read memories; the agent starts without them", "node", p.node.ID, "err", err)
		}
		return nil
	}
	return ms[:min(len(ms), limit)]
}

func (r *Runner) eventRecord(node sessions.Node, ev protocol.Event) protocol.Record {
	data, _ := json.Marshal(ev) // protocol structs: cannot fail
	return protocol.Record{NodeID: node.ID, Kind: protocol.KindEvent, Data: data}
}

func systemRecord(node sessions.Node, d protocol.SystemData) protocol.Record {
	data, _ := json.Marshal(d)
	return protocol.Record{NodeID: node.ID, Kind: protocol.KindSystem, Data: data}
}
