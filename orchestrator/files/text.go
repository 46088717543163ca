package files

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"regexp"
	"unicode/utf8"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// The text tier (files.md "Tier 2"): a text file as numbered lines, read
// by range with the total count, edited by range, searched by regular
// expression. Every edit is a read-modify-write that writes only if the
// file still has the hash it read (and, with if_match, the caller's), so
// an edit never overwrites a change it did not see; it rewrites the file
// from the first changed line on.

// PreconditionError is an If-Match that failed: the file changed. Current
// is its hash now, to read it again with.
type PreconditionError struct {
	err     *orchestrator.Error
	Current string
}

func (e *PreconditionError) Error() string { return e.err.Message }
func (e *PreconditionError) Unwrap() error { return e.err }

// changed is the PreconditionError of file p, whose hash is now cur.
func changed(p, cur string) error {
	return &PreconditionError{err: orchestrator.Errorf(orchestrator.EPreconditionFailed,
		"%s has changed since it was read: its hash is now %s; read it again (if_match: that hash)", p, cur), Current: cur}
}

// CurrentHash returns the hash of the file a failed If-Match found ("" for
// any other error).
func CurrentHash(err error) string {
	var pe *PreconditionError
	if errors.As(err, &pe) {
		return pe.Current
	}
	return ""
}

// content returns the whole of file p with its hash, from the cache when
// its generation is the one kept. The bytes are shared: never change them.
func (s *Service) content(ctx context.Context, fs *vfs.FS, p string) (vfs.FileInfo, []byte, error) {
	for try := 0; ; try++ {
		info, err := fs.Peek(ctx, p)
		if err != nil {
			return vfs.FileInfo{}, nil, err
		}
		if info.IsDir {
			return vfs.FileInfo{}, nil, orchestrator.Errorf(orchestrator.EInvalid, "%s is a directory", info.Path)
		}
		k := CacheKey{fs.SessionID(), info.Ino}
		if data, hash, ok := s.cache.Bytes(k, info.Gen); ok {
			info.Hash = hash
			return info, data, nil
		}
		info, data, stable, err := fs.ReadContent(ctx, p)
		if err != nil {
			return vfs.FileInfo{}, nil, err
		}
		if stable {
			s.cache.PutBytes(k, info.Gen, info.Hash, data)
			return info, data, nil
		}
		if try == 2 {
			return vfs.FileInfo{}, nil, orchestrator.Errorf(orchestrator.EConflict, "%s changed while it was read, three times: something is writing it; try again later", info.Path)
		}
	}
}

// Content returns the whole of file p with its info (hash, inode,
// generation), from the cache when its generation is the one kept: for
// the format tools, which parse it (Cache.Parsed under the same key,
// CacheKey{fs.SessionID(), info.Ino}). The bytes are shared: never
// change them.
func (s *Service) Content(ctx context.Context, fs *vfs.FS, p string) (vfs.FileInfo, []byte, error) {
	return s.content(ctx, fs, p)
}

// Changed is the PreconditionError of file p, whose hash is now cur: an
// edit based on an older read.
func Changed(p, cur string) error { return changed(p, cur) }

// text is content that must be text: UTF-8 without NUL bytes.
func (s *Service) text(ctx context.Context, fs *vfs.FS, p string) (vfs.FileInfo, []byte, *lineIndex, error) {
	info, data, err := s.content(ctx, fs, p)
	if err != nil {
		return info, nil, nil, err
	}
	v, err := s.cache.Parsed(CacheKey{fs.SessionID(), info.Ino}, info.Gen, "lines", func() (any, int64, error) {
		if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
			return nil, 0, notText(info, fs)
		}
		ix := indexLines(data)
		return ix, int64(len(ix.starts)) * 8, nil // the bytes are counted by their own entry
	})
	if err != nil {
		return info, nil, nil, err
	}
	return info, data, v.(*lineIndex), nil
}

