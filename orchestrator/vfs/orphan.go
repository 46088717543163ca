package vfs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Open files and orphans: an inode whose last name goes while a mount has
// it open stays, listed in fs_orphan, until its last Release.

// removeInodeIfUnlinked deletes ino when no dentry refers to it and no mount has it
// open; an open inode is recorded as an orphan instead.
func (fs *FS) removeInodeIfUnlinked(ctx context.Context, tx *txn, ino int64) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT nlink FROM fs_inode WHERE session_id=? AND ino=?`, fs.sid, ino).Scan(&n); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return fmt.Errorf("count links: %w", err)
	}
	if n > 0 || fs.pinned[ino] {
		return nil
	}
	if fs.v.keepIfOpen(fs.sid, ino) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO fs_orphan(session_id, ino) VALUES(?,?) ON CONFLICT DO NOTHING`, fs.sid, ino); err != nil {
			return fmt.Errorf("record orphan: %w", err)
		}
		return nil
	}
	return fs.deleteInode(ctx, tx, ino)
}

func (fs *FS) deleteInode(ctx context.Context, tx *txn, ino int64) error {
	var mode uint32
	var size int64
	lv, _, err := fs.levels(ctx, tx)
	if err != nil {
		return err
	}
	inherited, err := inheritedIno(ctx, tx, lv, ino)
	if err != nil {
		return fmt.Errorf("delete inode %d: %w", ino, err)
	}
	if inherited {
		// a layered fork's inode from its base: a tombstone hides it
		if err := fs.ownIno(ctx, tx, ino); err != nil {
			return err
		}
		err = tx.QueryRowContext(ctx, `SELECT mode, size FROM fs_inode WHERE session_id=? AND ino=? AND mode != 0`, fs.sid, ino).Scan(&mode, &size)
		if err == nil {
			_, err = tx.ExecContext(ctx, `UPDATE fs_inode SET mode=0, nlink=0, size=0, sha256=NULL WHERE session_id=? AND ino=?`, fs.sid, ino)
		}
	} else {
		err = tx.QueryRowContext(ctx, `DELETE FROM fs_inode WHERE session_id=? AND ino=? RETURNING mode, size`, fs.sid, ino).Scan(&mode, &size)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete inode %d: %w", ino, err)
	}
	for _, q := range []string{
		`DELETE FROM fs_data WHERE session_id=? AND ino=?`,
		`DELETE FROM fs_symlink WHERE session_id=? AND ino=?`,
		`DELETE FROM fs_orphan WHERE session_id=? AND ino=?`,
	} {
		if _, err := tx.ExecContext(ctx, q, fs.sid, ino); err != nil {
			return fmt.Errorf("delete inode %d: %w", ino, err)
		}
	}
	if mode&ModeType == ModeRegular {
		return fs.addUsage(ctx, tx, -size)
	}
	return nil
}

// keepIfOpen reports whether ino is open and, if so, notes it as an orphan
// candidate in the same critical section, so that its last Release (which
// takes the same lock) cannot miss it.
func (v *VFS) keepIfOpen(sid string, ino int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := v.sessions[sid]
	if st == nil || st.open[ino] <= 0 {
		return false
	}
	st.orphan[ino] = true
	return true
}

// Open records that the mount holds ino open: unlinking its last name keeps
// the inode (an orphan) until the matching Release.
func (fs *FS) Open(ino int64) {
	st := fs.v.state(fs.sid)
	fs.v.mu.Lock()
	st.open[ino]++
	fs.v.mu.Unlock()
}

// Release ends one Open of ino; the last Release of an orphan deletes it.
func (fs *FS) Release(ctx context.Context, ino int64) error {
	st := fs.v.state(fs.sid)
	fs.v.mu.Lock()
	st.open[ino]--
	last := st.open[ino] <= 0
	orphan := false
	if last {
		delete(st.open, ino)
		orphan = st.orphan[ino]
		delete(st.orphan, ino)
	}
	fs.v.mu.Unlock()
	if !orphan {
		return nil // the common close: no transaction
	}
	return fs.v.tx(ctx, func(tx *txn) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM fs_orphan WHERE session_id=? AND ino=?`, fs.sid, ino).Scan(&n); err != nil {
			return fmt.Errorf("look up orphan: %w", err)
		}
		if n == 0 {
			return nil
		}
		return fs.removeInodeIfUnlinked(ctx, tx, ino)
	})
}

// PurgeOrphans deletes every orphan inode left by a previous run (all
// sessions). Call it at start, before any mount opens files.
func (v *VFS) PurgeOrphans(ctx context.Context) (int, error) {
	rows, err := v.db.QueryContext(ctx, `SELECT session_id, ino FROM fs_orphan`)
	if err != nil {
		return 0, fmt.Errorf("list orphans: %w", err)
	}
	type orphan struct {
		sid string
		ino int64
	}
	var list []orphan
	for rows.Next() {
		var o orphan
		if err := rows.Scan(&o.sid, &o.ino); err != nil {
			rows.Close()
			return 0, fmt.Errorf("list orphans: %w", err)
		}
		list = append(list, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("list orphans: %w", err)
	}
	for _, o := range list {
		fs := v.Session(o.sid)
		if err := v.tx(ctx, func(tx *txn) error {
			if _, err := tx.ExecContext(ctx, `DELETE FROM fs_orphan WHERE session_id=? AND ino=?`, o.sid, o.ino); err != nil {
				return err
			}
			return fs.removeInodeIfUnlinked(ctx, tx, o.ino)
		}); err != nil {
			return 0, fmt.Errorf("purge orphan %d of session %s: %w", o.ino, o.sid, err)
		}
	}
	return len(list), nil
}
