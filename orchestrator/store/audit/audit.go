// Package audit keeps each node's audit (agentfs tool_calls): the tools and
// commands its agent reported, each from its start to its end, and the
// calls it made to the agent API.
package audit

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/protocol"
)

// Store keeps the audit rows in the store's database.
type Store struct{ st *store.Store }

// New returns the audit kept in st.
func New(st *store.Store) *Store { return &Store{st: st} }

// Sources of an audit row (ToolCall.Source).
const (
	SourceTool    = "tool"    // a tool event's start and its done or error
	SourceCommand = "command" // a command event's start and its done or error
	SourceAPI     = "api"     // a call of the agent API
	SourceUser    = "user"    // a person's file operation through the user API
)

// Audit bounds.
const (
	auditTail     = 2 << 10 // bytes of output, stdout or stderr kept in a row (the end of it)
	auditLookback = 256     // earlier records of the node searched for a call's start
	DefaultLimit  = 100
	MaxLimit      = 1000
)

// ToolCall is one row of a node's audit (agentfs tool_calls): a tool or
// command the agent reported, or a call it made to the agent API.
type ToolCall struct {
	ID     int64  `json:"id"`
	NodeID string `json:"node_id"`
	// Source is tool, command, api or user.
	Source string `json:"source" jsonschema:"enum=tool,enum=command,enum=api,enum=user"`
	// Actor is the person who made a user-API call (source user); empty
	// for the node's agent.
	Actor string `json:"actor,omitempty" jsonschema_description:"the person who made the call (source user); absent: the node's agent"`
	Name  string `json:"name"`
	// Parameters: {"path"} of a tool, {"cmd"} of a command, the request of
	// an API call.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// Result: {"output"} of a tool, {"exit","stdout"} of a command (the
	// ends of long outputs), the answer's summary of an API call; absent
	// when Error is set.
	Result      json.RawMessage `json:"result,omitempty"`
	Error       string          `json:"error,omitempty"`
	StartedAt   time.Time       `json:"started_at"`
	CompletedAt time.Time       `json:"completed_at"`
	DurationMS  int64           `json:"duration_ms"`
	// Seq is the log record that ended a tool or command (0 for API calls).
	Seq int64 `json:"seq,omitempty"`
}

// NewToolCall is an audit row to insert.
type NewToolCall struct {
	SessionID, NodeID, Source, Name string
	Actor                           string          // the person (source user)
	Parameters, Result              json.RawMessage // JSON, or nil
	Error                           string          // set: Result is not stored
	StartedAt, CompletedAt          time.Time
	Seq                             int64
}

const insertToolCallSQL = `INSERT INTO tool_calls (session_id, node_id, source, name, parameters, result, error,
	started_at, completed_at, duration_ms, started_ms, completed_ms, seq, actor) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`

func toolCallArgs(c NewToolCall) []any {
	if c.CompletedAt.Before(c.StartedAt) {
		c.CompletedAt = c.StartedAt
	}
	var params, result, errS, seq any
	if len(c.Parameters) > 0 && json.Valid(c.Parameters) {
		params = string(c.Parameters)
	}
	if c.Error != "" {
		b, _ := json.Marshal(c.Error)
		errS = string(b)
	} else if len(c.Result) > 0 && json.Valid(c.Result) {
		result = string(c.Result)
	} else {
		result = "null"
	}
	if c.Seq > 0 {
		seq = c.Seq
	}
	st, ct := c.StartedAt.Unix(), c.CompletedAt.Unix()
	return []any{c.SessionID, c.NodeID, c.Source, c.Name, params, result, errS, st, ct, (ct - st) * 1000,
		store.Millis(c.StartedAt), store.Millis(c.CompletedAt), seq, c.Actor}
}

// RecordToolCall inserts one audit row (an agent-API call).
func (s *Store) RecordToolCall(ctx context.Context, c NewToolCall) error {
	if c.SessionID == "" || c.Name == "" {
		return orchestrator.FieldErrorf("name", "a tool call needs a session and a name")
	}
	if err := s.st.DB().WithContext(ctx).Exec(insertToolCallSQL, toolCallArgs(c)...).Error; err != nil {
		return fmt.Errorf("record tool call: %w", err)
	}
	return nil
}

