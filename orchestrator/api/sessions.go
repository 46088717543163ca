package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/gitnet"
	"github.com/filepath-dev/filepath/orchestrator/models"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
	"github.com/filepath-dev/filepath/protocol"
)

// Message paging bounds of GET .../messages.
const (
	defaultMessageLimit = 100
	maxMessageLimit     = 1000
)

// listBody is a list answer: {"data": [...]}; its schema is named
// "<item>List".
type listBody[T any] struct {
	Data []T `json:"data"`
}

func list[T any](items []T) listBody[T] {
	if items == nil {
		items = []T{}
	}
	return listBody[T]{Data: items}
}

// AgentInfo is an agent of the catalog as GET /agents answers it: whether
// it can be spawned on this server, and if not, why and what fixes it.
type AgentInfo struct {
	orchestrator.Agent
	// Available: the agent can run here. A custom agent always can (its
	// image is checked when it is spawned).
	Available bool `json:"available"`
	// Reason says why an agent cannot run here (its provider's key is
	// missing, its image is not on the machine); Fix, what makes it run.
	Reason string `json:"reason,omitempty"`
	Fix    string `json:"fix,omitempty"`
}

// agentChecker is what a Runner offers when it can tell whether a catalog
// agent can run (runner.Runner: its provider's key, its image).
type agentChecker interface {
	AgentStatus(ctx context.Context, a orchestrator.Agent) (reason, fix string)
}

func (s *Server) listAgents(c echo.Context) ([]AgentInfo, error) {
	ac, _ := s.cfg.Runner.(agentChecker)
	var out []AgentInfo
	for _, a := range orchestrator.Catalog() {
		info := AgentInfo{Agent: a, Available: true}
		if ac != nil {
			if info.Reason, info.Fix = ac.AgentStatus(c.Request().Context(), a); info.Reason != "" {
				info.Available = false
			}
		}
		out = append(out, info)
	}
	return out, nil
}

func (s *Server) listModels(c echo.Context) (models.List, error) {
	list, err := s.cfg.Models.Models(c.Request().Context())
	if err != nil {
		return models.List{}, err
	}
	if list.Providers == nil {
		list.Providers = []models.Provider{}
	}
	return list, nil
}

// CreateSessionRequest is the body of POST /sessions.
type CreateSessionRequest struct {
	Name       *string          `json:"name"`
	GitRepoURL *string          `json:"git_repo_url,omitempty" jsonschema:"nullable" jsonschema_description:"a repository to clone into the workspace before the first agent starts"`
	Checks     []protocol.Check `json:"checks,omitempty" jsonschema_description:"health checks run in the workspace before every agent session (absent: detected from the repository)"`
}

func (s *Server) createSession(c echo.Context) (protocol.Session, error) {
	var req CreateSessionRequest
	if err := decodeJSON(c, &req); err != nil {
		return protocol.Session{}, err
	}
	if req.Name == nil {
		return protocol.Session{}, orchestrator.FieldErrorf("name", "field \"name\" is required")
	}
	in := sessions.NewSession{Name: *req.Name, GitRepoURL: req.GitRepoURL, Checks: req.Checks}
	if u := req.GitRepoURL; u != nil && strings.TrimSpace(*u) != "" && !s.cfg.GitAllowPrivate {
		// A host only the server's network reaches is refused (the clone
		// checks it again), after the URL's form.
		valid, err := sessions.ValidateGitURL(*u)
		if err != nil {
			return protocol.Session{}, err
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), 5*time.Second)
		err = gitnet.Check(ctx, s.cfg.Resolver, valid, false)
		cancel()
		if err != nil {
			return protocol.Session{}, err
		}
	}
	return s.sessions.CreateSession(c.Request().Context(), user(c).ID, in)
}

func (s *Server) listSessions(c echo.Context) (listBody[protocol.Session], error) {
	ss, err := s.sessions.ListSessions(c.Request().Context(), user(c).ID)
	return list(ss), err
}

func (s *Server) getSession(c echo.Context) (protocol.Session, error) {
	return s.sessions.GetSession(c.Request().Context(), user(c).ID, c.Param("id"))
}

// PatchSessionRequest changes a session: checks, when present, replace its
// health checks ([] or null: detect them from the repository); a budget
// field present sets its limit (null: unlimited), an absent one leaves it.
type PatchSessionRequest struct {
	Checks       Nullable[[]protocol.Check] `json:"checks,omitzero" jsonschema:"nullable" jsonschema_description:"replaces the session's health checks; [] or null: detect them from the repository"`
	BudgetTokens Nullable[int64]            `json:"budget_tokens,omitzero" jsonschema:"nullable" jsonschema_description:"the most tokens the session's agents may spend through the LLM gateway (null: unlimited)"`
	BudgetUSD    Nullable[float64]          `json:"budget_usd,omitzero" jsonschema:"nullable" jsonschema_description:"the most US dollars of reported cost they may spend (null: unlimited)"`
}

