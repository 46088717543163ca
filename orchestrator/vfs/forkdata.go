package vfs

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"syscall"
)

// Reading a fork's data (doc.go, "Forks"): a chunk is the fork's own row if
// it has one, else the nearest row up the chain while the inode is below that
// level's bound. Rows may be longer than the file: callers clip to the size.

// readChunksChain is readChunks for a fork with chain ch.
func (fs *FS) readChunksChain(ctx context.Context, q querier, ch []chainLevel, ino int64, cs int, p []byte, off int64) error {
	c64 := int64(cs)
	first := off / c64 * c64
	end := off + int64(len(p))
	want := int((end - first + c64 - 1) / c64)
	clear(p)
	filled := make(map[int64]bool, want)
	level := func(ws string) error {
		rows, err := q.QueryContext(ctx, `SELECT "offset", data FROM fs_data WHERE session_id=? AND ino=? AND "offset">=? AND "offset"<? ORDER BY "offset"`, ws, ino, first, end)
		if err != nil {
			return fmt.Errorf("read data of inode %d: %w", ino, err)
		}
		defer rows.Close()
		for rows.Next() {
			var coff int64
			var data []byte
			if err := rows.Scan(&coff, &data); err != nil {
				return fmt.Errorf("read data of inode %d: %w", ino, err)
			}
			if filled[coff] {
				continue
			}
			filled[coff] = true
			lo, hi := max(coff, off), min(coff+int64(len(data)), end)
			if lo < hi {
				copy(p[lo-off:hi-off], data[lo-coff:hi-coff])
			}
		}
		return rows.Err()
	}
	if err := level(fs.sid); err != nil {
		return err
	}
	for _, l := range ch {
		if len(filled) >= want || ino >= l.below {
			break
		}
		if err := level(l.ws); err != nil {
			return err
		}
	}
	return nil
}

