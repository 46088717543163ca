package vfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"syscall"
)

// Whole contents for callers that keep them (orchestrator/files: the text
// tier and its cache of hot reads), which need a cheap test of whether a
// file changed: its generation, without the hash a write through the mount
// cleared (computing it reads the whole file).

// Peek is Stat without computing a hash: Hash is empty when a write
// cleared it; Gen tells whether the content changed since an earlier Peek.
func (fs *FS) Peek(ctx context.Context, p string) (FileInfo, error) {
	p, r, err := fs.resolveExisting(ctx, p)
	if err != nil {
		return FileInfo{}, err
	}
	if err := fs.checkPath(ctx, "stat", r.path, false); err != nil {
		return FileInfo{}, err
	}
	info := infoOf(p, baseName(p), r.attr)
	if r.attr.IsRegular() {
		h, gen, err := fs.storedHash(ctx, r.attr.Ino)
		if err != nil {
			return FileInfo{}, err
		}
		info.Hash, info.Gen = h.String, gen
	}
	return info, nil
}

// ReadContent reads the whole of regular file p with its hash (computed
// from the bytes read when a write cleared it, and stored). Stable reports
// that no write changed the file while it was read: only then do info's
// Gen and Hash describe the bytes.
func (fs *FS) ReadContent(ctx context.Context, p string) (info FileInfo, data []byte, stable bool, err error) {
	info, err = fs.Peek(ctx, p)
	if err != nil {
		return FileInfo{}, nil, false, err
	}
	if info.IsDir {
		return FileInfo{}, nil, false, errorf(syscall.EISDIR, p, "%s is a directory", info.Path)
	}
	cs, err := fs.init(ctx)
	if err != nil {
		return FileInfo{}, nil, false, err
	}
	data = make([]byte, info.Size)
	if err := fs.readChunks(ctx, fs.v.r, info.Ino, cs, data, 0); err != nil {
		return FileInfo{}, nil, false, err
	}
	h, gen, err := fs.storedHash(ctx, info.Ino)
	if err != nil {
		return FileInfo{}, nil, false, err
	}
	if gen != info.Gen {
		return info, data, false, nil
	}
	if h.Valid {
		info.Hash = h.String
		return info, data, true, nil
	}
	sum := sha256.Sum256(data)
	info.Hash = hex.EncodeToString(sum[:])
	if _, err := fs.v.db.ExecContext(ctx, `UPDATE fs_inode SET sha256=? WHERE session_id=? AND ino=? AND data_gen=? AND sha256 IS NULL`, info.Hash, fs.sid, info.Ino, gen); err != nil {
		return FileInfo{}, nil, false, fmt.Errorf("cache hash: %w", err)
	}
	return info, data, true, nil
}

// SetMIME records mime as regular file p's type, as it stands now (a later
// write of its content makes the type detected again): for a type its
// writer declares that the bytes cannot tell (text/csv is text/plain to a
// detector).
func (fs *FS) SetMIME(ctx context.Context, p, mime string) error {
	info, err := fs.Peek(ctx, p)
	if err != nil {
		return err
	}
	if info.IsDir {
		return errorf(syscall.EISDIR, p, "%s is a directory", info.Path)
	}
	if _, err := fs.cleanFor(ctx, "write", info.Path, true); err != nil {
		return err
	}
	return fs.v.tx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO fs_file_meta(session_id, ino, source, node_id, mime_type, mime_gen) VALUES(?1,?2,?3,?4,?5,?6)
			ON CONFLICT(session_id, ino) DO UPDATE SET mime_type=excluded.mime_type, mime_gen=excluded.mime_gen`,
			fs.sid, info.Ino, fs.writeSource(), fs.nodeID, mime, info.Gen); err != nil {
			return fmt.Errorf("set the type of %s: %w", p, err)
		}
		return nil
	})
}
