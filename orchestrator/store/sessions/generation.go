package sessions

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/protocol"
)

// Continuation is what ContinueNode returns: the node in its new
// generation and the handoff summary it starts from.
type Continuation struct {
	Node    Node
	Summary string
	// New is false when the node's last handoff was continued already (a
	// repeated call, e.g. after a restart): nothing was changed.
	New bool
}

// ContinueNode begins the next generation of a node whose agent handed off:
// in one transaction it moves the node's generation on (an "updated"
// record) and appends the system record of type continuation (generation,
// summary) that opens the new generation in the chat. It is idempotent: a
// handoff already followed by a continuation record is not continued again.
// A node without a handoff event is a conflict.
func (s *Store) ContinueNode(ctx context.Context, sessionID, nodeID string) (Continuation, error) {
	var out Continuation
	_, err := s.st.WithLog(ctx, sessionID, func(tx *store.Tx) error {
		g := tx.DB()
		var hand []struct {
			Seq     int64
			Payload string
		}
		if err := g.Raw(`SELECT seq, payload FROM session_log WHERE session_id = ? AND node_id = ? AND kind = ?
			AND `+s.st.JSONText("payload", "type")+` = ? ORDER BY seq DESC LIMIT 1`,
			sessionID, nodeID, protocol.KindEvent, protocol.TypeHandoff).Scan(&hand).Error; err != nil {
			return fmt.Errorf("read the handoff of node %s: %w", nodeID, err)
		}
		if len(hand) == 0 {
			return orchestrator.Errorf(orchestrator.EConflict, "node %s has not handed off", nodeID)
		}
		var ev protocol.HandoffEvent
		if err := json.Unmarshal([]byte(hand[0].Payload), &ev); err != nil {
			return fmt.Errorf("decode the handoff of node %s: %w", nodeID, err)
		}
		out.Summary = ev.Summary
		var cont int64
		if err := g.Raw(`SELECT COALESCE(MAX(seq), 0) FROM session_log WHERE session_id = ? AND node_id = ? AND kind = ?
			AND `+s.st.JSONText("payload", "type")+` = ?`, sessionID, nodeID, protocol.KindSystem, protocol.SystemContinuation).
			Scan(&cont).Error; err != nil {
			return fmt.Errorf("read the continuations of node %s: %w", nodeID, err)
		}
		t, err := loadTree(g, sessionID)
		if err != nil {
			return err
		}
		r := t.byID[nodeID]
		if r == nil {
			return store.NotFound("node", nodeID)
		}
		if cont > hand[0].Seq {
			out.Node = t.node(nodeID)
			return nil
		}
		r.Generation++
		r.UpdatedAt = store.Millis(tx.Now())
		if err := g.Exec(`UPDATE agent_node SET generation = ?, updated_at = ? WHERE id = ?`, r.Generation, r.UpdatedAt, nodeID).Error; err != nil {
			return fmt.Errorf("update node %s: %w", nodeID, err)
		}
		out.Node, out.New = t.node(nodeID), true
		if err := tx.AppendJSON(nodeID, protocol.KindNode, protocol.NodeChange{Op: protocol.OpUpdated, Node: out.Node.Node}); err != nil {
			return err
		}
		return tx.AppendJSON(nodeID, protocol.KindSystem, protocol.SystemData{
			Type: protocol.SystemContinuation, Text: fmt.Sprintf("continuation: generation %d starts from the handoff summary", r.Generation),
			Generation: r.Generation, Summary: ev.Summary,
		})
	})
	if err != nil {
		return Continuation{}, err
	}
	return out, nil
}