func notText(info vfs.FileInfo, fs *vfs.FS) error {
	what := "binary"
	if m, err := fs.MetaOf(context.Background(), info); err == nil && m.MimeType != "" {
		what = m.MimeType
	}
	return orchestrator.Errorf(orchestrator.EInvalid, "%s is not UTF-8 text (%s): read it with file_read_bytes", info.Path, what)
}

// lineIndex is where each line of a text starts. A text of n bytes has
// no lines when empty, else one more than its newlines, less one when it
// ends with a newline (which ends its last line).
type lineIndex struct {
	starts []int
	size   int
}

func indexLines(data []byte) *lineIndex {
	ix := &lineIndex{size: len(data)}
	if len(data) == 0 {
		return ix
	}
	ix.starts = append(make([]int, 0, bytes.Count(data, []byte{'\n'})+1), 0)
	for i := 0; ; {
		j := bytes.IndexByte(data[i:], '\n')
		if j < 0 || i+j+1 >= len(data) {
			break
		}
		i += j + 1
		ix.starts = append(ix.starts, i)
	}
	return ix
}

func (ix *lineIndex) total() int { return len(ix.starts) }

// off is the byte offset where line k (0-based; total() is the end) starts.
func (ix *lineIndex) off(k int) int {
	if k >= len(ix.starts) {
		return ix.size
	}
	return ix.starts[k]
}

// TextRead is a range of lines.
type TextRead struct {
	Content    string `json:"content"`
	TotalLines int    `json:"total_lines"`
	StartLine  int    `json:"start_line" jsonschema_description:"the first line returned, 1-based (0: none)"`
	EndLine    int    `json:"end_line" jsonschema_description:"the last line returned"`
	// Hash is the content's sha256: if_match of an edit that must not
	// overwrite a change made since.
	Hash      string `json:"hash" jsonschema_description:"the file's sha256: pass it as if_match to an edit"`
	Truncated bool   `json:"truncated,omitempty" jsonschema_description:"the range was cut at the size limit: read on from end_line + 1"`
}

func (r TextRead) AuditSummary() any {
	return map[string]any{"start_line": r.StartLine, "end_line": r.EndLine, "total_lines": r.TotalLines, "bytes": len(r.Content), "truncated": r.Truncated}
}

// ReadText returns lines start to end (1-based, inclusive; 0: the first,
// the last) of file p, at most MaxTextRead bytes of them.
func (s *Service) ReadText(ctx context.Context, fs *vfs.FS, p string, start, end int) (TextRead, error) {
	info, data, ix, err := s.text(ctx, fs, p)
	if err != nil {
		return TextRead{}, err
	}
	n := ix.total()
	out := TextRead{TotalLines: n, Hash: info.Hash}
	if start == 0 {
		start = 1
	}
	if end == 0 || end > n {
		end = n
	}
	switch {
	case start < 0 || end < 0:
		return TextRead{}, orchestrator.FieldErrorf("start_line", "line numbers start at 1")
	case n == 0:
		return out, nil
	case start > n:
		return TextRead{}, orchestrator.FieldErrorf("start_line", "start_line %d is past the end of %s (%d lines)", start, info.Path, n)
	case end < start:
		return TextRead{}, orchestrator.FieldErrorf("end_line", "end_line %d is before start_line %d", end, start)
	}
	lo, hi := ix.off(start-1), ix.off(end)
	if hi-lo > MaxTextRead {
		out.Truncated = true
		// the lines that fit; at least the first, cut
		k := start
		for k < end && ix.off(k+1)-lo <= MaxTextRead {
			k++
		}
		end, hi = k, min(ix.off(k), lo+MaxTextRead)
		for hi > lo && !utf8.RuneStart(data[hi]) && hi < len(data) {
			hi--
		}
	}
	out.Content, out.StartLine, out.EndLine = string(data[lo:hi]), start, end
	return out, nil
}

// LineCount is the size of a text in lines.
type LineCount struct {
	TotalLines int    `json:"total_lines"`
	Size       int64  `json:"size"`
	Hash       string `json:"hash"`
}

