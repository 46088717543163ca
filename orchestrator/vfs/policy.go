package vfs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// CleanPath validates a session path and returns it in canonical form. It must
// start with "/", contain no NUL, no "//", no "." or ".." segment, have
// segments of at most 255 bytes and be at most 4096 bytes long. One trailing
// slash is dropped ("/src/" is "/src").
func CleanPath(p string) (string, error) {
	if p == "" || p[0] != '/' {
		return "", errorf(syscall.EINVAL, p, "path %q must start with /", trunc(p))
	}
	if len(p) > MaxPathLen {
		return "", errorf(syscall.ENAMETOOLONG, p, "path is longer than %d bytes", MaxPathLen)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errorf(syscall.EINVAL, p, "path %q contains a NUL byte", trunc(p))
	}
	if strings.Contains(p, "//") {
		return "", errorf(syscall.EINVAL, p, "path %q contains a double slash", trunc(p))
	}
	if len(p) > 1 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	if p == "/" {
		return p, nil
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch {
		case seg == "":
			return "", errorf(syscall.EINVAL, p, "path %q has an empty name", trunc(p))
		case seg == "..":
			return "", errorf(syscall.EINVAL, p, "path %q contains '..': path traversal is not allowed", trunc(p))
		case seg == ".":
			return "", errorf(syscall.EINVAL, p, "path %q contains a '.' segment", trunc(p))
		case len(seg) > MaxNameLen:
			return "", errorf(syscall.ENAMETOOLONG, p, "a name in path %q is longer than %d bytes", trunc(p), MaxNameLen)
		}
	}
	return p, nil
}

func trunc(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// Reserved reports whether p's first segment starts with "_" (reserved for
// REST actions such as /_/stat; names like /src/__init__.py are fine).
func Reserved(p string) bool { return strings.HasPrefix(p, "/_") }

func joinPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// allowedPath reports whether p may be used under the node's policy: inside
// an allowed prefix, or (read-only traversal) an ancestor of one.
func (fs *FS) allowedPath(p string, write bool) bool {
	if fs.allowed == nil {
		return true
	}
	for _, a := range fs.allowed {
		if p == a || strings.HasPrefix(p, a+"/") {
			return true
		}
		if !write && (p == "/" || strings.HasPrefix(a, p+"/")) {
			return true
		}
	}
	return false
}

// checkPath enforces the policy for a path operation outside a transaction.
func (fs *FS) checkPath(ctx context.Context, op, p string, write bool) error {
	if fs.allowedPath(p, write) {
		return nil
	}
	err := fs.denial(op, p)
	fs.v.recordDenial(ctx, err)
	return err
}

// checkPathTx is checkPath inside a transaction: the audit record is written
// by VFS.tx after the rollback (the store has one writer connection).
func (fs *FS) checkPathTx(op, p string, write bool) error {
	if fs.allowedPath(p, write) {
		return nil
	}
	return fs.denial(op, p)
}

// checkInodeAccess enforces the policy for an inode operation on ino (or its
// entry name when name is not empty).
func (fs *FS) checkInodeAccess(ctx context.Context, op string, ino int64, name string, write bool) error {
	if fs.allowed == nil {
		return nil
	}
	p, err := fs.pathOf(ctx, fs.v.r, ino)
	if err != nil {
		return err
	}
	if name != "" {
		p = joinPath(p, name)
	}
	return fs.checkPath(ctx, op, p, write)
}

// auditRec is a pending security audit record carried by a denial error.
type auditRec struct {
	sid, nodeID, op, path string
	allowed               []string
	at                    time.Time
}

func (fs *FS) denial(op, p string) *Error {
	e := errorf(syscall.EACCES, p, "%s is outside the allowed paths of node %s", p, fs.nodeID)
	e.audit = &auditRec{sid: fs.sid, nodeID: fs.nodeID, op: op, path: p, allowed: fs.allowed, at: fs.v.cfg.Now()}
	return e
}

// recordDenial logs a policy violation at WARN and inserts it into fs_audit.
func (v *VFS) recordDenial(ctx context.Context, err error) {
	var e *Error
	if !errors.As(err, &e) || e.audit == nil {
		return
	}
	a := e.audit
	e.audit = nil
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