func (s *Server) patchSession(c echo.Context) (protocol.Session, error) {
	var req PatchSessionRequest
	if err := decodeJSON(c, &req); err != nil {
		return protocol.Session{}, err
	}
	var p sessions.SessionPatch
	var err error
	if p.Budget.SetTokens, p.Budget.Tokens, err = req.BudgetTokens.Get(); err != nil {
		return protocol.Session{}, badRequest("budget_tokens", "field \"budget_tokens\" must be a whole number of tokens or null (unlimited)")
	}
	if p.Budget.SetUSD, p.Budget.USD, err = req.BudgetUSD.Get(); err != nil {
		return protocol.Session{}, badRequest("budget_usd", "field \"budget_usd\" must be a number of dollars or null (unlimited)")
	}
	var checks *[]protocol.Check
	if p.SetChecks, checks, err = req.Checks.Get(); err != nil {
		return protocol.Session{}, badRequest("checks", "field \"checks\" must be a list of {\"command\": string, \"timeout\": seconds}")
	}
	if checks != nil {
		p.Checks = *checks
	}
	return s.sessions.PatchSession(c.Request().Context(), user(c).ID, c.Param("id"), p)
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

func (s *Server) startSession(c echo.Context) (protocol.Session, error) {
	return s.lifecycle(c, func(r Runner, uid, sid string) error {
		return r.StartSession(c.Request().Context(), uid, sid)
	})
}

func (s *Server) stopSession(c echo.Context) (protocol.Session, error) {
	return s.lifecycle(c, func(r Runner, uid, sid string) error {
		return r.StopSession(c.Request().Context(), uid, sid)
	})
}

func (s *Server) lifecycle(c echo.Context, do func(r Runner, uid, sid string) error) (protocol.Session, error) {
	ctx := c.Request().Context()
	uid, sid := user(c).ID, c.Param("id")
	if _, err := s.sessions.GetSession(ctx, uid, sid); err != nil {
		return protocol.Session{}, err
	}
	if s.cfg.Runner == nil {
		return protocol.Session{}, errNoRunner
	}
	if err := do(s.cfg.Runner, uid, sid); err != nil {
		return protocol.Session{}, err
	}
	return s.sessions.GetSession(ctx, uid, sid)
}

func (s *Server) getTree(c echo.Context) (listBody[sessions.Node], error) {
	nodes, err := s.sessions.Tree(c.Request().Context(), user(c).ID, c.Param("id"))
	if err != nil {
		return listBody[sessions.Node]{}, err
	}
	if p := principal(c); p.NodeID != "" {
		// A node key sees its own node and its descendants.
		scope := subtree(nodes, p.NodeID)
		nodes = slices.DeleteFunc(nodes, func(n sessions.Node) bool { return !scope[n.ID] })
	}
	return list(nodes), nil
}

// CreateNodeRequest is the body of POST /sessions/{id}/nodes: a node of
// the session's tree, started at once when the server runs agents.
type CreateNodeRequest struct {
	Name      string          `json:"name,omitempty" jsonschema_description:"absent: a generated adjective-number name"`
	AgentType *string         `json:"agent_type" jsonschema_description:"a catalog type (GET /agents)"`
	Model     string          `json:"model,omitempty" jsonschema_description:"absent: the agent's default model"`
	ParentID  *string         `json:"parent_id,omitempty" jsonschema:"nullable" jsonschema_description:"absent or null: a top-level node (the session's first is its root_node_id)"`
	Image     string          `json:"image,omitempty" jsonschema_description:"the custom agent's image (required for custom)"`
	Task      string          `json:"task,omitempty" jsonschema_description:"the agent's first message"`
	Config    json.RawMessage `json:"config,omitempty" jsonschema:"type=object,nullable" jsonschema_description:"the node's config (allowed_paths, approvals, ...)"`
	// Workspace: "shared" (default) or "fork": a child works on a
	// copy-on-write fork of its parent's workspace (protocol.SpawnEvent).
	Workspace string `json:"workspace,omitempty" jsonschema:"enum=shared,enum=fork" jsonschema_description:"fork: the child works on a copy-on-write fork of its parent's workspace (needs parent_id)"`
}

func (s *Server) createNode(c echo.Context) (sessions.Node, error) {
	var req CreateNodeRequest
	if err := decodeJSON(c, &req); err != nil {
		return sessions.Node{}, err
	}
	if req.AgentType == nil {
		return sessions.Node{}, orchestrator.FieldErrorf("agent_type", "field \"agent_type\" is required")
	}
	if err := objectField("config", req.Config); err != nil {
		return sessions.Node{}, err
	}
	fork := false
	switch req.Workspace {
	case "", protocol.WorkspaceShared:
	case protocol.WorkspaceFork:
		if req.ParentID == nil {
			return sessions.Node{}, orchestrator.FieldErrorf("workspace", "workspace \"fork\" needs a parent_id: the root works on the session's workspace")
		}
		if s.cfg.Files == nil {
			return sessions.Node{}, orchestrator.FieldErrorf("workspace", "this server has no session filesystem to fork")
		}
		fork = true
	default:
		return sessions.Node{}, orchestrator.FieldErrorf("workspace", "field \"workspace\" must be shared or fork, not %q", req.Workspace)
	}
	if err := s.needVendorKey(c, c.Param("id"), *req.AgentType); err != nil {
		return sessions.Node{}, err
	}
	in := sessions.NewNode{Name: req.Name, AgentType: *req.AgentType, Model: req.Model, ParentID: req.ParentID, Image: req.Image, Task: req.Task, Config: req.Config}
	if fork {
		in.Workspace = protocol.WorkspaceFork
	}
	ctx := c.Request().Context()
	n, err := s.sessions.CreateNode(ctx, user(c).ID, c.Param("id"), in)
	if err != nil {
		return sessions.Node{}, err
	}
	if fork {
		if _, err := s.cfg.Files.ForkForNode(ctx, n.SessionID, *req.ParentID, n.ID); err != nil {
			// no node without the workspace it was asked for
			if _, derr := s.sessions.DeleteNode(context.WithoutCancel(ctx), user(c).ID, n.SessionID, n.ID); derr != nil {
				s.log.Warn("delete a node whose workspace fork failed", "node", n.ID, "err", derr)
			}
			return sessions.Node{}, err
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
	return n, nil
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

// PatchNodeRequest is the body of PATCH /sessions/{id}/nodes/{node}: the
// fields present change.
type PatchNodeRequest struct {
	Name   *string         `json:"name,omitempty" jsonschema:"nullable"`
	Status *string         `json:"status,omitempty" jsonschema:"nullable" jsonschema_description:"done, error or idle; running and thinking only while the node's agent runs"`
	Config json.RawMessage `json:"config,omitempty" jsonschema:"type=object,nullable" jsonschema_description:"replaces the node's config (the user only; allowed_paths not while it runs)"`
}

func (s *Server) patchNode(c echo.Context) (sessions.Node, error) {
	var req PatchNodeRequest
	if err := decodeJSON(c, &req); err != nil {
		return sessions.Node{}, err
	}
	if err := objectField("config", req.Config); err != nil {
		return sessions.Node{}, err
	}
	if p := principal(c); p.NodeID != "" && len(req.Config) > 0 {
		// The config holds the node's allowed_paths: only the user sets it.
		return sessions.Node{}, orchestrator.Errorf(orchestrator.EForbidden, "this API key belongs to node %s and cannot change a node's config", p.NodeID)
	}
	if req.Status != nil && (*req.Status == protocol.StateRunning || *req.Status == protocol.StateThinking) {
		// Invariant 6: running means a container runs; only the agent
		// itself reports what it is doing while it runs.
		if s.cfg.Runner != nil && !s.cfg.Runner.Running(c.Param("node")) {
			return sessions.Node{}, orchestrator.Errorf(orchestrator.EConflict, "node %s is not running: status %q is reported by a running agent, not set by hand", c.Param("node"), *req.Status)
		}
	}
	p := sessions.NodePatch{Name: req.Name, Status: req.Status}
	if len(req.Config) > 0 && string(req.Config) != "null" {
		p.Config = &req.Config
		if err := s.allowedPathsSettable(c, req.Config); err != nil {
			return sessions.Node{}, err
		}
	}
	return s.sessions.UpdateNode(c.Request().Context(), user(c).ID, c.Param("id"), c.Param("node"), p)
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
	was, _ := paths.AllowedPaths(n.Config)
	now, err := paths.AllowedPaths(config)
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

// MoveNodeRequest is the body of POST /sessions/{id}/nodes/{node}/move.
type MoveNodeRequest struct {
	ParentID  *string `json:"parent_id,omitempty" jsonschema:"nullable" jsonschema_description:"the new parent (absent or null: none, for the root)"`
	SortOrder *int    `json:"sort_order" jsonschema_description:"the node's position among its new siblings, from 0"`
}

func (s *Server) moveNode(c echo.Context) (sessions.Node, error) {
	var req MoveNodeRequest
	if err := decodeJSON(c, &req); err != nil {
		return sessions.Node{}, err
	}
	if req.SortOrder == nil {
		return sessions.Node{}, orchestrator.FieldErrorf("sort_order", "field \"sort_order\" is required")
	}
	return s.sessions.MoveNode(c.Request().Context(), user(c).ID, c.Param("id"), c.Param("node"), req.ParentID, *req.SortOrder)
}

// RecordPage is a page of a node's log records (GET .../messages).
type RecordPage struct {
	Data []protocol.Record `json:"data"`
	// NextAfter is the after of the next page: the last record's seq.
	NextAfter int64 `json:"next_after"`
}

// messagesQuery is the query of GET .../messages.
type messagesQuery struct {
	After int64 `query:"after" jsonschema_description:"return records with seq greater than this"`
	Limit int64 `query:"limit" jsonschema_description:"page size"`
}

func (messagesQuery) JSONSchemaExtend(s *jsonschema.Schema) {
	bound(s, "after", 0, 1<<62, 0)
	bound(s, "limit", 1, maxMessageLimit, defaultMessageLimit)
}

func (s *Server) listMessages(c echo.Context) (RecordPage, error) {
	var q messagesQuery
	if err := bindQuery(c, &q); err != nil {
		return RecordPage{}, err
	}
	ctx := c.Request().Context()
	sid, nid := c.Param("id"), c.Param("node")
	if _, err := s.sessions.GetNode(ctx, user(c).ID, sid, nid); err != nil {
		return RecordPage{}, err
	}
	recs, err := s.store.Records(ctx, sid, q.After, int(q.Limit), nid)
	if err != nil {
		return RecordPage{}, err
	}
	next := q.After
	if len(recs) > 0 {
		next = recs[len(recs)-1].Seq
	}
	if recs == nil {
		recs = []protocol.Record{}
	}
	return RecordPage{Data: recs, NextAfter: next}, nil
}

// MessageRequest is the body of POST .../messages: a message from the user.
type MessageRequest struct {
	Content *string `json:"content,omitempty" jsonschema_description:"the message; required unless files are attached"`
	// Attachments are paths of files in the node's workspace (uploaded
	// first, e.g. to /uploads) that the message hands the agent.
	Attachments []string `json:"attachments,omitempty" jsonschema:"maxItems=20" jsonschema_description:"paths in the node's workspace of files to hand the agent (upload them first); the message tells the agent their paths, sizes and types"`
}

// maxAttachments bounds the files one message hands an agent.
const maxAttachments = 20

func (s *Server) postMessage(c echo.Context) (protocol.Record, error) {
	if p := principal(c); p.NodeID != "" {
		// A message here is recorded as from the user: an agent's never is.
		// Agents message their children and report to their parent through
		// the agent API, which records who sent it.
		return protocol.Record{}, orchestrator.Errorf(orchestrator.EForbidden, "this API key belongs to node %s: a message sent here is from the user; an agent messages its descendants or its parent with POST $FILEPATH_API_URL/api/v1/nodes/{node}/messages", p.NodeID)
	}
	var req MessageRequest
	if err := decodeJSON(c, &req); err != nil {
		return protocol.Record{}, err
	}
	content := ""
	if req.Content != nil {
		content = *req.Content
	}
	if strings.TrimSpace(content) == "" && len(req.Attachments) == 0 {
		return protocol.Record{}, orchestrator.FieldErrorf("content", "field \"content\" is required and must not be empty (or attach a file)")
	}
	in := protocol.MessageInput{Type: protocol.TypeMessage, From: protocol.FromUser, Content: content}
	if len(req.Attachments) > 0 {
		atts, err := s.attachments(c, req.Attachments)
		if err != nil {
			return protocol.Record{}, err
		}
		in.Attachments = atts
		in.Content = attachmentText(content, atts)
	}
	return s.deliver(c, in)
}

// attachments checks that each path is a regular file of the node's
// workspace and gives its size and detected type.
func (s *Server) attachments(c echo.Context, paths []string) ([]protocol.Attachment, error) {
	if len(paths) > maxAttachments {
		return nil, orchestrator.FieldErrorf("attachments", "at most %d files can be attached to one message, not %d", maxAttachments, len(paths))
	}
	fs, err := s.filesOf(c)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.Attachment, 0, len(paths))
	seen := map[string]bool{}
	for _, p := range paths {
		clean := "/" + strings.Trim(path.Clean("/"+strings.TrimPrefix(p, "/workspace")), "/")
		if seen[clean] {
			continue
		}
		seen[clean] = true
		d, err := fs.Info(c.Request().Context(), clean)
		if err != nil {
			if orchestrator.ErrorCode(err) == orchestrator.ENotFound {
				return nil, orchestrator.FieldErrorf("attachments", "attachment %s is not in the node's workspace (upload it first)", clean)
			}
			return nil, err
		}
		if d.IsDir || d.Type != "file" {
			return nil, orchestrator.FieldErrorf("attachments", "attachment %s is a %s, not a file", clean, d.Type)
		}
		out = append(out, protocol.Attachment{Path: clean, SizeBytes: d.Size, MimeType: d.MimeType})
	}
	return out, nil
}

// attachmentText is what an agent that reads only content gets: the
// user's words, then the files with their paths in /workspace.
func attachmentText(content string, atts []protocol.Attachment) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(content, "\n"))
	if b.Len() > 0 {
		b.WriteString("\n\n")
	}
	if len(atts) == 1 {
		b.WriteString("Attached file (in your workspace):")
	} else {
		b.WriteString("Attached files (in your workspace):")
	}
	for _, a := range atts {
		fmt.Fprintf(&b, "\n- /workspace%s (%s", a.Path, humanSize(a.SizeBytes))
		if a.MimeType != "" {
			b.WriteString(", " + a.MimeType)
		}
		b.WriteString(")")
	}
	return b.String()
}

// humanSize writes n bytes as a person reads it: 980 B, 12.4 KB, 3.1 MB.
func humanSize(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f KB", float64(n)/1000)
	case n < 1000*1000*1000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1e9)
}

// SignalRequest is the body of POST .../signal.
type SignalRequest struct {
	Action *string `json:"action" jsonschema:"enum=stop,enum=pause,enum=resume"`
}

func (s *Server) postSignal(c echo.Context) (protocol.Record, error) {
	var req SignalRequest
	if err := decodeJSON(c, &req); err != nil {
		return protocol.Record{}, err
	}
	if req.Action == nil {
		return protocol.Record{}, orchestrator.FieldErrorf("action", "field \"action\" is required: stop, pause or resume")
	}
	switch *req.Action {
	case protocol.ActionStop, protocol.ActionPause, protocol.ActionResume:
	default:
		return protocol.Record{}, orchestrator.FieldErrorf("action", "field \"action\" must be stop, pause or resume, not %q", *req.Action)
	}
	return s.deliver(c, protocol.SignalInput{Type: protocol.TypeSignal, Action: *req.Action})
}

// deliver hands an input to the runner, or with no runner appends it to the
// log as an input record; it answers the record.
func (s *Server) deliver(c echo.Context, in protocol.Input) (protocol.Record, error) {
	ctx := c.Request().Context()
	sid, nid := c.Param("id"), c.Param("node")
	if _, err := s.sessions.GetNode(ctx, user(c).ID, sid, nid); err != nil {
		return protocol.Record{}, err
	}
	if s.cfg.Runner != nil {
		if _, isMsg := in.(protocol.MessageInput); isMsg {
			if err := s.cfg.Runner.StartNode(ctx, user(c).ID, sid, nid); err != nil {
				return protocol.Record{}, err
			}
		}
		return s.cfg.Runner.Deliver(ctx, sid, nid, in)
	}
	data, err := json.Marshal(in)
	if err != nil {
		return protocol.Record{}, err
	}
	recs, err := s.store.Append(ctx, sid, protocol.Record{NodeID: nid, Kind: protocol.KindInput, Data: data})
	if err != nil {
		return protocol.Record{}, err
	}
	return recs[0], nil
}

// logsQuery is the query of GET .../logs.
type logsQuery struct {
	Tail int64 `query:"tail" jsonschema_description:"number of last lines"`
}

func (logsQuery) JSONSchemaExtend(s *jsonschema.Schema) { bound(s, "tail", 1, 100000, 200) }

func (s *Server) nodeLogs(c echo.Context) error {
	var q logsQuery
	if err := bindQuery(c, &q); err != nil {
		return err
	}
	tail := q.Tail
	ctx := c.Request().Context()
	sid, nid := c.Param("id"), c.Param("node")
	if _, err := s.sessions.GetNode(ctx, user(c).ID, sid, nid); err != nil {
		return err
	}
	var b []byte
	if s.cfg.Runner != nil {
		var err error
		if b, err = s.cfg.Runner.NodeLog(ctx, sid, nid, int(tail)); err != nil {
			return err
		}
	}
	return c.Blob(http.StatusOK, echo.MIMETextPlainCharsetUTF8, b)
}
