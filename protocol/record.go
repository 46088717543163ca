package protocol

import (
	"encoding/json"
	"time"
)

// Record kinds: the value of "kind" in a session log record.
const (
	KindEvent  = "event"  // Data is an event (AgentEvent) the agent wrote
	KindInput  = "input"  // Data is an input (AgentInput) written to the agent
	KindNode   = "node"   // Data is a NodeChange
	KindFile   = "file"   // Data is a FileChange
	KindError  = "error"  // Data is an ErrorData
	KindSystem = "system" // Data is a SystemData
)

// RecordKinds lists the record kinds in the order of docs/design.md.
func RecordKinds() []string {
	return []string{KindEvent, KindInput, KindNode, KindFile, KindError, KindSystem}
}

// Record is one entry of a session's ordered log: the one type the relays
// append, the store keeps (with the session id beside it) and the live
// stream and the API send. Every record of a session has a strictly
// increasing Seq. Kind selects the shape of Data; the record schema
// (RecordSchema) says which shape goes with which kind.
type Record struct {
	Seq  int64  `json:"seq" jsonschema:"minimum=1"`
	Kind string `json:"kind" jsonschema:"enum=event,enum=input,enum=node,enum=file,enum=error,enum=system"`
	// NodeID is the node the record belongs to ("" for a session-level record).
	NodeID string          `json:"node_id"`
	At     time.Time       `json:"at"`
	Data   json.RawMessage `json:"data"`
	// Ref links the record to an earlier one of the same node: for a commit
	// event, the seq of the tool or command record during which HEAD moved
	// (absent: none is known).
	Ref int64 `json:"ref,omitempty" jsonschema:"minimum=1"`
}

// Node change ops (the "op" of a NodeChange).
const (
	OpCreated = "created"
	OpUpdated = "updated"
	OpMoved   = "moved"
	OpDeleted = "deleted"
)

// NodeChange is the data of a "node" record: a node was created, updated,
// moved or deleted. Node is the node after the change (before it, for
// deleted); IDs lists every node a delete removed (the subtree).
type NodeChange struct {
	Op   string   `json:"op" jsonschema:"enum=created,enum=updated,enum=moved,enum=deleted"`
	Node Node     `json:"node"`
	IDs  []string `json:"ids,omitempty"`
}

// File change ops (the "op" of a FileChange).
const (
	FileCreated  = "created"
	FileModified = "modified"
	FileDeleted  = "deleted"
)

// FileChange is the data of a "file" record: the net change to one path of
// the session's filesystem within a short window.
type FileChange struct {
	Op   string `json:"op" jsonschema:"enum=created,enum=modified,enum=deleted"`
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Error sources (the "source" of an ErrorData).
const (
	SourceStdout  = "stdout"  // a line the agent wrote that is not valid FAP
	SourceExit    = "exit"    // the agent's container exited without a done event
	SourceRuntime = "runtime" // starting, stopping or writing to the container failed
)

// ErrorData is the data of an "error" record, shown in the node's chat.
type ErrorData struct {
	// Message says what went wrong, for a person.
	Message string `json:"message"`
	// Raw is the offending stdout line, cut to a bound (source stdout).
	Raw    string `json:"raw,omitempty"`
	Source string `json:"source" jsonschema:"enum=stdout,enum=exit,enum=runtime"`
	// ExitCode is the container's exit code (source exit).
	ExitCode *int `json:"exit_code,omitempty"`
	// StderrTail is the last lines of the agent's stderr (source exit).
	StderrTail string `json:"stderr_tail,omitempty"`
}

// System record types (the "type" of a SystemData).
const (
	SystemCheck        = "check"        // a health check ran before the agent started
	SystemMemory       = "memory"       // memories were given to the agent at its start
	SystemContinuation = "continuation" // a fresh agent continues the node after a handoff
	SystemApproval     = "approval"     // an agent asked for permission, or got its answer
)

// SystemData is the data of a "system" record: a block filepath itself adds
// to a node's chat (not something the agent printed). Type selects which of
// the optional fields are set.
type SystemData struct {
	Type string `json:"type" jsonschema:"enum=check,enum=memory,enum=continuation,enum=approval"`
	// Text is a one-line summary for a person.
	Text string `json:"text"`

	// Command is the check's shell command (check). A check block without
	// one says that no check was found to run.
	Command string `json:"command,omitempty"`
	// Exit is the check's exit code (check); absent when it did not run to
	// its end (it timed out, or could not start).
	Exit *int `json:"exit,omitempty"`
	// Output is the tail of the check's combined stdout and stderr (check).
	Output string `json:"output,omitempty"`
	// DurationMS is how long the check ran, in milliseconds (check).
	DurationMS int64 `json:"duration_ms,omitempty" jsonschema:"minimum=0"`
	// TimedOut: the check was stopped at its time limit (check).
	TimedOut bool `json:"timed_out,omitempty"`

	// Memories are the memories given to the agent (memory).
	Memories []Memory `json:"memories,omitempty"`

	// Generation is the number of the agent session that starts (continuation):
	// a node's first agent is generation 1, each handoff starts the next.
	Generation int `json:"generation,omitempty" jsonschema:"minimum=1"`
	// Summary is the handoff summary the new agent starts from (continuation).
	Summary string `json:"summary,omitempty"`

	// Approval is the request and its state (approval): the request is
	// appended pending, its answer as another record with the same id.
	Approval *Approval `json:"approval,omitempty"`
}

// Memory is one learning from the memory store, as a memory block shows it.
type Memory struct {
	Key  string `json:"key"`
	Text string `json:"text"`
}

// Check is a health check command of a session, run in the workspace before
// every agent session of its nodes.
type Check struct {
	// Command is run with sh -c in /workspace.
	Command string `json:"command"`
	// Timeout is its time limit in seconds (absent: the server's default).
	Timeout int `json:"timeout,omitempty" jsonschema:"minimum=1"`
}

// Approval statuses.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
)

