package vfs

import (
	"context"
	"fmt"
	"io"
	"syscall"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
	"github.com/filepath-dev/filepath/protocol"
)

// Byte ranges of a file through the path API: a reader that seeks (HTTP
// Range, the raw-bytes tier) and a write at an offset, an append, or a
// write that ends the file (the text tier's edits rewrite from the first
// changed line on), each one transaction with an optional If-Match.

// readAhead is how much a File reads at once: one query per this many
// bytes whatever the size of the caller's reads (http.ServeContent reads
// 32 KiB at a time).
const readAhead = 1 << 20

// File is a regular file opened for reading through the path API. It
// reads committed chunks as it goes: a write while it reads may be seen
// part-way (compare Info().Hash with the file's after reading to know).
// Used by one goroutine.
type File struct {
	ctx  context.Context
	fs   *FS
	info FileInfo
	cs   int
	off  int64
	buf  []byte // read ahead, from bufOff
	bOff int64
}

var _ io.ReadSeeker = (*File)(nil)

// OpenPath opens regular file p (symlinks followed) for reading.
func (fs *FS) OpenPath(ctx context.Context, p string) (*File, error) {
	info, err := fs.Stat(ctx, p)
	if err != nil {
		return nil, err
	}
	if info.IsDir {
		return nil, errorf(syscall.EISDIR, p, "%s is a directory", info.Path)
	}
	if info.Type != "file" {
		return nil, errorf(syscall.EINVAL, p, "%s is a %s, not a regular file: it has no content to read or write", info.Path, info.Type).WithCode(orchestrator.EConflict)
	}
	cs, err := fs.init(ctx)
	if err != nil {
		return nil, err
	}
	return &File{ctx: ctx, fs: fs, info: info, cs: cs}, nil
}

// Info is the file as it was when opened.
func (f *File) Info() FileInfo { return f.info }

// Read reads from the current offset.
func (f *File) Read(p []byte) (int, error) {
	if f.off >= f.info.Size {
		return 0, io.EOF
	}
	if f.off < f.bOff || f.off >= f.bOff+int64(len(f.buf)) {
		n := min(int64(readAhead), f.info.Size-f.off)
		if len(p) >= readAhead {
			// a large read needs no buffer of its own
			n = min(int64(len(p)), f.info.Size-f.off)
			if err := f.fs.readChunks(f.ctx, f.fs.v.r, f.info.Ino, f.cs, p[:n], f.off); err != nil {
				return 0, err
			}
			f.off += n
			return int(n), nil
		}
		if cap(f.buf) < int(n) {
			f.buf = make([]byte, n, readAhead)
		}
		f.buf = f.buf[:n]
		if err := f.fs.readChunks(f.ctx, f.fs.v.r, f.info.Ino, f.cs, f.buf, f.off); err != nil {
			f.buf = f.buf[:0]
			return 0, err
		}
		f.bOff = f.off
	}
	n := copy(p, f.buf[f.off-f.bOff:])
	f.off += int64(n)
	return n, nil
}

// Seek sets the offset of the next Read.
func (f *File) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.off
	case io.SeekEnd:
		offset += f.info.Size
	default:
		return 0, errorf(syscall.EINVAL, f.info.Path, "bad whence %d", whence)
	}
	if offset < 0 {
		return 0, errorf(syscall.EINVAL, f.info.Path, "negative offset")
	}
	f.off = offset
	return offset, nil
}

// WriteAtOptions tune WriteAt.
type WriteAtOptions struct {
	// Append writes at the end of the file (the offset is ignored).
	Append bool
	// Truncate ends the file where the data ends.
	Truncate bool
	// Create makes the file (and its parents) when it is missing.
	Create bool
	// IfMatch is the sha256 the content must have before the write ("":
	// no check; with Create, a missing file fails it).
	IfMatch string
	// Hash, when the caller knows it, is the sha256 of the whole content
	// after the write (the text tier holds the whole text): it is stored
	// instead of being computed again on the next read of the hash.
	Hash string
}

