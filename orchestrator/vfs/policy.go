package vfs

import (
	"context"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
)

// A node's allowed-paths policy (paths.Allowed) is enforced here, on both
// APIs: a refusal is EACCES, logged at WARN and recorded in fs_audit
// (audit.go) once the change it refused has rolled back.

// allowedPath reports whether p may be used under the node's policy: inside
// an allowed prefix, or (read-only traversal) an ancestor of one.
func (fs *FS) allowedPath(p string, write bool) bool { return paths.Allowed(fs.allowed, p, write) }

// Visible reports whether p (a clean path) can be seen through fs: it is
// inside an allowed path or leads to one, as in a listing of its parent.
// Without a policy everything is visible.
func (fs *FS) Visible(p string) bool { return fs.allowedPath(p, false) }

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
		p = paths.Join(p, name)
	}
	return fs.checkPath(ctx, op, p, write)
}

// denial is the refusal of op on p, carrying its audit record.
func (fs *FS) denial(op, p string) error {
	e := errorf(syscall.EACCES, p, "%s is outside the allowed paths of node %s", p, fs.nodeID)
	return fs.audited(e, op, p)
}

// audited wraps e, a refusal of op on p, with its audit record, which
// recordDenial writes.
func (fs *FS) audited(e *Error, op, p string) error {
	return &deniedError{err: e, rec: &auditRec{sid: fs.sid, nodeID: fs.nodeID, op: op, path: p, allowed: fs.allowed, at: fs.v.cfg.Now()}}
}

// deniedError is a refusal (an *Error) whose audit record is still to be
// written.
type deniedError struct {
	err *Error
	rec *auditRec // nil once recorded
}

func (d *deniedError) Error() string { return d.err.Error() }

// Unwrap exposes the *Error (and through it the errno and the code).
func (d *deniedError) Unwrap() error { return d.err }

// auditRec is a pending security audit record carried by a denial error.
type auditRec struct {
	sid, nodeID, op, path string
	allowed               []string
	at                    time.Time
}
