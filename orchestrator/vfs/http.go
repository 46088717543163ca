package vfs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
)

// Handler serves the session VFS over REST (session-vfs.md).
type Handler struct {
	v *VFS
}

// NewHandler returns the REST handler for v.
func NewHandler(v *VFS) *Handler { return &Handler{v: v} }

// Register adds the routes to g, which is mounted at
// /api/v1/sessions/:id/fs and has already authorized the session. The body
// limit in front of g must allow MaxFileSize raw bytes (or 4/3 of it as base64 JSON).
func (h *Handler) Register(g *echo.Group) {
	g.POST("/_/stat", h.stat)
	g.POST("/_/move", h.move)
	g.POST("/_/copy", h.copy)
	g.POST("/_/grep", h.grep)
	g.GET("/_/audit", h.audit)
	for _, p := range []string{"", "/", "/*"} {
		g.GET(p, h.get)
		g.HEAD(p, h.get)
		g.POST(p, h.post)
		g.PUT(p, h.put)
		g.DELETE(p, h.delete)
	}
}

func (h *Handler) fs(c echo.Context) *FS { return h.v.Session(c.Param("id")) }

// reqPath is the file path of the request: "/" + the wildcard, unescaped.
func reqPath(c echo.Context) (string, error) {
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

// fileJSON is a file with its content, as GET and POST answer.
type fileJSON struct {
	SessionID string `json:"session_id"`
	FileInfo
	Content  *string `json:"content,omitempty"`
	Encoding string  `json:"encoding,omitempty"`
}

type listJSON struct {
	Data []FileInfo `json:"data"`
}

// encode picks text (UTF-8 without NUL in the first 8 KiB) or base64.
func encode(b []byte) (string, string) {
	if bytes.IndexByte(b[:min(len(b), 8192)], 0) < 0 && utf8.Valid(b) {
		return string(b), "text"
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

func etag(hash string) string { return `"` + hash + `"` }

func ifMatch(c echo.Context) string {
	v := strings.TrimSpace(c.Request().Header.Get("If-Match"))
	v = strings.TrimPrefix(v, "W/")
	return strings.Trim(v, `"`)
}

func wantsRaw(c echo.Context) bool {
	for _, part := range strings.Split(c.Request().Header.Get(echo.HeaderAccept), ",") {
		mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
		if mt == echo.MIMEOctetStream {
			return true
		}
	}
	return c.QueryParam("download") == "true"
}

func (h *Handler) get(c echo.Context) error {
	ctx := c.Request().Context()
	p, err := reqPath(c)
	if err != nil {
		return err
	}
	fs := h.fs(c)
	info, err := fs.Stat(ctx, p)
	if err != nil {
		return err
	}
	if info.IsDir {
		list, err := fs.List(ctx, p)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, listJSON{Data: list})
	}
	hdr := c.Response().Header()
	if inm := strings.Trim(strings.TrimPrefix(strings.TrimSpace(c.Request().Header.Get("If-None-Match")), "W/"), `"`); inm != "" && inm == info.Hash {
		hdr.Set("ETag", etag(info.Hash))
		return c.NoContent(http.StatusNotModified)
	}
	info, r, err := fs.ReadFile(ctx, p)
	if err != nil {
		return err
	}
	hdr.Set("ETag", etag(info.Hash))
	if wantsRaw(c) {
		head := make([]byte, min(info.Size, 512))
		n, err := io.ReadFull(r, head)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return err
		}
		head = head[:n]
		hdr.Set(echo.HeaderContentType, http.DetectContentType(head))
		hdr.Set(echo.HeaderContentDisposition, mime.FormatMediaType("attachment", map[string]string{"filename": info.Name}))
		hdr.Set(echo.HeaderContentLength, strconv.FormatInt(info.Size, 10))
		c.Response().WriteHeader(http.StatusOK)
		if c.Request().Method == http.MethodHead {
			return nil
		}
		if _, err := c.Response().Write(head); err != nil {
			return nil // the client went away
		}
		_, _ = io.Copy(c.Response(), r)
		return nil
	}
	b := make([]byte, 0, info.Size)
	if b, err = readAllInto(b, r); err != nil {
		return err
	}
	content, enc := encode(b)
	return c.JSON(http.StatusOK, fileJSON{SessionID: fs.sid, FileInfo: info, Content: &content, Encoding: enc})
}

// writeBody is the JSON body of POST and PUT.
type writeBody struct {
	Content     *string `json:"content"`
	Encoding    string  `json:"encoding"`
	IsReadonly  *bool   `json:"is_readonly"`
	IsDirectory bool    `json:"is_directory"`
}

// badRequest answers 400 for a request whose shape is wrong (the API's error
// handler would answer 422 for EInvalid).
func badRequest(c echo.Context, field, format string, args ...any) error {
	return c.JSON(http.StatusBadRequest, map[string]any{"error": map[string]string{
		"code": orchestrator.EInvalid, "message": fmt.Sprintf(format, args...), "field": field,
	}})
}

// decodeStrict decodes one JSON object with no unknown fields; it answers 400
// itself and returns answered=true on failure.
func decodeStrict(c echo.Context, limit int64, v any) (answered bool, err error) {
	body := io.LimitReader(c.Request().Body, limit+1)
	raw, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return false, orchestrator.Errorf(orchestrator.ETooLarge, "request body too large: the limit is %d bytes", mbe.Limit)
		}
		return false, fmt.Errorf("read body: %w", err)
	}
	if int64(len(raw)) > limit {
		return false, orchestrator.Errorf(orchestrator.ETooLarge, "request body too large: the limit is %d bytes", limit)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return true, badRequest(c, "", "request body is empty; expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if f, ok := strings.CutPrefix(msg, "unknown field "); ok {
			name, _ := strconv.Unquote(f)
			return true, badRequest(c, name, "unknown field %q", name)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return true, badRequest(c, te.Field, "field %q must be %s, not %s", te.Field, te.Type.String(), te.Value)
		}
		return true, badRequest(c, "", "malformed JSON: %s", msg)
	}
	if dec.More() {
		return true, badRequest(c, "", "malformed JSON: unexpected data after the object")
	}
	return false, nil
}

