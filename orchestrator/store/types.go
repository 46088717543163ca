package store

import (
	"encoding/json"
	"time"

	"github.com/filepath-dev/filepath/protocol"
)

// Session statuses.
const (
	SessionDraft   = protocol.SessionDraft
	SessionRunning = protocol.SessionRunning
	SessionPaused  = protocol.SessionPaused
	SessionStopped = protocol.SessionStopped
	SessionError   = protocol.SessionError
)

// Node statuses.
const (
	NodeIdle     = protocol.StateIdle
	NodeThinking = protocol.StateThinking
	NodeRunning  = protocol.StateRunning
	NodeDone     = protocol.StateDone
	NodeError    = protocol.StateError
	NodePaused   = protocol.NodePaused  // shown while the container is frozen; never stored as the status
	NodeStopped  = protocol.NodeStopped // stopped by a person before it said done
	NodeLost     = protocol.NodeLost    // its container vanished
)

// Node workspaces (Node.Workspace).
const (
	WorkspaceShared = protocol.WorkspaceShared
	WorkspaceFork   = protocol.WorkspaceFork
)

// Record kinds.
const (
	KindEvent  = protocol.KindEvent  // a validated FAP event from the agent
	KindInput  = protocol.KindInput  // an input written to the agent's stdin
	KindNode   = protocol.KindNode   // a tree change: {"op","node"[,"ids"]}
	KindFile   = protocol.KindFile   // a VFS change: {"op","path","size"}
	KindError  = protocol.KindError  // a protocol or runtime error
	KindSystem = protocol.KindSystem // a block filepath adds to a node's chat
)

// Node record ops (the "op" of a KindNode record).
const (
	OpCreated = protocol.OpCreated
	OpUpdated = protocol.OpUpdated
	OpMoved   = protocol.OpMoved
	OpDeleted = protocol.OpDeleted
)

// User is an account.
type User struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	IsAdmin   bool      `json:"is_admin"`
	CreatedAt time.Time `json:"created_at"`
}

// APIKey describes a stored key (never the key itself).
type APIKey struct {
	ID         string     `json:"id"`
	UserID     string     `json:"user_id"`
	SessionID  string     `json:"session_id,omitempty"` // set for node keys
	NodeID     string     `json:"node_id,omitempty"`    // set for node keys
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"` // the first characters of the key, for display
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	ExpiresAt  *time.Time `json:"expires_at"` // nil: never (node keys, and keys made without an expiry)
}

// Principal is who an API key authenticates: a user, or, for a node key,
// one node of one of the user's sessions (DESIGN invariant 9).
type Principal struct {
	User      User
	SessionID string // "" for a user key
	NodeID    string // "" for a user key
}

// Session is an agent session: a tree of nodes and one ordered log. Its JSON
// is protocol.Session's (schema_test.go checks it).
type Session struct {
	ID         string     `json:"id"`
	UserID     string     `json:"user_id"`
	Name       string     `json:"name"`
	GitRepoURL *string    `json:"git_repo_url"`
	Status     string     `json:"status"`
	RootNodeID *string    `json:"root_node_id"`
	StartedAt  *time.Time `json:"started_at"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	// NodeCount is the number of nodes in the tree.
	NodeCount int `json:"node_count"`
	// LastActivity is the time of the last log record, or UpdatedAt if later.
	LastActivity time.Time `json:"last_activity"`
	// Checks are the health checks run in the workspace before every agent
	// session of the session's nodes (empty: detected from the repository).
	Checks []Check `json:"checks"`
	// BudgetTokens and BudgetUSD bound what the session's agents may spend
	// through the LLM gateway (nil: unlimited). TokensUsed and CostUSD are
	// what they spent so far, deleted nodes included.
	BudgetTokens *int64   `json:"budget_tokens"`
	BudgetUSD    *float64 `json:"budget_usd"`
	TokensUsed   int64    `json:"tokens_used"`
	CostUSD      float64  `json:"cost_usd"`
}

// Check is one health check of a session (protocol.Check).
type Check = protocol.Check

// NewSession is the input of CreateSession.
type NewSession struct {
	Name       string  `json:"name"`
	GitRepoURL *string `json:"git_repo_url,omitempty"`
	Checks     []Check `json:"checks,omitempty"`
}

// Node is one agent in a session's tree. Its JSON is protocol.Node's
// (schema_test.go checks it against the record schema).
type Node struct {
	ID        string  `json:"id"`
	SessionID string  `json:"session_id"`
	ParentID  *string `json:"parent_id"`
	Name      string  `json:"name"`
	AgentType string  `json:"agent_type"`
	Model     string  `json:"model"`
	Image     string  `json:"image"`
	// Status is the node's state; NodePaused while its container is
	// frozen (Paused), whatever the agent said last.
	Status      string          `json:"status"`
	Workspace   string          `json:"workspace"`
	ContextPct  *float64        `json:"context_pct"`
	Config      json.RawMessage `json:"config"`
	ContainerID string          `json:"container_id"`
	SortOrder   int             `json:"sort_order"`
	Tokens      int64           `json:"tokens"`   // prompt (cached or not) + completion tokens, metered by the gateway
	CostUSD     float64         `json:"cost_usd"` // USD the upstream reported for those requests (0 when none did)
	ExitCode    *int            `json:"exit_code"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	// Done and Total count the leaves of the node's subtree (a leaf counts
	// itself): Total leaves, Done of them with status done.
	Done  int `json:"done"`
	Total int `json:"total"`
	// Generation is the node's agent session number: 1 for its first
	// agent, N+1 for the continuation after generation N handed off.
	Generation int `json:"generation"`
	// SubtreeTokens and SubtreeCostUSD add Tokens and CostUSD over the
	// node and its descendants;
	// DescendantActive says a descendant is running or thinking. Like Done
	// and Total they are computed from the tree (not by NodeByID).
	SubtreeTokens    int64   `json:"subtree_tokens"`
	SubtreeCostUSD   float64 `json:"subtree_cost_usd"`
	DescendantActive bool    `json:"descendant_active"`
	// LogCursor is the relay's opaque position in the container log.
	LogCursor string `json:"-"`
	// StartedAt is when the node's agent was first started (nil: never):
	// a later start is a restart (no FILEPATH_TASK, a resume message).
	StartedAt *time.Time `json:"-"`
}

