package api

import (
	"net/http"
	"strings"

	"github.com/invopop/jsonschema"
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
		op(http.MethodGet, "/sessions/:id/approvals", (*Server).listApprovals, opDoc{summary: "The session's approvals inbox: every agent's requests for permission, oldest first (status=pending: those waiting)", status: 200, query: approvalsQuery{}}),
		op(http.MethodPost, "/sessions/:id/approvals/:approval", (*Server).answerApproval, opDoc{summary: "Answer a pending request: approve, deny, or always (approve, and allow its kind for its node from now on); the answer reaches the agent", status: 200, req: AnswerApprovalRequest{}}),
		op(http.MethodGet, "/sessions/:id/nodes/:node/audit", (*Server).nodeAudit, opDoc{summary: "A node's audit, newest first: its tools and commands (start to end) and its agent-API calls; page with before=<the last id>", status: 200, query: auditQuery{}}),
		op(http.MethodGet, "/memories", (*Server).listMemories, opDoc{summary: "The user's memories (learnings agents kept per repository), newest first; repo selects one repository (\"\" : sessions without one), q searches it by words", status: 200, query: memoriesQuery{}}),
		{http.MethodDelete, "/memories/:memory", (*Server).deleteMemory, opDoc{summary: "Delete a memory", status: 204}},
	}
}

// approvalsQuery is the query of GET /sessions/{id}/approvals.
type approvalsQuery struct {
	Status string `query:"status" jsonschema:"enum=pending,enum=approved,enum=denied" jsonschema_description:"pending, approved or denied (default: all)"`
	Limit  int64  `query:"limit" jsonschema_description:"page size"`
}

func (approvalsQuery) JSONSchemaExtend(s *jsonschema.Schema) {
	bound(s, "limit", 1, collab.MaxApprovalsList, collab.DefaultApprovalsList)
}

func (s *Server) listApprovals(c echo.Context) (listBody[collab.Approval], error) {
	var q approvalsQuery
	if err := bindQuery(c, &q); err != nil {
		return listBody[collab.Approval]{}, err
	}
	switch q.Status {
	case "", protocol.ApprovalPending, protocol.ApprovalApproved, protocol.ApprovalDenied:
	default:
		return listBody[collab.Approval]{}, badRequest("status", "query parameter \"status\" must be pending, approved or denied, not %q", q.Status)
	}
	as, err := s.collab.Approvals(c.Request().Context(), user(c).ID, c.Param("id"), q.Status, int(q.Limit))
	return list(as), err
}

// AnswerApprovalRequest is the body of POST .../approvals/{approval}.
type AnswerApprovalRequest struct {
	Decision *string `json:"decision" jsonschema:"enum=approve,enum=deny,enum=always" jsonschema_description:"always: approve, and allow the request's kind for its node from now on"`
	// Credential is the approver's choice of secret for a push or pull
	// request the orchestrator does once approved.
	Credential string `json:"credential,omitempty" jsonschema_description:"approving an agent's push or pull request: the name of your secret to use (an SSH key, an HTTPS credential, a forge token), over the one the agent named or the one for the remote's host"`
}

func (s *Server) answerApproval(c echo.Context) (collab.Approval, error) {
	var req AnswerApprovalRequest
	if err := decodeJSON(c, &req); err != nil {
		return collab.Approval{}, err
	}
	var d collab.Decision
	switch {
	case req.Decision == nil:
		return collab.Approval{}, orchestrator.FieldErrorf("decision", "field \"decision\" is required: approve, deny or always")
	case *req.Decision == "approve":
		d.Approve = true
	case *req.Decision == "always":
		d.Approve, d.Always = true, true
	case *req.Decision == "deny":
	default:
		return collab.Approval{}, orchestrator.FieldErrorf("decision", "field \"decision\" must be approve, deny or always, not %q", *req.Decision)
	}
	d.Credential = strings.TrimSpace(req.Credential)
	u := user(c)
	return s.collab.AnswerApproval(c.Request().Context(), u.ID, c.Param("id"), c.Param("approval"), d, u.Name)
}

// AuditPage is a page of a node's audit (GET .../audit), newest first.
type AuditPage struct {
	Data []audit.ToolCall `json:"data"`
	// NextBefore is the before of the next (older) page; 0: no more.
	NextBefore int64 `json:"next_before" jsonschema_description:"the before of the next (older) page; 0: no more"`
}

// auditQuery is the query of GET .../audit.
type auditQuery struct {
	Before int64 `query:"before" jsonschema_description:"return rows with an id below this (next_before of the previous page)"`
	Limit  int64 `query:"limit" jsonschema_description:"page size"`
}

func (auditQuery) JSONSchemaExtend(s *jsonschema.Schema) {
	bound(s, "before", 0, 1<<62, 0)
	bound(s, "limit", 1, audit.MaxLimit, audit.DefaultLimit)
}

func (s *Server) nodeAudit(c echo.Context) (AuditPage, error) {
	var q auditQuery
	if err := bindQuery(c, &q); err != nil {
		return AuditPage{}, err
	}
	ctx := c.Request().Context()
	sid, nid := c.Param("id"), c.Param("node")
	if _, err := s.sessions.GetNode(ctx, user(c).ID, sid, nid); err != nil {
		return AuditPage{}, err
	}
	calls, err := s.audit.ToolCalls(ctx, sid, nid, q.Before, int(q.Limit))
	if err != nil {
		return AuditPage{}, err
	}
	page := AuditPage{Data: calls}
	if len(calls) == int(q.Limit) {
		page.NextBefore = calls[len(calls)-1].ID
	}
	return page, nil
}

// memoriesQuery is the query of GET /memories.
type memoriesQuery struct {
	Repo  *string `query:"repo" jsonschema_description:"a repository's git URL (any form; normalised), or empty for sessions without one"`
	Q     string  `query:"q" jsonschema_description:"words to search for in keys and texts"`
	Limit int64   `query:"limit" jsonschema_description:"page size"`
}

func (memoriesQuery) JSONSchemaExtend(s *jsonschema.Schema) {
	bound(s, "limit", 1, collab.MaxMemoryLimit, collab.DefaultMemoryLimit)
}

func (s *Server) listMemories(c echo.Context) (listBody[collab.Memory], error) {
	var q memoriesQuery
	if err := bindQuery(c, &q); err != nil {
		return listBody[collab.Memory]{}, err
	}
	ctx, uid := c.Request().Context(), user(c).ID
	words := strings.TrimSpace(q.Q)
	var repo *string
	if q.Repo != nil {
		r := collab.NormalizeRepo(*q.Repo)
		repo = &r
	}
	var ms []collab.Memory
	var err error
	switch {
	case words != "" && repo == nil:
		return listBody[collab.Memory]{}, badRequest("repo", "a search (q) needs repo: the repository's git URL, or repo= for sessions without one")
	case words != "":
		ms, err = s.collab.SearchMemories(ctx, uid, *repo, words, int(q.Limit))
	default:
		ms, err = s.collab.Memories(ctx, uid, repo, int(q.Limit))
	}
	return list(ms), err
}

func (s *Server) deleteMemory(c echo.Context) error {
	if err := s.collab.DeleteMemory(c.Request().Context(), user(c).ID, c.Param("memory")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
