package vfs

import (
	"context"
	"fmt"
)

// Chunk layout: chunk k holds bytes [k*cs, min((k+1)*cs, size)). Every chunk
// exists (holes are stored as zeros), so size = sum of chunk sizes.

const upsertChunk = `INSERT INTO fs_data(session_id, ino, "offset", size, data) VALUES(?,?,?,?,?)
	ON CONFLICT(session_id, ino, "offset") DO UPDATE SET size=excluded.size, data=excluded.data`

// readChunks copies file bytes [off, off+len(p)) into p; the caller has
// clamped the range to the file size.
func (fs *FS) readChunks(ctx context.Context, q querier, ino int64, cs int, p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	if ch, err := fs.chain(ctx, q); err != nil {
		return err
	} else if len(ch) > 0 {
		return fs.readChunksChain(ctx, q, ch, ino, cs, p, off)
	}
	first := off / int64(cs) * int64(cs)
	end := off + int64(len(p))
	rows, err := q.QueryContext(ctx, `SELECT "offset", data FROM fs_data WHERE session_id=? AND ino=? AND "offset">=? AND "offset"<? ORDER BY "offset"`, fs.sid, ino, first, end)
	if err != nil {
		return fmt.Errorf("read data of inode %d: %w", ino, err)
	}
	defer rows.Close()
	clear(p)
	for rows.Next() {
		var coff int64
		var data []byte
		if err := rows.Scan(&coff, &data); err != nil {
			return fmt.Errorf("read data of inode %d: %w", ino, err)
		}
		// overlap of [coff, coff+len(data)) with [off, end)
		lo, hi := max(coff, off), min(coff+int64(len(data)), end)
		if lo < hi {
			copy(p[lo-off:hi-off], data[lo-coff:hi-coff])
		}
	}
	return rows.Err()
}

// writeChunks writes p at off into a file of oldSize bytes, zero-filling any
// gap, and returns the new size. Only chunks overlapping [min(off,oldSize), off+len(p)) are rewritten.
func (fs *FS) writeChunks(ctx context.Context, tx *txn, ino int64, cs int, oldSize int64, p []byte, off int64) (int64, error) {
	tx.written += int64(len(p))
	end := off + int64(len(p))
	newSize := max(oldSize, end)
	start := min(off, oldSize)
	if start >= newSize {
		return newSize, nil
	}
	c64 := int64(cs)
	var zeros []byte
	// Only the chunks from start (the write, or the old end when it leaves
	// a hole) to the write's end change; those after it stay as they are.
	for k := start / c64; k*c64 < max(end, start+1) && k*c64 < newSize; k++ {
		coff := k * c64
		clen := min(c64, newSize-coff)
		var buf []byte
		switch {
		case off <= coff && end >= coff+clen:
			// p covers the whole chunk: no read needed
			buf = p[coff-off : coff-off+clen]
		case coff >= oldSize && (end <= coff || off >= coff+clen):
			// pure zero fill past the old end (a hole)
			if zeros == nil {
				zeros = make([]byte, cs)
			}
			buf = zeros[:clen]
		default:
			buf = make([]byte, clen)
			if coff < oldSize {
				n := min(clen, oldSize-coff)
				if err := fs.readChunks(ctx, tx, ino, cs, buf[:n], coff); err != nil {
					return 0, err
				}
			}
			lo, hi := max(coff, off), min(coff+clen, end)
			if lo < hi {
				copy(buf[lo-coff:hi-coff], p[lo-off:hi-off])
			}
		}
		if err := fs.copyUpBeforeInsert(ctx, tx, ino, coff); err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, upsertChunk, fs.sid, ino, coff, clen, buf); err != nil {
			return 0, fmt.Errorf("write data of inode %d at %d: %w", ino, coff, err)
		}
	}
	return newSize, nil
}

// truncateChunks shrinks a file to newSize (< oldSize).
func (fs *FS) truncateChunks(ctx context.Context, tx *txn, ino int64, cs int, newSize int64) error {
	c64 := int64(cs)
	keep := (newSize + c64 - 1) / c64 * c64 // first chunk offset to delete
	if _, err := tx.ExecContext(ctx, `DELETE FROM fs_data WHERE session_id=? AND ino=? AND "offset">=?`, fs.sid, ino, keep); err != nil {
		return fmt.Errorf("truncate inode %d: %w", ino, err)
	}
	if rem := newSize % c64; rem != 0 {
		last := newSize - rem
		if _, err := tx.ExecContext(ctx, `UPDATE fs_data SET data=substr(data,1,?), size=? WHERE session_id=? AND ino=? AND "offset"=?`, rem, rem, fs.sid, ino, last); err != nil {
			return fmt.Errorf("truncate inode %d: %w", ino, err)
		}
	}
	return nil
}

// resize changes a regular file's size in tx (truncate or zero-extend),
// enforcing the limits and updating usage, hash and times.
func (fs *FS) resize(ctx context.Context, tx *txn, ino int64, cs int, oldSize, newSize int64) error {
	if newSize == oldSize {
		return nil
	}
	if newSize > oldSize {
		if err := fs.checkFileSize(newSize, ""); err != nil {
			return err
		}
		if err := fs.addUsage(ctx, tx, newSize-oldSize); err != nil {
			return err
		}
		if _, err := fs.writeChunks(ctx, tx, ino, cs, oldSize, nil, newSize); err != nil {
			return err
		}
	} else {
		if err := fs.truncateChunks(ctx, tx, ino, cs, newSize); err != nil {
			return err
		}
		if err := fs.addUsage(ctx, tx, newSize-oldSize); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `UPDATE fs_inode SET size=?, sha256=NULL, data_gen=data_gen+1 WHERE session_id=? AND ino=?`, newSize, fs.sid, ino)
	if err != nil {
		return fmt.Errorf("resize inode %d: %w", ino, err)
	}
	fs.changedData(tx, ino)
	return nil
}
