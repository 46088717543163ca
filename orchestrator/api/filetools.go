package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/invopop/jsonschema"
	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/files"
	"github.com/filepath-dev/filepath/orchestrator/files/format"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
)

// The file tiers on the user API (orchestrator/files): the tools that
// name a route (POST .../fs/_/{route}: the text tier, raw bytes, info,
// list), multipart uploads, the session's key-value store, the session's
// audit, and the cache's counters. Every file operation is audited with
// who made it (files.Do).

// fileToolRoutes are the user API routes of tools (built-in ones for the
// committed document; the server's own, plug-ins included, when served).
func fileToolRoutes(tools []files.Tool) []route {
	var rs []route
	for _, t := range tools {
		if t.Route == "" {
			continue
		}
		doc := opDoc{summary: t.Description + " (the tool " + t.Name + ")", status: 200, req: t.In, resp: t.Out, bodyLimit: toolBodyLimit(t)}
		if t.IfMatch {
			doc.summary += "; If-Match: <hash> gives if_match"
		}
		rs = append(rs, route{http.MethodPost, "/sessions/:id/fs/_/" + t.Route, toolHandler(t.Name), doc})
		// and on a node's workspace (its fork, or the session's), as the
		// other file routes are
		nd := doc
		nd.summary = "The node's workspace (its fork, or the session's): " + doc.summary
		rs = append(rs, route{http.MethodPost, "/sessions/:id/nodes/:node/fs/_/" + t.Route, toolHandler(t.Name), nd})
	}
	return rs
}

// filesRoutes are the routes of orchestrator/files besides the tools'.
func filesRoutes() []route {
	upload := opDoc{summary: "Upload files (multipart/form-data: each file part goes to dir/<its filename>, which may name subdirectories; streamed, never held whole; 413 names the per-file limit or the session's quota)", status: 201, query: uploadQuery{},
		// the session's quota bounds the files; a part, the per-file limit
		bodyLimit: func(s *Server) int64 { return s.cfg.Files.Config().SessionQuota + 1<<20 }}
	nodeUpload := upload
	thumbDoc := opDoc{summary: "A thumbnail of an image (PNG, JPEG, GIF, WebP) fitted into size x size pixels: image/jpeg, or image/png when it has transparency; ETag from the file's hash and the size (If-None-Match → 304); 415 for a file that is not an image, 422 for a broken one or one over 50 megapixels", status: 200, query: thumbnailQuery{}, respRaw: true, notModified: true}
	nodeThumbDoc := thumbDoc
	nodeThumbDoc.summary = "The node's workspace (its fork, or the session's): " + thumbDoc.summary
	nodeUpload.summary = "The node's workspace (its fork, or the session's): " + upload.summary
	return []route{
		op(http.MethodPost, "/sessions/:id/fs/_/upload", (*Server).fsUpload, upload),
		op(http.MethodPost, "/sessions/:id/nodes/:node/fs/_/upload", (*Server).fsUpload, nodeUpload),
		{http.MethodGet, "/sessions/:id/fs/_/thumbnail", (*Server).fsThumbnail, thumbDoc},
		{http.MethodGet, "/sessions/:id/nodes/:node/fs/_/thumbnail", (*Server).fsThumbnail, nodeThumbDoc},
		op(http.MethodGet, "/sessions/:id/kv", (*Server).kvList, opDoc{summary: "The session's key-value store: its keys (without values), optionally those with a prefix", status: 200, query: kvListQuery{}}),
		op(http.MethodGet, "/sessions/:id/kv/*", (*Server).kvGet, opDoc{summary: "A value of the session's key-value store (the path is the key, slashes and all)", status: 200}),
		op(http.MethodPut, "/sessions/:id/kv/*", (*Server).kvPut, opDoc{summary: "Store a JSON value under a key (the path)", status: 200, req: KVPutRequest{}}),
		op(http.MethodDelete, "/sessions/:id/kv/*", (*Server).kvDelete, opDoc{summary: "Delete a key (the path)", status: 200}),
		op(http.MethodGet, "/sessions/:id/audit", (*Server).sessionAudit, opDoc{summary: "The session's audit, newest first: every node's tools, commands and agent-API calls, and the file operations of people (actor) in its workspace or a node's; page with before=<the last id>", status: 200, query: auditQuery{}}),
		op(http.MethodGet, "/admin/files/cache", (*Server).fileCacheStats, opDoc{summary: "The counters of the cache of hot reads (admins only)", status: 200}),
	}
}

