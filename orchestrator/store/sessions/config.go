package sessions

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/protocol"
)

// Approval policies of a node, per kind, in its config:
// {"approvals": {"bash": "ask"}}.
const (
	PolicyAsk   = "ask"   // a request waits for a person (the default)
	PolicyAllow = "allow" // a request is approved at once
	PolicyDeny  = "deny"  // a request is denied at once
)

// ApprovalPolicies reads the approvals policy of a node's config: kind →
// ask, allow or deny (absent kinds: ask).
func ApprovalPolicies(config json.RawMessage) (map[string]string, error) {
	var c struct {
		Approvals map[string]string `json:"approvals"`
	}
	if len(config) == 0 {
		return map[string]string{}, nil
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, orchestrator.FieldErrorf("config", "config.approvals must map a kind to \"ask\", \"allow\" or \"deny\", e.g. {\"approvals\": {\"bash\": \"ask\"}}")
	}
	for k, v := range c.Approvals {
		switch v {
		case PolicyAsk, PolicyAllow, PolicyDeny:
		default:
			return nil, orchestrator.FieldErrorf("config", "config.approvals.%s is %q: want \"ask\", \"allow\" or \"deny\"", k, v)
		}
	}
	if c.Approvals == nil {
		c.Approvals = map[string]string{}
	}
	return c.Approvals, nil
}

// validConfig checks a node's config (a JSON object: its approvals policy
// and allowed paths) and returns it compacted.
func validConfig(c json.RawMessage) (json.RawMessage, error) {
	c = bytes.TrimSpace(c)
	if len(c) > MaxConfigBytes {
		return nil, orchestrator.FieldErrorf("config", "config is larger than %d bytes", MaxConfigBytes)
	}
	if len(c) == 0 || c[0] != '{' || !json.Valid(c) {
		return nil, orchestrator.FieldErrorf("config", "config must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, c); err != nil {
		return nil, orchestrator.FieldErrorf("config", "config must be a JSON object")
	}
	if _, err := ApprovalPolicies(buf.Bytes()); err != nil {
		return nil, err
	}
	if err := validAllowedPaths(buf.Bytes()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// AllowKind sets approvals[kind] = "allow" in the config of node nodeID,
// in tx on its session's log, and appends the node's "updated" record: an
// approval answered "always allow".
func AllowKind(tx *store.Tx, nodeID, kind string) error {
	sessionID := tx.SessionID()
	g := tx.DB()
	t, err := loadTree(g, sessionID)
	if err != nil {
		return err
	}
	r := t.byID[nodeID]
	if r == nil {
		return store.NotFound("node", nodeID)
	}
	var cfg map[string]any
	if json.Unmarshal([]byte(r.Config), &cfg) != nil || cfg == nil {
		cfg = map[string]any{}
	}
	pol, _ := cfg["approvals"].(map[string]any)
	if pol == nil {
		pol = map[string]any{}
	}
	pol[kind] = PolicyAllow
	cfg["approvals"] = pol
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	c, err := validConfig(b)
	if err != nil {
		return err
	}
	r.Config, r.UpdatedAt = string(c), store.Millis(tx.Now())
	if err := g.Exec(`UPDATE agent_node SET config = ?, updated_at = ? WHERE id = ?`, r.Config, r.UpdatedAt, nodeID).Error; err != nil {
		return fmt.Errorf("update node %s config: %w", nodeID, err)
	}
	return tx.AppendJSON(nodeID, protocol.KindNode, protocol.NodeChange{Op: protocol.OpUpdated, Node: t.node(nodeID).Node})
}