// Who answered an approval besides a user (Approval.AnsweredBy).
const (
	AnsweredByTimeout = "timeout" // nobody answered in time: denied
	AnsweredByPolicy  = "policy"  // the node's approvals policy answered
	AnsweredByAgent   = "agent"   // the agent withdrew its request: denied
)

// Approval is an agent's request for permission to do something (run a
// command, reach the network), as its system records carry it.
type Approval struct {
	ID string `json:"id"`
	// Action is what the agent wants to do, e.g. "bash: curl https://…".
	Action string `json:"action"`
	// Detail says why it asks, for the person who answers.
	Detail string `json:"detail"`
	// Kind is the class of action ("bash", "network", "edit"): "always
	// allow" allows this kind for the node from then on.
	Kind string `json:"kind"`
	// Scope narrows "always allow" to part of the kind, when the server
	// made the request: a "network" request's host.
	Scope  string `json:"scope,omitempty"`
	Status string `json:"status" jsonschema:"enum=pending,enum=approved,enum=denied"`
	// AnsweredBy is the name of the user who answered, "timeout" or "policy".
	AnsweredBy string     `json:"answered_by,omitempty"`
	AnsweredAt *time.Time `json:"answered_at,omitempty"`
	// Always: the answer allows this kind for the node from now on.
	Always bool `json:"always,omitempty"`
	// ExpiresAt is when a request nobody answered is denied.
	ExpiresAt time.Time `json:"expires_at"`
}

// Node statuses besides the agent states (State*), which filepath alone
// sets: an agent never reports them.
const (
	// NodePaused: the node's container is frozen (signal pause) until a
	// resume; messages sent meanwhile are delivered on resume.
	NodePaused = "paused"
	// NodeStopped: a person (or the session's stop) stopped the agent
	// before it said done.
	NodeStopped = "stopped"
	// NodeLost: the node's container vanished (removed behind filepath's
	// back, or gone while the orchestrator was down).
	NodeLost = "lost"
)

// NodeStatuses lists every value of Node.Status: the agent states, then
// filepath's own.
func NodeStatuses() []string {
	return []string{StateIdle, StateThinking, StateRunning, StateDone, StateError, NodePaused, NodeStopped, NodeLost}
}