// fileCaller is who the request acts as on the files, and what it reaches:
// a person on the session's workspace, or a node's key on its node's.
func (s *Server) fileCaller(c echo.Context) (files.Caller, error) {
	fs, err := s.filesOf(c)
	if err != nil {
		return files.Caller{}, err
	}
	p := principal(c)
	fc := files.Caller{SessionID: c.Param("id"), NodeID: p.NodeID, FS: fs}
	if p.NodeID == "" {
		fc.Actor = p.User.Name
	}
	return fc, nil
}

// toolBodyLimit bounds the arguments of a tool: a whole file's content
// (as base64, about 4/3 of it) for one that writes, a small object for one
// that only reads.
func toolBodyLimit(t files.Tool) func(*Server) int64 {
	if t.ReadOnly {
		return func(*Server) int64 { return fsActionBody }
	}
	return func(s *Server) int64 { return s.cfg.Files.Config().MaxFileSize/3*4 + 64<<10 }
}

// toolHandler serves tool name: the body is its arguments.
func toolHandler(name string) func(*Server, echo.Context) error {
	return func(s *Server, c echo.Context) error {
		t, ok := s.files.Tool(name)
		if !ok {
			return orchestrator.Errorf(orchestrator.ENotFound, "no tool %s", name)
		}
		raw, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return jsonError(err)
		}
		if im := unquoteETag(c.Request().Header.Get("If-Match")); im != "" && t.IfMatch {
			var args map[string]json.RawMessage
			if err := json.Unmarshal(raw, &args); err != nil {
				return jsonError(err)
			}
			if _, set := args["if_match"]; !set {
				args["if_match"], _ = json.Marshal(im)
				raw, _ = json.Marshal(args)
			}
		}
		fc, err := s.fileCaller(c)
		if err != nil {
			return err
		}
		out, err := s.files.Call(c.Request().Context(), fc, name, raw)
		if err != nil {
			if h := files.CurrentHash(err); h != "" {
				c.Response().Header().Set("ETag", etag(h))
			}
			return err
		}
		return c.JSON(http.StatusOK, out)
	}
}

// thumbnailQuery is the query of GET .../fs/_/thumbnail.
type thumbnailQuery struct {
	Path string `query:"path" jsonschema_description:"the image's path in the workspace"`
	Size int64  `query:"size" jsonschema_description:"the square the thumbnail fits in, in pixels (default 256, 16 to 1024); never enlarged"`
}

func (thumbnailQuery) JSONSchemaExtend(s *jsonschema.Schema) {
	bound(s, "size", 16, format.MaxThumbnail, format.DefaultThumbnail)
}

