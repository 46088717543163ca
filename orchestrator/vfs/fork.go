package vfs

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// ForkInfo describes a copy-on-write fork of a workspace (doc.go, "Forks").
type ForkInfo struct {
	ID        string    `json:"id"`         // the fork's workspace: Session(ID) reads and writes it
	Base      string    `json:"base"`       // its frozen fork point
	Origin    string    `json:"origin"`     // the workspace it was forked from; Merge writes there
	SessionID string    `json:"session_id"` // the session it belongs to
	NodeID    string    `json:"node_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// chainLevel is one workspace a fork reads data through: chunks of inodes
// below `below` not stored nearer come from ws.
type chainLevel struct {
	ws    string
	below int64
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func newWorkspaceID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "ws-" + hex.EncodeToString(b[:])
}

// Fork makes a copy-on-write fork of workspace origin (a session's or a
// fork's) for nodeID ("" for none) in one transaction and returns it. It
// copies no rows of files (layers.go): its cost does not depend on the
// number of files nor on the bytes stored, and the fork copies none later
// either: it reads through its fork point (doc.go, "Forks"). A fork point
// of a fork is compacted in the background (compact.go).
func (v *VFS) Fork(ctx context.Context, origin, nodeID string) (ForkInfo, error) {
	ofs := v.Session(origin)
	if _, err := ofs.init(ctx); err != nil {
		return ForkInfo{}, err
	}
	now := v.cfg.Now()
	info := ForkInfo{ID: newWorkspaceID(), Base: newWorkspaceID(), Origin: origin, SessionID: origin, NodeID: nodeID, CreatedAt: now}
	err := v.tx(ctx, func(tx *txn) error {
		var kind, sess sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT kind, session_id FROM fs_fork WHERE ws=?`, origin).Scan(&kind, &sess)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("fork %s: %w", origin, err)
		case kind.String == "base":
			return errorf(syscall.EPERM, "", "workspace %s is a frozen fork point; fork the fork instead", origin)
		default:
			info.SessionID = sess.String
		}
		var next, maxDentry int64
		if err := tx.QueryRowContext(ctx, `SELECT next_ino, (SELECT COALESCE(MAX(id), 0) FROM fs_dentry) FROM fs_meta WHERE session_id=?`, origin).Scan(&next, &maxDentry); err != nil {
			return fmt.Errorf("fork %s: read meta: %w", origin, err)
		}
		ms := now.UnixMilli()
		for _, ws := range []struct{ id, kind, parent string }{{info.Base, "base", origin}, {info.ID, "fork", info.Base}} {
			res, err := tx.ExecContext(ctx, `INSERT INTO agent_session(id, user_id, name, status, created_at, updated_at)
				SELECT ?, user_id, ?, 'draft', ?, ? FROM agent_session WHERE id=?`, ws.id, ws.kind+" of "+origin, ms, ms, info.SessionID)
			if err != nil {
				return fmt.Errorf("fork %s: %w", origin, err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return errorf(syscall.ENOENT, "", "session %s not found", info.SessionID)
			}
			if err := copyMetaRow(ctx, tx, origin, ws.id); err != nil {
				return fmt.Errorf("fork %s: %w", origin, err)
			}
			var origArg, baseArg, nodeArg any
			if ws.kind == "fork" {
				origArg, baseArg = origin, info.Base
				if nodeID != "" {
					nodeArg = nodeID
				}
			}
			// the base is a view of the origin (lazy), the fork reads
			// through it (layered): no row of a file is copied
			if _, err := tx.ExecContext(ctx, `INSERT INTO fs_fork(ws, session_id, kind, parent_ws, base_next_ino, origin_ws, base_ws, node_id, created_at, lazy, layered, max_dentry)
				VALUES(?,?,?,?,?,?,?,?,?,?,?,?)`, ws.id, info.SessionID, ws.kind, ws.parent, next, origArg, baseArg, nodeArg, ms, b2i(ws.kind == "base"), b2i(ws.kind == "fork"), maxDentry); err != nil {
				return fmt.Errorf("fork %s: %w", origin, err)
			}
		}
		// Inode numbers the origin reserved but has not used are below
		// next_ino: drop them, so its new files do not count as inherited.
		tx.onCommit(func() {
			st := v.state(origin)
			v.mu.Lock()
			st.resNext = st.resEnd
			v.mu.Unlock()
		})
		return nil
	})
	if err != nil {
		return ForkInfo{}, err
	}
	// Readers of the new workspaces (its chain, its view, its lazy state)
	// read the read pool without settling: the fork must be committed.
	if err := v.Sync(ctx, false); err != nil {
		return ForkInfo{}, err
	}
	v.scheduleCompact(ctx, info.Base)
	return info, nil
}