// Node is one agent of a session's tree, as the API and "node" records carry it.
type Node struct {
	ID        string  `json:"id"`
	SessionID string  `json:"session_id"`
	ParentID  *string `json:"parent_id" jsonschema:"nullable"` // null for the root
	Name      string  `json:"name"`
	AgentType string  `json:"agent_type"`
	Model     string  `json:"model"`
	Image     string  `json:"image"`
	// Status is an agent state (State*: the agent's last status or done,
	// or error when it failed) or one filepath sets: paused (its container
	// is frozen, whatever the agent said last), stopped or lost (Node*).
	Status string `json:"status" jsonschema:"enum=idle,enum=thinking,enum=running,enum=done,enum=error,enum=paused,enum=stopped,enum=lost"`
	// Workspace is what the node's /workspace is: the workspace of the
	// session ("shared") or a copy-on-write fork of its parent's ("fork").
	Workspace string `json:"workspace" jsonschema:"enum=shared,enum=fork"`
	// ContextPct is how full the agent's context window is (0 to 1), if it said.
	ContextPct  *float64        `json:"context_pct" jsonschema:"nullable,minimum=0,maximum=1"`
	Config      json.RawMessage `json:"config" jsonschema:"type=object"`
	ContainerID string          `json:"container_id"`
	// SortOrder is the node's position among its siblings, from 0.
	SortOrder int `json:"sort_order" jsonschema:"minimum=0"`
	// Tokens and CostUSD are what the node's agents spent through the LLM
	// gateway: prompt tokens (cached or not) plus completion tokens, and the
	// US dollars the provider reported (0 when it reports none).
	Tokens  int64   `json:"tokens" jsonschema:"minimum=0"`
	CostUSD float64 `json:"cost_usd" jsonschema:"minimum=0"`
	// ExitCode is the exit code of the node's last container, once it exited.
	ExitCode  *int      `json:"exit_code" jsonschema:"nullable"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Done and Total count the leaves of the node's subtree (a leaf counts
	// itself): Total leaves, Done of them with status done (not stopped,
	// lost or error, nor paused).
	Done  int `json:"done" jsonschema:"minimum=0"`
	Total int `json:"total" jsonschema:"minimum=0"`
	// Generation counts the node's agent sessions begun by a handoff: 1 for
	// its first agent, N+1 for the continuation of generation N.
	Generation int `json:"generation" jsonschema:"minimum=1"`
	// SubtreeTokens and SubtreeCostUSD add Tokens and CostUSD over the node
	// and its descendants.
	SubtreeTokens  int64   `json:"subtree_tokens" jsonschema:"minimum=0"`
	SubtreeCostUSD float64 `json:"subtree_cost_usd" jsonschema:"minimum=0"`
	// DescendantActive: a descendant (not the node itself) is running or
	// thinking.
	DescendantActive bool `json:"descendant_active"`
	// PullRequest is the pull (merge) request last opened of the node's
	// branch, from the push dialog or an approved request_pull_request;
	// absent: none. Opening it again after a new push keeps the one link.
	PullRequest *PullRequestLink `json:"pull_request,omitempty"`
}

// PullRequestLink is a pull request (GitHub) or merge request (GitLab) of
// a node's pushed branch, as its node carries it.
type PullRequestLink struct {
	Forge  string `json:"forge" jsonschema:"enum=github,enum=gitlab"`
	URL    string `json:"url"`
	Number int    `json:"number" jsonschema:"minimum=1"`
	Branch string `json:"branch"`
	Base   string `json:"base"`
}

// Session statuses.
const (
	SessionDraft   = "draft"
	SessionRunning = "running"
	SessionPaused  = "paused"
	SessionStopped = "stopped"
	SessionError   = "error"
)

// Session is an agent session (a tree of nodes and one ordered log), as the
// API sends it.
type Session struct {
	ID         string  `json:"id"`
	UserID     string  `json:"user_id"`
	Name       string  `json:"name"`
	GitRepoURL *string `json:"git_repo_url" jsonschema:"nullable"`
	Status     string  `json:"status" jsonschema:"enum=draft,enum=running,enum=paused,enum=stopped,enum=error"`
	// RootNodeID is the session's first top-level node (null: none). A
	// session may have several top-level nodes (parent_id null); the first
	// is the one `start` starts when none runs.
	RootNodeID *string    `json:"root_node_id" jsonschema:"nullable"`
	StartedAt  *time.Time `json:"started_at" jsonschema:"nullable"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	// NodeCount is the number of nodes in the tree.
	NodeCount int `json:"node_count" jsonschema:"minimum=0"`
	// LastActivity is the time of the last log record, or UpdatedAt if later.
	LastActivity time.Time `json:"last_activity"`
	// Checks are the session's health checks (empty: detected from the
	// repository before each agent session).
	Checks []Check `json:"checks"`
	// BudgetTokens and BudgetUSD bound what the session's agents may spend
	// through the LLM gateway (null: unlimited); TokensUsed and CostUSD are
	// what they spent so far, deleted nodes included.
	BudgetTokens *int64   `json:"budget_tokens" jsonschema:"nullable,minimum=0"`
	BudgetUSD    *float64 `json:"budget_usd" jsonschema:"nullable,minimum=0"`
	TokensUsed   int64    `json:"tokens_used" jsonschema:"minimum=0"`
	CostUSD      float64  `json:"cost_usd" jsonschema:"minimum=0"`
}
