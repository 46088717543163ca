package changes

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// Archive formats.
const (
	FormatTarGz = "tar.gz"
	FormatZip   = "zip"
)

// archiveFile is one member of an archive: a file of a workspace, or
// bytes made here (data).
type archiveFile struct {
	name   string // relative, slash-separated
	mode   uint32 // vfs mode (type | permissions)
	size   int64
	mtime  time.Time
	fs     *vfs.FS
	ino    int64
	target string
	data   []byte
}

// Archive is an archive being written: its members are known (and
// bounded) before the first byte goes out, so a failure of the checks is
// an error answer, not a cut stream.
type Archive struct {
	format string
	files  []archiveFile
	ctx    context.Context
}

// checkFormat accepts the archive formats.
func checkFormat(f string) error {
	if f != FormatTarGz && f != FormatZip {
		return orchestrator.FieldErrorf("format", "format must be %s or %s, not %q", FormatTarGz, FormatZip, f)
	}
	return nil
}

// maxArchive bounds an archive's content: the session quota (a workspace
// holds no more) plus what a fork adds.
func (s *Service) maxArchive() int64 { return 2 * s.files.Config().SessionQuota }

// WorkspaceArchive lists directory dir of workspace ws ("/" or "" for all
// of it, .git included) as an archive in format.
func (s *Service) WorkspaceArchive(ctx context.Context, ws, dir, format string) (*Archive, error) {
	if err := checkFormat(format); err != nil {
		return nil, err
	}
	fsys := s.files.Session(ws)
	dir = "/" + strings.Trim(dir, "/")
	if dir != "/" {
		info, err := fsys.Stat(ctx, dir)
		if err != nil {
			return nil, err
		}
		if !info.IsDir {
			return nil, orchestrator.FieldErrorf("path", "%s is not a directory", dir)
		}
	}
	ents, err := fsys.Walk(ctx, nil)
	if err != nil {
		return nil, err
	}
	a := &Archive{format: format, ctx: ctx}
	var total int64
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for _, e := range ents {
		if !strings.HasPrefix(e.Path, prefix) {
			continue
		}
		name := strings.TrimPrefix(e.Path, prefix)
		if e.Mode&vfs.ModeType == vfs.ModeRegular {
			total += e.Size
		}
		a.files = append(a.files, archiveFile{name: name, mode: e.Mode, size: e.Size, mtime: time.Unix(0, e.Mtime), fs: fsys, ino: e.Ino, target: e.Target})
	}
	if total > s.maxArchive() {
		return nil, orchestrator.Errorf(orchestrator.ETooLarge, "the archive would hold %d bytes, over the limit of %d", total, s.maxArchive())
	}
	return a, nil
}

// ChangesArchive lists the files added or changed between the base and
// the working tree (committed and uncommitted together) as an archive;
// the deleted paths are listed in FILEPATH-DELETED.
func (s *Service) ChangesArchive(ctx context.Context, t Target, opt Options, format string) (*Archive, error) {
	if err := checkFormat(format); err != nil {
		return nil, err
	}
	v, err := s.open(ctx, t, opt.Base)
	if err != nil {
		return nil, err
	}
	var pairs []pair
	if v.rp == nil {
		if pairs, err = s.section(ctx, v, SectionUncommitted); err != nil {
			return nil, err
		}
	} else {
		cur, err := s.worktree(ctx, v.fs, worktreeOptions{ws: t.Workspace, idx: v.idx, idxTime: v.idxTime, ignore: true, rp: v.rp})
		if err != nil {
			return nil, err
		}
		base, err := v.rp.treeOf(v.baseC)
		if err != nil {
			return nil, err
		}
		if pairs, err = compare(base, cur, func(entry) ([]byte, error) { return nil, nil }); err != nil {
			return nil, err
		}
	}
	a := &Archive{format: format, ctx: ctx}
	var deleted []string
	var total int64
	now := time.Now()
	for _, p := range pairs {
		if p.from != nil && (p.to == nil || p.from.path != p.to.path) {
			deleted = append(deleted, p.from.path) // gone, or renamed away
		}
		if p.to == nil {
			continue
		}
		e := p.to.e
		mode := uint32(vfs.ModeRegular | 0o644)
		switch e.mode {
		case filemode.Executable:
			mode = vfs.ModeRegular | 0o755
		case filemode.Symlink:
			mode = vfs.ModeSymlink | 0o777
		case filemode.Submodule:
			continue
		}
		total += e.size
		a.files = append(a.files, archiveFile{name: p.to.path, mode: mode, size: e.size, mtime: now, fs: e.fs, ino: e.ino, target: e.target})
	}
	if len(deleted) > 0 {
		sort.Strings(deleted)
		list := []byte(strings.Join(deleted, "\n") + "\n")
		a.files = append(a.files, archiveFile{name: "FILEPATH-DELETED", mode: vfs.ModeRegular | 0o644, size: int64(len(list)), mtime: now, data: list})
	}
	if total > s.maxArchive() {
		return nil, orchestrator.Errorf(orchestrator.ETooLarge, "the archive would hold %d bytes, over the limit of %d", total, s.maxArchive())
	}
	return a, nil
}

