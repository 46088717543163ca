package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/protocol"
	"gorm.io/gorm"
)

// Limits on node fields.
const (
	MaxNodeNameLen  = 100      // runes
	MaxModelLen     = 200      // bytes
	MaxImageLen     = 512      // bytes
	MaxConfigBytes  = 64 << 10 // bytes of config JSON
	MaxTaskBytes    = 1 << 20  // bytes of the first message
	MaxContainerLen = 256      // bytes of container_id
	MaxLogCursorLen = 1024     // bytes of log_cursor
	// MaxPullRequestURLLen bounds the URL of a node's pull request.
	MaxPullRequestURLLen = 2048
)

func validNodeName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case utf8.RuneCountInString(name) > MaxNodeNameLen:
		return "", orchestrator.FieldErrorf("name", "name is longer than %d characters", MaxNodeNameLen)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "", orchestrator.FieldErrorf("name", "name must not contain control characters")
	}
	return name, nil
}

func validStatus(status string) error {
	switch status {
	case protocol.StateIdle, protocol.StateThinking, protocol.StateRunning, protocol.StateDone, protocol.StateError, protocol.NodeStopped, protocol.NodeLost:
		return nil
	case protocol.NodePaused:
		return orchestrator.FieldErrorf("status", "status %q is not set: a node is paused by signal pause", status)
	}
	return orchestrator.FieldErrorf("status", "status %q: want idle, thinking, running, done, error, stopped or lost", status)
}

