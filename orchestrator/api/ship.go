package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/ship"
)

// shipRoutes take a node's work out: a push of its branch from the host
// with one of the user's credentials (orchestrator/ship).
func shipRoutes() []route {
	return []route{
		op(http.MethodPost, "/sessions/:id/nodes/:node/push", (*Server).pushNode, opDoc{summary: "Push the node's commits (its workspace's HEAD, or ref) to a branch of the session's git remote or another URL, from the server with one of your credentials (HTTPS or SSH): no credential enters a container. 412 (field trust_host_key): a new SSH host, its key's fingerprint in the message; 409: the remote refused (its words in the message); 422 with field credential: none fits, or the remote refused it", status: 200, req: ship.NodePush{}}),
		op(http.MethodPost, "/sessions/:id/nodes/:node/pull-request", (*Server).pullRequest, opDoc{summary: "Open a pull request (GitHub, GitHub Enterprise) or merge request (GitLab) of the node's pushed branch with one of your forge tokens, or update the one open for the branch (updated: true); title and body default to a draft from the node's commits. 422 with field credential: no token fits or the forge refused it; 503: the forge is unreachable", status: 200, req: ship.NodePullRequest{}}),
		op(http.MethodGet, "/sessions/:id/remote-host-key", (*Server).remoteHostKey, opDoc{summary: "The SSH host key an ssh:// remote presents, and whether you trust (pinned) it: shown for confirmation before the first push there", status: 200, query: hostKeyQuery{}}),
	}
}

type hostKeyQuery struct {
	RemoteURL string `query:"remote_url" json:"remote_url,omitempty" jsonschema_description:"the ssh:// or user@host:path remote (default: the session's git URL)"`
}

// noShip is the answer of a server without Ship, once the session is
// known to be the user's.
func (s *Server) noShip(c echo.Context) error {
	if _, err := s.sessions.GetSession(c.Request().Context(), user(c).ID, c.Param("id")); err != nil {
		return err
	}
	return orchestrator.Errorf(orchestrator.EUnavailable, "this server does not push (no runner)")
}

func (s *Server) pushNode(c echo.Context) (ship.PushResult, error) {
	var req ship.NodePush
	if err := decodeJSON(c, &req); err != nil {
		return ship.PushResult{}, err
	}
	if s.cfg.Ship == nil {
		return ship.PushResult{}, s.noShip(c)
	}
	sid, nid := c.Param("id"), c.Param("node")
	res, err := s.cfg.Ship.Push(c.Request().Context(), user(c).ID, sid, nid, req)
	if err != nil {
		s.log.Info("push refused", "session", sid, "node", nid, "remote", res.RemoteURL, "branch", res.Branch, "code", orchestrator.ErrorCode(err))
		return res, err
	}
	s.log.Info("pushed", "session", sid, "node", nid, "remote", res.RemoteURL, "branch", res.Branch, "commit", res.Commit, "status", res.Status)
	return res, nil
}

func (s *Server) remoteHostKey(c echo.Context) (ship.HostKey, error) {
	if s.cfg.Ship == nil {
		return ship.HostKey{}, s.noShip(c)
	}
	ctx := c.Request().Context()
	remote, err := s.cfg.Ship.RemoteOf(ctx, user(c).ID, c.Param("id"), c.QueryParam("remote_url"))
	if err != nil {
		return ship.HostKey{}, err
	}
	return s.cfg.Ship.Pusher().ProbeHostKey(ctx, user(c).ID, remote)
}

func (s *Server) pullRequest(c echo.Context) (ship.PullRequest, error) {
	var req ship.NodePullRequest
	if err := decodeJSON(c, &req); err != nil {
		return ship.PullRequest{}, err
	}
	if s.cfg.Ship == nil {
		return ship.PullRequest{}, s.noShip(c)
	}
	sid, nid := c.Param("id"), c.Param("node")
	pr, err := s.cfg.Ship.OpenPullRequest(c.Request().Context(), user(c).ID, sid, nid, req)
	if err != nil {
		s.log.Info("pull request refused", "session", sid, "node", nid, "code", orchestrator.ErrorCode(err))
		return pr, err
	}
	s.log.Info("pull request", "session", sid, "node", nid, "url", pr.URL, "updated", pr.Updated)
	return pr, nil
}
