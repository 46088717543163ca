package api

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/gitnet"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/protocol"
)

// Message paging bounds of GET .../messages.
const (
	defaultMessageLimit = 100
	maxMessageLimit     = 1000
)

type listBody[T any] struct {
	Data []T `json:"data"`
}

func list[T any](items []T) listBody[T] {
	if items == nil {
		items = []T{}
	}
	return listBody[T]{Data: items}
}

func (s *Server) listAgents(c echo.Context) error {
	return c.JSON(http.StatusOK, orchestrator.Catalog())
}

func (s *Server) listModels(c echo.Context) error {
	list, err := s.cfg.Models.Models(c.Request().Context())
	if err != nil {
		return err
	}
	if list.Providers == nil {
		list.Providers = []Provider{}
	}
	return c.JSON(http.StatusOK, list)
}

type newSessionReq struct {
	Name       *string          `json:"name"`
	GitRepoURL *string          `json:"git_repo_url"`
	Checks     []protocol.Check `json:"checks"`
}

func (s *Server) createSession(c echo.Context) error {
	var req newSessionReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return orchestrator.FieldErrorf("name", "field \"name\" is required")
	}
	in := sessions.NewSession{Name: *req.Name, GitRepoURL: req.GitRepoURL, Checks: req.Checks}
	if u := req.GitRepoURL; u != nil && strings.TrimSpace(*u) != "" && !s.cfg.GitAllowPrivate {
		// A host only the server's network reaches is refused (the clone
		// checks it again), after the URL's form.
		valid, err := sessions.ValidateGitURL(*u)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), 5*time.Second)
		err = gitnet.Check(ctx, s.cfg.Resolver, valid, false)
		cancel()
		if err != nil {
			return err
		}
	}
	sess, err := s.sessions.CreateSession(c.Request().Context(), user(c).ID, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, sess)
}

func (s *Server) listSessions(c echo.Context) error {
	ss, err := s.sessions.ListSessions(c.Request().Context(), user(c).ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list(ss))
}

func (s *Server) getSession(c echo.Context) error {
	sess, err := s.sessions.GetSession(c.Request().Context(), user(c).ID, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, sess)
}

// patchSessionReq changes a session: checks, when present, replace its
// health checks ([] or null: detect them from the repository); a budget
// field present sets its limit (null: unlimited), an absent one leaves it.
type patchSessionReq struct {
	Checks       json.RawMessage `json:"checks"` // absent: nil; null: "null"
	BudgetTokens json.RawMessage `json:"budget_tokens"`
	BudgetUSD    json.RawMessage `json:"budget_usd"`
}

func (s *Server) patchSession(c echo.Context) error {
	var req patchSessionReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var p sessions.SessionPatch
	if req.BudgetTokens != nil {
		p.Budget.SetTokens = true
		if string(req.BudgetTokens) != "null" {
			var v int64
			if err := json.Unmarshal(req.BudgetTokens, &v); err != nil {
				return badRequest("budget_tokens", "field \"budget_tokens\" must be a whole number of tokens or null (unlimited)")
			}
			p.Budget.Tokens = &v
		}
	}
	if req.BudgetUSD != nil {
		p.Budget.SetUSD = true
		if string(req.BudgetUSD) != "null" {
			var v float64
			if err := json.Unmarshal(req.BudgetUSD, &v); err != nil {
				return badRequest("budget_usd", "field \"budget_usd\" must be a number of dollars or null (unlimited)")
			}
			p.Budget.USD = &v
		}
	}
	if req.Checks != nil {
		p.SetChecks = true
		if string(req.Checks) != "null" {
			if err := json.Unmarshal(req.Checks, &p.Checks); err != nil {
				return badRequest("checks", "field \"checks\" must be a list of {\"command\": string, \"timeout\": seconds}")
			}
		}
	}
	sess, err := s.sessions.PatchSession(c.Request().Context(), user(c).ID, c.Param("id"), p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, sess)
}

