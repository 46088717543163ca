package changes

import (
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// reader reads the content of a tree's entry: a blob of the repository or
// a working-tree file.
type reader struct {
	ctx   context.Context
	rp    *repo
	max   int64
	sizes *sizeCache // nil: none
}

// content reads e, at most r.max bytes (errTooLarge beyond).
func (r reader) content(e entry) ([]byte, error) {
	if e.mode == filemode.Submodule {
		return []byte("Subproject commit " + e.hash.String() + "\n"), nil
	}
	if e.fs != nil {
		if e.mode == filemode.Symlink {
			return []byte(e.target), nil
		}
		if e.size > r.max {
			return nil, errTooLarge
		}
		return e.fs.ReadInode(r.ctx, e.ino, r.max)
	}
	if r.rp == nil {
		return nil, fmt.Errorf("blob %s: no repository", e.hash)
	}
	b, _, err := r.rp.blob(e.hash, r.max)
	return b, err
}

// size returns e's size (reading a blob's header when not known).
func (r reader) size(e entry) int64 {
	if e.size >= 0 {
		return e.size
	}
	if n, ok := r.sizes.get(e.hash); ok {
		return n
	}
	if r.rp != nil {
		if n, err := r.rp.blobSize(e.hash); err == nil {
			r.sizes.put(e.hash, n)
			return n
		}
	}
	return 0
}

// fileDiff describes pair p; with text, its patch too (when within max
// bytes per side and MaxPatch of patch).
func fileDiff(p pair, rd reader, text bool, maxPatch int) (FileDiff, error) {
	fd := FileDiff{Path: p.path()}
	switch {
	case p.from == nil:
		fd.Status = Added
	case p.to == nil:
		fd.Status = Deleted
	case p.from.path != p.to.path:
		fd.Status = Renamed
		fd.OldPath = p.from.path
		fd.Similarity = p.score * 100 / maxScore
	default:
		fd.Status = Modified
	}
	if p.from != nil {
		fd.OldMode, fd.OldID, fd.OldSize = modeString(p.from.e.mode), p.from.e.hash.String(), rd.size(p.from.e)
	}
	if p.to != nil {
		fd.NewMode, fd.NewID, fd.NewSize = modeString(p.to.e.mode), p.to.e.hash.String(), rd.size(p.to.e)
	}
	if p.from != nil && p.to != nil && p.from.e.hash == p.to.e.hash {
		return fd, nil // a pure rename or mode change: no content to show
	}
	if !text {
		fd.Omitted = true
		return fd, nil
	}
	old, new, err := sides(p, rd)
	if err == errTooLarge {
		fd.TooLarge = true
		return fd, nil
	}
	if err != nil {
		return fd, err
	}
	sniff := new
	if p.to == nil {
		sniff = old
	}
	fd.Type = mediaType(fd.Path, sniff)
	if isBinary(old) || isBinary(new) {
		fd.Binary = true
		return fd, nil
	}
	patch, adds, dels := newLineDiff(old, new).unified(3)
	fd.Additions, fd.Deletions = adds, dels
	if len(patch) > maxPatch {
		fd.TooLarge = true
		return fd, nil
	}
	fd.Patch = patch
	return fd, nil
}

// sides reads both contents of p (nil for a missing side).
func sides(p pair, rd reader) (old, new []byte, err error) {
	if p.from != nil {
		if old, err = rd.content(p.from.e); err != nil {
			return nil, nil, err
		}
	}
	if p.to != nil {
		if new, err = rd.content(p.to.e); err != nil {
			return nil, nil, err
		}
	}
	return old, new, nil
}

func modeString(m filemode.FileMode) string { return fmt.Sprintf("%06o", uint32(m)) }

// mediaType names what a file holds, for the summary of a binary or
// large one: by its extension, else sniffed.
func mediaType(p string, b []byte) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".svg":
		return "image/svg+xml"
	case ".pdf":
		return "application/pdf"
	case ".zip":
		return "application/zip"
	case ".gz", ".tgz":
		return "application/gzip"
	case ".wasm":
		return "application/wasm"
	}
	if len(b) == 0 {
		return ""
	}
	return http.DetectContentType(b[:min(len(b), 512)])
}

