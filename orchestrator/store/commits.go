package store

import (
	"context"
	"fmt"
)

// CommitRecord is a commit event of a session's log: which record reported
// the commit and, in Ref, the tool or command record during which it was
// made (0: none known).
type CommitRecord struct {
	Seq    int64
	NodeID string
	Hash   string
	Ref    int64
}

// CommitRecords returns the commit events of sessionID's log (of nodeID
// only, when it is not ""), oldest first.
func (s *Store) CommitRecords(ctx context.Context, sessionID, nodeID string) ([]CommitRecord, error) {
	q := `SELECT seq, node_id, COALESCE(` + s.JSONText("payload", "hash") + `, ''), COALESCE(ref, 0) FROM session_log
		WHERE session_id = ? AND kind = 'event' AND ` + s.JSONText("payload", "type") + ` = 'commit'`
	args := []any{sessionID}
	if nodeID != "" {
		q += ` AND node_id = ?`
		args = append(args, nodeID)
	}
	rows, err := s.rsql.QueryContext(ctx, q+` ORDER BY seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("read commits of session %s: %w", sessionID, err)
	}
	defer rows.Close()
	var out []CommitRecord
	for rows.Next() {
		var c CommitRecord
		if err := rows.Scan(&c.Seq, &c.NodeID, &c.Hash, &c.Ref); err != nil {
			return nil, fmt.Errorf("read commits of session %s: %w", sessionID, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
