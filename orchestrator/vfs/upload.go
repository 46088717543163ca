package vfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"syscall"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
	"github.com/filepath-dev/filepath/protocol"
)

// UploadFlush is how many bytes an Upload holds before it writes them, in
// one transaction: the memory of one stream, and the longest it holds the
// write connection.
const UploadFlush = 1 << 20

// Upload is a file written as a stream (an upload, a download from a URL)
// without holding it in memory or the write connection for its length:
// its bytes go into an inode without a name, in transactions of
// UploadFlush bytes, counted against the limits as they come; Commit names
// it at its path in one transaction (a file already there gets its
// content, keeping its inode, links and metadata), Abort removes it. Until
// Commit nothing of it is visible. An inode left by a crash is listed in
// fs_orphan and removed at the next start (PurgeOrphans).
//
// An Upload is used by one goroutine.
type Upload struct {
	ctx  context.Context
	fs   *FS
	path string // cleaned
	ino  int64
	cs   int
	size int64 // bytes written to the inode
	buf  []byte
	h    hash.Hash
	head []byte // the first bytes, for the MIME type
	done bool
}

// NewUpload starts a stream to path p (checked against fs's policy now and
// again at Commit). ctx bounds the stream's writes.
func (fs *FS) NewUpload(ctx context.Context, p string) (*Upload, error) {
	p, err := fs.cleanFor(ctx, "write", p, true)
	if err != nil {
		return nil, err
	}
	if p == "/" {
		return nil, errorf(syscall.EISDIR, p, "/ is a directory")
	}
	if err := paths.CheckLen(p); err != nil {
		return nil, err
	}
	cs, err := fs.init(ctx)
	if err != nil {
		return nil, err
	}
	u := &Upload{ctx: ctx, fs: fs, path: p, cs: cs, h: sha256.New()}
	err = fs.v.tx(ctx, func(tx *txn) error {
		ino, err := fs.newInode(ctx, tx, 0, ModeRegular|0o644, fs.uid, fs.gid, 0, 0, fs.v.cfg.Now())
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO fs_orphan(session_id, ino) VALUES(?,?)`, fs.sid, ino); err != nil {
			return fmt.Errorf("start upload: %w", err)
		}
		u.ino = ino
		return nil
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// Path is the cleaned path the upload goes to.
func (u *Upload) Path() string { return u.path }

// Size is the number of bytes written so far.
func (u *Upload) Size() int64 { return u.size + int64(len(u.buf)) }

// Write adds p to the stream. Past the per-file limit it fails with EFBIG,
// past the session's quota with ENOSPC; the upload must then be aborted.
func (u *Upload) Write(p []byte) (int, error) {
	if u.done {
		return 0, errorf(syscall.EINVAL, u.path, "upload of %s is finished", u.path)
	}
	if err := u.fs.checkFileSize(u.Size()+int64(len(p)), u.path); err != nil {
		return 0, err
	}
	if len(u.head) < mimeSniff {
		u.head = append(u.head, p[:min(len(p), mimeSniff-len(u.head))]...)
	}
	u.h.Write(p)
	n := len(p)
	for len(p) > 0 {
		if u.buf == nil {
			u.buf = make([]byte, 0, UploadFlush)
		}
		k := min(len(p), UploadFlush-len(u.buf))
		u.buf = append(u.buf, p[:k]...)
		p = p[k:]
		if len(u.buf) == UploadFlush {
			if err := u.flush(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// flush writes the buffered bytes at the end of the inode in one change.
func (u *Upload) flush() error {
	if len(u.buf) == 0 {
		return nil
	}
	fs := u.fs
	err := fs.v.tx(u.ctx, func(tx *txn) error {
		if err := fs.addUsage(u.ctx, tx, int64(len(u.buf))); err != nil {
			return err
		}
		end, err := fs.writeChunks(u.ctx, tx, u.ino, u.cs, u.size, u.buf, u.size)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(u.ctx, `UPDATE fs_inode SET size=? WHERE session_id=? AND ino=?`, end, fs.sid, u.ino); err != nil {
			return fmt.Errorf("upload %s: %w", u.path, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	u.size += int64(len(u.buf))
	u.buf = u.buf[:0]
	return nil
}

// Commit writes what is buffered and puts the file at its path in one
// transaction, as WriteFile would (opt.Mode, IfMatch, Readonly, Perm;
// missing parents are created except with WriteUpdate). On an error the
// upload is aborted. It returns the file as Info does, and whether it was
// created.
func (u *Upload) Commit(ctx context.Context, opt WriteOptions) (Detail, bool, error) {
	if u.done {
		return Detail{}, false, errorf(syscall.EINVAL, u.path, "upload of %s is finished", u.path)
	}
	if err := u.flush(); err != nil {
		u.abort()
		return Detail{}, false, err
	}
	u.done = true
	fs, p := u.fs, u.path
	sum := hex.EncodeToString(u.h.Sum(nil))
	var evs []event
	created := false
	var ino int64
	err := fs.v.tx(ctx, func(tx *txn) error {
		var mk *[]event
		if opt.Mode != WriteUpdate {
			mk = &evs
		}
		r, err := fs.resolve(ctx, tx, p, true, mk)
		if err != nil {
			return err
		}
		if err := fs.checkPathTx("write", r.path, true); err != nil {
			return err
		}
		now := fs.v.cfg.Now()
		s, ns := splitTime(now)
		if !r.exists {
			switch {
			case opt.Mode == WriteUpdate:
				return notFound(p)
			case opt.IfMatch != "":
				return preconditionFailed(p)
			}
			if err := paths.CheckLen(r.path); err != nil {
				return err
			}
			perm := opt.Perm
			if perm == 0 {
				perm = 0o644
			}
			if err := fs.addDentry(ctx, tx, r.parent, r.name, u.ino); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM fs_orphan WHERE session_id=? AND ino=?`, fs.sid, u.ino); err != nil {
				return fmt.Errorf("upload %s: %w", p, err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET mode=?, sha256=?, data_gen=1, mtime=?, mtime_ns=?, ctime=?, ctime_ns=? WHERE session_id=? AND ino=?`,
				ModeRegular|perm&ModePerm, sum, s, ns, s, ns, fs.sid, u.ino); err != nil {
				return fmt.Errorf("upload %s: %w", p, err)
			}
			if err := fs.touch(ctx, tx, r.parent, now); err != nil {
				return err
			}
			ino, created = u.ino, true
			evs = append(evs, event{op: protocol.FileCreated, path: r.path, size: u.size})
		} else {
			if r.attr.IsDir() {
				return errorf(syscall.EISDIR, p, "%s is a directory", p).WithCode(orchestrator.EConflict)
			}
			if !r.attr.IsRegular() {
				return errorf(syscall.EINVAL, p, "%s is not a regular file", p).WithCode(orchestrator.EConflict)
			}
			if opt.Mode == WriteCreate {
				return errorf(syscall.EEXIST, p, "%s already exists", p)
			}
			ino = r.attr.Ino
			if err := fs.ownIno(ctx, tx, ino); err != nil {
				return err
			}
			if opt.IfMatch != "" {
				cur, err := fs.hashInTx(ctx, tx, ino)
				if err != nil {
					return err
				}
				if cur != opt.IfMatch {
					return preconditionFailed(p)
				}
			}
			if r.attr.Readonly && (opt.Readonly == nil || *opt.Readonly) {
				return errorf(syscall.EACCES, p, "%s is readonly", p)
			}
			if err := u.moveInto(ctx, tx, ino, r.attr.Size); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET size=?, sha256=?, data_gen=data_gen+1, mtime=?, mtime_ns=?, ctime=?, ctime_ns=? WHERE session_id=? AND ino=?`,
				u.size, sum, s, ns, s, ns, fs.sid, ino); err != nil {
				return fmt.Errorf("upload %s: %w", p, err)
			}
			fs.changedData(tx, ino)
			evs = append(evs, event{op: protocol.FileModified, path: r.path, size: u.size})
		}
		if err := fs.stamp(ctx, tx, ino, ""); err != nil {
			return err
		}
		if opt.Readonly != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET is_readonly=? WHERE session_id=? AND ino=?`, *opt.Readonly, fs.sid, ino); err != nil {
				return fmt.Errorf("set readonly on %s: %w", p, err)
			}
			fs.changedAttrs(tx, ino)
		}
		// Its type, known from the bytes that went by: no read later.
		if _, err := tx.ExecContext(ctx, `UPDATE fs_file_meta SET mime_type=?3, mime_gen=(SELECT data_gen FROM fs_inode WHERE session_id=?1 AND ino=?2)
			WHERE session_id=?1 AND ino=?2`, fs.sid, ino, DetectMIME(u.head)); err != nil {
			return fmt.Errorf("upload %s: %w", p, err)
		}
		return nil
	})
	if err != nil {
		u.abort()
		return Detail{}, false, err
	}
	fs.notifyAll(evs)
	d, err := fs.Info(ctx, p)
	return d, created, err
}

// moveInto gives existing file ino (of oldSize bytes) the upload's bytes:
// its chunks become ino's, the upload's inode goes.
func (u *Upload) moveInto(ctx context.Context, tx *txn, ino, oldSize int64) error {
	fs := u.fs
	if fork, err := fs.isFork(ctx, tx); err != nil {
		return err
	} else if fork {
		// forks of this fork keep reading what they read of ino
		for off := int64(0); off < u.size; off += int64(u.cs) {
			if err := fs.copyUpBeforeInsert(ctx, tx, ino, off); err != nil {
				return err
			}
		}
	}
	for _, st := range []struct {
		q    string
		args []any
	}{
		{`DELETE FROM fs_data WHERE session_id=? AND ino=?`, []any{fs.sid, ino}},
		{`UPDATE fs_data SET ino=? WHERE session_id=? AND ino=?`, []any{ino, fs.sid, u.ino}},
		{`DELETE FROM fs_orphan WHERE session_id=? AND ino=?`, []any{fs.sid, u.ino}},
		{`DELETE FROM fs_inode WHERE session_id=? AND ino=?`, []any{fs.sid, u.ino}},
	} {
		if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
			return fmt.Errorf("upload %s: %w", u.path, err)
		}
	}
	// the upload's bytes were counted as they came; the old ones go
	return fs.addUsage(ctx, tx, -oldSize)
}

// Abort removes what was written. Safe after Commit (it does nothing).
func (u *Upload) Abort() {
	if u.done {
		return
	}
	u.done = true
	u.abort()
}

func (u *Upload) abort() {
	u.done = true
	u.buf = nil
	ctx := context.WithoutCancel(u.ctx)
	fs := u.fs
	if err := fs.v.tx(ctx, func(tx *txn) error { return fs.removeInodeIfUnlinked(ctx, tx, u.ino) }); err != nil {
		fs.v.cfg.Logger.Warn("vfs: remove an aborted upload (it goes at the next start)", "session", fs.sid, "path", u.path, "err", err)
	}
}

// hashInTx is the sha256 of ino's content as tx sees it: the stored hash,
// or computed when a write cleared it.
func (fs *FS) hashInTx(ctx context.Context, tx *txn, ino int64) (string, error) {
	var h *string
	if err := tx.QueryRowContext(ctx, `SELECT sha256 FROM fs_inode WHERE session_id=? AND ino=?`, fs.sid, ino).Scan(&h); err == nil && h != nil {
		return *h, nil
	}
	return fs.computeHash(ctx, tx, ino)
}