func noControl(field, v string, maxLen int) error {
	if len(v) > maxLen {
		return orchestrator.FieldErrorf(field, "%s is longer than %d bytes", field, maxLen)
	}
	if strings.IndexFunc(v, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0 {
		return orchestrator.FieldErrorf(field, "%s must not contain spaces or control characters", field)
	}
	return nil
}

// CreateNode adds a node to userID's session. Without ParentID it is a
// top-level node; the first one becomes the session's root (root_node_id),
// and a session may have several. The node and its
// "created" record (and, with a Task, the first input message) are committed
// together.
func (s *Store) CreateNode(ctx context.Context, userID, sessionID string, in NewNode) (Node, error) {
	return s.createNode(ctx, store.RequireUser(userID), sessionID, in)
}

func (s *Store) createNode(ctx context.Context, scope, sessionID string, in NewNode) (Node, error) {
	agent, ok := orchestrator.AgentByType(in.AgentType)
	if !ok {
		types := []string{}
		for _, a := range orchestrator.Catalog() {
			types = append(types, a.Type)
		}
		return Node{}, orchestrator.FieldErrorf("agent_type", "agent_type %q: want one of %s", in.AgentType, strings.Join(types, ", "))
	}
	name, err := validNodeName(in.Name)
	if err != nil {
		return Node{}, err
	}
	workspace := protocol.WorkspaceShared
	switch in.Workspace {
	case "", protocol.WorkspaceShared:
	case protocol.WorkspaceFork:
		if in.ParentID == nil || *in.ParentID == "" {
			return Node{}, orchestrator.FieldErrorf("workspace", "workspace \"fork\" needs a parent_id: a top-level node works on the session's workspace")
		}
		workspace = protocol.WorkspaceFork
	default:
		return Node{}, orchestrator.FieldErrorf("workspace", "workspace %q: want shared or fork", in.Workspace)
	}
	model := strings.TrimSpace(in.Model)
	if model == "" {
		model = agent.DefaultModel
	}
	if err := noControl("model", model, MaxModelLen); err != nil {
		return Node{}, err
	}
	image := strings.TrimSpace(in.Image)
	if agent.Type == orchestrator.AgentCustom {
		if image == "" {
			return Node{}, orchestrator.FieldErrorf("image", "image is required for a custom agent")
		}
		if err := noControl("image", image, MaxImageLen); err != nil {
			return Node{}, err
		}
		if strings.HasPrefix(image, "-") {
			return Node{}, orchestrator.FieldErrorf("image", "image must not start with '-'")
		}
	} else {
		if image != "" && image != agent.Image {
			return Node{}, orchestrator.FieldErrorf("image", "image can only be set for a custom agent")
		}
		image = agent.Image
	}
	config := json.RawMessage(`{}`)
	if len(bytes.TrimSpace(in.Config)) > 0 && string(bytes.TrimSpace(in.Config)) != "null" {
		if config, err = validConfig(in.Config); err != nil {
			return Node{}, err
		}
	}
	if len(in.Task) > MaxTaskBytes {
		return Node{}, orchestrator.FieldErrorf("task", "task is larger than %d bytes", MaxTaskBytes)
	}

	var created Node
	_, err = s.st.WithLog(ctx, sessionID, func(tx *store.Tx) error {
		g := tx.DB()
		root, err := ownedSession(g, scope, sessionID)
		if err != nil {
			return err
		}
		t, err := loadTree(g, sessionID)
		if err != nil {
			return err
		}
		if max := s.cfg.MaxNodes; len(t.byID) >= max {
			return orchestrator.Errorf(orchestrator.EConflict, "session has reached its limit of %d agents; delete some or raise --max-agents", max)
		}
		parentKey := ""
		if in.ParentID != nil && *in.ParentID != "" {
			p := t.byID[*in.ParentID]
			if p == nil {
				return orchestrator.FieldErrorf("parent_id", "parent node %q not found in this session", *in.ParentID)
			}
			parentKey = p.ID
		}
		if name == "" {
			name = uniqueName(t, parentKey)
		} else if k := t.siblingNamed(parentKey, name, ""); k != nil {
			return conflict(nameTaken(k, name))
		}
		if parentKey != "" {
			// No node reaches more of the workspace than its parent.
			if config, err = inheritAllowedPaths(json.RawMessage(t.byID[parentKey].Config), config, fmt.Sprintf("node %q", name)); err != nil {
				return err
			}
		}
		now := store.Millis(tx.Now())
		r := nodeRow{
			ID: store.NewID(), SessionID: sessionID, Name: name, AgentType: agent.Type, Model: model,
			Image: image, Status: protocol.StateIdle, Workspace: workspace, Config: string(config),
			SortOrder: len(t.children[parentKey]), CreatedAt: now, UpdatedAt: now,
		}
		if parentKey != "" {
			r.ParentID = &parentKey
		}
		if err := g.Exec(`INSERT INTO agent_node (id, session_id, parent_id, name, agent_type, model, image,
			status, workspace, config, sort_order, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			r.ID, r.SessionID, r.ParentID, r.Name, r.AgentType, r.Model, r.Image, r.Status, r.Workspace, r.Config,
			r.SortOrder, r.CreatedAt, r.UpdatedAt).Error; err != nil {
			return fmt.Errorf("insert node: %w", err)
		}
		if parentKey == "" && root == nil {
			// The first top-level node is the session's root.
			if err := g.Exec(`UPDATE agent_session SET root_node_id = ?, updated_at = ? WHERE id = ?`,
				r.ID, now, sessionID).Error; err != nil {
				return fmt.Errorf("set root node: %w", err)
			}
		}
		r.Generation = 1
		created = r.node()
		created.Done, created.Total = 0, 1
		if err := tx.AppendJSON(r.ID, protocol.KindNode, protocol.NodeChange{Op: protocol.OpCreated, Node: created.Node}); err != nil {
			return err
		}
		if in.Task != "" {
			from := protocol.FromUser
			if parentKey != "" {
				from = protocol.FromParent
			}
			msg := protocol.MessageInput{Type: protocol.TypeMessage, From: from, Content: in.Task}
			if err := tx.AppendJSON(r.ID, protocol.KindInput, msg); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Node{}, err
	}
	return created, nil
}

// uniqueName picks an automatic name no node of the session has (and so
// no future sibling under parentKey).
func uniqueName(t *tree, parentKey string) string {
	used := make(map[string]bool, len(t.byID))
	for _, r := range t.byID {
		used[r.Name] = true
	}
	name := orchestrator.NewNodeName()
	for i := 0; i < 20 && used[name]; i++ {
		name = orchestrator.NewNodeName()
	}
	for i := 2; t.siblingNamed(parentKey, name, "") != nil; i++ {
		name = fmt.Sprintf("%s-%d", orchestrator.NewNodeName(), i)
	}
	return name
}

func nameTaken(k *nodeRow, name string) *orchestrator.Error {
	return orchestrator.FieldErrorf("name", "a sibling is already named %q (node %s): names are unique among a node's children", name, k.ID)
}

// GetNode returns one node of userID's session, with its leaf counts.
func (s *Store) GetNode(ctx context.Context, userID, sessionID, nodeID string) (Node, error) {
	g := s.rdb.WithContext(ctx)
	if _, err := ownedSession(g, store.RequireUser(userID), sessionID); err != nil {
		return Node{}, err
	}
	t, err := loadTree(g, sessionID)
	if err != nil {
		return Node{}, err
	}
	if t.byID[nodeID] == nil {
		return Node{}, store.NotFound("node", nodeID)
	}
	return t.node(nodeID), nil
}

// NodeByID returns a node whoever owns it (for the runner and relays; never
// for request handlers). Done and Total are not computed.
func (s *Store) NodeByID(ctx context.Context, nodeID string) (Node, error) {
	var rows []nodeRow
	if err := s.rdb.WithContext(ctx).Raw(`SELECT `+nodeCols+` FROM agent_node WHERE id = ?`, nodeID).
		Scan(&rows).Error; err != nil {
		return Node{}, fmt.Errorf("read node %s: %w", nodeID, err)
	}
	if len(rows) == 0 {
		return Node{}, store.NotFound("node", nodeID)
	}
	return rows[0].node(), nil
}

// ActiveNodes returns every node, of any user, that has a container or a
// status other than idle, done and error: what the runner reconciles with
// the real containers at start-up.
func (s *Store) ActiveNodes(ctx context.Context) ([]Node, error) {
	var rows []nodeRow
	if err := s.rdb.WithContext(ctx).Raw(`SELECT ` + nodeCols + ` FROM agent_node
		WHERE container_id != '' OR status IN ('thinking', 'running') ORDER BY session_id, created_at, id`).
		Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read active nodes: %w", err)
	}
	out := make([]Node, len(rows))
	for i := range rows {
		out[i] = rows[i].node()
	}
	return out, nil
}

// Tree returns every node of userID's session in depth-first order (siblings
// by sort_order), each with its leaf counts, from one query.
func (s *Store) Tree(ctx context.Context, userID, sessionID string) ([]Node, error) {
	g := s.rdb.WithContext(ctx)
	if _, err := ownedSession(g, store.RequireUser(userID), sessionID); err != nil {
		return nil, err
	}
	t, err := loadTree(g, sessionID)
	if err != nil {
		return nil, err
	}
	return t.list(), nil
}

func validatePatch(p *NodePatch) error {
	if p.Name != nil {
		n, err := validNodeName(*p.Name)
		if err != nil {
			return err
		}
		if n == "" {
			return orchestrator.FieldErrorf("name", "name must not be empty")
		}
		p.Name = &n
	}
	if p.Status != nil {
		if err := validStatus(*p.Status); err != nil {
			return err
		}
	}
	if p.Config != nil {
		c, err := validConfig(*p.Config)
		if err != nil {
			return err
		}
		p.Config = &c
	}
	if p.ContextPct != nil {
		if v := *p.ContextPct; math.IsNaN(v) || v < 0 || v > 1 {
			return orchestrator.FieldErrorf("context_pct", "context_pct %v: want a number from 0 to 1", v)
		}
	}
	if p.Tokens != nil && *p.Tokens < 0 {
		return orchestrator.FieldErrorf("tokens", "tokens must not be negative")
	}
	if p.Generation != nil && *p.Generation < 1 {
		return orchestrator.FieldErrorf("generation", "generation must be at least 1")
	}
	if p.AddTokens < 0 || p.AddCostUSD < 0 || math.IsNaN(p.AddCostUSD) || math.IsInf(p.AddCostUSD, 0) {
		return orchestrator.FieldErrorf("tokens", "usage to add must be a finite number, not negative")
	}
	if p.ContainerID != nil && len(*p.ContainerID) > MaxContainerLen {
		return orchestrator.FieldErrorf("container_id", "container_id is longer than %d bytes", MaxContainerLen)
	}
	if pr := p.PullRequest; pr != nil {
		u, err := url.Parse(pr.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(pr.URL) > MaxPullRequestURLLen {
			return orchestrator.FieldErrorf("pull_request", "a pull request's URL must be an http(s) URL of at most %d bytes, not %q", MaxPullRequestURLLen, pr.URL)
		}
	}
	if p.LogCursor != nil && len(*p.LogCursor) > MaxLogCursorLen {
		return orchestrator.FieldErrorf("log_cursor", "log_cursor is longer than %d bytes", MaxLogCursorLen)
	}
	return nil
}

// UpdateNode changes the fields set in p on a node of userID's session. A
// change other than LogCursor alone appends an "updated" record in the same
// transaction; a patch that changes nothing appends nothing.
func (s *Store) UpdateNode(ctx context.Context, userID, sessionID, nodeID string, p NodePatch) (Node, error) {
	return s.updateNode(ctx, store.RequireUser(userID), sessionID, nodeID, p)
}

// PatchNode is UpdateNode for the runner and relays: any owner.
func (s *Store) PatchNode(ctx context.Context, sessionID, nodeID string, p NodePatch) (Node, error) {
	return s.updateNode(ctx, "", sessionID, nodeID, p)
}

func (s *Store) updateNode(ctx context.Context, scope, sessionID, nodeID string, p NodePatch) (Node, error) {
	if err := validatePatch(&p); err != nil {
		return Node{}, err
	}
	var out Node
	_, err := s.st.WithLog(ctx, sessionID, func(tx *store.Tx) error {
		g := tx.DB()
		if _, err := ownedSession(g, scope, sessionID); err != nil {
			return err
		}
		t, err := loadTree(g, sessionID)
		if err != nil {
			return err
		}
		out, err = patchNode(tx, t, nodeID, p)
		return err
	})
	if err != nil {
		return Node{}, err
	}
	return out, nil
}

// patchNode applies a validated p to node nodeID of the loaded tree t, in
// the transaction: the one path by which a node changes, so that every
// visible change appends an "updated" record with the node as it now is.
func patchNode(tx *store.Tx, t *tree, nodeID string, p NodePatch) (Node, error) {
	g := tx.DB()
	r := t.byID[nodeID]
	if r == nil {
		return Node{}, store.NotFound("node", nodeID)
	}
	old := *r
	if p.Name != nil && *p.Name != r.Name {
		parentKey := ""
		if r.ParentID != nil && t.byID[*r.ParentID] != nil {
			parentKey = *r.ParentID
		}
		if k := t.siblingNamed(parentKey, *p.Name, r.ID); k != nil {
			return Node{}, conflict(nameTaken(k, *p.Name))
		}
	}
	if p.Name != nil {
		r.Name = *p.Name
	}
	if p.Status != nil {
		r.setStatus(*p.Status)
	}
	if p.Paused != nil {
		r.Paused = *p.Paused
	}
	if p.Config != nil {
		r.Config = string(*p.Config)
	}
	if p.ContextPct != nil {
		v := *p.ContextPct
		r.ContextPct = &v
	} else if p.ClearContextPct {
		r.ContextPct = nil
	}
	if p.Tokens != nil {
		r.Tokens = *p.Tokens
	}
	r.Tokens += p.AddTokens
	r.CostUSD += p.AddCostUSD
	if p.ContainerID != nil {
		r.ContainerID = *p.ContainerID
	}
	if p.LogCursor != nil {
		r.LogCursor = *p.LogCursor
	}
	if p.ExitCode != nil {
		v := *p.ExitCode
		r.ExitCode = &v
	} else if p.ClearExitCode {
		r.ExitCode = nil
	}
	if p.MarkStarted && r.StartedAt == nil {
		v := store.Millis(tx.Now())
		r.StartedAt = &v
	} else if p.ClearStarted {
		r.StartedAt = nil
	}
	if p.Generation != nil {
		r.Generation = *p.Generation
	}
	if p.PullRequest != nil {
		b, err := json.Marshal(p.PullRequest)
		if err != nil {
			return Node{}, err
		}
		r.PullRequest = string(b)
	}
	visible := r.Name != old.Name || r.status() != old.status() || r.Config != old.Config ||
		!eqPtr(r.ContextPct, old.ContextPct) || r.Tokens != old.Tokens || r.CostUSD != old.CostUSD ||
		r.ContainerID != old.ContainerID || !eqPtr(r.ExitCode, old.ExitCode) || r.Generation != old.Generation ||
		r.PullRequest != old.PullRequest
	// The agent's status may change unseen while the node shows paused.
	hidden := r.Status != old.Status || r.Detail != old.Detail || r.Paused != old.Paused
	if !visible && !hidden && r.LogCursor == old.LogCursor && eqPtr(r.StartedAt, old.StartedAt) {
		return t.node(nodeID), nil
	}
	if visible {
		r.UpdatedAt = store.Millis(tx.Now())
	}
	// Raw SQL: gorm's Updates(map) cost a third of the gateway's metering.
	if err := g.Exec(`UPDATE agent_node SET name = ?, status = ?, status_detail = ?, paused = ?, config = ?, context_pct = ?, tokens = ?, cost_usd = ?,
		container_id = ?, log_cursor = ?, exit_code = ?, started_at = ?, generation = ?, pull_request = ?, updated_at = ? WHERE id = ?`,
		r.Name, r.Status, r.Detail, r.Paused, r.Config, r.ContextPct, r.Tokens, r.CostUSD, r.ContainerID, r.LogCursor, r.ExitCode,
		r.StartedAt, r.Generation, r.PullRequest, r.UpdatedAt, nodeID).Error; err != nil {
		return Node{}, fmt.Errorf("update node %s: %w", nodeID, err)
	}
	out := t.node(nodeID)
	if visible {
		if err := tx.AppendJSON(nodeID, protocol.KindNode, protocol.NodeChange{Op: protocol.OpUpdated, Node: out.Node}); err != nil {
			return Node{}, err
		}
	}
	return out, nil
}

// conflict makes a field error a 409 (the field still named).
func conflict(e *orchestrator.Error) *orchestrator.Error {
	e.Code = orchestrator.EConflict
	return e
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// MoveNode moves a node of userID's session to position sortOrder (0-based,
// clamped to the end) among the children of parentID (nil: its current
// parent), renumbering both sibling lists contiguously. The root cannot be
// moved, and a node cannot move under itself or a descendant. It appends a
// "moved" record for the node and an "updated" record for every other node
// whose sort_order changed, in the same transaction.
func (s *Store) MoveNode(ctx context.Context, userID, sessionID, nodeID string, parentID *string, sortOrder int) (Node, error) {
	if sortOrder < 0 {
		return Node{}, orchestrator.FieldErrorf("sort_order", "sort_order must not be negative")
	}
	var out Node
	_, err := s.st.WithLog(ctx, sessionID, func(tx *store.Tx) error {
		g := tx.DB()
		if _, err := ownedSession(g, store.RequireUser(userID), sessionID); err != nil {
			return err
		}
		t, err := loadTree(g, sessionID)
		if err != nil {
			return err
		}
		r := t.byID[nodeID]
		if r == nil {
			return store.NotFound("node", nodeID)
		}
		if r.ParentID == nil {
			return orchestrator.FieldErrorf("parent_id", "the root node cannot be moved")
		}
		oldParent := *r.ParentID
		newParent := oldParent
		if parentID != nil && *parentID != "" {
			newParent = *parentID
			if t.byID[newParent] == nil {
				return orchestrator.FieldErrorf("parent_id", "parent node %q not found in this session", newParent)
			}
			if t.isDescendant(newParent, nodeID) {
				return orchestrator.FieldErrorf("parent_id", "moving node %q under %q would create a cycle", nodeID, newParent)
			}
			if k := t.siblingNamed(newParent, r.Name, r.ID); k != nil && newParent != oldParent {
				return conflict(orchestrator.FieldErrorf("parent_id", "cannot move node %q under %q: it already has a child named %q (node %s); names are unique among a node's children", r.Name, t.byID[newParent].Name, r.Name, k.ID))
			}
			if newParent != oldParent {
				// No node reaches more of the workspace than its parent:
				// each moved node must already keep within the new parent's
				// allowed_paths (set its config first).
				pc := json.RawMessage(t.byID[newParent].Config)
				for _, id := range t.subtree(nodeID) {
					m := t.byID[id]
					if err := keepsWithin(pc, json.RawMessage(m.Config), fmt.Sprintf("node %q", m.Name)); err != nil {
						return orchestrator.FieldErrorf("parent_id", "cannot move node %q under %q: %s", r.Name, t.byID[newParent].Name, orchestrator.ErrorMessage(err))
					}
				}
			}
		}
		before := map[string]int{}
		for _, k := range t.children[oldParent] {
			before[k.ID] = k.SortOrder
		}
		for _, k := range t.children[newParent] {
			before[k.ID] = k.SortOrder
		}
		// Take the node out of its old list, insert into the new one.
		oldList := removeRow(t.children[oldParent], nodeID)
		t.children[oldParent] = oldList
		newList := removeRow(t.children[newParent], nodeID)
		pos := min(sortOrder, len(newList))
		newList = append(newList[:pos], append([]*nodeRow{r}, newList[pos:]...)...)
		t.children[newParent] = newList
		np := newParent
		r.ParentID = &np
		now := store.Millis(tx.Now())
		r.UpdatedAt = now
		if err := g.Exec(`UPDATE agent_node SET parent_id = ?, updated_at = ? WHERE id = ?`, newParent, now, nodeID).Error; err != nil {
			return fmt.Errorf("move node %s: %w", nodeID, err)
		}
		lists := [][]*nodeRow{newList}
		if oldParent != newParent {
			lists = append(lists, oldList)
		}
		var changed []string
		for _, list := range lists {
			for i, k := range list {
				k.SortOrder = i
				if k.ID != nodeID {
					if before[k.ID] == i {
						continue
					}
					k.UpdatedAt = now
					changed = append(changed, k.ID)
				}
				if err := g.Exec(`UPDATE agent_node SET sort_order = ?, updated_at = ? WHERE id = ?`, i, now, k.ID).Error; err != nil {
					return fmt.Errorf("renumber node %s: %w", k.ID, err)
				}
			}
		}
		out = t.node(nodeID)
		if err := tx.AppendJSON(nodeID, protocol.KindNode, protocol.NodeChange{Op: protocol.OpMoved, Node: out.Node}); err != nil {
			return err
		}
		sort.Strings(changed)
		for _, id := range changed {
			if err := tx.AppendJSON(id, protocol.KindNode, protocol.NodeChange{Op: protocol.OpUpdated, Node: t.node(id).Node}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Node{}, err
	}
	return out, nil
}

// DeleteNode deletes a node of userID's session with its whole subtree and
// returns the removed ids (the node first, parents before children). Deleting
// the root makes the next top-level node the session's root (none left:
// root_node_id is cleared). The remaining siblings are
// renumbered. One "deleted" record (with every removed id) is appended in the
// same transaction. Stop the subtree's containers first.
func (s *Store) DeleteNode(ctx context.Context, userID, sessionID, nodeID string) ([]string, error) {
	var ids []string
	_, err := s.st.WithLog(ctx, sessionID, func(tx *store.Tx) error {
		g := tx.DB()
		root, err := ownedSession(g, store.RequireUser(userID), sessionID)
		if err != nil {
			return err
		}
		t, err := loadTree(g, sessionID)
		if err != nil {
			return err
		}
		r := t.byID[nodeID]
		if r == nil {
			return store.NotFound("node", nodeID)
		}
		gone := t.node(nodeID)
		ids = t.subtree(nodeID)
		// Children first so the parent_id foreign key never sees a dangling row.
		for i := len(ids) - 1; i >= 0; i-- {
			if err := g.Exec(`DELETE FROM agent_node WHERE id = ?`, ids[i]).Error; err != nil {
				return fmt.Errorf("delete node %s: %w", ids[i], err)
			}
		}
		now := store.Millis(tx.Now())
		parentKey := ""
		if r.ParentID != nil {
			parentKey = *r.ParentID
		}
		siblings := removeRow(t.children[parentKey], nodeID)
		if root != nil && *root == nodeID {
			var next *string
			if len(siblings) > 0 {
				next = &siblings[0].ID
			}
			if err := g.Exec(`UPDATE agent_session SET root_node_id = ?, updated_at = ? WHERE id = ?`, next, now, sessionID).Error; err != nil {
				return fmt.Errorf("set root node: %w", err)
			}
		}
		t.children[parentKey] = siblings
		for _, id := range ids {
			delete(t.byID, id)
		}
		if err := tx.AppendJSON(nodeID, protocol.KindNode, protocol.NodeChange{Op: protocol.OpDeleted, Node: gone.Node, IDs: ids}); err != nil {
			return err
		}
		for i, k := range siblings {
			if k.SortOrder == i {
				continue
			}
			k.SortOrder, k.UpdatedAt = i, now
			if err := g.Exec(`UPDATE agent_node SET sort_order = ?, updated_at = ? WHERE id = ?`, i, now, k.ID).Error; err != nil {
				return fmt.Errorf("renumber node %s: %w", k.ID, err)
			}
			if err := tx.AppendJSON(k.ID, protocol.KindNode, protocol.NodeChange{Op: protocol.OpUpdated, Node: t.node(k.ID).Node}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// NodeIn reads node nodeID of sessionID through g (a transaction's handle,
// or a pool); Done and Total are not computed. Not found: not_found.
func NodeIn(g *gorm.DB, sessionID, nodeID string) (Node, error) {
	var rows []nodeRow
	if err := g.Raw(`SELECT `+nodeCols+` FROM agent_node WHERE id = ? AND session_id = ?`, nodeID, sessionID).Scan(&rows).Error; err != nil {
		return Node{}, fmt.Errorf("read node %s: %w", nodeID, err)
	}
	if len(rows) == 0 {
		return Node{}, store.NotFound("node", nodeID)
	}
	return rows[0].node(), nil
}