// CountLines returns the number of lines of text file p.
func (s *Service) CountLines(ctx context.Context, fs *vfs.FS, p string) (LineCount, error) {
	info, _, ix, err := s.text(ctx, fs, p)
	if err != nil {
		return LineCount{}, err
	}
	return LineCount{TotalLines: ix.total(), Size: info.Size, Hash: info.Hash}, nil
}

// TextEdit is the outcome of an edit.
type TextEdit struct {
	OK         bool   `json:"ok"`
	Size       int64  `json:"size"`
	TotalLines int    `json:"total_lines"`
	Hash       string `json:"hash" jsonschema_description:"the new sha256: if_match of the next edit"`
}

// Splice replaces lines from to to (0-based, to exclusive: [from, to) of
// the current lines; from == to inserts before line from) of text file p
// with text (its lines; a missing final newline is added, except where
// the file had none at its end). With ifMatch the file must have that
// hash. It writes the file from the first changed byte on.
func (s *Service) Splice(ctx context.Context, fs *vfs.FS, p string, from, to int, text, ifMatch string) (TextEdit, error) {
	info, data, ix, err := s.text(ctx, fs, p)
	if err != nil {
		return TextEdit{}, err
	}
	if ifMatch != "" && ifMatch != info.Hash {
		return TextEdit{}, changed(info.Path, info.Hash)
	}
	if from < 0 || to < from || to > ix.total() {
		return TextEdit{}, orchestrator.FieldErrorf("start_line", "lines %d to %d are not within %s (%d lines)", from+1, to, info.Path, ix.total())
	}
	off0, off1 := ix.off(from), ix.off(to)
	noFinalNL := len(data) > 0 && data[len(data)-1] != '\n'
	res := make([]byte, 0, len(data)-(off1-off0)+len(text)+1)
	res = append(res, data[:off0]...)
	if len(res) > 0 && res[len(res)-1] != '\n' {
		res = append(res, '\n') // an insert after a last line without its newline
	}
	res = append(res, text...)
	if text != "" && text[len(text)-1] != '\n' {
		res = append(res, '\n')
	}
	res = append(res, data[off1:]...)
	if noFinalNL && off1 == len(data) && len(res) > 0 && res[len(res)-1] == '\n' {
		res = res[:len(res)-1]
	}
	return s.writeFrom(ctx, fs, info, res, min(off0, len(res)))
}

// writeFrom writes res, the new content of the file info, from byte off on
// (the bytes before it are the file's), if the file still has info's hash.
func (s *Service) writeFrom(ctx context.Context, fs *vfs.FS, info vfs.FileInfo, res []byte, off int) (TextEdit, error) {
	sum := sha256.Sum256(res)
	hash := hex.EncodeToString(sum[:])
	ninfo, err := fs.WriteAtPath(ctx, info.Path, res[off:], int64(off), vfs.WriteAtOptions{Truncate: true, IfMatch: info.Hash, Hash: hash})
	if err != nil {
		if orchestrator.ErrorCode(err) == orchestrator.EPreconditionFailed {
			if cur, perr := fs.Stat(ctx, info.Path); perr == nil {
				return TextEdit{}, changed(info.Path, cur.Hash)
			}
		}
		return TextEdit{}, err
	}
	ix := indexLines(res)
	if ninfo.Hash == hash {
		k := CacheKey{fs.SessionID(), ninfo.Ino}
		s.cache.PutBytes(k, ninfo.Gen, hash, res)
		s.cache.PutParsed(k, ninfo.Gen, "lines", ix, int64(len(ix.starts))*8)
	}
	return TextEdit{OK: true, Size: int64(len(res)), TotalLines: ix.total(), Hash: hash}, nil
}

// ReplaceLines replaces lines start to end (1-based, inclusive) with text.
func (s *Service) ReplaceLines(ctx context.Context, fs *vfs.FS, p string, start, end int, text, ifMatch string) (TextEdit, error) {
	if start < 1 || end < start {
		return TextEdit{}, orchestrator.FieldErrorf("start_line", "want 1 <= start_line <= end_line, not %d and %d", start, end)
	}
	return s.Splice(ctx, fs, p, start-1, end, text, ifMatch)
}

