package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator/files"
	"github.com/filepath-dev/filepath/orchestrator/files/format"
)

// apiPrefix is where every JSON route lives.
const apiPrefix = "/api/v1"

// route is one /api/v1 route: how it is served and how it is documented.
type route struct {
	method  string
	path    string // below apiPrefix, Echo syntax (":id", "*")
	handler func(s *Server, c echo.Context) error
	doc     opDoc
}

// opDoc documents a route by its Go types: the OpenAPI document reflects
// their schemas (openapi.go).
type opDoc struct {
	summary string
	status  int // the success status (0: the route answers only errors)
	// query is the route's query struct (a zero value; query.go); nil: none.
	query any
	// req is the JSON body's type (a zero value); nil: none. reqRaw: the
	// body may be raw bytes instead (application/octet-stream).
	req    any
	reqRaw bool
	// resp is the JSON answer's type (a zero value; op sets it from the
	// handler's), or oneOf several; nil: no body. respRaw: the answer may
	// be raw bytes instead; text: it is text/plain; notModified: it may be
	// 304.
	resp        any
	respRaw     bool
	text        bool
	notModified bool
	// partial: it may answer 206 with a range of raw bytes.
	partial bool
	// bodyLimit, when set, bounds the request body instead of the
	// default (Config.MaxBody, or a file route's fileBodyLimit).
	bodyLimit func(*Server) int64
}

// oneOf is an answer that is one of several types.
type oneOf []any

// op is a route whose handler answers T with doc.status: the document
// describes the answer by T, and the compiler holds the handler to it.
func op[T any](method, path string, h func(*Server, echo.Context) (T, error), doc opDoc) route {
	doc.resp = *new(T)
	return route{method, path, answer(doc.status, h), doc}
}

// answer serves h: its answer with status, or its error.
func answer[T any](status int, h func(*Server, echo.Context) (T, error)) func(*Server, echo.Context) error {
	return func(s *Server, c echo.Context) error {
		v, err := h(s, c)
		if err != nil {
			return err
		}
		return c.JSON(status, v)
	}
}

// apiRoutes lists every /api/v1 route of this package. routes() registers
// them and the OpenAPI document describes them.
func apiRoutes() []route {
	return []route{
		op(http.MethodGet, "/me", (*Server).getMe, opDoc{summary: "The authenticated user", status: 200}),
		{http.MethodPost, "/logout", (*Server).logout, opDoc{summary: "End this browser session (all=true: every browser session of the user) and clear the login cookie; API keys answer 400", status: 204, query: logoutQuery{}}},
		op(http.MethodGet, "/agents", (*Server).listAgents, opDoc{summary: "The agent catalog, each agent with whether it can run on this server (and if not, why and the fix)", status: 200}),
		op(http.MethodGet, "/models", (*Server).listModels, opDoc{summary: "Models grouped by provider", status: 200}),
		op(http.MethodGet, "/openapi.json", (*Server).getOpenAPI, opDoc{summary: "This document", status: 200}),
		op(http.MethodPost, "/sessions", (*Server).createSession, opDoc{summary: "Create a session", status: 201, req: CreateSessionRequest{}}),
		op(http.MethodGet, "/sessions", (*Server).listSessions, opDoc{summary: "List the user's sessions", status: 200}),
		op(http.MethodGet, "/sessions/:id", (*Server).getSession, opDoc{summary: "Get a session", status: 200}),
		op(http.MethodPatch, "/sessions/:id", (*Server).patchSession, opDoc{summary: "Change a session: checks replaces its health checks (run in the workspace before every agent session; [] detects them from the repository); budget_tokens and budget_usd set its LLM budget (null: unlimited)", status: 200, req: PatchSessionRequest{}}),
		{http.MethodDelete, "/sessions/:id", (*Server).deleteSession, opDoc{summary: "Delete a session with its nodes and log", status: 204}},
		op(http.MethodPost, "/sessions/:id/start", (*Server).startSession, opDoc{summary: "Start the session's agents", status: 202}),
		op(http.MethodPost, "/sessions/:id/stop", (*Server).stopSession, opDoc{summary: "Stop the session's agents", status: 202}),
		op(http.MethodGet, "/sessions/:id/tree", (*Server).getTree, opDoc{summary: "The agent tree as a flat list", status: 200}),
		{http.MethodGet, "/sessions/:id/stream", (*Server).stream, opDoc{summary: "WebSocket: one JSON Record per text message, replay after `after` then live; close 1013: too slow, reconnect with after=<last seq>; 1001: server shutting down; 4404: session deleted; 4422: after is beyond the session's last record (reload)", status: 101, query: streamQuery{}}},
		op(http.MethodPost, "/sessions/:id/nodes", (*Server).createNode, opDoc{summary: "Create a node", status: 201, req: CreateNodeRequest{}}),
		op(http.MethodPatch, "/sessions/:id/nodes/:node", (*Server).patchNode, opDoc{summary: "Update a node", status: 200, req: PatchNodeRequest{}}),
		{http.MethodDelete, "/sessions/:id/nodes/:node", (*Server).deleteNode, opDoc{summary: "Delete a node and its subtree", status: 204}},
		op(http.MethodPost, "/sessions/:id/nodes/:node/move", (*Server).moveNode, opDoc{summary: "Move a node under another parent", status: 200, req: MoveNodeRequest{}}),
		op(http.MethodGet, "/sessions/:id/nodes/:node/messages", (*Server).listMessages, opDoc{summary: "A node's log records, paged", status: 200, query: messagesQuery{}}),
		op(http.MethodPost, "/sessions/:id/nodes/:node/messages", (*Server).postMessage, opDoc{summary: "Send a message to a node", status: 202, req: MessageRequest{}}),
		op(http.MethodPost, "/sessions/:id/nodes/:node/signal", (*Server).postSignal, opDoc{summary: "Send a signal to a node", status: 202, req: SignalRequest{}}),
		{http.MethodGet, "/sessions/:id/nodes/:node/logs", (*Server).nodeLogs, opDoc{summary: "The tail of a node's stderr log", status: 200, text: true, query: logsQuery{}}},
	}
}

