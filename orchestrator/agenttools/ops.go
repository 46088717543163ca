package agenttools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// Child is a node of the caller's subtree as the tools show it.
type Child struct {
	ID       string  `json:"id"`
	Name     string  `json:"name"`
	ParentID *string `json:"parent_id"`
	Agent    string  `json:"agent"`
	Model    string  `json:"model"`
	// Status is idle, thinking, running, done or error.
	Status string `json:"status"`
	// Running: its container runs.
	Running bool `json:"running"`
	// Finished: done or error, or its agent exited (what wait_for_children waits for).
	Finished bool `json:"finished"`
	// Done and Total count the leaves of its subtree (done ones of all).
	Done   int   `json:"done"`
	Total  int   `json:"total"`
	Tokens int64 `json:"tokens"`
	// CostUSD is what its LLM calls cost, when the provider reported it.
	CostUSD  float64 `json:"cost_usd,omitempty"`
	ExitCode *int    `json:"exit_code,omitempty"`
}

// Self is the caller's own node and what its agent may rely on.
type Self struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	SessionID string  `json:"session_id"`
	ParentID  *string `json:"parent_id"`
	Agent     string  `json:"agent"`
	Model     string  `json:"model"`
	// Approvals is the node's approvals policy by kind: ask, allow or
	// deny (a kind not listed: ask).
	Approvals map[string]string `json:"approvals"`
	// Repo is the memory scope: the session's git URL, normalised ("": none).
	Repo string `json:"repo"`
}

// RecordPage is a page of a node's log records.
type RecordPage struct {
	Data []protocol.Record `json:"data"`
	// NextAfter is the seq to pass as after for the next page.
	NextAfter int64 `json:"next_after"`
}

// Sent is a delivered message: its record in the receiver's log.
type Sent struct {
	To   string `json:"to"`   // the receiver's id
	Name string `json:"name"` // the receiver's name
	From string `json:"from"` // parent or system
	Seq  int64  `json:"seq"`
}

// Waited is what wait_for_children saw.
type Waited struct {
	// AllFinished: every direct child is finished.
	AllFinished bool `json:"all_finished"`
	// TimedOut: the timeout passed first.
	TimedOut bool    `json:"timed_out"`
	Children []Child `json:"children"`
}

// SpawnRequest is spawn's input.
type SpawnRequest struct {
	Name  string `json:"name"`
	Agent string `json:"agent"`
	Model string `json:"model"`
	Task  string `json:"task"`
	// Workspace: "shared" (default) or "fork" (protocol.SpawnEvent.Workspace).
	Workspace string `json:"workspace,omitempty"`
}

// ApprovalRequest is request_approval's input.
type ApprovalRequest struct {
	Action    string `json:"action"`
	Detail    string `json:"detail"`
	Kind      string `json:"kind"`
	RequestID string `json:"request_id"`
}

// view is the caller's session tree, read once for one call.
type view struct {
	c     orchestrator.Caller
	self  sessions.Node
	nodes map[string]sessions.Node
	kids  map[string][]string // parent id → children ids, in tree order
	sub   map[string]bool     // the caller and its descendants
	sess  protocol.Session
}

func (s *Server) view(ctx context.Context, c orchestrator.Caller) (*view, error) {
	nodes, err := s.sessions.Tree(ctx, c.UserID, c.SessionID)
	if err != nil {
		return nil, err
	}
	v := &view{c: c, nodes: make(map[string]sessions.Node, len(nodes)), kids: map[string][]string{}, sub: map[string]bool{}}
	for _, n := range nodes {
		v.nodes[n.ID] = n
		if n.ParentID != nil {
			v.kids[*n.ParentID] = append(v.kids[*n.ParentID], n.ID)
		}
	}
	self, ok := v.nodes[c.NodeID]
	if !ok {
		return nil, orchestrator.Errorf(orchestrator.ENotFound, "this agent's node %s no longer exists", c.NodeID)
	}
	v.self = self
	for stack := []string{self.ID}; len(stack) > 0; {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		v.sub[id] = true
		stack = append(stack, v.kids[id]...)
	}
	return v, nil
}

