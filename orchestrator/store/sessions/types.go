package sessions

import (
	"encoding/json"
	"time"

	"github.com/filepath-dev/filepath/protocol"
)

// NewSession is the input of CreateSession.
type NewSession struct {
	Name       string           `json:"name"`
	GitRepoURL *string          `json:"git_repo_url,omitempty"`
	Checks     []protocol.Check `json:"checks,omitempty"`
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
	// reads protocol.NodePaused while it is paused (the runner, after the
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
	// PullRequest sets the pull request the node's branch has (ship, once
	// the forge opened or updated it).
	PullRequest *protocol.PullRequestLink `json:"-"`
	// AddTokens and AddCostUSD add to the node's totals (the gateway's
	// metering; never from a request body).
	AddTokens  int64   `json:"-"`
	AddCostUSD float64 `json:"-"`
}
