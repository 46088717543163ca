package vfs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The security audit (fs_audit: insert-only, the columns of tool_calls):
// every refusal of a node's allowed-paths policy, and every symlink that
// escapes the workspace.

// recordDenial logs a policy violation at WARN and inserts it into fs_audit.
func (v *VFS) recordDenial(ctx context.Context, err error) {
	var d *deniedError
	if !errors.As(err, &d) || d.rec == nil {
		return
	}
	a, e := d.rec, d.err
	d.rec = nil
	v.cfg.Logger.WarnContext(ctx, "vfs access denied", "session_id", a.sid, "node_id", a.nodeID, "op", a.op, "path", a.path, "allowed", a.allowed)
	params, _ := json.Marshal(map[string]string{"path": a.path, "node_id": a.nodeID})
	errJSON, _ := json.Marshal(e.Message)
	// a fork's refusal goes to its session's log, which the user reads
	if _, err := v.db.ExecContext(context.WithoutCancel(ctx), `INSERT INTO fs_audit(session_id, name, parameters, error, started_at, completed_at, duration_ms) VALUES(COALESCE((SELECT session_id FROM fs_fork WHERE ws=?), ?),?,?,?,?,?,0)`,
		a.sid, a.sid, a.op, string(params), string(errJSON), a.at.Unix(), a.at.Unix()); err != nil {
		v.cfg.Logger.ErrorContext(ctx, "vfs audit insert failed", "err", err)
	}
}

// AuditEntry is one security audit record.
type AuditEntry struct {
	ID          int64           `json:"id"`
	Name        string          `json:"name"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Error       string          `json:"error,omitempty"`
	StartedAt   time.Time       `json:"started_at"`
	CompletedAt time.Time       `json:"completed_at"`
	DurationMS  int64           `json:"duration_ms"`
}

// AuditLog returns the session's newest audit records first (limit <= 0: 100).
func (v *VFS) AuditLog(ctx context.Context, sessionID string, limit int) ([]AuditEntry, error) {
	return v.callLog(ctx, "fs_audit", sessionID, "", limit)
}

func (v *VFS) callLog(ctx context.Context, table, sessionID, name string, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT id, name, parameters, result, error, started_at, completed_at, duration_ms FROM ` + table + ` WHERE session_id=?`
	args := []any{sessionID}
	if name != "" {
		q += ` AND name=?`
		args = append(args, name)
	}
	q += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := v.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", table, err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var params, result, errS sql.NullString
		var st, ct int64
		if err := rows.Scan(&e.ID, &e.Name, &params, &result, &errS, &st, &ct, &e.DurationMS); err != nil {
			return nil, fmt.Errorf("read %s: %w", table, err)
		}
		if params.Valid {
			e.Parameters = json.RawMessage(params.String)
		}
		if errS.Valid {
			var s string
			if json.Unmarshal([]byte(errS.String), &s) == nil {
				e.Error = s
			} else {
				e.Error = errS.String
			}
		}
		if result.Valid {
			e.Result = json.RawMessage(result.String)
		}
		e.StartedAt, e.CompletedAt = time.Unix(st, 0), time.Unix(ct, 0)
		out = append(out, e)
	}
	return out, rows.Err()
}
