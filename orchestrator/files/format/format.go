// Package format is the format tier of the session's files
// (../shared/spec/files.md "Tier 3"): spreadsheets (xlsx, csv), PDFs and
// images as cells, pages and pixels, served as tools (spreadsheet_*,
// pdf_*, image_*) of the orchestrator/files registry and so on every API
// that serves it. Every operation is bounded (cells, pages, pixels, time)
// and a file it cannot read is a 422 naming the problem, never a panic.
package format

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/files"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// Bounds of the format operations.
const (
	// MaxPixels bounds the images decoded (read from the header first).
	MaxPixels = 50_000_000
	// MaxSheetCells bounds the cells of one sheet parsed; MaxReadCells the
	// cells one read returns; MaxWriteCells those one write sets.
	MaxSheetCells = 5_000_000
	MaxReadCells  = 100_000
	MaxWriteCells = 100_000
	// MaxUnzip bounds the uncompressed size of an xlsx (a zip), all of
	// it parsed in memory (excelize would spill larger sheets to
	// temporary files).
	MaxUnzip = 256 << 20
	// MaxPages bounds the pages of a PDF read; MaxTextPages the pages one
	// text extraction returns; MaxText the text it returns.
	MaxPages     = 5000
	MaxTextPages = 200
	MaxText      = 512 << 10
	// MaxMergeFiles bounds pdf_merge's inputs; MaxSplitParts pdf_split's.
	MaxMergeFiles = 50
	MaxSplitParts = 100
	// MaxSampleRows bounds the rows a sheet summary shows at each end.
	MaxSampleRows = 100
	// OpTimeout bounds the time of one parse or one edit.
	OpTimeout = 30 * time.Second
)

// tier serves the format tools on a files.Service.
type tier struct{ s *files.Service }

// Register adds the format tools to s: the agent API, the native agents
// and the user API serve them from its registry.
func Register(s *files.Service) error { return s.Register(Tools(s)...) }

// Definitions returns the format tools without a service (to document
// them; a Service that Register was given serves its own).
func Definitions() []files.Tool { return Tools(nil) }

// Tools returns the format tools served on s.
func Tools(s *files.Service) []files.Tool {
	t := &tier{s}
	return append(append(t.sheetTools(), t.pdfTools()...), t.imageTools()...)
}

// FileID names the file a tool works on; IfMatch makes an edit
// conditional on the file's hash (files' own, so every tier documents
// them alike).
type (
	FileID  = files.FileID
	IfMatch = files.IfMatch
)

// Edited is the outcome of an edit: the file written and its new hash.
type Edited struct {
	OK   bool   `json:"ok"`
	ID   string `json:"id" jsonschema_description:"the file written"`
	Size int64  `json:"size"`
	Hash string `json:"hash" jsonschema_description:"the new sha256: if_match of the next edit"`
}

// source is a file read for an operation.
type source struct {
	path string
	info vfs.FileInfo
	data []byte // shared with the cache: never changed
	key  files.CacheKey
}

// read returns file id of c, whole (from the cache of hot reads when it
// is current).
func (t *tier) read(ctx context.Context, c files.Caller, field, id string) (source, error) {
	if c.FS == nil {
		return source{}, orchestrator.Errorf(orchestrator.EForbidden, "this caller reaches no files")
	}
	p, err := files.CleanID(field, id)
	if err != nil {
		return source{}, err
	}
	info, data, err := t.s.Content(ctx, c.FS, p)
	if err != nil {
		return source{}, err
	}
	return source{path: info.Path, info: info, data: data, key: files.CacheKey{Workspace: c.FS.SessionID(), Ino: info.Ino}}, nil
}

// checkIfMatch fails when the caller's if_match is not the hash read.
func (src source) checkIfMatch(ifMatch string) error {
	if ifMatch != "" && ifMatch != src.info.Hash {
		return files.Changed(src.path, src.info.Hash)
	}
	return nil
}

// write writes data as file p of c: over the content of hash ifMatch
// ("": whatever is there). A file made from others (a merge, a converted
// copy) is recorded with source derived.
func (t *tier) write(ctx context.Context, c files.Caller, p string, data []byte, ifMatch string, derived bool) (Edited, error) {
	fs := c.FS
	if derived {
		fs = fs.WithSource(vfs.SourceDerived)
	}
	info, _, err := fs.WriteFile(ctx, p, data, vfs.WriteOptions{IfMatch: ifMatch})
	if err != nil {
		if orchestrator.ErrorCode(err) == orchestrator.EPreconditionFailed {
			if cur, serr := c.FS.Stat(ctx, p); serr == nil {
				return Edited{}, files.Changed(cur.Path, cur.Hash)
			}
		}
		return Edited{}, files.LimitError(err)
	}
	return Edited{OK: true, ID: info.Path, Size: info.Size, Hash: info.Hash}, nil
}

// output is where an operation on src writes: the output argument
// (cleaned), or src itself.
func output(field, out, src string) (string, bool, error) {
	if strings.TrimSpace(out) == "" {
		return src, false, nil
	}
	p, err := files.CleanID(field, out)
	return p, p != src, err
}

// withExt is p with its extension replaced by ext (".png").
func withExt(p, ext string) string {
	return strings.TrimSuffix(p, path.Ext(p)) + ext
}

// malformed is the 422 of a file that is not what kind says.
func malformed(p, kind string, err error) error {
	var oe *orchestrator.Error
	if errors.As(err, &oe) {
		return err
	}
	msg := err.Error()
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return orchestrator.Errorf(orchestrator.EInvalid, "%s is not a readable %s: %s", p, kind, msg)
}

// errTimeout ends an operation that ran past OpTimeout.
var errTimeout = errors.New("the operation took too long")

// guard runs fn bounded in time (OpTimeout, or ctx's end) and turns a
// panic of a parser into an error. On a timeout fn is left to finish in
// its goroutine (its input is bounded in size), and its result dropped.
func guard[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r.err = fmt.Errorf("the parser failed on it (%v)", p)
			}
			done <- r
		}()
		r.v, r.err = fn()
	}()
	tm := time.NewTimer(OpTimeout)
	defer tm.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-tm.C:
		var zero T
		return zero, orchestrator.Errorf(orchestrator.EInvalid, "%v: more than %s", errTimeout, OpTimeout)
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
