package api

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/invopop/jsonschema"
	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/files"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
)

// Bounds of the session filesystem routes.
const (
	// MaxAuditLimit bounds one page of GET /fs/_/audit.
	MaxAuditLimit = 1000
	// fsActionBody bounds the JSON body of the /fs/_/ actions.
	fsActionBody = 64 << 10
)

// fileRoutes lists the session filesystem routes (session-vfs.md), served
// when Config.Files is set. They bound their own bodies (fileBodyLimit).
func fileRoutes() []route {
	const base = "/sessions/:id/fs"
	rs := []route{
		op(http.MethodPost, base+"/_/stat", (*Server).fsStat, opDoc{summary: "Metadata of a file or directory (symlinks followed)", status: 200, req: StatRequest{}}),
		op(http.MethodPost, base+"/_/move", (*Server).fsMove, opDoc{summary: "Move or rename; parents of dst_path are created, dst_path must not exist", status: 200, req: TransferRequest{}}),
		op(http.MethodPost, base+"/_/copy", (*Server).fsCopy, opDoc{summary: "Copy a file or a directory recursively; dst_path must not exist", status: 201, req: TransferRequest{}}),
		op(http.MethodPost, base+"/_/grep", (*Server).fsGrep, opDoc{summary: "Search the text files (bounded: 100 files, 1000 matches)", status: 200, req: GrepRequest{}}),
		op(http.MethodGet, base+"/_/audit", (*Server).fsAudit, opDoc{summary: "The session's security audit records (refused paths, symlink escapes), newest first", status: 200, query: fsAuditQuery{}}),
	}
	// The root (base and base/) lists the top directory; its writes
	// answer only errors (a path below / is required; the root cannot be
	// deleted), so they document none.
	for _, p := range []string{"", "/"} {
		rs = append(rs,
			route{http.MethodGet, base + p, (*Server).fsGet, opDoc{summary: "List the top directory", status: 200, resp: listBody[vfs.FileInfo]{}}},
			route{http.MethodHead, base + p, (*Server).fsGet, opDoc{summary: "The headers of the top directory's list", status: 200}},
			route{http.MethodPost, base + p, answer(201, (*Server).fsPost), opDoc{summary: "Refused: a file needs a path below /"}},
			route{http.MethodPut, base + p, answer(200, (*Server).fsPut), opDoc{summary: "Refused: a file needs a path below /"}},
			route{http.MethodDelete, base + p, (*Server).fsDelete, opDoc{summary: "Refused: the root cannot be deleted"}},
		)
	}
	const path = base + "/*"
	rs = append(rs,
		route{http.MethodGet, path, (*Server).fsGet, opDoc{summary: "Read a file (JSON; raw bytes with Accept: application/octet-stream, ?download=true or ?download=inline, typed by the file's MIME type, Range: bytes=a-b → 206, past the end → 416; If-None-Match → 304) or list a directory. A path is at most 4096 bytes and each name 255 (422 past them), though the mount makes files deeper; a FIFO, socket or device is listed with its type, and reading one is a 409", status: 200, resp: oneOf{File{}, listBody[vfs.FileInfo]{}}, respRaw: true, partial: true, notModified: true, query: fsGetQuery{}}},
		route{http.MethodHead, path, (*Server).fsGet, opDoc{summary: "The headers of a read (ETag is the sha256 of the content)", status: 200, partial: true, notModified: true, query: fsGetQuery{}}},
		op(http.MethodPost, path, (*Server).fsPost, opDoc{summary: "Create a file (JSON, or the raw bytes as application/octet-stream) or a directory ({\"is_directory\": true}); missing parents are created", status: 201, req: WriteFileRequest{}, reqRaw: true}),
		op(http.MethodPut, path, (*Server).fsPut, opDoc{summary: "Update a file's content or readonly flag (If-Match: <hash> for a conditional write)", status: 200, req: WriteFileRequest{}, reqRaw: true}),
		route{http.MethodDelete, path, (*Server).fsDelete, opDoc{summary: "Delete a file, or a directory with ?recursive=true", status: 204, query: fsDeleteQuery{}}},
	)
	return rs
}

// fileBodyLimit is the body limit of a file route: a whole file (as base64
// JSON) for POST and PUT of a path, a small JSON object for the rest.
func (s *Server) fileBodyLimit(r route) int64 {
	if (r.method == http.MethodPost || r.method == http.MethodPut) && !strings.Contains(r.path, "/_/") {
		return s.cfg.Files.Config().MaxFileSize/3*4 + 64<<10
	}
	return fsActionBody
}