func (s *Server) deleteSession(c echo.Context) error {
	ctx := c.Request().Context()
	uid, sid := user(c).ID, c.Param("id")
	if _, err := s.sessions.GetSession(ctx, uid, sid); err != nil {
		return err
	}
	if s.cfg.Runner != nil {
		if err := s.cfg.Runner.DeleteSession(ctx, uid, sid); err != nil {
			return err
		}
	}
	if err := s.sessions.DeleteSession(ctx, uid, sid); err != nil {
		return err
	}
	if s.hub != nil {
		s.hub.End(sid, errSessionDeleted) // open streams close with 4404
	}
	return c.NoContent(http.StatusNoContent)
}

// errNoRunner answers start/stop when no lifecycle runner is configured.
var errNoRunner = orchestrator.Errorf(orchestrator.EUnavailable, "agents cannot be started or stopped: this server has no runtime configured")

func (s *Server) startSession(c echo.Context) error {
	return s.lifecycle(c, func(r Runner, uid, sid string) error {
		return r.StartSession(c.Request().Context(), uid, sid)
	})
}

func (s *Server) stopSession(c echo.Context) error {
	return s.lifecycle(c, func(r Runner, uid, sid string) error {
		return r.StopSession(c.Request().Context(), uid, sid)
	})
}

func (s *Server) lifecycle(c echo.Context, do func(r Runner, uid, sid string) error) error {
	ctx := c.Request().Context()
	uid, sid := user(c).ID, c.Param("id")
	if _, err := s.sessions.GetSession(ctx, uid, sid); err != nil {
		return err
	}
	if s.cfg.Runner == nil {
		return errNoRunner
	}
	if err := do(s.cfg.Runner, uid, sid); err != nil {
		return err
	}
	sess, err := s.sessions.GetSession(ctx, uid, sid)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, sess)
}

func (s *Server) getTree(c echo.Context) error {
	nodes, err := s.sessions.Tree(c.Request().Context(), user(c).ID, c.Param("id"))
	if err != nil {
		return err
	}
	if p := principal(c); p.NodeID != "" {
		// A node key sees its own node and its descendants.
		scope := subtree(nodes, p.NodeID)
		nodes = slices.DeleteFunc(nodes, func(n sessions.Node) bool { return !scope[n.ID] })
	}
	return c.JSON(http.StatusOK, list(nodes))
}

type newNodeReq struct {
	Name      string          `json:"name"`
	AgentType *string         `json:"agent_type"`
	Model     string          `json:"model"`
	ParentID  *string         `json:"parent_id"`
	Image     string          `json:"image"`
	Task      string          `json:"task"`
	Config    json.RawMessage `json:"config"`
	// Workspace: "shared" (default) or "fork": a child works on a
	// copy-on-write fork of its parent's workspace (protocol.SpawnEvent).
	Workspace string `json:"workspace"`
}

func (s *Server) createNode(c echo.Context) error {
	var req newNodeReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.AgentType == nil {
		return orchestrator.FieldErrorf("agent_type", "field \"agent_type\" is required")
	}
	if err := objectField("config", req.Config); err != nil {
		return err
	}
	fork := false
	switch req.Workspace {
	case "", protocol.WorkspaceShared:
	case protocol.WorkspaceFork:
		if req.ParentID == nil {
			return orchestrator.FieldErrorf("workspace", "workspace \"fork\" needs a parent_id: the root works on the session's workspace")
		}
		if s.cfg.Files == nil {
			return orchestrator.FieldErrorf("workspace", "this server has no session filesystem to fork")
		}
		fork = true
	default:
		return orchestrator.FieldErrorf("workspace", "field \"workspace\" must be shared or fork, not %q", req.Workspace)
	}
	if err := s.needVendorKey(c, c.Param("id"), *req.AgentType); err != nil {
		return err
	}
	in := sessions.NewNode{Name: req.Name, AgentType: *req.AgentType, Model: req.Model, ParentID: req.ParentID, Image: req.Image, Task: req.Task, Config: req.Config}
	ctx := c.Request().Context()
	n, err := s.sessions.CreateNode(ctx, user(c).ID, c.Param("id"), in)
	if err != nil {
		return err
	}
	if fork {
		if _, err := s.cfg.Files.ForkForNode(ctx, n.SessionID, *req.ParentID, n.ID); err != nil {
			// no node without the workspace it was asked for
			if _, derr := s.sessions.DeleteNode(context.WithoutCancel(ctx), user(c).ID, n.SessionID, n.ID); derr != nil {
				s.log.Warn("delete a node whose workspace fork failed", "node", n.ID, "err", derr)
			}
			return err
		}
	}
	if s.cfg.Runner != nil {
		// The node exists whatever happens next: a start that fails marks it
		// error with a record saying why, which the answer shows.
		if err := s.cfg.Runner.StartNode(ctx, user(c).ID, n.SessionID, n.ID); err != nil {
			s.log.Warn("start spawned node", "node", n.ID, "err", err)
		}
		if fresh, err := s.sessions.GetNode(ctx, user(c).ID, n.SessionID, n.ID); err == nil {
			n = fresh
		}
	}
	return c.JSON(http.StatusCreated, n)
}