func isRaw(c echo.Context) bool {
	mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	return mt == echo.MIMEOctetStream
}

// readRaw reads a raw upload body, bounded by the per-file limit.
func (h *Handler) readRaw(c echo.Context) ([]byte, error) {
	max := h.v.cfg.MaxFileSize
	if c.Request().ContentLength > max {
		return nil, orchestrator.Errorf(orchestrator.ETooLarge, "file exceeds the %s per-file limit", humanBytes(max))
	}
	b, err := io.ReadAll(io.LimitReader(c.Request().Body, max+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, orchestrator.Errorf(orchestrator.ETooLarge, "request body too large: the limit is %d bytes", mbe.Limit)
		}
		return nil, fmt.Errorf("read upload: %w", err)
	}
	if int64(len(b)) > max {
		return nil, orchestrator.Errorf(orchestrator.ETooLarge, "file exceeds the %s per-file limit", humanBytes(max))
	}
	return b, nil
}

// parseWrite turns the request into content and options. answered is set when
// a 400 has been written.
func (h *Handler) parseWrite(c echo.Context, body *writeBody) (data []byte, answered bool, err error) {
	if isRaw(c) {
		data, err = h.readRaw(c)
		return data, false, err
	}
	limit := h.v.cfg.MaxFileSize/3*4 + 64<<10
	if answered, err := decodeStrict(c, limit, body); answered || err != nil {
		return nil, answered, err
	}
	if body.IsDirectory {
		if body.Content != nil {
			return nil, true, badRequest(c, "content", "a directory has no content")
		}
		return nil, false, nil
	}
	if body.Content == nil {
		return nil, false, nil
	}
	switch body.Encoding {
	case "", "text":
		return []byte(*body.Content), false, nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(*body.Content)
		if err != nil {
			return nil, true, badRequest(c, "content", "content is not valid base64: %v", err)
		}
		return b, false, nil
	}
	return nil, true, badRequest(c, "encoding", "encoding must be \"text\" or \"base64\", not %q", body.Encoding)
}

func checkWritable(p string) error {
	if p == "/" {
		return orchestrator.FieldErrorf("path", "a path below / is required")
	}
	if Reserved(p) {
		return orchestrator.FieldErrorf("path", "paths whose first name starts with _ are reserved: %s", p)
	}
	return nil
}

// writeRequest reads what POST and PUT share: the writable path and the
// body (answered is true when parseWrite has already answered the request).
func (h *Handler) writeRequest(c echo.Context) (p string, body writeBody, data []byte, answered bool, err error) {
	if p, err = reqPath(c); err != nil {
		return "", body, nil, false, err
	}
	if p, err = CleanPath(p); err != nil {
		return "", body, nil, false, err
	}
	if err = checkWritable(p); err != nil {
		return "", body, nil, false, err
	}
	data, answered, err = h.parseWrite(c, &body)
	return p, body, data, answered, err
}

