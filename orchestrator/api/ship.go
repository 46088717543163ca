package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/ship"
)

// Workspaces lends the host directory of a node's workspace to the
// orchestrator's own work on it (a push); runner.Runner implements it.
type Workspaces interface {
	// Workspace returns the directory, and release to give it back.
	Workspace(ctx context.Context, nodeID string) (dir string, release func(), err error)
}

// shipRoutes take a node's work out: a push of its branch from the host
// with one of the user's credentials (orchestrator/ship).
func shipRoutes() []route {
	return []route{
		op(http.MethodPost, "/sessions/:id/nodes/:node/push", (*Server).pushNode, opDoc{summary: "Push the node's commits (its workspace's HEAD, or ref) to a branch of the session's git remote or another URL, from the server with one of your credentials (HTTPS or SSH): no credential enters a container. 412 (field trust_host_key): a new SSH host, its key's fingerprint in the message; 409: the remote refused (its words in the message); 422 with field credential: none fits, or the remote refused it", status: 200, req: PushRequest{}}),
		op(http.MethodGet, "/sessions/:id/remote-host-key", (*Server).remoteHostKey, opDoc{summary: "The SSH host key an ssh:// remote presents, and whether you trust (pinned) it: shown for confirmation before the first push there", status: 200, query: hostKeyQuery{}}),
	}
}

// PushRequest is the body of POST /sessions/{id}/nodes/{node}/push.
type PushRequest struct {
	RemoteURL    string `json:"remote_url,omitempty" jsonschema_description:"default: the session's git URL"`
	Branch       string `json:"branch,omitempty" jsonschema_description:"the remote branch; default filepath/<node name>"`
	Ref          string `json:"ref,omitempty" jsonschema_description:"what to push from the workspace: a branch, tag or commit (default HEAD)"`
	Credential   string `json:"credential,omitempty" jsonschema_description:"the name of the secret to use (default: the one whose host is the remote's)"`
	TrustHostKey string `json:"trust_host_key,omitempty" jsonschema_description:"an SSH host key's fingerprint (SHA256:...) you checked: the first push to that host pins it"`
}

type hostKeyQuery struct {
	RemoteURL string `query:"remote_url" json:"remote_url,omitempty" jsonschema_description:"the ssh:// or user@host:path remote (default: the session's git URL)"`
}

// remoteOf is url, or the session's git URL.
func (s *Server) remoteOf(ctx context.Context, userID, sessionID, url string) (string, error) {
	sess, err := s.sessions.GetSession(ctx, userID, sessionID)
	if err != nil {
		return "", err
	}
	if url = strings.TrimSpace(url); url != "" {
		return url, nil
	}
	if sess.GitRepoURL == nil || *sess.GitRepoURL == "" {
		return "", orchestrator.FieldErrorf("remote_url", "the session has no git URL: give the remote's")
	}
	return *sess.GitRepoURL, nil
}

func (s *Server) pushNode(c echo.Context) (ship.PushResult, error) {
	var req PushRequest
	if err := decodeJSON(c, &req); err != nil {
		return ship.PushResult{}, err
	}
	return s.push(c.Request().Context(), user(c).ID, c.Param("id"), c.Param("node"), req)
}

// push pushes a node's commits as userID: for the route, and for an agent's
// request_push once the user approved it.
func (s *Server) push(ctx context.Context, userID, sessionID, nodeID string, req PushRequest) (ship.PushResult, error) {
	if s.cfg.Pusher == nil || s.cfg.Workspaces == nil {
		return ship.PushResult{}, orchestrator.Errorf(orchestrator.EUnavailable, "this server does not push (no runner)")
	}
	node, err := s.sessions.GetNode(ctx, userID, sessionID, nodeID)
	if err != nil {
		return ship.PushResult{}, err
	}
	remote, err := s.remoteOf(ctx, userID, sessionID, req.RemoteURL)
	if err != nil {
		return ship.PushResult{}, err
	}
	branch := strings.TrimSpace(req.Branch)
	if branch == "" {
		branch = "filepath/" + node.Name
	}
	dir, release, err := s.cfg.Workspaces.Workspace(ctx, nodeID)
	if err != nil {
		return ship.PushResult{}, err
	}
	defer release()
	res, err := s.cfg.Pusher.Push(ctx, ship.PushRequest{UserID: userID, SessionID: sessionID, Dir: dir, RemoteURL: remote,
		Branch: branch, Ref: req.Ref, Credential: req.Credential, TrustHostKey: req.TrustHostKey})
	if err != nil {
		s.log.Info("push refused", "session", sessionID, "node", nodeID, "remote", res.RemoteURL, "branch", branch, "code", orchestrator.ErrorCode(err))
		return res, err
	}
	s.log.Info("pushed", "session", sessionID, "node", nodeID, "remote", res.RemoteURL, "branch", branch, "commit", res.Commit, "status", res.Status)
	return res, nil
}

func (s *Server) remoteHostKey(c echo.Context) (ship.HostKey, error) {
	if s.cfg.Pusher == nil {
		return ship.HostKey{}, orchestrator.Errorf(orchestrator.EUnavailable, "this server does not push (no runner)")
	}
	ctx := c.Request().Context()
	remote, err := s.remoteOf(ctx, user(c).ID, c.Param("id"), c.QueryParam("remote_url"))
	if err != nil {
		return ship.HostKey{}, err
	}
	return s.cfg.Pusher.ProbeHostKey(ctx, user(c).ID, remote)
}
