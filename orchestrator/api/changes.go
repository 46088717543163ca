package api

import (
	"fmt"
	"mime"
	"net/http"
	"strings"
	"syscall"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/changes"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/protocol"
)

// changesRoutes are the review routes (orchestrator/changes): a
// workspace's changes as git sees them, one file's diff, comments on a
// diff's lines sent to the agent, and downloads (archives, a git bundle, a
// patch series). Served when Config.Files is set; the user's only (a node
// key is refused: the diff and the archives read past allowed_paths).
func changesRoutes() []route {
	const sess = "/sessions/:id"
	const node = sess + "/nodes/:node"
	dl := "the workspace (or the directory path) as a .tar.gz or .zip archive, streamed"
	cdl := "the changes since the base: tar.gz or zip of the files added or changed (deleted ones listed in FILEPATH-DELETED), a git bundle of base..HEAD (base none: the whole history), or the commits as a patch series (git format-patch, for git am)"
	return []route{
		op(http.MethodGet, sess+"/changes", (*Server).sessionChanges, opDoc{summary: "The session's shared workspace's changes: the commits base..HEAD with their diff, and the working tree against HEAD (uncommitted), each file with git's status (renames detected) and unified diff", status: 200, query: changesQuery{}}),
		op(http.MethodGet, sess+"/changes/file", (*Server).sessionChangesFile, opDoc{summary: "One file's diff of the session's changes, in full (\"show anyway\" for a large one)", status: 200, query: changesFileQuery{}}),
		{http.MethodGet, sess + "/changes/download", (*Server).sessionChangesDownload, opDoc{summary: "Download the session's changes: " + cdl, status: 200, respRaw: true, query: changesDownloadQuery{}}},
		{http.MethodGet, sess + "/download", (*Server).sessionDownload, opDoc{summary: "Download " + dl, status: 200, respRaw: true, query: downloadQuery{}}},
		op(http.MethodGet, node+"/changes", (*Server).nodeChanges, opDoc{summary: "A node's changes (its fork's for a forked node, else the shared workspace's): the commits base..HEAD with their diff, and the working tree against HEAD (uncommitted)", status: 200, query: changesQuery{}}),
		op(http.MethodGet, node+"/changes/file", (*Server).nodeChangesFile, opDoc{summary: "One file's diff of a node's changes, in full", status: 200, query: changesFileQuery{}}),
		{http.MethodGet, node + "/changes/download", (*Server).nodeChangesDownload, opDoc{summary: "Download a node's changes: " + cdl, status: 200, respRaw: true, query: changesDownloadQuery{}}},
		{http.MethodGet, node + "/download", (*Server).nodeDownload, opDoc{summary: "Download a node's workspace: " + dl, status: 200, respRaw: true, query: downloadQuery{}}},
		op(http.MethodPost, node+"/comments", (*Server).postComment, opDoc{summary: "Comment on lines of a file's diff: the agent gets a message quoting the file, the line range and the lines, with the comment (the message's comment field links back to the diff)", status: 202, req: CommentRequest{}}),
	}
}

// changesQuery is the query of GET .../changes.
type changesQuery struct {
	Base string `query:"base" jsonschema_description:"what the commits are measured against: clone (the commit the session was cloned at), fork (a forked node's fork point), none (the whole history), or a branch, tag or commit of the repository; default: fork for a forked node, else clone when the session was cloned, else none"`
	Text string `query:"text" jsonschema:"enum=true,enum=false" jsonschema_description:"false: the file list without the patches"`
}

// changesFileQuery is the query of GET .../changes/file.
type changesFileQuery struct {
	Base    string `query:"base" jsonschema_description:"as for .../changes"`
	Section string `query:"section" jsonschema:"enum=uncommitted,enum=committed" jsonschema_description:"the part of the changes the file is in"`
	Path    string `query:"path" jsonschema_description:"the file's path (its new path for a rename)"`
}

// target resolves the request's workspace: the node's (its fork, or the
// shared one) or, without a node, the session's shared workspace.
func (s *Server) target(c echo.Context) (changes.Target, error) {
	ctx := c.Request().Context()
	sid := c.Param("id")
	if c.Param("node") == "" {
		if _, err := s.sessions.GetSession(ctx, user(c).ID, sid); err != nil {
			return changes.Target{}, err
		}
		return changes.Target{SessionID: sid, Workspace: sid}, nil
	}
	n, err := s.sessions.GetNode(ctx, user(c).ID, sid, c.Param("node"))
	if err != nil {
		return changes.Target{}, err
	}
	t := changes.Target{SessionID: sid, NodeID: n.ID, Workspace: sid}
	fk, err := s.cfg.Files.ForkOfNode(ctx, n.ID)
	switch {
	case err == nil:
		t.Workspace, t.Fork = fk.ID, &fk
	case !vfs.IsErrno(err, syscall.ENOENT):
		return changes.Target{}, err
	}
	return t, nil
}

func (s *Server) changesOf(c echo.Context) (changes.Changes, error) {
	t, err := s.target(c)
	if err != nil {
		return changes.Changes{}, err
	}
	var q changesQuery
	_ = bindQuery(c, &q) // strings only: no error
	return s.changes.Changes(c.Request().Context(), t, changes.Options{Base: q.Base, NoText: q.Text == "false"})
}

