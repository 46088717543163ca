package sessions

import (
	"context"
	"fmt"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/protocol"
)

// AppendWithCursor appends recs to sessionID's log and sets nodeID's
// log_cursor in one transaction: a relay recovering a container's log stores
// each line once, and its position with it. Each tool or command event that
// ends a call adds its row to the node's audit (audit.Steps) in the same
// transaction. No "node" record is written for the cursor. An unknown node
// is not_found.
func (s *Store) AppendWithCursor(ctx context.Context, sessionID, nodeID, cursor string, recs ...protocol.Record) ([]protocol.Record, error) {
	if len(cursor) > MaxLogCursorLen {
		return nil, orchestrator.FieldErrorf("log_cursor", "log_cursor is longer than %d bytes", MaxLogCursorLen)
	}
	return s.st.AppendWith(ctx, sessionID, recs, func(tx *store.Tx, stored []protocol.Record) error {
		// A tool or command that ended gets its audit row with its record.
		if err := audit.Steps(tx, stored); err != nil {
			return err
		}
		res := tx.DB().Exec(`UPDATE agent_node SET log_cursor = ? WHERE id = ? AND session_id = ?`, cursor, nodeID, sessionID)
		if res.Error != nil {
			return fmt.Errorf("set node %s log cursor: %w", nodeID, res.Error)
		}
		if res.RowsAffected != 1 {
			return store.NotFound("node", nodeID)
		}
		return nil
	})
}