func (h *Handler) post(c echo.Context) error {
	ctx := c.Request().Context()
	p, body, data, answered, err := h.writeRequest(c)
	if answered || err != nil {
		return err
	}
	fs := h.fs(c)
	if body.IsDirectory {
		info, _, err := fs.MkdirAll(ctx, p, true)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusCreated, fileJSON{SessionID: fs.sid, FileInfo: info})
	}
	info, _, err := fs.WriteFile(ctx, p, data, WriteOptions{Mode: WriteCreate, Readonly: body.IsReadonly})
	if err != nil {
		return err
	}
	c.Response().Header().Set("ETag", etag(info.Hash))
	content, enc := encode(data)
	return c.JSON(http.StatusCreated, fileJSON{SessionID: fs.sid, FileInfo: info, Content: &content, Encoding: enc})
}

func (h *Handler) put(c echo.Context) error {
	ctx := c.Request().Context()
	p, body, data, answered, err := h.writeRequest(c)
	if answered || err != nil {
		return err
	}
	if body.IsDirectory {
		return badRequest(c, "is_directory", "PUT updates a file; create directories with POST")
	}
	raw := isRaw(c)
	if !raw && body.Content == nil && body.IsReadonly == nil {
		return badRequest(c, "content", "content is required")
	}
	opt := WriteOptions{Mode: WriteUpdate, IfMatch: ifMatch(c), Readonly: body.IsReadonly, NoContent: !raw && body.Content == nil}
	fs := h.fs(c)
	info, _, err := fs.WriteFile(ctx, p, data, opt)
	if err != nil {
		return err
	}
	c.Response().Header().Set("ETag", etag(info.Hash))
	return c.JSON(http.StatusOK, fileJSON{SessionID: fs.sid, FileInfo: info})
}

func (h *Handler) delete(c echo.Context) error {
	p, err := reqPath(c)
	if err != nil {
		return err
	}
	recursive := false
	if q := c.QueryParam("recursive"); q != "" {
		if recursive, err = strconv.ParseBool(q); err != nil {
			return badRequest(c, "recursive", "recursive must be true or false, not %q", q)
		}
	}
	if err := h.fs(c).Delete(c.Request().Context(), p, recursive); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *Handler) stat(c echo.Context) error {
	var body struct {
		Path string `json:"path"`
	}
	if answered, err := decodeStrict(c, 64<<10, &body); answered || err != nil {
		return err
	}
	if body.Path == "" {
		return badRequest(c, "path", "path is required")
	}
	fs := h.fs(c)
	info, err := fs.Stat(c.Request().Context(), body.Path)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, fileJSON{SessionID: fs.sid, FileInfo: info})
}

type srcDst struct {
	SrcPath string `json:"src_path"`
	DstPath string `json:"dst_path"`
}

func (h *Handler) srcDst(c echo.Context) (srcDst, bool, error) {
	var body srcDst
	if answered, err := decodeStrict(c, 64<<10, &body); answered || err != nil {
		return body, answered, err
	}
	if body.SrcPath == "" {
		return body, true, badRequest(c, "src_path", "src_path is required")
	}
	if body.DstPath == "" {
		return body, true, badRequest(c, "dst_path", "dst_path is required")
	}
	dst, err := CleanPath(body.DstPath)
	if err != nil {
		return body, false, err
	}
	if err := checkWritable(dst); err != nil {
		return body, false, &orchestrator.Error{Code: orchestrator.EInvalid, Field: "dst_path", Message: err.Error()}
	}
	return body, false, nil
}

func (h *Handler) move(c echo.Context) error {
	body, answered, err := h.srcDst(c)
	if answered || err != nil {
		return err
	}
	fs := h.fs(c)
	info, err := fs.Move(c.Request().Context(), body.SrcPath, body.DstPath)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, fileJSON{SessionID: fs.sid, FileInfo: info})
}

func (h *Handler) copy(c echo.Context) error {
	body, answered, err := h.srcDst(c)
	if answered || err != nil {
		return err
	}
	fs := h.fs(c)
	info, err := fs.Copy(c.Request().Context(), body.SrcPath, body.DstPath)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, fileJSON{SessionID: fs.sid, FileInfo: info})
}

func (h *Handler) grep(c echo.Context) error {
	var body struct {
		Pattern     string `json:"pattern"`
		PathPattern string `json:"path_pattern"`
	}
	if answered, err := decodeStrict(c, 64<<10, &body); answered || err != nil {
		return err
	}
	res, err := h.fs(c).Grep(c.Request().Context(), GrepOptions{Pattern: body.Pattern, PathPattern: body.PathPattern})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}