// InsertLines inserts text after line after (0: at the start).
func (s *Service) InsertLines(ctx context.Context, fs *vfs.FS, p string, after int, text, ifMatch string) (TextEdit, error) {
	if after < 0 {
		return TextEdit{}, orchestrator.FieldErrorf("after_line", "after_line must be 0 (the start) or a line number")
	}
	return s.Splice(ctx, fs, p, after, after, text, ifMatch)
}

// DeleteLines deletes lines start to end (1-based, inclusive).
func (s *Service) DeleteLines(ctx context.Context, fs *vfs.FS, p string, start, end int, ifMatch string) (TextEdit, error) {
	return s.ReplaceLines(ctx, fs, p, start, end, "", ifMatch)
}

// WriteText replaces the whole content of p with text (creating it and its
// parents when missing); with ifMatch it must have that hash.
func (s *Service) WriteText(ctx context.Context, fs *vfs.FS, p, text, ifMatch string) (TextEdit, error) {
	info, _, err := fs.WriteFile(ctx, p, []byte(text), vfs.WriteOptions{IfMatch: ifMatch})
	if err != nil {
		if orchestrator.ErrorCode(err) == orchestrator.EPreconditionFailed {
			if cur, perr := fs.Stat(ctx, p); perr == nil {
				return TextEdit{}, changed(cur.Path, cur.Hash)
			}
		}
		return TextEdit{}, err
	}
	return TextEdit{OK: true, Size: info.Size, TotalLines: indexLines([]byte(text)).total(), Hash: info.Hash}, nil
}

// SearchMatch is a matching line.
type SearchMatch struct {
	Line    int    `json:"line"`
	Content string `json:"content"`
}

// SearchResult is the lines of a file that match.
type SearchResult struct {
	Matches    []SearchMatch `json:"matches"`
	TotalLines int           `json:"total_lines"`
	Hash       string        `json:"hash"`
	Truncated  bool          `json:"truncated,omitempty" jsonschema_description:"max_results was reached, or the time limit"`
}

func (r SearchResult) AuditSummary() any {
	return map[string]any{"matches": len(r.Matches), "truncated": r.Truncated}
}

// SearchText returns the lines of text file p that match the regular
// expression pattern (RE2: linear time), at most maxResults
// (DefaultSearchResults; at most MaxSearchResults), each cut to
// MaxSearchLine bytes, within SearchTimeout.
func (s *Service) SearchText(ctx context.Context, fs *vfs.FS, p, pattern string, maxResults int) (SearchResult, error) {
	switch {
	case pattern == "":
		return SearchResult{}, orchestrator.FieldErrorf("pattern", "pattern is required")
	case len(pattern) > MaxPattern:
		return SearchResult{}, orchestrator.FieldErrorf("pattern", "pattern is longer than %d bytes", MaxPattern)
	case maxResults < 0 || maxResults > MaxSearchResults:
		return SearchResult{}, orchestrator.FieldErrorf("max_results", "max_results must be 1 to %d", MaxSearchResults)
	case maxResults == 0:
		maxResults = DefaultSearchResults
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return SearchResult{}, orchestrator.FieldErrorf("pattern", "pattern is not a valid regular expression (RE2 syntax): %v", err)
	}
	info, data, ix, err := s.text(ctx, fs, p)
	if err != nil {
		return SearchResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, SearchTimeout)
	defer cancel()
	out := SearchResult{Matches: []SearchMatch{}, TotalLines: ix.total(), Hash: info.Hash}
	for k := range ix.total() {
		if k%1024 == 0 && ctx.Err() != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				out.Truncated = true
				break
			}
			return SearchResult{}, ctx.Err()
		}
		line := bytes.TrimSuffix(data[ix.off(k):ix.off(k+1)], []byte{'\n'})
		if !re.Match(line) {
			continue
		}
		if len(out.Matches) == maxResults {
			out.Truncated = true
			break
		}
		out.Matches = append(out.Matches, SearchMatch{Line: k + 1, Content: cutText(string(line), MaxSearchLine)})
	}
	return out, nil
}