// ToolCalls returns a page of nodeID's audit, newest first: the rows with
// an id below before (0: from the newest).
func (s *Store) ToolCalls(ctx context.Context, sessionID, nodeID string, before int64, limit int) ([]ToolCall, error) {
	return s.toolCalls(ctx, sessionID, &nodeID, before, limit)
}

// SessionToolCalls is ToolCalls of every node of the session and of the
// people's calls in its shared workspace (node ""), newest first.
func (s *Store) SessionToolCalls(ctx context.Context, sessionID string, before int64, limit int) ([]ToolCall, error) {
	return s.toolCalls(ctx, sessionID, nil, before, limit)
}

func (s *Store) toolCalls(ctx context.Context, sessionID string, nodeID *string, before int64, limit int) ([]ToolCall, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	q := `SELECT id, node_id, source, actor, name, parameters, result, error, started_at, completed_at, started_ms, completed_ms, seq
		FROM tool_calls WHERE session_id = ?`
	args := []any{sessionID}
	if nodeID != nil {
		q += ` AND node_id = ?`
		args = append(args, *nodeID)
	}
	if before > 0 {
		q += ` AND id < ?`
		args = append(args, before)
	}
	q += ` ORDER BY id DESC LIMIT ?`
	rows, err := s.st.ReadSQL().QueryContext(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("read audit: %w", err)
	}
	defer rows.Close()
	out := []ToolCall{}
	for rows.Next() {
		var c ToolCall
		var params, result, errS sql.NullString
		var st, ct int64
		var stMS, ctMS, seq sql.NullInt64
		if err := rows.Scan(&c.ID, &c.NodeID, &c.Source, &c.Actor, &c.Name, &params, &result, &errS, &st, &ct, &stMS, &ctMS, &seq); err != nil {
			return nil, fmt.Errorf("read audit: %w", err)
		}
		if params.Valid {
			c.Parameters = json.RawMessage(params.String)
		}
		if result.Valid && result.String != "null" {
			c.Result = json.RawMessage(result.String)
		}
		if errS.Valid && json.Unmarshal([]byte(errS.String), &c.Error) != nil {
			c.Error = errS.String
		}
		c.StartedAt, c.CompletedAt = time.Unix(st, 0).UTC(), time.Unix(ct, 0).UTC()
		if stMS.Valid && ctMS.Valid {
			c.StartedAt, c.CompletedAt = store.FromMillis(stMS.Int64), store.FromMillis(ctMS.Int64)
		}
		c.DurationMS = c.CompletedAt.Sub(c.StartedAt).Milliseconds()
		c.Seq = seq.Int64
		out = append(out, c)
	}
	return out, rows.Err()
}

// auditStep is the part of a tool or command event the audit reads.
type auditStep struct {
	Type   string   `json:"type"`
	Status string   `json:"status"`
	Name   string   `json:"name"`
	Path   *string  `json:"path"`
	Output *string  `json:"output"`
	Cmd    string   `json:"cmd"`
	Exit   *float64 `json:"exit"`
	Stdout *string  `json:"stdout"`
	Stderr *string  `json:"stderr"`
}

func (e auditStep) key() string { return e.Type + "\x00" + e.Name + "\x00" + e.Cmd }

var (
	toolPrefix    = []byte(`{"type":"tool"`)
	commandPrefix = []byte(`{"type":"command"`)
)

// auditStepOf decodes a tool or command event record (ok false for any
// other record). The relay stores events re-encoded from protocol's
// structs, whose "type" comes first: a prefix test skips every other
// record without decoding it.
func auditStepOf(r protocol.Record) (auditStep, bool) {
	if r.Kind != protocol.KindEvent || r.NodeID == "" || !(bytes.HasPrefix(r.Data, toolPrefix) || bytes.HasPrefix(r.Data, commandPrefix)) {
		return auditStep{}, false
	}
	var e auditStep
	if json.Unmarshal(r.Data, &e) != nil || (e.Type != protocol.TypeTool && e.Type != protocol.TypeCommand) {
		return auditStep{}, false
	}
	return e, true
}