func (s *Server) changesFile(c echo.Context) (changes.FileDiff, error) {
	t, err := s.target(c)
	if err != nil {
		return changes.FileDiff{}, err
	}
	var q changesFileQuery
	_ = bindQuery(c, &q)
	if q.Path == "" {
		return changes.FileDiff{}, badRequest("path", "path is required")
	}
	if q.Section == "" {
		q.Section = changes.SectionUncommitted
	}
	return s.changes.File(c.Request().Context(), t, changes.Options{Base: q.Base}, q.Section, q.Path)
}

func (s *Server) sessionChanges(c echo.Context) (changes.Changes, error) { return s.changesOf(c) }
func (s *Server) nodeChanges(c echo.Context) (changes.Changes, error)    { return s.changesOf(c) }
func (s *Server) sessionChangesFile(c echo.Context) (changes.FileDiff, error) {
	return s.changesFile(c)
}
func (s *Server) nodeChangesFile(c echo.Context) (changes.FileDiff, error) { return s.changesFile(c) }

// Bounds of a comment.
const (
	maxCommentLines = 500
	maxCommentBody  = 64 << 10
)

// CommentRequest is the body of POST .../comments: a comment on lines of
// a file's diff.
type CommentRequest struct {
	Path string `json:"path"`
	// StartLine and EndLine are line numbers of the file on Side (new: as
	// changed; old: before the change).
	StartLine int    `json:"start_line" jsonschema:"minimum=1"`
	EndLine   int    `json:"end_line" jsonschema:"minimum=1"`
	Side      string `json:"side" jsonschema:"enum=old,enum=new"`
	Section   string `json:"section,omitempty" jsonschema:"enum=uncommitted,enum=committed"`
	Base      string `json:"base,omitempty"`
	// Lines are the diff's lines selected, as shown (each led by ' ', '+'
	// or '-'); they are quoted to the agent.
	Lines []string `json:"lines"`
	Body  string   `json:"body" jsonschema_description:"the comment"`
}

func (s *Server) postComment(c echo.Context) (protocol.Record, error) {
	var req CommentRequest
	if err := decodeJSON(c, &req); err != nil {
		return protocol.Record{}, err
	}
	switch {
	case strings.TrimSpace(req.Path) == "":
		return protocol.Record{}, orchestrator.FieldErrorf("path", "path is required")
	case req.StartLine < 1 || req.EndLine < req.StartLine:
		return protocol.Record{}, orchestrator.FieldErrorf("start_line", "lines %d to %d are not a range: 1 <= start_line <= end_line", req.StartLine, req.EndLine)
	case req.Side != "old" && req.Side != "new":
		return protocol.Record{}, orchestrator.FieldErrorf("side", "side must be old or new, not %q", req.Side)
	case req.Section != "" && req.Section != changes.SectionUncommitted && req.Section != changes.SectionCommitted:
		return protocol.Record{}, orchestrator.FieldErrorf("section", "section must be uncommitted or committed, not %q", req.Section)
	case len(req.Lines) == 0 || len(req.Lines) > maxCommentLines:
		return protocol.Record{}, orchestrator.FieldErrorf("lines", "lines must hold the 1 to %d lines commented on", maxCommentLines)
	case strings.TrimSpace(req.Body) == "":
		return protocol.Record{}, orchestrator.FieldErrorf("body", "body is required and must not be empty")
	case len(req.Body) > maxCommentBody:
		return protocol.Record{}, orchestrator.FieldErrorf("body", "body is over %d bytes", maxCommentBody)
	}
	in := protocol.MessageInput{
		Type: protocol.TypeMessage, From: protocol.FromUser, Content: commentText(req),
		Comment: &protocol.DiffComment{Path: strings.TrimPrefix(req.Path, "/"), StartLine: req.StartLine, EndLine: req.EndLine, Side: req.Side, Section: req.Section, Base: req.Base},
	}
	return s.deliver(c, in)
}