// readAtFork is ReadAt for a fork: the inode and its chunks in one read
// transaction, after settling for the inode only (like ReadAt): a committed
// snapshot shows every workspace of the chain as of one moment, so what it
// reads through the chain is the fork's view then.
func (fs *FS) readAtFork(ctx context.Context, cs int, ino int64, p []byte, off int64) (int, error) {
	fs.settleIno(ctx, ino)
	tx, err := fs.v.rq.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, fmt.Errorf("read inode %d: %w", ino, err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	a, err := fs.getAttr(ctx, tx, ino)
	if err != nil {
		return 0, err
	}
	mode, size := a.Mode, a.Size
	if mode&ModeType == ModeDir {
		return 0, errorf(syscall.EISDIR, "", "inode %d is a directory", ino)
	}
	if off >= size {
		return 0, nil
	}
	n := int(min(int64(len(p)), size-off))
	if err := fs.readChunks(ctx, tx, ino, cs, p[:n], off); err != nil {
		return 0, err
	}
	return n, nil
}

// readAllIn reads the whole content of regular file ino (size bytes).
func (fs *FS) readAllIn(ctx context.Context, q querier, ino, size int64) ([]byte, error) {
	cs, err := fs.init(ctx)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	if err := fs.readChunks(ctx, q, ino, cs, buf, 0); err != nil {
		return nil, err
	}
	return buf, nil
}

// computeHashFork is computeHash for a fork.
func (fs *FS) computeHashFork(ctx context.Context, q querier, ino int64) (string, error) {
	cs, err := fs.init(ctx)
	if err != nil {
		return "", err
	}
	a, err := fs.getAttr(ctx, q, ino) // through the levels of a layered fork or a base's view
	if err != nil {
		return "", fmt.Errorf("hash inode %d: %w", ino, err)
	}
	size := a.Size
	h := sha256.New()
	buf := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size; {
		n := min(int64(len(buf)), size-off)
		if err := fs.readChunks(ctx, q, ino, cs, buf[:n], off); err != nil {
			return "", err
		}
		h.Write(buf[:n])
		off += n
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyDataFork copies the content of file src to the new, empty file dst
// (same workspace, a fork): dst gets rows of its own.
func (fs *FS) copyDataFork(ctx context.Context, tx *txn, src, dst, size int64) error {
	cs, err := fs.init(ctx)
	if err != nil {
		return err
	}
	buf, err := fs.readAllIn(ctx, tx, src, size)
	if err != nil {
		return err
	}
	_, err = fs.writeChunks(ctx, tx, dst, cs, 0, buf, 0)
	return err
}

// exportForkData writes the data of every regular file of fork fs into an
// exported agentfs file: exact chunks of the file's chunk size.
func (fs *FS) exportForkData(ctx context.Context, src *sql.Tx, dst *sql.Tx, files []regularFile) error {
	cs, err := fs.init(ctx)
	if err != nil {
		return err
	}
	if files != nil {
		return fs.writeForkData(ctx, src, dst, cs, files)
	}
	files, err = regularFiles(ctx, src, `SELECT ino, size FROM fs_inode WHERE session_id=? AND mode & 61440 = 32768
		AND ino NOT IN (SELECT ino FROM fs_orphan WHERE session_id=?) ORDER BY ino`, fs.sid, fs.sid)
	if err != nil {
		return err
	}
	return fs.writeForkData(ctx, src, dst, cs, files)
}

// writeForkData writes the chunks of files, read through fs's chain, into
// an exported agentfs file.
func (fs *FS) writeForkData(ctx context.Context, src *sql.Tx, dst *sql.Tx, cs int, files []regularFile) error {
	stmt, err := dst.PrepareContext(ctx, `INSERT INTO fs_data(ino, "offset", size, data) VALUES(?,?,?,?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	buf := make([]byte, cs)
	for _, f := range files {
		for off := int64(0); off < f.size; off += int64(cs) {
			n := min(int64(cs), f.size-off)
			if err := fs.readChunks(ctx, src, f.ino, cs, buf[:n], off); err != nil {
				return err
			}
			if _, err := stmt.ExecContext(ctx, f.ino, off, n, buf[:n]); err != nil {
				return err
			}
		}
	}
	return nil
}

// regularFile is a regular file's inode and size.
type regularFile struct{ ino, size int64 }

// regularFiles reads the (ino, size) rows query selects.
func regularFiles(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]regularFile, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var files []regularFile
	for rows.Next() {
		var f regularFile
		if err := rows.Scan(&f.ino, &f.size); err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, rows.Err()
}

// checkForkData is Check's data rule for a fork: every chunk of every regular
// file is found, through the chain, at least as long as the file needs.
func (v *VFS) checkForkData(ctx context.Context, sid string, ch []chainLevel, files []regularFile) error {
	fs := v.Session(sid)
	cs, err := fs.init(ctx)
	if err != nil {
		return err
	}
	tx, err := v.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	if files == nil {
		if files, err = regularFiles(ctx, tx, `SELECT ino, size FROM fs_inode WHERE session_id=? AND mode & 61440 = 32768`, sid); err != nil {
			return err
		}
	}
	var errs []error
	for _, f := range files {
		for off := int64(0); off < f.size; off += int64(cs) {
			need := min(int64(cs), f.size-off)
			var got int64 = -1
			levels := append([]chainLevel{{ws: sid, below: 1 << 62}}, ch...)
			for _, l := range levels {
				if f.ino >= l.below {
					break
				}
				err := tx.QueryRowContext(ctx, `SELECT size FROM fs_data WHERE session_id=? AND ino=? AND "offset"=?`, l.ws, f.ino, off).Scan(&got)
				if err == nil {
					break
				}
				if !errors.Is(err, sql.ErrNoRows) {
					return err
				}
			}
			if got < need {
				errs = append(errs, fmt.Errorf("fork data: inode %d chunk at %d has %d bytes, needs %d", f.ino, off, got, need))
			}
		}
	}
	return errors.Join(errs...)
}

// copyUpBeforeInsert keeps the forks of fork fs reading what they read: a
// chunk fs is about to store for an inode it inherited, where it has no row
// yet, shadows the row its forks read through it, which the fs_data triggers
// (they see updates and deletes) cannot copy. It copies that row into each
// direct fork that has no row of its own, like the triggers do. A workspace
// that is not a fork returns at once.
func (fs *FS) copyUpBeforeInsert(ctx context.Context, tx *txn, ino, coff int64) error {
	ch, err := fs.chain(ctx, tx)
	if err != nil || len(ch) == 0 || ino >= ch[0].below {
		return err
	}
	var forks int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM fs_fork WHERE parent_ws=?`, fs.sid).Scan(&forks); err != nil {
		return fmt.Errorf("copy up inode %d at %d: %w", ino, coff, err)
	}
	if forks == 0 {
		return nil
	}
	var own int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM fs_data WHERE session_id=? AND ino=? AND "offset"=?`, fs.sid, ino, coff).Scan(&own); err != nil {
		return fmt.Errorf("copy up inode %d at %d: %w", ino, coff, err)
	}
	if own > 0 {
		return nil // an update: the trigger copies it
	}
	for _, l := range ch {
		if ino >= l.below {
			return nil // no level has it: the chunk was not there at any fork point
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO fs_data(session_id, ino, "offset", size, data)
			SELECT f.ws, d.ino, d.offset, d.size, d.data FROM fs_data d JOIN fs_fork f ON f.parent_ws=?
			WHERE d.session_id=? AND d.ino=? AND d.offset=? AND d.ino < f.base_next_ino
			  AND NOT EXISTS (SELECT 1 FROM fs_data o WHERE o.session_id=f.ws AND o.ino=d.ino AND o.offset=d.offset)
			  AND (EXISTS (SELECT 1 FROM fs_inode i WHERE i.session_id=f.ws AND i.ino=d.ino)
			       OR EXISTS (SELECT 1 FROM fs_fork g WHERE g.parent_ws=f.ws))`, fs.sid, l.ws, ino, coff)
		if err != nil {
			return fmt.Errorf("copy up inode %d at %d: %w", ino, coff, err)
		}
		var found int
		if n, _ := res.RowsAffected(); n > 0 {
			return nil
		}
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM fs_data WHERE session_id=? AND ino=? AND "offset"=?`, l.ws, ino, coff).Scan(&found); err != nil {
			return fmt.Errorf("copy up inode %d at %d: %w", ino, coff, err)
		}
		if found > 0 {
			return nil // found here; every fork that needs it has it
		}
	}
	return nil
}
