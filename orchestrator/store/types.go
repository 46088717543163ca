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

// Node is one agent in a session's tree: protocol.Node, as the API and
// "node" records carry it, and what only the runner and relays read.
type Node struct {
	protocol.Node
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