// WriteAtPath writes data at off into regular file p in one transaction,
// zero-filling a gap past its end, under the limits and fs's policy.
func (fs *FS) WriteAtPath(ctx context.Context, p string, data []byte, off int64, o WriteAtOptions) (FileInfo, error) {
	p, err := fs.cleanFor(ctx, "write", p, true)
	if err != nil {
		return FileInfo{}, err
	}
	if off < 0 {
		return FileInfo{}, orchestrator.FieldErrorf("offset", "offset must be 0 or more, not %d", off)
	}
	cs, err := fs.init(ctx)
	if err != nil {
		return FileInfo{}, err
	}
	var evs []event
	err = fs.v.tx(ctx, func(tx *txn) error {
		var mk *[]event
		if o.Create {
			mk = &evs
		}
		r, err := fs.resolve(ctx, tx, p, true, mk)
		if err != nil {
			return err
		}
		if err := fs.checkPathTx("write", r.path, true); err != nil {
			return err
		}
		op := protocol.FileModified
		if !r.exists {
			switch {
			case !o.Create:
				return notFound(p)
			case o.IfMatch != "":
				return preconditionFailed(p)
			}
			if err := paths.CheckLen(r.path); err != nil {
				return err
			}
			a, err := fs.mknod(ctx, tx, r.parent, r.name, ModeRegular|0o644, "")
			if err != nil {
				return err
			}
			r.attr, op = a, protocol.FileCreated
		} else {
			if r.attr.IsDir() {
				return errorf(syscall.EISDIR, p, "%s is a directory", p).WithCode(orchestrator.EConflict)
			}
			if !r.attr.IsRegular() {
				return errorf(syscall.EINVAL, p, "%s is not a regular file", p).WithCode(orchestrator.EConflict)
			}
			if r.attr.Readonly {
				return errorf(syscall.EACCES, p, "%s is readonly", p)
			}
		}
		ino := r.attr.Ino
		if err := fs.ownIno(ctx, tx, ino); err != nil {
			return err
		}
		if o.IfMatch != "" {
			cur, err := fs.hashInTx(ctx, tx, ino)
			if err != nil {
				return err
			}
			if cur != o.IfMatch {
				return preconditionFailed(p)
			}
		}
		size := r.attr.Size
		if o.Append {
			off = size
		}
		newSize, err := fs.writeData(ctx, tx, ino, cs, size, data, off, fs.v.cfg.Now())
		if err != nil {
			return err
		}
		if end := off + int64(len(data)); o.Truncate && end < newSize {
			if err := fs.resize(ctx, tx, ino, cs, newSize, end); err != nil {
				return err
			}
			newSize = end
		}
		if o.Hash != "" {
			if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET sha256=? WHERE session_id=? AND ino=?`, o.Hash, fs.sid, ino); err != nil {
				return fmt.Errorf("write %s: %w", p, err)
			}
		}
		if err := fs.stamp(ctx, tx, ino, ""); err != nil {
			return err
		}
		evs = append(evs, event{op: op, path: r.path, size: newSize})
		return nil
	})
	if err != nil {
		return FileInfo{}, err
	}
	fs.notifyAll(evs)
	return fs.Stat(ctx, p)
}

// ReadRange reads up to n bytes of file p at off (fewer at its end).
func (fs *FS) ReadRange(ctx context.Context, p string, off int64, n int) (FileInfo, []byte, error) {
	if off < 0 || n < 0 {
		return FileInfo{}, nil, orchestrator.FieldErrorf("offset", "offset and length must be 0 or more")
	}
	f, err := fs.OpenPath(ctx, p)
	if err != nil {
		return FileInfo{}, nil, err
	}
	info := f.Info()
	if off >= info.Size {
		return info, []byte{}, nil
	}
	b := make([]byte, min(int64(n), info.Size-off))
	if err := fs.readChunks(ctx, fs.v.r, info.Ino, f.cs, b, off); err != nil {
		return FileInfo{}, nil, err
	}
	return info, b, nil
}