// copyMetaRow copies workspace src's fs_meta row (counters, chunk size) to
// dst; the bytes of src's open orphans, which a fork does not get, are left
// out of its usage.
func copyMetaRow(ctx context.Context, tx *txn, src, dst string) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO fs_meta(session_id, next_ino, used_bytes, chunk_size)
		SELECT ?, next_ino, used_bytes - COALESCE((SELECT SUM(i.size) FROM fs_orphan o JOIN fs_inode i ON i.session_id=o.session_id AND i.ino=o.ino
			WHERE o.session_id=m.session_id AND i.mode & 61440 = 32768), 0), chunk_size FROM fs_meta m WHERE session_id=?`, dst, src); err != nil {
		return fmt.Errorf("copy meta: %w", err)
	}
	return nil
}

const forkCols = `ws, session_id, origin_ws, base_ws, COALESCE(node_id, ''), created_at`

func scanFork(s interface{ Scan(...any) error }) (ForkInfo, error) {
	var f ForkInfo
	var ms int64
	if err := s.Scan(&f.ID, &f.SessionID, &f.Origin, &f.Base, &f.NodeID, &ms); err != nil {
		return ForkInfo{}, err
	}
	f.CreatedAt = time.UnixMilli(ms)
	return f, nil
}

// ForkByID returns fork ws; ENOENT when ws is not a fork.
func (v *VFS) ForkByID(ctx context.Context, ws string) (ForkInfo, error) {
	f, err := scanFork(v.r.QueryRowContext(ctx, `SELECT `+forkCols+` FROM fs_fork WHERE ws=? AND kind='fork'`, ws))
	if errors.Is(err, sql.ErrNoRows) {
		return ForkInfo{}, errorf(syscall.ENOENT, "", "workspace %s is not a fork", ws)
	}
	if err != nil {
		return ForkInfo{}, fmt.Errorf("read fork %s: %w", ws, err)
	}
	return f, nil
}

// ForkOfNode returns the fork node nodeID works on; ENOENT when it has none.
func (v *VFS) ForkOfNode(ctx context.Context, nodeID string) (ForkInfo, error) {
	f, err := scanFork(v.r.QueryRowContext(ctx, `SELECT `+forkCols+` FROM fs_fork WHERE node_id=? AND kind='fork'`, nodeID))
	if errors.Is(err, sql.ErrNoRows) {
		return ForkInfo{}, errorf(syscall.ENOENT, "", "node %s has no forked workspace", nodeID)
	}
	if err != nil {
		return ForkInfo{}, fmt.Errorf("read fork of node %s: %w", nodeID, err)
	}
	return f, nil
}

// Forks returns the forks of a session, oldest first.
func (v *VFS) Forks(ctx context.Context, sessionID string) ([]ForkInfo, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT `+forkCols+` FROM fs_fork WHERE session_id=? AND kind='fork' ORDER BY created_at, ws`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list forks: %w", err)
	}
	defer rows.Close()
	var out []ForkInfo
	for rows.Next() {
		f, err := scanFork(rows)
		if err != nil {
			return nil, fmt.Errorf("list forks: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// DeleteFork deletes fork ws, every fork made from it (deepest first) and
// their frozen fork points, in one transaction: what only they stored is
// freed; what the workspaces they came from store stays.
func (v *VFS) DeleteFork(ctx context.Context, ws string) error {
	if _, err := v.ForkByID(ctx, ws); err != nil {
		return err
	}
	var gone []string
	err := v.tx(ctx, func(tx *txn) error {
		gone = gone[:0]
		// forks made from ws, level by level
		levels := [][]string{{ws}}
		for {
			var next []string
			for _, w := range levels[len(levels)-1] {
				rows, err := tx.QueryContext(ctx, `SELECT ws FROM fs_fork WHERE origin_ws=? AND kind='fork'`, w)
				if err != nil {
					return fmt.Errorf("delete fork %s: %w", ws, err)
				}
				for rows.Next() {
					var c string
					if err := rows.Scan(&c); err != nil {
						rows.Close()
						return err
					}
					next = append(next, c)
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					return err
				}
			}
			if len(next) == 0 {
				break
			}
			levels = append(levels, next)
		}
		for i := len(levels) - 1; i >= 0; i-- {
			for _, w := range levels[i] {
				var base string
				if err := tx.QueryRowContext(ctx, `SELECT base_ws FROM fs_fork WHERE ws=?`, w).Scan(&base); err != nil {
					return fmt.Errorf("delete fork %s: %w", w, err)
				}
				for _, id := range []string{w, base} {
					if _, err := tx.ExecContext(ctx, `DELETE FROM agent_session WHERE id=?`, id); err != nil {
						return fmt.Errorf("delete fork %s: %w", w, err)
					}
					gone = append(gone, id)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	v.forget(gone...)
	return nil
}

// forget drops the in-memory state of deleted workspaces.
func (v *VFS) forget(ids ...string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, id := range ids {
		delete(v.sessions, id)
		v.chains.Delete(id)
		v.layers.Delete(id)
		v.counts.Delete(id)
	}
}

// chain returns the workspaces fork fs reads data through, nearest first
// (nil for a workspace that is not a fork). A chain never changes while its
// workspace exists, so it is read once; q need not settle the open batch:
// Fork commits before it returns the new workspace's id (its caller has no
// origin), so no one looks up a chain that is not committed.
func (fs *FS) chain(ctx context.Context, q querier) ([]chainLevel, error) {
	if c, ok := fs.v.chains.Load(fs.sid); ok {
		return c.([]chainLevel), nil
	}
	var out []chainLevel
	ws, below := fs.sid, int64(1<<62)
	for {
		var parent string
		var base int64
		err := q.QueryRowContext(ctx, `SELECT parent_ws, base_next_ino FROM fs_fork WHERE ws=?`, ws).Scan(&parent, &base)
		if errors.Is(err, sql.ErrNoRows) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read fork chain of %s: %w", fs.sid, err)
		}
		below = min(below, base)
		out = append(out, chainLevel{ws: parent, below: below})
		ws = parent
	}
	fs.v.chains.Store(fs.sid, out)
	return out, nil
}

// isFork reports whether fs reads data through a chain; a failed look-up
// counts as "not known yet" and is reported.
func (fs *FS) isFork(ctx context.Context, q querier) (bool, error) {
	c, err := fs.chain(ctx, q)
	return len(c) > 0, err
}

// WorkspaceOfNode returns the workspace node nodeID of session sessionID
// works on: its fork, or the session's.
func (v *VFS) WorkspaceOfNode(ctx context.Context, sessionID, nodeID string) (string, error) {
	f, err := v.ForkOfNode(ctx, nodeID)
	if err == nil {
		return f.ID, nil
	}
	if IsErrno(err, syscall.ENOENT) {
		return sessionID, nil
	}
	return "", err
}

// ForkForNode forks the workspace parentID works on (the session's, or
// the parent's own fork) for its new child childID.
func (v *VFS) ForkForNode(ctx context.Context, sessionID, parentID, childID string) (ForkInfo, error) {
	origin, err := v.WorkspaceOfNode(ctx, sessionID, parentID)
	if err != nil {
		return ForkInfo{}, err
	}
	return v.Fork(ctx, origin, childID)
}
