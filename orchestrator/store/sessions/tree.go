package sessions

import (
	"encoding/json"
	"fmt"

	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/protocol"
	"gorm.io/gorm"
)

// nodeRow is agent_node as stored.
type nodeRow struct {
	ID          string
	SessionID   string
	ParentID    *string
	Name        string
	AgentType   string
	Model       string
	Image       string
	Status      string
	Detail      string // status_detail: protocol.NodeStopped or NodeLost, shown as the status
	Paused      bool
	Workspace   string
	ContextPct  *float64
	Config      string
	ContainerID string
	SortOrder   int
	Tokens      int64
	CostUSD     float64
	LogCursor   string
	ExitCode    *int
	StartedAt   *int64
	Generation  int
	PullRequest string // JSON of a protocol.PullRequestLink; "": none
	CreatedAt   int64
	UpdatedAt   int64
}

const nodeCols = `id, session_id, parent_id, name, agent_type, model, image, status, status_detail AS detail, paused, workspace, context_pct, config,
	container_id, sort_order, tokens, cost_usd, log_cursor, exit_code, started_at, generation, pull_request, created_at, updated_at`

func (r *nodeRow) node() Node {
	return Node{Node: protocol.Node{
		ID: r.ID, SessionID: r.SessionID, ParentID: r.ParentID, Name: r.Name, AgentType: r.AgentType,
		Model: r.Model, Image: r.Image, Status: r.status(), Workspace: r.Workspace, ContextPct: r.ContextPct,
		Config: json.RawMessage(r.Config), ContainerID: r.ContainerID, SortOrder: r.SortOrder,
		Tokens: r.Tokens, CostUSD: r.CostUSD, ExitCode: r.ExitCode,
		Generation: r.Generation, SubtreeTokens: r.Tokens, SubtreeCostUSD: r.CostUSD,
		CreatedAt: store.FromMillis(r.CreatedAt), UpdatedAt: store.FromMillis(r.UpdatedAt),
		PullRequest: r.pullRequest(),
	}, LogCursor: r.LogCursor, StartedAt: store.FromMillisPtr(r.StartedAt)}
}

// pullRequest is the node's pull request link (nil: none, or a column
// this version cannot read).
func (r *nodeRow) pullRequest() *protocol.PullRequestLink {
	if r.PullRequest == "" {
		return nil
	}
	var pr protocol.PullRequestLink
	if json.Unmarshal([]byte(r.PullRequest), &pr) != nil || pr.URL == "" {
		return nil
	}
	return &pr
}

// rollup is what a node's subtree adds up to.
type rollup struct {
	done, total int
	tokens      int64
	cost        float64
	active      bool // the subtree (the node included) has a running or thinking node
}

// status is the node's status as shown: paused while its container is
// frozen, else how it ended if filepath found that out (stopped, lost),
// else the agent's.
func (r *nodeRow) status() string {
	switch {
	case r.Paused:
		return protocol.NodePaused
	case r.Detail != "":
		return r.Detail
	}
	return r.Status
}

// setStatus stores status: filepath's own ends (stopped, lost) are kept
// beside the agent state they stand closest to (idle, error), so that the
// status column keeps its five values (migration 0036).
func (r *nodeRow) setStatus(status string) {
	switch status {
	case protocol.NodeStopped:
		r.Status, r.Detail = protocol.StateIdle, protocol.NodeStopped
	case protocol.NodeLost:
		r.Status, r.Detail = protocol.StateError, protocol.NodeLost
	default:
		r.Status, r.Detail = status, ""
	}
}

func (r *nodeRow) active() bool {
	s := r.status()
	return s == protocol.StateRunning || s == protocol.StateThinking
}

// add puts a child's subtree into the parent's.
func (u *rollup) add(k rollup) {
	u.done += k.done
	u.total += k.total
	u.tokens += k.tokens
	u.cost += k.cost
	u.active = u.active || k.active
}

// set copies the roll-up onto n: DescendantActive is the children's
// activity, without n's own.
func (u rollup) set(n *Node, kids rollup) {
	n.Done, n.Total, n.SubtreeTokens, n.SubtreeCostUSD, n.DescendantActive = u.done, u.total, u.tokens, u.cost, kids.active
}

// tree is a session's nodes with parent links resolved.
type tree struct {
	byID     map[string]*nodeRow
	children map[string][]*nodeRow // by parent id; "" for roots (and orphans)
}