// gitPatch renders pair p as git's patch text ("diff --git" on), with
// full blob ids and binary files as a git binary patch: what git apply and
// git am take.
func gitPatch(p pair, rd reader) (string, error) {
	var b strings.Builder
	aPath, bPath := p.path(), p.path()
	if p.from != nil {
		aPath = p.from.path
	}
	if p.to != nil {
		bPath = p.to.path
	}
	fmt.Fprintf(&b, "diff --git %s %s\n", quotePath("a/"+aPath), quotePath("b/"+bPath))
	var oldID, newID plumbing.Hash
	modeSuffix := ""
	switch {
	case p.from == nil:
		fmt.Fprintf(&b, "new file mode %s\n", modeString(p.to.e.mode))
		newID = p.to.e.hash
	case p.to == nil:
		fmt.Fprintf(&b, "deleted file mode %s\n", modeString(p.from.e.mode))
		oldID = p.from.e.hash
	default:
		oldID, newID = p.from.e.hash, p.to.e.hash
		if p.from.e.mode != p.to.e.mode {
			fmt.Fprintf(&b, "old mode %s\nnew mode %s\n", modeString(p.from.e.mode), modeString(p.to.e.mode))
		} else {
			modeSuffix = " " + modeString(p.to.e.mode)
		}
		if p.from.path != p.to.path {
			fmt.Fprintf(&b, "similarity index %d%%\nrename from %s\nrename to %s\n", p.score*100/maxScore, quotePath(p.from.path), quotePath(p.to.path))
		}
		if oldID == newID {
			return b.String(), nil
		}
	}
	old, new, err := sides(p, reader{ctx: rd.ctx, rp: rd.rp, max: MaxFullFile * 4, sizes: rd.sizes})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "index %s..%s%s\n", oldID, newID, modeSuffix)
	if isBinary(old) || isBinary(new) {
		b.WriteString("GIT binary patch\n")
		writeBinaryLiteral(&b, new)
		b.WriteByte('\n')
		writeBinaryLiteral(&b, old)
		b.WriteByte('\n')
		return b.String(), nil
	}
	minus, plus := quotePath("a/"+aPath), quotePath("b/"+bPath)
	if p.from == nil {
		minus = "/dev/null"
	}
	if p.to == nil {
		plus = "/dev/null"
	}
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", minus, plus)
	hunks, _, _ := newLineDiff(old, new).unified(3)
	b.WriteString(hunks)
	return b.String(), nil
}

// quotePath quotes a path the way git does when it has special bytes.
func quotePath(p string) string {
	need := false
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			need = true
			break
		}
	}
	if !need {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// writeBinaryLiteral writes data as a "literal" part of a git binary
// patch: zlib-deflated, in lines of up to 52 bytes, each led by its length
// ('A'..'Z' 1..26, 'a'..'z' 27..52) and encoded in git's base85.
func writeBinaryLiteral(b *strings.Builder, data []byte) {
	var z bytes.Buffer
	w, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	w.Write(data) //nolint:errcheck // a bytes.Buffer does not fail
	w.Close()     //nolint:errcheck
	fmt.Fprintf(b, "literal %d\n", len(data))
	zb := z.Bytes()
	for len(zb) > 0 {
		n := min(len(zb), 52)
		if n <= 26 {
			b.WriteByte(byte('A' + n - 1))
		} else {
			b.WriteByte(byte('a' + n - 27))
		}
		b.WriteString(base85(zb[:n]))
		b.WriteByte('\n')
		zb = zb[n:]
	}
}

const base85Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

// base85 encodes b in groups of four bytes (the last zero-padded) as five
// characters each, as git's binary patches do.
func base85(b []byte) string {
	var out strings.Builder
	for len(b) > 0 {
		var acc uint32
		for i := 0; i < 4; i++ {
			acc <<= 8
			if i < len(b) {
				acc |= uint32(b[i])
			}
		}
		var c [5]byte
		for i := 4; i >= 0; i-- {
			c[i] = base85Alphabet[acc%85]
			acc /= 85
		}
		out.Write(c[:])
		b = b[min(4, len(b)):]
	}
	return out.String()
}