// objectField checks that an optional raw JSON field is an object (or absent).
func objectField(name string, raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if t := strings.TrimSpace(string(raw)); !strings.HasPrefix(t, "{") {
		return badRequest(name, "field %q must be an object", name)
	}
	return nil
}

type patchNodeReq struct {
	Name   *string         `json:"name"`
	Status *string         `json:"status"`
	Config json.RawMessage `json:"config"`
}

func (s *Server) patchNode(c echo.Context) error {
	var req patchNodeReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if err := objectField("config", req.Config); err != nil {
		return err
	}
	if p := principal(c); p.NodeID != "" && len(req.Config) > 0 {
		// The config holds the node's allowed_paths: only the user sets it.
		return orchestrator.Errorf(orchestrator.EForbidden, "this API key belongs to node %s and cannot change a node's config", p.NodeID)
	}
	if req.Status != nil && (*req.Status == protocol.StateRunning || *req.Status == protocol.StateThinking) {
		// Invariant 6: running means a container runs; only the agent
		// itself reports what it is doing while it runs.
		if s.cfg.Runner != nil && !s.cfg.Runner.Running(c.Param("node")) {
			return orchestrator.Errorf(orchestrator.EConflict, "node %s is not running: status %q is reported by a running agent, not set by hand", c.Param("node"), *req.Status)
		}
	}
	p := sessions.NodePatch{Name: req.Name, Status: req.Status}
	if len(req.Config) > 0 && string(req.Config) != "null" {
		p.Config = &req.Config
		if err := s.allowedPathsSettable(c, req.Config); err != nil {
			return err
		}
	}
	n, err := s.sessions.UpdateNode(c.Request().Context(), user(c).ID, c.Param("id"), c.Param("node"), p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, n)
}

// allowedPathsSettable refuses a change of config.allowed_paths while the
// node's container runs: its /workspace mount keeps the policy it was
// mounted with, so the change would hold for the API but not for the files
// the agent works on. Stopped, the node mounts the new paths at its next
// start.
func (s *Server) allowedPathsSettable(c echo.Context, config json.RawMessage) error {
	nid := c.Param("node")
	if s.cfg.Runner == nil || !s.cfg.Runner.Running(nid) {
		return nil
	}
	n, err := s.sessions.GetNode(c.Request().Context(), user(c).ID, c.Param("id"), nid)
	if err != nil {
		return err
	}
	was, _ := vfs.AllowedPaths(n.Config)
	now, err := vfs.AllowedPaths(config)
	if err != nil {
		return err
	}
	a, _ := json.Marshal(was)
	b, _ := json.Marshal(now)
	if string(a) == string(b) {
		return nil
	}
	return orchestrator.Errorf(orchestrator.EConflict, "node %s is running: its /workspace keeps the allowed_paths it started with (%s), so config.allowed_paths cannot change now; stop the node, change them, and start it again", nid, a)
}

func (s *Server) deleteNode(c echo.Context) error {
	ctx := c.Request().Context()
	uid, sid, nid := user(c).ID, c.Param("id"), c.Param("node")
	if s.cfg.Runner != nil {
		if _, err := s.sessions.GetNode(ctx, uid, sid, nid); err != nil {
			return err
		}
		if err := s.cfg.Runner.DeleteNode(ctx, uid, sid, nid); err != nil {
			return err
		}
	}
	if _, err := s.sessions.DeleteNode(ctx, uid, sid, nid); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

type moveNodeReq struct {
	ParentID  *string `json:"parent_id"`
	SortOrder *int    `json:"sort_order"`
}

func (s *Server) moveNode(c echo.Context) error {
	var req moveNodeReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.SortOrder == nil {
		return orchestrator.FieldErrorf("sort_order", "field \"sort_order\" is required")
	}
	n, err := s.sessions.MoveNode(c.Request().Context(), user(c).ID, c.Param("id"), c.Param("node"), req.ParentID, *req.SortOrder)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, n)
}