// Steps adds an audit row, in the transaction, for every tool or command
// event of recs (just appended to tx's session log) that ends a call: its
// start is the latest earlier start of the same node, tool name (or command
// line) not ended since; without one the call starts when it ends.
func Steps(tx *store.Tx, recs []protocol.Record) error {
	for i, r := range recs {
		e, ok := auditStepOf(r)
		if !ok || (e.Status != protocol.StepDone && e.Status != protocol.StepError) {
			continue
		}
		started, start, err := auditStart(tx, recs[:i], r, e)
		if err != nil {
			return err
		}
		c := NewToolCall{SessionID: tx.SessionID(), NodeID: r.NodeID, Name: e.Name, StartedAt: started, CompletedAt: r.At, Seq: r.Seq}
		if e.Type == protocol.TypeTool {
			c.Source = SourceTool
			path := e.Path
			if path == nil && start != nil {
				path = start.Path
			}
			if path != nil {
				c.Parameters, _ = json.Marshal(map[string]string{"path": *path})
			}
			out := ""
			if e.Output != nil {
				out = tail(*e.Output)
			}
			if e.Status == protocol.StepError {
				c.Error = out
				if c.Error == "" {
					c.Error = "error"
				}
			} else {
				c.Result, _ = json.Marshal(map[string]string{"output": out})
			}
		} else {
			c.Source, c.Name = SourceCommand, "command"
			c.Parameters, _ = json.Marshal(map[string]string{"cmd": e.Cmd})
			res := map[string]any{}
			if e.Exit != nil {
				res["exit"] = *e.Exit
			}
			if e.Stdout != nil {
				res["stdout"] = tail(*e.Stdout)
			}
			if e.Status == protocol.StepError {
				c.Error = "failed"
				if e.Stderr != nil && *e.Stderr != "" {
					c.Error = tail(*e.Stderr)
				} else if e.Exit != nil {
					c.Error = fmt.Sprintf("exit %v", *e.Exit)
				}
			} else {
				if e.Stderr != nil {
					res["stderr"] = tail(*e.Stderr)
				}
				c.Result, _ = json.Marshal(res)
			}
		}
		if err := tx.DB().Exec(insertToolCallSQL, toolCallArgs(c)...).Error; err != nil {
			return fmt.Errorf("audit %s: %w", c.Name, err)
		}
	}
	return nil
}

// auditStart finds the start of the call that end ends: first among the
// records appended before it in this batch, then in the node's earlier
// records. It returns the start's time (end's own when none is found).
func auditStart(tx *store.Tx, batch []protocol.Record, end protocol.Record, e auditStep) (time.Time, *auditStep, error) {
	key, skip := e.key(), 0
	// match reports whether r is the start sought, counting the calls of
	// the same key that ended in between.
	match := func(r protocol.Record) (*auditStep, bool) {
		s, ok := auditStepOf(r)
		if !ok || r.NodeID != end.NodeID || s.key() != key {
			return nil, false
		}
		if s.Status != protocol.StepStart {
			skip++
			return nil, false
		}
		if skip > 0 {
			skip--
			return nil, false
		}
		return &s, true
	}
	for j := len(batch) - 1; j >= 0; j-- {
		if s, ok := match(batch[j]); ok {
			return batch[j].At, s, nil
		}
	}
	first := end.Seq
	if len(batch) > 0 {
		first = batch[0].Seq
	}
	rows, err := tx.DB().Statement.ConnPool.QueryContext(tx.Context(), `SELECT seq, kind, payload, created_at FROM session_log
		WHERE session_id = ? AND node_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?`, tx.SessionID(), end.NodeID, first, auditLookback)
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("audit: find the start of %s: %w", e.Type, err)
	}
	defer rows.Close()
	for rows.Next() {
		r := protocol.Record{NodeID: end.NodeID}
		var at int64
		var payload []byte
		if err := rows.Scan(&r.Seq, &r.Kind, &payload, &at); err != nil {
			return time.Time{}, nil, fmt.Errorf("audit: find the start of %s: %w", e.Type, err)
		}
		r.Data, r.At = payload, store.FromMillis(at)
		if s, ok := match(r); ok {
			return r.At, s, nil
		}
	}
	if err := rows.Err(); err != nil {
		return time.Time{}, nil, fmt.Errorf("audit: find the start of %s: %w", e.Type, err)
	}
	return end.At, nil, nil
}

// tail keeps the end of s, at most auditTail bytes.
func tail(s string) string {
	if len(s) <= auditTail {
		return s
	}
	i := len(s) - auditTail
	for i < len(s) && s[i]&0xC0 == 0x80 {
		i++
	}
	return "…" + s[i:]
}
