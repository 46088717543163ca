package vfs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
)

// ToolCall is one record of the insert-only tool_calls audit trail.
type ToolCall = AuditEntry

// NewToolCall is a completed tool call to record. Exactly one of Result and
// Err is set; Params and Result must be JSON.
type NewToolCall struct {
	Name        string
	Params      json.RawMessage
	Result      json.RawMessage
	Err         string
	StartedAt   time.Time
	CompletedAt time.Time
}

// RecordToolCall inserts a completed tool call (agentfs tool_calls rules:
// exactly one of result/error, valid JSON, duration = (completed-started)*1000
// in whole seconds, insert-only).
func (v *VFS) RecordToolCall(ctx context.Context, sessionID string, c NewToolCall) (int64, error) {
	switch {
	case c.Name == "":
		return 0, orchestrator.FieldErrorf("name", "tool call name is required")
	case (len(c.Result) > 0) == (c.Err != ""):
		return 0, orchestrator.FieldErrorf("result", "exactly one of result and error must be set")
	case len(c.Params) > 0 && !json.Valid(c.Params):
		return 0, orchestrator.FieldErrorf("parameters", "parameters must be valid JSON")
	case len(c.Result) > 0 && !json.Valid(c.Result):
		return 0, orchestrator.FieldErrorf("result", "result must be valid JSON")
	case c.CompletedAt.Before(c.StartedAt):
		return 0, orchestrator.FieldErrorf("completed_at", "completed_at is before started_at")
	}
	st, ct := c.StartedAt.Unix(), c.CompletedAt.Unix()
	var params, result, errS any
	if len(c.Params) > 0 {
		params = string(c.Params)
	}
	if len(c.Result) > 0 {
		result = string(c.Result)
	}
	if c.Err != "" {
		b, _ := json.Marshal(c.Err)
		errS = string(b)
	}
	var id int64
	err := v.db.QueryRowContext(ctx, `INSERT INTO tool_calls(session_id, name, parameters, result, error, started_at, completed_at, duration_ms)
		VALUES(?,?,?,?,?,?,?,?) RETURNING id`, sessionID, c.Name, params, result, errS, st, ct, (ct-st)*1000).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("record tool call: %w", err)
	}
	return id, nil
}

// ToolCalls returns the session's tool calls, newest first, optionally only those named name.
func (v *VFS) ToolCalls(ctx context.Context, sessionID, name string, limit int) ([]ToolCall, error) {
	return v.callLog(ctx, "tool_calls", sessionID, name, limit)
}

// KV is one key-value entry.
type KV struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// KVSet stores value (valid JSON) under key in the session.
func (v *VFS) KVSet(ctx context.Context, sessionID, key string, value json.RawMessage) error {
	if key == "" {
		return orchestrator.FieldErrorf("key", "key is required")
	}
	if !json.Valid(value) {
		return orchestrator.FieldErrorf("value", "value for key %q must be valid JSON", key)
	}
	now := v.cfg.Now().Unix()
	_, err := v.db.ExecContext(ctx, `INSERT INTO kv_store(session_id, key, value, created_at, updated_at) VALUES(?,?,?,?,?)
		ON CONFLICT(session_id, key) DO UPDATE SET value=excluded.value, updated_at=excluded.updated_at`, sessionID, key, string(value), now, now)
	if err != nil {
		return fmt.Errorf("set key %q: %w", key, err)
	}
	return nil
}

// KVGet returns the value of key (not_found when missing).
func (v *VFS) KVGet(ctx context.Context, sessionID, key string) (json.RawMessage, error) {
	var s string
	err := v.r.QueryRowContext(ctx, `SELECT value FROM kv_store WHERE session_id=? AND key=?`, sessionID, key).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, orchestrator.Errorf(orchestrator.ENotFound, "key %q not found", key)
	}
	if err != nil {
		return nil, fmt.Errorf("get key %q: %w", key, err)
	}
	return json.RawMessage(s), nil
}

// KVDelete removes key (no error when missing).
func (v *VFS) KVDelete(ctx context.Context, sessionID, key string) error {
	if _, err := v.db.ExecContext(ctx, `DELETE FROM kv_store WHERE session_id=? AND key=?`, sessionID, key); err != nil {
		return fmt.Errorf("delete key %q: %w", key, err)
	}
	return nil
}

// KVList returns the session's keys in order, without values.
func (v *VFS) KVList(ctx context.Context, sessionID string) ([]KV, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT key, created_at, updated_at FROM kv_store WHERE session_id=? ORDER BY key`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var out []KV
	for rows.Next() {
		var e KV
		var c, u int64
		if err := rows.Scan(&e.Key, &c, &u); err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		e.CreatedAt, e.UpdatedAt = time.Unix(c, 0), time.Unix(u, 0)
		out = append(out, e)
	}
	return out, rows.Err()
}