// filesOf returns the filesystem of the request's session as its caller
// may see it: all of it for the user, and for a node key what its node's
// config.allowed_paths allows, exactly as its mount does (refusals are
// audited with the node's id). A policy that cannot be read refuses all.
// A node spawned with workspace "fork" reaches its fork, as its mount does.
func (s *Server) filesOf(c echo.Context) (*vfs.FS, error) {
	fs := s.cfg.Files.Session(c.Param("id"))
	p := principal(c)
	if p.NodeID == "" {
		return fs, nil
	}
	ctx := c.Request().Context()
	n, err := s.sessions.NodeByID(ctx, p.NodeID)
	if err != nil {
		return nil, err
	}
	ws, err := s.cfg.Files.WorkspaceOfNode(ctx, c.Param("id"), n.ID)
	if err != nil {
		return nil, err
	}
	fs = s.cfg.Files.Session(ws)
	allowed, err := paths.AllowedPaths(n.Config)
	if err == nil {
		fs, err = fs.ForNode(n.ID, allowed)
	}
	if err != nil {
		return nil, orchestrator.Errorf(orchestrator.EForbidden, "node %s has an invalid files policy (%s); the session's owner must fix its config", n.ID, orchestrator.ErrorMessage(err))
	}
	return fs, nil
}

// fsPath is the file path of the request: "/" + the wildcard, unescaped.
func fsPath(c echo.Context) (string, error) {
	p := c.Param("*")
	if c.Request().URL.RawPath != "" {
		u, err := url.PathUnescape(p)
		if err != nil {
			return "", orchestrator.FieldErrorf("path", "path %q is not valid URL encoding", p)
		}
		p = u
	}
	return "/" + p, nil
}

// File is a file or directory of the session's filesystem, with the
// content of a file read or created.
type File struct {
	SessionID string `json:"session_id"`
	vfs.FileInfo
	Content  *string `json:"content,omitempty" jsonschema_description:"the file's content (GET and POST of a file)"`
	Encoding string  `json:"encoding,omitempty" jsonschema:"enum=text,enum=base64" jsonschema_description:"of content: text (UTF-8) or base64"`
}