// fsThumbnail answers a thumbnail of an image, from the files cache when
// the file has not changed since one was made.
func (s *Server) fsThumbnail(c echo.Context) error {
	var q thumbnailQuery
	if err := bindQuery(c, &q); err != nil {
		return err
	}
	p, err := files.CleanID("path", q.Path)
	if err != nil {
		return err
	}
	fc, err := s.fileCaller(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	hdr := c.Response().Header()
	// revalidated on every use (the file may change), cheaply: the hash
	hdr.Set("Cache-Control", "private, no-cache")
	if inm := c.Request().Header.Get("If-None-Match"); inm != "" {
		if info, err := fc.FS.Stat(ctx, p); err == nil && !info.IsDir && strings.TrimPrefix(strings.TrimSpace(inm), "W/") == format.ThumbnailETag(info.Hash, int(q.Size)) {
			hdr.Set("ETag", format.ThumbnailETag(info.Hash, int(q.Size)))
			return c.NoContent(http.StatusNotModified)
		}
	}
	th, err := files.Do(s.files, ctx, fc, "thumbnail", map[string]any{"path": p, "size": q.Size}, func() (format.Thumb, error) {
		return format.Thumbnail(ctx, s.files, fc.FS, p, int(q.Size))
	})
	if err != nil {
		return err
	}
	hdr.Set("ETag", th.ETag)
	return c.Blob(http.StatusOK, th.ContentType, th.Data)
}

// uploadQuery is the query of POST .../fs/_/upload.
type uploadQuery struct {
	Dir       string `query:"dir" jsonschema_description:"the directory the files go to (default /; created when missing)"`
	Overwrite bool   `query:"overwrite" jsonschema_description:"replace files that exist (default: 409 for the first that does, and the files after it are not written)"`
}

// Uploaded is the answer of an upload: the files written, in the order sent.
type Uploaded struct {
	Data []files.Info `json:"data"`
}

// fsUpload streams each file part of a multipart body into the session
// filesystem: never more than vfs.UploadFlush of it in memory, nothing of
// a part that fails left behind (the parts before it stay written).
func (s *Server) fsUpload(c echo.Context) (Uploaded, error) {
	var q uploadQuery
	if err := bindQuery(c, &q); err != nil {
		return Uploaded{}, err
	}
	if q.Dir == "" {
		q.Dir = "/"
	}
	dir, err := paths.CleanPath(q.Dir)
	if err != nil {
		return Uploaded{}, &orchestrator.Error{Code: orchestrator.ErrorCode(err), Field: "dir", Message: orchestrator.ErrorMessage(err)}
	}
	if dir != "/" {
		if err := writablePath("dir", dir); err != nil {
			return Uploaded{}, err
		}
	}
	mt, params, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	if mt != "multipart/form-data" || params["boundary"] == "" {
		return Uploaded{}, badRequest("", "an upload is multipart/form-data with a boundary, not %q", mt)
	}
	fc, err := s.fileCaller(c)
	if err != nil {
		return Uploaded{}, err
	}
	ctx := c.Request().Context()
	mode := vfs.WriteCreate
	if q.Overwrite {
		mode = vfs.WriteUpsert
	}
	mr := multipart.NewReader(c.Request().Body, params["boundary"])
	out := Uploaded{Data: []files.Info{}}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Uploaded{}, bodyError(err)
		}
		if part.FileName() == "" {
			part.Close()
			continue // a form field
		}
		p, err := uploadPath(dir, part)
		if err != nil {
			return Uploaded{}, err
		}
		d, err := files.Do(s.files, ctx, fc, "upload", map[string]any{"path": p}, func() (files.Info, error) {
			return s.uploadPart(c, fc.FS, p, part, vfs.WriteOptions{Mode: mode})
		})
		part.Close()
		if err != nil {
			return Uploaded{}, err
		}
		out.Data = append(out.Data, d)
	}
	if len(out.Data) == 0 {
		return Uploaded{}, badRequest("", "the upload has no file part (a part with a filename)")
	}
	c.Response().Header().Set(echo.HeaderLocation, apiPrefix+"/sessions/"+c.Param("id")+"/fs"+out.Data[0].Path)
	return out, nil
}