// NewNode is the input of CreateNode.
type NewNode struct {
	Name      string          `json:"name,omitempty"`      // "" → a generated adjective-number name
	AgentType string          `json:"agent_type"`          // a catalog type
	Model     string          `json:"model,omitempty"`     // "" → the catalog default
	ParentID  *string         `json:"parent_id,omitempty"` // nil → a top-level node (the first is the session's root)
	Image     string          `json:"image,omitempty"`     // required for custom; "" → the catalog image
	Task      string          `json:"task,omitempty"`      // "" → no first message
	Config    json.RawMessage `json:"config,omitempty"`    // a JSON object; nil → {}
	// Workspace is "fork" for a child that works on a fork of its
	// parent's workspace (the caller makes the fork); "" is shared.
	Workspace string `json:"workspace,omitempty"`
}

// NodePatch lists the node fields to change; nil fields stay as they are.
type NodePatch struct {
	Name   *string          `json:"name,omitempty"`
	Status *string          `json:"status,omitempty"`
	Config *json.RawMessage `json:"config,omitempty"` // a JSON object
	// Paused freezes (true) or thaws (false) the node as shown: its Status
	// reads NodePaused while it is paused (the runner, after the
	// container's pause or unpause).
	Paused          *bool    `json:"-"`
	ContextPct      *float64 `json:"context_pct,omitempty"`
	ClearContextPct bool     `json:"-"`
	Tokens          *int64   `json:"tokens,omitempty"`
	ContainerID     *string  `json:"container_id,omitempty"`
	LogCursor       *string  `json:"-"`
	ExitCode        *int     `json:"exit_code,omitempty"`
	ClearExitCode   bool     `json:"-"`
	// MarkStarted sets StartedAt to now unless it is set; ClearStarted
	// unsets it (a first start that failed).
	MarkStarted  bool `json:"-"`
	ClearStarted bool `json:"-"`
	// Generation sets the node's generation (the runner, at a continuation).
	Generation *int `json:"-"`
	// AddTokens and AddCostUSD add to the node's totals (the gateway's
	// metering; never from a request body).
	AddTokens  int64   `json:"-"`
	AddCostUSD float64 `json:"-"`
}

// Record is one entry of a session's log. Its JSON is protocol.Record's
// (schema_test.go checks it against the record schema).
type Record struct {
	SessionID string          `json:"-"` // the log it belongs to (the hub's key)
	Seq       int64           `json:"seq"`
	Kind      string          `json:"kind"`
	NodeID    string          `json:"node_id"`
	At        time.Time       `json:"at"`
	Data      json.RawMessage `json:"data"`
	// Ref is the seq of an earlier record of the node this one refers to
	// (a commit's tool or command record); 0: none.
	Ref int64 `json:"ref,omitempty"`
}

// NewRecord is the input of Append: the store assigns Seq, and At unless
// it is given.
type NewRecord struct {
	NodeID string          // "" for a session-level record
	Kind   string          // one of the Kind constants
	Data   json.RawMessage // a JSON object
	// At is when the record's content happened: for an agent's output line,
	// the container runtime's timestamp of it, so that output recovered
	// after a restart keeps the time it was printed. Zero: the append time.
	// At is information, not order: seq is the order, and At may go
	// backwards from one record to the next.
	At time.Time
	// Ref links the record to an earlier one (Record.Ref): > 0 is that
	// record's seq; -k is the record k places before this one in the same
	// Append call (whose seq is not known until the append).
	Ref int64
}

// NodeChange is the data of a KindNode record.
type NodeChange struct {
	Op   string   `json:"op"`
	Node Node     `json:"node"`
	IDs  []string `json:"ids,omitempty"` // for OpDeleted: every removed id
}