// encodeContent picks text (UTF-8 without NUL in the first 8 KiB) or base64.
func encodeContent(b []byte) (string, string) {
	if bytes.IndexByte(b[:min(len(b), 8192)], 0) < 0 && utf8.Valid(b) {
		return string(b), "text"
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

func etag(hash string) string { return `"` + hash + `"` }

// unquoteETag strips W/ and the quotes of an If-Match or If-None-Match value.
func unquoteETag(v string) string {
	return strings.Trim(strings.TrimPrefix(strings.TrimSpace(v), "W/"), `"`)
}

// rawDisposition says whether a GET answers the raw bytes, and how: as an
// attachment (Accept: application/octet-stream, ?download=true), inline
// (?download=inline: a preview), or not at all ("": JSON).
func rawDisposition(c echo.Context) string {
	var q fsGetQuery
	_ = bindQuery(c, &q) // strings only: no error
	switch q.Download {
	case "true":
		return "attachment"
	case "inline":
		return "inline"
	}
	for _, part := range strings.Split(c.Request().Header.Get(echo.HeaderAccept), ",") {
		mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
		if mt == echo.MIMEOctetStream {
			return "attachment"
		}
	}
	return ""
}

// fsGetQuery is the query of GET and HEAD of a path.
type fsGetQuery struct {
	Download string `query:"download" jsonschema:"enum=true,enum=inline,enum=false" jsonschema_description:"true: answer the raw bytes as an attachment; inline: the raw bytes to show (a preview); both take Range (206, 416)"`
}

func (s *Server) fsGet(c echo.Context) error {
	ctx := c.Request().Context()
	p, err := fsPath(c)
	if err != nil {
		return err
	}
	fc, err := s.fileCaller(c)
	if err != nil {
		return err
	}
	fs := fc.FS
	info, err := fs.Stat(ctx, p)
	if err != nil {
		return err
	}
	if info.IsDir {
		entries, err := fs.List(ctx, p)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, list(entries))
	}
	hdr := c.Response().Header()
	if inm := unquoteETag(c.Request().Header.Get("If-None-Match")); inm != "" && inm == info.Hash {
		hdr.Set("ETag", etag(info.Hash))
		return c.NoContent(http.StatusNotModified)
	}
	if disp := rawDisposition(c); disp != "" {
		return s.download(c, fc, p, disp)
	}
	out, err := files.Do(s.files, ctx, fc, "read", map[string]string{"path": p}, func() (File, error) {
		info, r, err := fs.ReadFile(ctx, p)
		if err != nil {
			return File{}, err
		}
		var buf bytes.Buffer
		buf.Grow(int(info.Size))
		if _, err := buf.ReadFrom(r); err != nil {
			return File{}, err
		}
		content, enc := encodeContent(buf.Bytes())
		return File{SessionID: c.Param("id"), FileInfo: info, Content: &content, Encoding: enc}, nil
	})
	if err != nil {
		return err
	}
	hdr.Set("ETag", etag(out.Hash))
	return c.JSON(http.StatusOK, out)
}

// readSummary is what the audit keeps of a read.
func (f File) AuditSummary() any {
	return map[string]any{"size": f.Size, "hash": f.Hash}
}

// download serves file p's bytes (files.Service.Serve: its MIME type,
// one range, If-Range) as disposition, audited.
func (s *Server) download(c echo.Context, fc files.Caller, p, disp string) error {
	err := s.files.Serve(c.Response(), c.Request(), fc, p, disp)
	if err != nil && c.Response().Committed {
		return nil // the client went away mid-answer (audited as such)
	}
	return err
}

// WriteFileRequest is the JSON body of POST and PUT of a path.
type WriteFileRequest struct {
	Content     *string `json:"content,omitempty" jsonschema:"nullable" jsonschema_description:"the file's content; absent in a PUT that only sets is_readonly"`
	Encoding    string  `json:"encoding,omitempty" jsonschema:"enum=text,enum=base64" jsonschema_description:"of content (default text)"`
	IsReadonly  *bool   `json:"is_readonly,omitempty" jsonschema:"nullable"`
	IsDirectory bool    `json:"is_directory,omitempty" jsonschema_description:"POST only: create a directory"`
}

func isRawUpload(c echo.Context) bool {
	mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	return mt == echo.MIMEOctetStream
}

// humanBytes prints a limit the way the flags take it: 50 MiB, 1 GiB, 512 bytes.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// fileWrite reads what POST and PUT share: the writable path, the JSON
// body (empty for a raw upload) and the content.
func (s *Server) fileWrite(c echo.Context) (p string, body WriteFileRequest, data []byte, err error) {
	if p, err = fsPath(c); err != nil {
		return "", body, nil, err
	}
	if p, err = paths.CleanPath(p); err != nil {
		return "", body, nil, err
	}
	if err = writablePath("path", p); err != nil {
		return "", body, nil, err
	}
	if isRawUpload(c) {
		return p, body, nil, nil // streamed by the caller (rawWrite)
	}
	if err := decodeJSON(c, &body); err != nil {
		return "", body, nil, err
	}
	if body.IsDirectory {
		if body.Content != nil {
			return "", body, nil, badRequest("content", "a directory has no content")
		}
		return p, body, nil, nil
	}
	if body.Content == nil {
		return p, body, nil, nil
	}
	switch body.Encoding {
	case "", "text":
		return p, body, []byte(*body.Content), nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(*body.Content)
		if err != nil {
			return "", body, nil, badRequest("content", "content is not valid base64: %v", err)
		}
		return p, body, b, nil
	}
	return "", body, nil, badRequest("encoding", "encoding must be \"text\" or \"base64\", not %q", body.Encoding)
}

// writablePath refuses the root and the reserved names (/_stat, /_/...).
func writablePath(field, p string) error {
	if p == "/" {
		return orchestrator.FieldErrorf(field, "a path below / is required")
	}
	if paths.Reserved(p) {
		return orchestrator.FieldErrorf(field, "paths whose first name starts with _ are reserved: %s", p)
	}
	return nil
}

func (s *Server) fsPost(c echo.Context) (File, error) {
	ctx := c.Request().Context()
	p, body, data, err := s.fileWrite(c)
	if err != nil {
		return File{}, err
	}
	fc, err := s.fileCaller(c)
	if err != nil {
		return File{}, err
	}
	if isRawUpload(c) {
		return s.rawWrite(c, fc, p, vfs.WriteOptions{Mode: vfs.WriteCreate})
	}
	if body.IsDirectory {
		return files.Do(s.files, ctx, fc, "mkdir", map[string]string{"path": p}, func() (File, error) {
			info, _, err := fc.FS.MkdirAll(ctx, p, true)
			return File{SessionID: c.Param("id"), FileInfo: info}, err
		})
	}
	out, err := files.Do(s.files, ctx, fc, "create", map[string]any{"path": p, "size": len(data)}, func() (File, error) {
		info, _, err := fc.FS.WriteFile(ctx, p, data, vfs.WriteOptions{Mode: vfs.WriteCreate, Readonly: body.IsReadonly})
		return File{SessionID: c.Param("id"), FileInfo: info}, err
	})
	if err != nil {
		return File{}, err
	}
	c.Response().Header().Set("ETag", etag(out.Hash))
	content, enc := encodeContent(data)
	out.Content, out.Encoding = &content, enc
	return out, nil
}

// rawWrite streams the raw body of a POST or PUT into file p.
func (s *Server) rawWrite(c echo.Context, fc files.Caller, p string, opt vfs.WriteOptions) (File, error) {
	ctx := c.Request().Context()
	if max := s.cfg.Files.Config().MaxFileSize; c.Request().ContentLength > max {
		return File{}, orchestrator.Errorf(orchestrator.ETooLarge, "file exceeds the %s per-file limit (--file-max)", humanBytes(max))
	}
	out, err := files.Do(s.files, ctx, fc, "upload", map[string]any{"path": p, "if_match": opt.IfMatch}, func() (File, error) {
		d, err := s.uploadPart(c, fc.FS, p, c.Request().Body, opt)
		return File{SessionID: c.Param("id"), FileInfo: d.FileInfo}, err
	})
	if err != nil {
		return File{}, err
	}
	c.Response().Header().Set("ETag", etag(out.Hash))
	return out, nil
}

func (s *Server) fsPut(c echo.Context) (File, error) {
	ctx := c.Request().Context()
	p, body, data, err := s.fileWrite(c)
	if err != nil {
		return File{}, err
	}
	if body.IsDirectory {
		return File{}, badRequest("is_directory", "PUT updates a file; create directories with POST")
	}
	raw := isRawUpload(c)
	if !raw && body.Content == nil && body.IsReadonly == nil {
		return File{}, badRequest("content", "content is required")
	}
	opt := vfs.WriteOptions{Mode: vfs.WriteUpdate, IfMatch: unquoteETag(c.Request().Header.Get("If-Match")), Readonly: body.IsReadonly, NoContent: !raw && body.Content == nil}
	fc, err := s.fileCaller(c)
	if err != nil {
		return File{}, err
	}
	if raw {
		return s.rawWrite(c, fc, p, opt)
	}
	name, params := "write", map[string]any{"path": p, "size": len(data), "if_match": opt.IfMatch}
	if opt.NoContent {
		name, params = "set_readonly", map[string]any{"path": p, "is_readonly": *body.IsReadonly}
	}
	out, err := files.Do(s.files, ctx, fc, name, params, func() (File, error) {
		info, _, err := fc.FS.WriteFile(ctx, p, data, opt)
		return File{SessionID: c.Param("id"), FileInfo: info}, err
	})
	if err != nil {
		return File{}, err
	}
	c.Response().Header().Set("ETag", etag(out.Hash))
	return out, nil
}

// fsDeleteQuery is the query of DELETE of a path.
type fsDeleteQuery struct {
	Recursive bool `query:"recursive" jsonschema_description:"delete a directory with everything in it"`
}

func (s *Server) fsDelete(c echo.Context) error {
	p, err := fsPath(c)
	if err != nil {
		return err
	}
	var q fsDeleteQuery
	if err := bindQuery(c, &q); err != nil {
		return badRequest("recursive", "recursive must be true or false, not %q", c.QueryParam("recursive"))
	}
	fc, err := s.fileCaller(c)
	if err != nil {
		return err
	}
	if _, err := files.Do(s.files, c.Request().Context(), fc, "delete", map[string]any{"path": p, "recursive": q.Recursive}, func() (any, error) {
		return nil, fc.FS.Delete(c.Request().Context(), p, q.Recursive)
	}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// StatRequest is the body of POST .../fs/_/stat.
type StatRequest struct {
	Path string `json:"path"`
}

func (s *Server) fsStat(c echo.Context) (File, error) {
	var body StatRequest
	if err := decodeJSON(c, &body); err != nil {
		return File{}, err
	}
	if body.Path == "" {
		return File{}, badRequest("path", "path is required")
	}
	fs, err := s.filesOf(c)
	if err != nil {
		return File{}, err
	}
	info, err := fs.Stat(c.Request().Context(), body.Path)
	if err != nil {
		return File{}, err
	}
	return File{SessionID: c.Param("id"), FileInfo: info}, nil
}

// TransferRequest is the body of POST .../fs/_/move and .../fs/_/copy.
type TransferRequest struct {
	SrcPath string `json:"src_path"`
	DstPath string `json:"dst_path"`
}

// transfer reads the body of a move or copy.
func transfer(c echo.Context) (TransferRequest, error) {
	var body TransferRequest
	if err := decodeJSON(c, &body); err != nil {
		return body, err
	}
	if body.SrcPath == "" {
		return body, badRequest("src_path", "src_path is required")
	}
	if body.DstPath == "" {
		return body, badRequest("dst_path", "dst_path is required")
	}
	dst, err := paths.CleanPath(body.DstPath)
	if err != nil {
		return body, &orchestrator.Error{Code: orchestrator.ErrorCode(err), Field: "dst_path", Message: orchestrator.ErrorMessage(err)}
	}
	return body, writablePath("dst_path", dst)
}

func (s *Server) fsMove(c echo.Context) (File, error) {
	body, err := transfer(c)
	if err != nil {
		return File{}, err
	}
	fc, err := s.fileCaller(c)
	if err != nil {
		return File{}, err
	}
	return files.Do(s.files, c.Request().Context(), fc, "move", body, func() (File, error) {
		info, err := fc.FS.Move(c.Request().Context(), body.SrcPath, body.DstPath)
		return File{SessionID: c.Param("id"), FileInfo: info}, err
	})
}

func (s *Server) fsCopy(c echo.Context) (File, error) {
	body, err := transfer(c)
	if err != nil {
		return File{}, err
	}
	fc, err := s.fileCaller(c)
	if err != nil {
		return File{}, err
	}
	return files.Do(s.files, c.Request().Context(), fc, "copy", body, func() (File, error) {
		info, err := fc.FS.Copy(c.Request().Context(), body.SrcPath, body.DstPath)
		return File{SessionID: c.Param("id"), FileInfo: info}, err
	})
}

// GrepRequest is the body of POST .../fs/_/grep.
type GrepRequest struct {
	Pattern     string `json:"pattern" jsonschema_description:"a regular expression (RE2)"`
	PathPattern string `json:"path_pattern,omitempty" jsonschema_description:"a glob matched against the base name and the full path"`
}

func (s *Server) fsGrep(c echo.Context) (vfs.GrepResult, error) {
	var body GrepRequest
	if err := decodeJSON(c, &body); err != nil {
		return vfs.GrepResult{}, err
	}
	fc, err := s.fileCaller(c)
	if err != nil {
		return vfs.GrepResult{}, err
	}
	return files.Do(s.files, c.Request().Context(), fc, "grep", body, func() (vfs.GrepResult, error) {
		return fc.FS.Grep(c.Request().Context(), vfs.GrepOptions{Pattern: body.Pattern, PathPattern: body.PathPattern})
	})
}

// fsAuditQuery is the query of GET .../fs/_/audit.
type fsAuditQuery struct {
	Limit int64 `query:"limit" jsonschema_description:"page size"`
}

func (fsAuditQuery) JSONSchemaExtend(s *jsonschema.Schema) { bound(s, "limit", 1, MaxAuditLimit, 100) }

// fsAudit answers GET /fs/_/audit?limit=N: the session's security audit
// records (refused paths, symlink escapes, loops), newest first.
func (s *Server) fsAudit(c echo.Context) (listBody[vfs.AuditEntry], error) {
	var q fsAuditQuery
	if err := bindQuery(c, &q); err != nil {
		return listBody[vfs.AuditEntry]{}, orchestrator.FieldErrorf("limit", "limit must be a whole number from 1 to %d", MaxAuditLimit)
	}
	entries, err := s.cfg.Files.AuditLog(c.Request().Context(), c.Param("id"), int(q.Limit))
	return list(entries), err
}