// uploadPath is where a part goes: its file name (a relative path, as a
// folder upload sends) below dir.
func uploadPath(dir string, part *multipart.Part) (string, error) {
	name := part.FileName() // the base name only: multipart strips directories
	if _, ps, err := mime.ParseMediaType(part.Header.Get("Content-Disposition")); err == nil && ps["filename"] != "" {
		name = ps["filename"]
	}
	name = strings.ReplaceAll(name, `\`, "/")
	p, err := paths.CleanPath(path.Join(dir, name))
	if err != nil {
		return "", &orchestrator.Error{Code: orchestrator.ErrorCode(err), Field: "filename", Message: orchestrator.ErrorMessage(err)}
	}
	if p == dir || !strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/") {
		return "", orchestrator.FieldErrorf("filename", "file name %q leaves the upload's directory %s", name, dir)
	}
	return p, writablePath("filename", p)
}

// uploadPart streams r into file p.
func (s *Server) uploadPart(c echo.Context, fs *vfs.FS, p string, r io.Reader, opt vfs.WriteOptions) (files.Info, error) {
	ctx := c.Request().Context()
	up, err := fs.NewUpload(ctx, p)
	if err != nil {
		return files.Info{}, err
	}
	defer up.Abort()
	buf := make([]byte, 256<<10)
	if _, err := io.CopyBuffer(up, r, buf); err != nil {
		if c := orchestrator.ErrorCode(err); c == orchestrator.ETooLarge || c == orchestrator.EInsufficientStorage {
			return files.Info{}, files.LimitError(err)
		}
		return files.Info{}, bodyError(err) // the client's body broke off
	}
	d, _, err := up.Commit(ctx, opt)
	if err != nil {
		return files.Info{}, files.LimitError(err)
	}
	return files.Info{ID: d.Path, Detail: d}, nil
}

// bodyError is a failure to read the request's body.
func bodyError(err error) error {
	var mbe *http.MaxBytesError
	var oe *orchestrator.Error
	switch {
	case errors.As(err, &mbe):
		return orchestrator.Errorf(orchestrator.ETooLarge, "request body too large: the limit is %d bytes", mbe.Limit)
	case errors.As(err, &oe):
		return err
	}
	return badRequest("", "the request body could not be read: %v", err)
}

// kvKey is the key of a kv route: the path after kv/, unescaped.
func kvKey(c echo.Context) (string, error) {
	k := c.Param("*")
	if c.Request().URL.RawPath == "" {
		return k, nil
	}
	u, err := url.PathUnescape(k)
	if err != nil {
		return "", badRequest("key", "key %q is not valid URL encoding", k)
	}
	return u, nil
}

// kvListQuery is the query of GET .../kv.
type kvListQuery struct {
	Prefix string `query:"prefix" jsonschema_description:"only keys that start with this"`
}

func (s *Server) kvCaller(c echo.Context) files.Caller {
	p := principal(c)
	fc := files.Caller{SessionID: c.Param("id"), NodeID: p.NodeID}
	if p.NodeID == "" {
		fc.Actor = p.User.Name
	}
	return fc
}

func (s *Server) kvList(c echo.Context) (files.KVKeys, error) {
	var q kvListQuery
	if err := bindQuery(c, &q); err != nil {
		return files.KVKeys{}, err
	}
	fc := s.kvCaller(c)
	return files.Do(s.files, c.Request().Context(), fc, "kv_list", q.Prefix, func() (files.KVKeys, error) {
		return s.files.KVList(c.Request().Context(), fc.SessionID, q.Prefix)
	})
}

func (s *Server) kvGet(c echo.Context) (files.KVValue, error) {
	key, err := kvKey(c)
	if err != nil {
		return files.KVValue{}, err
	}
	fc := s.kvCaller(c)
	return files.Do(s.files, c.Request().Context(), fc, "kv_get", map[string]string{"key": key}, func() (files.KVValue, error) {
		return s.files.KVGet(c.Request().Context(), fc.SessionID, key)
	})
}

// KVPutRequest is the body of PUT .../kv/{key}.
type KVPutRequest struct {
	Value json.RawMessage `json:"value" jsonschema_description:"any JSON value (at most 256 KiB)"`
}

func (s *Server) kvPut(c echo.Context) (files.KVValue, error) {
	key, err := kvKey(c)
	if err != nil {
		return files.KVValue{}, err
	}
	var body KVPutRequest
	if err := decodeJSON(c, &body); err != nil {
		return files.KVValue{}, err
	}
	fc := s.kvCaller(c)
	return files.Do(s.files, c.Request().Context(), fc, "kv_set", map[string]any{"key": key, "value": body.Value}, func() (files.KVValue, error) {
		return s.files.KVSet(c.Request().Context(), fc.SessionID, key, body.Value)
	})
}

func (s *Server) kvDelete(c echo.Context) (files.KVDeleted, error) {
	key, err := kvKey(c)
	if err != nil {
		return files.KVDeleted{}, err
	}
	fc := s.kvCaller(c)
	return files.Do(s.files, c.Request().Context(), fc, "kv_delete", map[string]string{"key": key}, func() (files.KVDeleted, error) {
		return s.files.KVDelete(c.Request().Context(), fc.SessionID, key)
	})
}

func (s *Server) sessionAudit(c echo.Context) (AuditPage, error) {
	var q auditQuery
	if err := bindQuery(c, &q); err != nil {
		return AuditPage{}, err
	}
	calls, err := s.audit.SessionToolCalls(c.Request().Context(), c.Param("id"), q.Before, int(q.Limit))
	if err != nil {
		return AuditPage{}, err
	}
	page := AuditPage{Data: calls}
	if len(calls) == int(q.Limit) {
		page.NextBefore = calls[len(calls)-1].ID
	}
	return page, nil
}

func (s *Server) fileCacheStats(c echo.Context) (files.CacheStats, error) {
	if !user(c).IsAdmin {
		return files.CacheStats{}, orchestrator.Errorf(orchestrator.EForbidden, "the cache's counters are for admins")
	}
	return s.files.Cache().Stats(), nil
}

// storeRecorder keeps the audit of file operations in the store's
// tool_calls (the Audit tab): source user for a person's, api for an
// agent's.
type storeRecorder struct{ st *audit.Store }

// FileAudit returns the files.Recorder that writes to st.
func FileAudit(st *audit.Store) files.Recorder { return storeRecorder{st} }

func (r storeRecorder) RecordFileOp(ctx context.Context, a files.Audit) error {
	src := audit.SourceAPI
	if a.Actor != "" {
		src = audit.SourceUser
	}
	return r.st.RecordToolCall(ctx, audit.NewToolCall{SessionID: a.SessionID, NodeID: a.NodeID, Actor: a.Actor, Source: src, Name: a.Name,
		Parameters: a.Params, Result: a.Result, Error: a.Err, StartedAt: a.Started, CompletedAt: a.Completed})
}