// commentText is what an agent that reads only content gets: the file,
// the line range and the lines quoted, then the comment.
func commentText(req CommentRequest) string {
	var b strings.Builder
	where := fmt.Sprintf("line %d", req.StartLine)
	if req.EndLine != req.StartLine {
		where = fmt.Sprintf("lines %d-%d", req.StartLine, req.EndLine)
	}
	side := ""
	if req.Side == "old" {
		side = " (before the change)"
	}
	fmt.Fprintf(&b, "Comment on %s, %s%s:\n\n", strings.TrimPrefix(req.Path, "/"), where, side)
	for _, l := range req.Lines {
		l = strings.TrimRight(l, "\r\n")
		if len(l) > 1000 {
			l = l[:1000] + "…"
		}
		b.WriteString("> ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.TrimSpace(req.Body))
	return b.String()
}

// downloadQuery is the query of GET .../download.
type downloadQuery struct {
	Path   string `query:"path" jsonschema_description:"a directory of the workspace (default: all of it)"`
	Format string `query:"format" jsonschema:"enum=tar.gz,enum=zip" jsonschema_description:"the archive's format (default tar.gz)"`
}

// changesDownloadQuery is the query of GET .../changes/download.
type changesDownloadQuery struct {
	Base   string `query:"base" jsonschema_description:"as for .../changes"`
	Format string `query:"format" jsonschema:"enum=tar.gz,enum=zip,enum=bundle,enum=patch" jsonschema_description:"tar.gz or zip: the files added or changed; bundle: a git bundle of base..HEAD; patch: base..HEAD as a patch series (git format-patch)"`
}

func (s *Server) sessionDownload(c echo.Context) error { return s.workspaceDownload(c) }
func (s *Server) nodeDownload(c echo.Context) error    { return s.workspaceDownload(c) }

func (s *Server) sessionChangesDownload(c echo.Context) error { return s.changesDownload(c) }
func (s *Server) nodeChangesDownload(c echo.Context) error    { return s.changesDownload(c) }

// attachment sets the headers of a download named name.
func attachment(c echo.Context, name, contentType string) {
	hdr := c.Response().Header()
	hdr.Set(echo.HeaderContentType, contentType)
	hdr.Set(echo.HeaderContentDisposition, mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	hdr.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	c.Response().WriteHeader(http.StatusOK)
}

// downloadName is a file name for what t downloads: the session's (and
// node's) name, made safe.
func (s *Server) downloadName(c echo.Context, t changes.Target, what string) string {
	ctx := c.Request().Context()
	name := t.SessionID
	if sess, err := s.sessions.GetSession(ctx, user(c).ID, t.SessionID); err == nil {
		name = sess.Name
	}
	if t.NodeID != "" {
		if n, err := s.sessions.GetNode(ctx, user(c).ID, t.SessionID, t.NodeID); err == nil {
			name += "-" + n.Name
		}
	}
	if what != "" {
		name += "-" + what
	}
	return safeName(name)
}

// safeName keeps letters, digits, '-', '_' and '.' of a name.
func safeName(s string) string {
	b := []byte(s)
	out := b[:0]
	for _, ch := range b {
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', ch == '-', ch == '_', ch == '.':
			out = append(out, ch)
		case ch == ' ':
			out = append(out, '-')
		}
	}
	if len(out) == 0 {
		return "workspace"
	}
	return string(out)
}

func contentTypeOf(format string) string {
	switch format {
	case changes.FormatZip:
		return "application/zip"
	case "bundle":
		return "application/x-git-bundle"
	case "patch":
		return "text/x-patch; charset=utf-8"
	}
	return "application/gzip"
}

func (s *Server) workspaceDownload(c echo.Context) error {
	t, err := s.target(c)
	if err != nil {
		return err
	}
	var q downloadQuery
	_ = bindQuery(c, &q)
	if q.Format == "" {
		q.Format = changes.FormatTarGz
	}
	a, err := s.changes.WorkspaceArchive(c.Request().Context(), t.Workspace, q.Path, q.Format)
	if err != nil {
		return err
	}
	what := ""
	if p := strings.Trim(q.Path, "/"); p != "" {
		what = strings.ReplaceAll(p, "/", "-")
	}
	attachment(c, a.Name(s.downloadName(c, t, what)), contentTypeOf(q.Format))
	if _, err := a.WriteTo(c.Response()); err != nil {
		s.log.Warn("download cut", "session", t.SessionID, "err", err)
	}
	return nil
}

func (s *Server) changesDownload(c echo.Context) error {
	ctx := c.Request().Context()
	t, err := s.target(c)
	if err != nil {
		return err
	}
	var q changesDownloadQuery
	_ = bindQuery(c, &q)
	if q.Format == "" {
		q.Format = changes.FormatTarGz
	}
	opt := changes.Options{Base: q.Base}
	name := s.downloadName(c, t, "changes")
	switch q.Format {
	case "bundle", "patch":
		// the headers go out with the first byte: a failure before it is
		// an error answer, one after it cuts the download
		w := &lazyAttachment{c: c, name: name + "." + q.Format, contentType: contentTypeOf(q.Format)}
		if q.Format == "bundle" {
			err = s.changes.Bundle(ctx, t, opt, w)
		} else {
			err = s.changes.Patches(ctx, t, opt, w)
		}
		if err != nil && c.Response().Committed {
			s.log.Warn("download cut", "session", t.SessionID, "err", err)
			return nil
		}
		return err
	}
	a, err := s.changes.ChangesArchive(ctx, t, opt, q.Format)
	if err != nil {
		return err
	}
	attachment(c, a.Name(name), contentTypeOf(q.Format))
	if _, err := a.WriteTo(c.Response()); err != nil {
		s.log.Warn("download cut", "session", t.SessionID, "err", err)
	}
	return nil
}

// lazyAttachment sends a download's headers with its first byte.
type lazyAttachment struct {
	c                 echo.Context
	name, contentType string
}

func (l *lazyAttachment) Write(p []byte) (int, error) {
	if !l.c.Response().Committed {
		attachment(l.c, l.name, l.contentType)
	}
	return l.c.Response().Write(p)
}