func loadTree(g *gorm.DB, sessionID string) (*tree, error) {
	var rows []nodeRow
	if err := g.Raw(`SELECT `+nodeCols+` FROM agent_node WHERE session_id = ? ORDER BY sort_order, created_at, id`,
		sessionID).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read session %s nodes: %w", sessionID, err)
	}
	t := &tree{byID: make(map[string]*nodeRow, len(rows)), children: map[string][]*nodeRow{}}
	for i := range rows {
		t.byID[rows[i].ID] = &rows[i]
	}
	for i := range rows {
		r := &rows[i]
		key := ""
		if r.ParentID != nil && t.byID[*r.ParentID] != nil {
			key = *r.ParentID
		}
		t.children[key] = append(t.children[key], r)
	}
	return t, nil
}

// rollup returns what id's subtree adds up to, and what its children's
// subtrees add up to without id itself.
func (t *tree) rollup(id string) (all, kids rollup) {
	for _, k := range t.children[id] {
		sub, _ := t.rollup(k.ID)
		kids.add(sub)
	}
	return t.withSelf(t.byID[id], kids), kids
}

// withSelf is a node's roll-up from its children's: a leaf counts itself.
func (t *tree) withSelf(r *nodeRow, kids rollup) rollup {
	all := kids
	if len(t.children[r.ID]) == 0 {
		all.total = 1
		if r.status() == protocol.StateDone {
			all.done = 1
		}
	}
	all.tokens += r.Tokens
	all.cost += r.CostUSD
	all.active = all.active || r.active()
	return all
}

// node returns id as a Node with its subtree's roll-up.
func (t *tree) node(id string) Node {
	n := t.byID[id].node()
	all, kids := t.rollup(id)
	all.set(&n, kids)
	return n
}

// list returns every node in depth-first pre-order (siblings by sort_order),
// with its subtree's roll-up, computed in one pass.
func (t *tree) list() []Node {
	out := make([]Node, 0, len(t.byID))
	var walk func(r *nodeRow) rollup
	walk = func(r *nodeRow) rollup {
		i := len(out)
		out = append(out, r.node())
		var kids rollup
		for _, k := range t.children[r.ID] {
			kids.add(walk(k))
		}
		all := t.withSelf(r, kids)
		all.set(&out[i], kids)
		return all
	}
	for _, r := range t.children[""] {
		walk(r)
	}
	return out
}

// isDescendant reports whether id is in the subtree of ancestor (or is it).
func (t *tree) isDescendant(id, ancestor string) bool {
	for seen := 0; seen <= len(t.byID); seen++ {
		if id == ancestor {
			return true
		}
		r := t.byID[id]
		if r == nil || r.ParentID == nil {
			return false
		}
		id = *r.ParentID
	}
	return true // a cycle already exists: treat as related
}

// subtree returns id and all its descendants, parents before children.
func (t *tree) subtree(id string) []string {
	ids := []string{id}
	for i := 0; i < len(ids); i++ {
		for _, k := range t.children[ids[i]] {
			ids = append(ids, k.ID)
		}
	}
	return ids
}

// ownedSession checks that the session exists and belongs to scope ("" for
// any owner) and returns its root node id.
func ownedSession(g *gorm.DB, scope, sessionID string) (*string, error) {
	q := `SELECT root_node_id FROM agent_session WHERE id = ?`
	args := []any{sessionID}
	if scope != "" {
		q += ` AND user_id = ?`
		args = append(args, scope)
	}
	var rows []struct{ RootNodeID *string }
	if err := g.Raw(q, args...).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read session %s: %w", sessionID, err)
	}
	if len(rows) == 0 {
		return nil, store.NotFound("session", sessionID)
	}
	return rows[0].RootNodeID, nil
}

// siblingNamed returns the child of parentKey ("" : the root level) named
// name, other than node except, or nil. Names are unique among siblings, so
// that a node's children can be named by name.
func (t *tree) siblingNamed(parentKey, name, except string) *nodeRow {
	for _, k := range t.children[parentKey] {
		if k.Name == name && k.ID != except {
			return k
		}
	}
	return nil
}

// removeRow returns list without the row of id.
func removeRow(list []*nodeRow, id string) []*nodeRow {
	out := make([]*nodeRow, 0, len(list))
	for _, r := range list {
		if r.ID != id {
			out = append(out, r)
		}
	}
	return out
}