// allRoutes is every /api/v1 route a server may serve.
func allRoutes() []route {
	return slices.Concat(apiRoutes(), collabRoutes(), secretRoutes(), shipRoutes(), fileRoutes(), forkRoutes(), changesRoutes(), filesRoutes(), fileToolRoutes(slices.Concat(files.Builtins(), format.Definitions())))
}

// routeList is every /api/v1 route this server serves: apiRoutes, and the
// session filesystem's when Config.Files is set.
func (s *Server) routeList() []route {
	rs := slices.Concat(apiRoutes(), collabRoutes(), secretRoutes(), shipRoutes())
	if s.cfg.Files != nil {
		rs = append(rs, fileRoutes()...)
		rs = append(rs, forkRoutes()...)
		rs = append(rs, changesRoutes()...)
		rs = append(rs, filesRoutes()...)
		rs = append(rs, fileToolRoutes(s.files.Tools())...)
	}
	return rs
}

// routes builds the router: public /healthz and /login, the authenticated
// /api/v1 group, and the UI for every other GET.
func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = s.ipExtractor()

	e.Use(s.recoverPanic, s.logRequests, secureHeaders, s.authenticate)

	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]bool{"ok": true}) })
	e.GET("/login", s.login)

	// No group middleware: Echo's Group.Use adds catch-all 404 routes that
	// would hide 405 answers. The body limit is per route.
	g := e.Group(apiPrefix)
	limit := limitBody(s.cfg.MaxBody)
	fileRoute := map[string]bool{}
	for _, r := range fileRoutes() {
		fileRoute[r.method+" "+r.path] = true
	}
	for _, r := range s.routeList() {
		h, l := r.handler, limit
		switch {
		case r.doc.bodyLimit != nil:
			l = limitBody(r.doc.bodyLimit(s))
		case fileRoute[r.method+" "+r.path]:
			l = limitBody(s.fileBodyLimit(r))
		}
		g.Add(r.method, r.path, func(c echo.Context) error { return h(s, c) }, l)
	}
	// No catch-all route for the UI: Echo would then answer 404 instead of
	// 405 for known paths. handleError serves the UI for unrouted GETs.
	return e
}

// isAPI reports whether path is an API path (never served by the UI).
func isAPI(path string) bool { return path == "/api" || strings.HasPrefix(path, "/api/") }
