package vfs

import (
	"context"
	"fmt"
	"strconv"
)

// Compaction bounds the depth of forks of forks (doc.go, "Forks"). A base
// whose origin is itself a layered fork reads through the origin's levels
// too, so every fork of a fork adds two levels to what its reads walk.
// Compacting such a base fills its saved rows with everything its view
// reads (the rows of the levels below, as its view sees them) and marks it
// full: its view then stops at its saved rows. It changes nothing a read
// returns, before, during or after: a saved row is the row the view read
// there anyway, and a reader still walking the old levels finds the saved
// row first. It runs in the background after such a fork (one change, on
// the write connection like any other), and CompactForks runs it at once.

// compactDepth is how many levels a base's view may have before it is
// compacted: its saved rows and its origin's (an origin that is not a fork).
const compactDepth = 2

// scheduleCompact compacts base b in the background when its view is
// deeper than compactDepth.
func (v *VFS) scheduleCompact(ctx context.Context, b string) {
	lv, err := v.baseLevels(ctx, v.rq, b, noBound)
	if err != nil || len(lv) <= compactDepth {
		return
	}
	v.bgMu.Lock()
	defer v.bgMu.Unlock()
	if v.bgClosed {
		return
	}
	v.bg.Add(1)
	go func() {
		defer v.bg.Done()
		if err := v.compactBase(v.bgCtx, b); err != nil && v.bgCtx.Err() == nil {
			v.cfg.Logger.Warn("vfs: compact fork point", "ws", b, "err", err)
		}
	}()
}

// CompactForks compacts, at once, every fork point of a session whose view
// is deeper than compactDepth.
func (v *VFS) CompactForks(ctx context.Context, sessionID string) error {
	rows, err := v.r.QueryContext(ctx, `SELECT ws FROM fs_fork WHERE session_id=? AND kind='base' AND lazy=1`, sessionID)
	if err != nil {
		return fmt.Errorf("compact forks: %w", err)
	}
	var bases []string
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return err
		}
		bases = append(bases, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, b := range bases {
		if err := v.compactBase(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// compactBase fills base b's saved rows with its whole view and marks it
// full, in one change. A no-op for a base whose view is shallow enough, or
// gone.
func (v *VFS) compactBase(ctx context.Context, b string) error {
	err := v.tx(ctx, func(tx *txn) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM fs_fork WHERE ws=? AND kind='base' AND lazy=1`, b).Scan(&n); err != nil || n == 0 {
			return err
		}
		lv, err := v.baseLevels(ctx, tx, b, noBound)
		if err != nil || len(lv) <= compactDepth {
			return err
		}
		for k := 1; k < len(lv); k++ {
			// names of level k that no level above hides (whiteouts are
			// not needed: the view stops at the saved rows)
			q := &sqlb{args: []any{b}}
			cond := "t.ino != 0"
			for j := 0; j < k; j++ {
				a := "u" + strconv.Itoa(j)
				cond += " AND NOT EXISTS (" + dentrySel(q, lv[j], a, "1", a+".parent_ino=t.parent_ino AND "+a+".name=t.name") + ")"
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO fs_fork_dentry(ws, orig_id, name, parent_ino, ino) SELECT ?1, id, name, parent_ino, ino FROM (`+
				dentrySel(q, lv[k], "t", "$id AS id, t.name, t.parent_ino, t.ino", cond)+`) AS v`, q.args...); err != nil {
				return fmt.Errorf("compact %s: names: %w", b, err)
			}
			for _, table := range []struct{ name, cols string }{{"fs_inode", inodeCols}, {"fs_symlink", "ino, target"}} {
				q := &sqlb{args: []any{b}}
				cond := "1=1"
				for j := 0; j < k; j++ {
					cond += " AND NOT EXISTS (" + rowSel(q, lv[j], table.name, "u"+strconv.Itoa(j), "1", "u"+strconv.Itoa(j)+".ino=i.ino") + ")"
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO `+table.name+`(session_id, `+table.cols+`) SELECT ?1, `+table.cols+` FROM (`+
					rowSel(q, lv[k], table.name, "i", "i.*", cond)+`) AS v`, q.args...); err != nil {
					return fmt.Errorf("compact %s: %s: %w", b, table.name, err)
				}
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE fs_fork SET "full"=1, lazy=0 WHERE ws=?`, b)
		return err
	})
	if err != nil {
		return err
	}
	// new reads take the shorter levels; old ones still read the same
	v.layers.Range(func(k, _ any) bool { v.layers.Delete(k); return true })
	return v.Sync(ctx, false)
}