type recordPage struct {
	Data      []protocol.Record `json:"data"`
	NextAfter int64             `json:"next_after"`
}

func (s *Server) listMessages(c echo.Context) error {
	after, err := queryInt(c, "after", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	limit, err := queryInt(c, "limit", defaultMessageLimit, 1, maxMessageLimit)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	sid, nid := c.Param("id"), c.Param("node")
	if _, err := s.sessions.GetNode(ctx, user(c).ID, sid, nid); err != nil {
		return err
	}
	recs, err := s.store.Records(ctx, sid, after, int(limit), nid)
	if err != nil {
		return err
	}
	next := after
	if len(recs) > 0 {
		next = recs[len(recs)-1].Seq
	}
	if recs == nil {
		recs = []protocol.Record{}
	}
	return c.JSON(http.StatusOK, recordPage{Data: recs, NextAfter: next})
}

type messageReq struct {
	Content *string `json:"content"`
}

func (s *Server) postMessage(c echo.Context) error {
	if p := principal(c); p.NodeID != "" {
		// A message here is recorded as from the user: an agent's never is.
		// Agents message their children and report to their parent through
		// the agent API, which records who sent it.
		return orchestrator.Errorf(orchestrator.EForbidden, "this API key belongs to node %s: a message sent here is from the user; an agent messages its descendants or its parent with POST $FILEPATH_API_URL/api/v1/nodes/{node}/messages", p.NodeID)
	}
	var req messageReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Content == nil || strings.TrimSpace(*req.Content) == "" {
		return orchestrator.FieldErrorf("content", "field \"content\" is required and must not be empty")
	}
	return s.deliver(c, protocol.MessageInput{Type: protocol.TypeMessage, From: protocol.FromUser, Content: *req.Content})
}

type signalReq struct {
	Action *string `json:"action"`
}

func (s *Server) postSignal(c echo.Context) error {
	var req signalReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Action == nil {
		return orchestrator.FieldErrorf("action", "field \"action\" is required: stop, pause or resume")
	}
	switch *req.Action {
	case protocol.ActionStop, protocol.ActionPause, protocol.ActionResume:
	default:
		return orchestrator.FieldErrorf("action", "field \"action\" must be stop, pause or resume, not %q", *req.Action)
	}
	return s.deliver(c, protocol.SignalInput{Type: protocol.TypeSignal, Action: *req.Action})
}

// deliver hands an input to the runner, or with no runner appends it to the
// log as an input record; it answers 202 with the record.
func (s *Server) deliver(c echo.Context, in protocol.Input) error {
	ctx := c.Request().Context()
	sid, nid := c.Param("id"), c.Param("node")
	if _, err := s.sessions.GetNode(ctx, user(c).ID, sid, nid); err != nil {
		return err
	}
	if s.cfg.Runner != nil {
		if _, isMsg := in.(protocol.MessageInput); isMsg {
			if err := s.cfg.Runner.StartNode(ctx, user(c).ID, sid, nid); err != nil {
				return err
			}
		}
		rec, err := s.cfg.Runner.Deliver(ctx, sid, nid, in)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusAccepted, rec)
	}
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	recs, err := s.store.Append(ctx, sid, protocol.Record{NodeID: nid, Kind: protocol.KindInput, Data: data})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, recs[0])
}

func (s *Server) nodeLogs(c echo.Context) error {
	tail, err := queryInt(c, "tail", 200, 1, 100000)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	sid, nid := c.Param("id"), c.Param("node")
	if _, err := s.sessions.GetNode(ctx, user(c).ID, sid, nid); err != nil {
		return err
	}
	var b []byte
	if s.cfg.Runner != nil {
		if b, err = s.cfg.Runner.NodeLog(ctx, sid, nid, int(tail)); err != nil {
			return err
		}
	}
	return c.Blob(http.StatusOK, echo.MIMETextPlainCharsetUTF8, b)
}
