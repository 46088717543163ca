package api

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/protocol"
)

// collabRoutes are the user's side of agents working together: the
// approvals inbox of a session, the memories, a node's audit.
func collabRoutes() []route {
	return []route{
		{http.MethodGet, "/sessions/:id/approvals", (*Server).listApprovals, opDoc{summary: "The session's approvals inbox: every agent's requests for permission, oldest first (status=pending: those waiting)", status: 200, resp: "ApprovalList", query: []string{"status", "limit"}}},
		{http.MethodPost, "/sessions/:id/approvals/:approval", (*Server).answerApproval, opDoc{summary: "Answer a pending request: approve, deny, or always (approve, and allow its kind for its node from now on); the answer reaches the agent", status: 200, req: "ApprovalAnswer", resp: "ApprovalRequest"}},
		{http.MethodGet, "/sessions/:id/nodes/:node/audit", (*Server).nodeAudit, opDoc{summary: "A node's audit, newest first: its tools and commands (start to end) and its agent-API calls; page with before=<the last id>", status: 200, resp: "AuditPage", query: []string{"before", "limit"}}},
		{http.MethodGet, "/memories", (*Server).listMemories, opDoc{summary: "The user's memories (learnings agents kept per repository), newest first; repo selects one repository (\"\" : sessions without one), q searches it by words", status: 200, resp: "MemoryList", query: []string{"repo", "q", "limit"}}},
		{http.MethodDelete, "/memories/:memory", (*Server).deleteMemory, opDoc{summary: "Delete a memory", status: 204}},
	}
}

func (s *Server) listApprovals(c echo.Context) error {
	limit, err := queryInt(c, "limit", collab.DefaultApprovalsList, 1, collab.MaxApprovalsList)
	if err != nil {
		return err
	}
	status := c.QueryParam("status")
	switch status {
	case "", protocol.ApprovalPending, protocol.ApprovalApproved, protocol.ApprovalDenied:
	default:
		return badRequest("status", "query parameter \"status\" must be pending, approved or denied, not %q", status)
	}
	as, err := s.collab.Approvals(c.Request().Context(), user(c).ID, c.Param("id"), status, int(limit))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list(as))
}

type approvalAnswerReq struct {
	Decision *string `json:"decision"`
}

func (s *Server) answerApproval(c echo.Context) error {
	var req approvalAnswerReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var d collab.Decision
	switch {
	case req.Decision == nil:
		return orchestrator.FieldErrorf("decision", "field \"decision\" is required: approve, deny or always")
	case *req.Decision == "approve":
		d.Approve = true
	case *req.Decision == "always":
		d.Approve, d.Always = true, true
	case *req.Decision == "deny":
	default:
		return orchestrator.FieldErrorf("decision", "field \"decision\" must be approve, deny or always, not %q", *req.Decision)
	}
	u := user(c)
	a, err := s.collab.AnswerApproval(c.Request().Context(), u.ID, c.Param("id"), c.Param("approval"), d, u.Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

type auditPage struct {
	Data []audit.ToolCall `json:"data"`
	// NextBefore is the before of the next (older) page; 0: no more.
	NextBefore int64 `json:"next_before"`
}

func (s *Server) nodeAudit(c echo.Context) error {
	before, err := queryInt(c, "before", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	limit, err := queryInt(c, "limit", audit.DefaultLimit, 1, audit.MaxLimit)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	sid, nid := c.Param("id"), c.Param("node")
	if _, err := s.sessions.GetNode(ctx, user(c).ID, sid, nid); err != nil {
		return err
	}
	calls, err := s.audit.ToolCalls(ctx, sid, nid, before, int(limit))
	if err != nil {
		return err
	}
	page := auditPage{Data: calls}
	if len(calls) == int(limit) {
		page.NextBefore = calls[len(calls)-1].ID
	}
	return c.JSON(http.StatusOK, page)
}

func (s *Server) listMemories(c echo.Context) error {
	limit, err := queryInt(c, "limit", collab.DefaultMemoryLimit, 1, collab.MaxMemoryLimit)
	if err != nil {
		return err
	}
	ctx, uid := c.Request().Context(), user(c).ID
	q := strings.TrimSpace(c.QueryParam("q"))
	var repo *string
	if c.QueryParams().Has("repo") {
		r := collab.NormalizeRepo(c.QueryParam("repo"))
		repo = &r
	}
	var ms []collab.Memory
	switch {
	case q != "" && repo == nil:
		return badRequest("repo", "a search (q) needs repo: the repository's git URL, or repo= for sessions without one")
	case q != "":
		ms, err = s.collab.SearchMemories(ctx, uid, *repo, q, int(limit))
	default:
		ms, err = s.collab.Memories(ctx, uid, repo, int(limit))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list(ms))
}

func (s *Server) deleteMemory(c echo.Context) error {
	if err := s.collab.DeleteMemory(c.Request().Context(), user(c).ID, c.Param("memory")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