// inodeReader streams a file's content in chunk-sized reads.
type inodeReader struct {
	ctx  context.Context
	fs   *vfs.FS
	ino  int64
	off  int64
	size int64
}

func (r *inodeReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.size-r.off, blockSize)]
	n, err := r.fs.ReadAt(r.ctx, r.ino, p, r.off)
	r.off += int64(n)
	if err == nil && n == 0 {
		return 0, io.ErrUnexpectedEOF // it shrank meanwhile
	}
	return n, err
}

// content opens a member's bytes: exactly size of them (a file that
// changed size meanwhile is cut or padded with zeros, so the archive
// stays well formed).
func (f archiveFile) content(ctx context.Context) io.Reader {
	if f.data != nil {
		return strings.NewReader(string(f.data))
	}
	r := &inodeReader{ctx: ctx, fs: f.fs, ino: f.ino, size: f.size}
	return io.MultiReader(io.LimitReader(r, f.size), io.LimitReader(zeros{}, f.size))
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// WriteTo streams the archive to w.
func (a *Archive) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	var err error
	if a.format == FormatZip {
		err = a.writeZip(cw)
	} else {
		err = a.writeTarGz(cw)
	}
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (a *Archive) writeTarGz(w io.Writer) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, f := range a.files {
		if err := a.ctx.Err(); err != nil {
			return err
		}
		h := &tar.Header{Name: f.name, Mode: int64(f.mode & 0o7777), ModTime: f.mtime, Format: tar.FormatPAX}
		switch f.mode & vfs.ModeType {
		case vfs.ModeDir:
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		case vfs.ModeSymlink:
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.target
		case vfs.ModeRegular:
			h.Typeflag, h.Size = tar.TypeReg, f.size
		default:
			continue // fifos and sockets have nothing to carry
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := io.CopyN(tw, f.content(a.ctx), f.size); err != nil {
				return fmt.Errorf("archive %s: %w", f.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func (a *Archive) writeZip(w io.Writer) error {
	zw := zip.NewWriter(w)
	for _, f := range a.files {
		if err := a.ctx.Err(); err != nil {
			return err
		}
		h := &zip.FileHeader{Name: f.name, Modified: f.mtime, Method: zip.Deflate}
		perm := fs.FileMode(f.mode & 0o777)
		var body io.Reader
		switch f.mode & vfs.ModeType {
		case vfs.ModeDir:
			h.Name, h.Method = f.name+"/", zip.Store
			h.SetMode(fs.ModeDir | perm)
		case vfs.ModeSymlink:
			h.Method = zip.Store
			h.SetMode(fs.ModeSymlink | perm)
			body = strings.NewReader(f.target)
		case vfs.ModeRegular:
			h.SetMode(perm)
			body = io.LimitReader(f.content(a.ctx), f.size)
		default:
			continue
		}
		zf, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		if body != nil {
			if _, err := io.Copy(zf, body); err != nil {
				return fmt.Errorf("archive %s: %w", f.name, err)
			}
		}
	}
	return zw.Close()
}

// Name is a file name for the archive: base plus the format's extension.
func (a *Archive) Name(base string) string {
	return path.Base(base) + "." + a.format
}
