package store

import (
	"encoding/json"
	"time"
)

// Session statuses.
const (
	SessionDraft   = "draft"
	SessionRunning = "running"
	SessionPaused  = "paused"
	SessionStopped = "stopped"
	SessionError   = "error"
)

// Node statuses.
const (
	NodeIdle     = "idle"
	NodeThinking = "thinking"
	NodeRunning  = "running"
	NodeDone     = "done"
	NodeError    = "error"
)

// Record kinds.
const (
	KindEvent = "event" // a validated FAP event from the agent
	KindInput = "input" // an input written to the agent's stdin
	KindNode  = "node"  // a tree change: {"op","node"[,"ids"]}
	KindFile  = "file"  // a VFS change: {"op","path","size"}
	KindError = "error" // a protocol or runtime error
)

// Node record ops (the "op" of a KindNode record).
const (
	OpCreated = "created"
	OpUpdated = "updated"
	OpMoved   = "moved"
	OpDeleted = "deleted"
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
}

// Principal is who an API key authenticates: a user, or, for a node key,
// one node of one of the user's sessions (DESIGN invariant 9).
type Principal struct {
	User      User
	SessionID string // "" for a user key
	NodeID    string // "" for a user key
}

// Session is an agent session: a tree of nodes and one ordered log.
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
	// BudgetTokens and BudgetUSD bound what the session's agents may spend
	// through the LLM gateway (nil: unlimited). TokensUsed and CostUSD are
	// what they spent so far, deleted nodes included.
	BudgetTokens *int64   `json:"budget_tokens"`
	BudgetUSD    *float64 `json:"budget_usd"`
	TokensUsed   int64    `json:"tokens_used"`
	CostUSD      float64  `json:"cost_usd"`
}

// NewSession is the input of CreateSession.
type NewSession struct {
	Name       string  `json:"name"`
	GitRepoURL *string `json:"git_repo_url,omitempty"`
}

// Node is one agent in a session's tree.
type Node struct {
	ID          string          `json:"id"`
	SessionID   string          `json:"session_id"`
	ParentID    *string         `json:"parent_id"`
	Name        string          `json:"name"`
	AgentType   string          `json:"agent_type"`
	Model       string          `json:"model"`
	Image       string          `json:"image"`
	Status      string          `json:"status"`
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
	// LogCursor is the relay's opaque position in the container log.
	LogCursor string `json:"-"`
}

// NewNode is the input of CreateNode.
type NewNode struct {
	Name      string          `json:"name,omitempty"`      // "" → a generated adjective-number name
	AgentType string          `json:"agent_type"`          // a catalog type
	Model     string          `json:"model,omitempty"`     // "" → the catalog default
	ParentID  *string         `json:"parent_id,omitempty"` // nil → the root (only if the session has none)
	Image     string          `json:"image,omitempty"`     // required for custom; "" → the catalog image
	Task      string          `json:"task,omitempty"`      // "" → no first message
	Config    json.RawMessage `json:"config,omitempty"`    // a JSON object; nil → {}
}

// NodePatch lists the node fields to change; nil fields stay as they are.
type NodePatch struct {
	Name            *string          `json:"name,omitempty"`
	Status          *string          `json:"status,omitempty"`
	Config          *json.RawMessage `json:"config,omitempty"` // a JSON object
	ContextPct      *float64         `json:"context_pct,omitempty"`
	ClearContextPct bool             `json:"-"`
	Tokens          *int64           `json:"tokens,omitempty"`
	ContainerID     *string          `json:"container_id,omitempty"`
	LogCursor       *string          `json:"-"`
	ExitCode        *int             `json:"exit_code,omitempty"`
	ClearExitCode   bool             `json:"-"`
	// AddTokens and AddCostUSD add to the node's totals (the gateway's
	// metering; never from a request body).
	AddTokens  int64   `json:"-"`
	AddCostUSD float64 `json:"-"`
}

// Record is one entry of a session's log.
type Record struct {
	SessionID string          `json:"-"` // the log it belongs to (the hub's key)
	Seq       int64           `json:"seq"`
	Kind      string          `json:"kind"`
	NodeID    string          `json:"node_id"`
	At        time.Time       `json:"at"`
	Data      json.RawMessage `json:"data"`
}

// NewRecord is the input of Append: the store assigns Seq and At.
type NewRecord struct {
	NodeID string          // "" for a session-level record
	Kind   string          // one of the Kind constants
	Data   json.RawMessage // a JSON object
}

// NodeChange is the data of a KindNode record.
type NodeChange struct {
	Op   string   `json:"op"`
	Node Node     `json:"node"`
	IDs  []string `json:"ids,omitempty"` // for OpDeleted: every removed id
}