// resolve finds the node a tool names: its id, its name (a direct child's
// first, as names are unique among siblings; else unique in the caller's
// subtree, or the parent's), or "parent". With descendants only
// the caller's strict descendants qualify (the parent too when withParent).
func (v *view) resolve(ref string, withSelf, withParent bool) (sessions.Node, error) {
	ref = strings.TrimSpace(ref)
	ok := func(n sessions.Node) bool {
		switch {
		case n.ID == v.self.ID:
			return withSelf
		case v.sub[n.ID]:
			return true
		case withParent && v.self.ParentID != nil && n.ID == *v.self.ParentID:
			return true
		}
		return false
	}
	if ref == "" {
		return sessions.Node{}, orchestrator.FieldErrorf("node", "name the node: its id or its name (list_children shows them)")
	}
	if ref == "parent" && withParent {
		if v.self.ParentID == nil {
			return sessions.Node{}, orchestrator.Errorf(orchestrator.ENotFound, "this agent is the root of its session: it has no parent")
		}
		return v.nodes[*v.self.ParentID], nil
	}
	if n, found := v.nodes[ref]; found && ok(n) {
		return n, nil
	}
	var match []sessions.Node
	for _, n := range v.nodes {
		if n.Name == ref && ok(n) {
			match = append(match, n)
		}
	}
	if len(match) > 1 {
		// Names are unique among siblings: the caller's own child of that
		// name wins over deeper namesakes.
		for _, n := range match {
			if n.ParentID != nil && *n.ParentID == v.self.ID {
				return n, nil
			}
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		what := "descendants"
		if withParent {
			what = "descendants or its parent"
		}
		return sessions.Node{}, orchestrator.Errorf(orchestrator.ENotFound, "no node %q among this agent's %s", cutText(ref, 100), what)
	}
	ids := make([]string, len(match))
	for i, n := range match {
		ids[i] = n.ID
	}
	return sessions.Node{}, orchestrator.FieldErrorf("node", "%d nodes are named %q: use an id (%s)", len(match), ref, strings.Join(ids, ", "))
}

func (s *Server) child(n sessions.Node) Child {
	return Child{ID: n.ID, Name: n.Name, ParentID: n.ParentID, Agent: n.AgentType, Model: n.Model, Status: n.Status,
		Running: s.run.Running(n.ID), Finished: s.finished(n), Done: n.Done, Total: n.Total, Tokens: n.Tokens, CostUSD: n.CostUSD, ExitCode: n.ExitCode}
}

// finished: the node is done, error, stopped or lost, or its agent exited
// (an exit code is set until its next start), or it ran once and runs no
// more. A paused node is not: it goes on when resumed.
func (s *Server) finished(n sessions.Node) bool {
	switch {
	case n.Status == protocol.NodePaused:
		return false
	case n.Status == protocol.StateDone || n.Status == protocol.StateError || n.Status == protocol.NodeStopped || n.Status == protocol.NodeLost:
		return true
	case n.ExitCode != nil:
		return true
	}
	return n.StartedAt != nil && !s.run.Running(n.ID)
}

// Self returns the caller's node.
func (s *Server) Self(ctx context.Context, c orchestrator.Caller) (Self, error) {
	n, err := s.sessions.GetNode(ctx, c.UserID, c.SessionID, c.NodeID)
	if err != nil {
		return Self{}, err
	}
	sess, err := s.sessions.GetSession(ctx, c.UserID, c.SessionID)
	if err != nil {
		return Self{}, err
	}
	pol, err := sessions.ApprovalPolicies(n.Config)
	if err != nil {
		pol = map[string]string{}
	}
	return Self{ID: n.ID, Name: n.Name, SessionID: n.SessionID, ParentID: n.ParentID, Agent: n.AgentType, Model: n.Model,
		Approvals: pol, Repo: repoOf(sess)}, nil
}

func repoOf(sess protocol.Session) string {
	if sess.GitRepoURL == nil {
		return ""
	}
	return collab.NormalizeRepo(*sess.GitRepoURL)
}

// ListChildren returns the caller's direct children, in tree order.
func (s *Server) ListChildren(ctx context.Context, c orchestrator.Caller) ([]Child, error) {
	v, err := s.view(ctx, c)
	if err != nil {
		return nil, err
	}
	out := make([]Child, 0, len(v.kids[c.NodeID]))
	for _, id := range v.kids[c.NodeID] {
		out = append(out, s.child(v.nodes[id]))
	}
	return out, nil
}

// ReadMessages returns a page of the log records of the caller or one of
// its descendants (ref: id or name), after seq after.
func (s *Server) ReadMessages(ctx context.Context, c orchestrator.Caller, ref string, after int64, limit int) (RecordPage, error) {
	v, err := s.view(ctx, c)
	if err != nil {
		return RecordPage{}, err
	}
	n, err := v.resolve(ref, true, false)
	if err != nil {
		return RecordPage{}, err
	}
	if after < 0 {
		return RecordPage{}, orchestrator.FieldErrorf("after", "after must not be negative")
	}
	if limit <= 0 {
		limit = store.DefaultRecordsLimit
	}
	recs, err := s.st.Records(ctx, c.SessionID, after, min(limit, store.MaxRecordsLimit), n.ID)
	if err != nil {
		return RecordPage{}, err
	}
	page := RecordPage{Data: recs, NextAfter: after}
	if len(recs) > 0 {
		page.NextAfter = recs[len(recs)-1].Seq
	}
	return page, nil
}

// SendMessage delivers content to a descendant (from parent; a stopped one
// is started) or to the caller's parent (from system, as the child's report;
// the parent must be running). Either way from_node names the caller.
func (s *Server) SendMessage(ctx context.Context, c orchestrator.Caller, to, content string) (Sent, error) {
	if strings.TrimSpace(content) == "" {
		return Sent{}, orchestrator.FieldErrorf("content", "content is required")
	}
	if len(content) > MaxMessageBytes {
		return Sent{}, orchestrator.FieldErrorf("content", "content is larger than %d bytes: write it to a file in /workspace and send its path", MaxMessageBytes)
	}
	if !utf8.ValidString(content) {
		return Sent{}, orchestrator.FieldErrorf("content", "content must be UTF-8")
	}
	v, err := s.view(ctx, c)
	if err != nil {
		return Sent{}, err
	}
	n, err := v.resolve(to, false, true)
	if err != nil {
		return Sent{}, err
	}
	from := &protocol.NodeRef{ID: v.self.ID, Name: v.self.Name}
	msg := protocol.MessageInput{Type: protocol.TypeMessage, From: protocol.FromParent, Content: content, FromNode: from}
	if !v.sub[n.ID] { // the parent
		msg.From, msg.Content = protocol.FromSystem, fmt.Sprintf("%s reports: %s", v.self.Name, content)
		if !s.run.Running(n.ID) {
			return Sent{}, orchestrator.Errorf(orchestrator.EConflict, "the parent %s is not running: the report was not delivered; end with a final answer instead (it reaches the parent when it runs again)", n.Name)
		}
	} else if err := s.run.StartNode(ctx, c.UserID, c.SessionID, n.ID); err != nil {
		return Sent{}, err
	}
	rec, err := s.run.Deliver(ctx, c.SessionID, n.ID, msg)
	if err != nil {
		return Sent{}, err
	}
	return Sent{To: n.ID, Name: n.Name, From: msg.From, Seq: rec.Seq}, nil
}

// Spawn creates a child of the caller, as a spawn event on its stdout
// would: the event is appended to the caller's log first, then the child
// is created and started. A child whose start failed is returned with
// status error.
func (s *Server) Spawn(ctx context.Context, c orchestrator.Caller, in SpawnRequest) (Child, error) {
	switch {
	case utf8.RuneCountInString(in.Name) > sessions.MaxNodeNameLen:
		return Child{}, orchestrator.FieldErrorf("name", "name is longer than %d characters", sessions.MaxNodeNameLen)
	case len(in.Task) > MaxTaskBytes:
		return Child{}, orchestrator.FieldErrorf("task", "task is larger than %d bytes", MaxTaskBytes)
	}
	self, err := s.sessions.GetNode(ctx, c.UserID, c.SessionID, c.NodeID)
	if err != nil {
		return Child{}, err
	}
	if strings.TrimSpace(in.Agent) == "" {
		in.Agent = self.AgentType
	}
	ev := protocol.SpawnEvent{Type: protocol.TypeSpawn, Name: strings.TrimSpace(in.Name), Agent: strings.TrimSpace(in.Agent), Model: strings.TrimSpace(in.Model)}
	if in.Task != "" {
		ev.Task = &in.Task
	}
	if w := strings.TrimSpace(in.Workspace); w != "" {
		ev.Workspace = &w
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return Child{}, err
	}
	if _, err := protocol.DecodeEvent(data); err != nil {
		return Child{}, orchestrator.FieldErrorf("agent", "%v", err)
	}
	// Durable before anything happens, like the relay's append of a line.
	if _, err := s.st.Append(ctx, c.SessionID, protocol.Record{NodeID: c.NodeID, Kind: protocol.KindEvent, Data: data}); err != nil {
		return Child{}, err
	}
	child, err := s.run.SpawnChild(ctx, c.SessionID, c.NodeID, ev)
	if child.ID == "" {
		if err == nil {
			err = orchestrator.Errorf(orchestrator.EInternal, "spawn created no child")
		}
		s.recordError(ctx, c, fmt.Sprintf("spawn %q: %s", ev.Name, orchestrator.ErrorMessage(err)))
		return Child{}, err
	}
	if fresh, gerr := s.sessions.GetNode(ctx, c.UserID, c.SessionID, child.ID); gerr == nil {
		child = fresh
	}
	if err != nil {
		s.log.Warn("spawned child did not start", "node", child.ID, "err", err)
	}
	return s.child(child), nil
}

func (s *Server) recordError(ctx context.Context, c orchestrator.Caller, msg string) {
	data, _ := json.Marshal(protocol.ErrorData{Message: msg, Source: protocol.SourceRuntime})
	if _, err := s.st.Append(context.WithoutCancel(ctx), c.SessionID, protocol.Record{NodeID: c.NodeID, Kind: protocol.KindError, Data: data}); err != nil {
		s.log.Warn("append error record", "node", c.NodeID, "err", err)
	}
}

var opUpdated = []byte(`"op":"updated"`)

// WaitForChildren blocks until every direct child of the caller is
// finished, the timeout (bounded by MaxWait; 0: DefaultWait) passes, or ctx
// ends. It follows the session log, not a timer: it looks again whenever a
// child's node record or event arrives.
func (s *Server) WaitForChildren(ctx context.Context, c orchestrator.Caller, timeout time.Duration) (Waited, error) {
	if timeout <= 0 {
		timeout = DefaultWait
	}
	timeout = min(timeout, s.cfg.MaxWait)
	var out Waited
	kids := map[string]bool{}
	err := s.follow(ctx, c.SessionID, s.clock.After(timeout), func() (bool, error) {
		list, err := s.ListChildren(ctx, c)
		if err != nil {
			return false, err
		}
		out = Waited{AllFinished: true, Children: list}
		clear(kids)
		for _, k := range list {
			out.AllFinished = out.AllFinished && k.Finished
			kids[k.ID] = true
		}
		return out.AllFinished, nil
	}, func(r protocol.Record) bool {
		// A child's state changes only with a node record (its status, its
		// exit code); a node created, moved or deleted may be a child.
		return r.Kind == protocol.KindNode && (kids[r.NodeID] || !bytes.Contains(r.Data, opUpdated))
	})
	if err == errDeadline {
		out.TimedOut = true
		return out, nil
	}
	return out, err
}

// StoreMemory keeps a learning for the caller's user and repository.
func (s *Server) StoreMemory(ctx context.Context, c orchestrator.Caller, key, text string) (collab.Memory, error) {
	sess, err := s.sessions.GetSession(ctx, c.UserID, c.SessionID)
	if err != nil {
		return collab.Memory{}, err
	}
	return s.collab.SetMemory(ctx, c.UserID, repoOf(sess), key, text, c.SessionID, c.NodeID)
}

// SearchMemories finds the learnings of the caller's user and repository
// that match query (all of them, newest first, for an empty query).
func (s *Server) SearchMemories(ctx context.Context, c orchestrator.Caller, query string, limit int) ([]collab.Memory, error) {
	sess, err := s.sessions.GetSession(ctx, c.UserID, c.SessionID)
	if err != nil {
		return nil, err
	}
	return s.collab.SearchMemories(ctx, c.UserID, repoOf(sess), query, limit)
}

// RequestApproval stores the caller's request (or returns the one it made
// with the same request_id) and appends its record.
func (s *Server) RequestApproval(ctx context.Context, c orchestrator.Caller, in ApprovalRequest) (collab.Approval, bool, error) {
	if strings.HasPrefix(strings.TrimSpace(in.Kind), KindNetwork+":") {
		// The policy keys of the egress proxy's requests (one host each):
		// an agent's own request may not name one.
		return collab.Approval{}, false, orchestrator.FieldErrorf("kind", "kind %q is the egress proxy's: ask for %q", in.Kind, KindNetwork)
	}
	a, created, err := s.collab.RequestApproval(ctx, c.SessionID, c.NodeID, collab.NewApproval{
		RequestID: in.RequestID, Action: in.Action, Detail: in.Detail, Kind: in.Kind, Timeout: s.cfg.ApprovalTimeout})
	if err == nil && created {
		s.nudge()
	}
	return a, created, err
}

// WithdrawApproval withdraws one of the caller's pending requests (denied,
// answered by "agent").
func (s *Server) WithdrawApproval(ctx context.Context, c orchestrator.Caller, id string) (collab.Approval, error) {
	a, err := s.collab.WithdrawApproval(ctx, c.SessionID, c.NodeID, id)
	if orchestrator.ErrorCode(err) == orchestrator.ENotFound {
		return collab.Approval{}, orchestrator.Errorf(orchestrator.ENotFound, "approval %q not found", id)
	}
	return a, err
}

// Approval returns one of the caller's approvals; with wait > 0 it waits
// (at most MaxPoll) while the request is pending.
func (s *Server) Approval(ctx context.Context, c orchestrator.Caller, id string, wait time.Duration) (collab.Approval, error) {
	get := func() (collab.Approval, error) {
		a, err := s.collab.GetApproval(ctx, c.SessionID, id)
		if err == nil && a.NodeID != c.NodeID {
			return collab.Approval{}, orchestrator.Errorf(orchestrator.ENotFound, "approval %q not found", id)
		}
		return a, err
	}
	if wait <= 0 {
		return get()
	}
	wait = min(wait, s.cfg.MaxPoll)
	var a collab.Approval
	err := s.follow(ctx, c.SessionID, s.clock.After(wait), func() (bool, error) {
		var err error
		a, err = get()
		return err == nil && a.Status != protocol.ApprovalPending, err
	}, func(r protocol.Record) bool { return r.Kind == protocol.KindSystem && r.NodeID == c.NodeID })
	if err == errDeadline {
		return a, nil
	}
	return a, err
}

// cutText shortens s to n bytes for a message.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
