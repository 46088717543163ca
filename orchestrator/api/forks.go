package api

import (
	"net/http"
	"syscall"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
)

// forkRoutes are the routes of a forked child's workspace (spawn with
// workspace "fork"): its diff against the fork point and the merge into
// the workspace it was forked from. Served when Config.Files is set.
func forkRoutes() []route {
	return []route{
		op(http.MethodGet, "/sessions/:id/nodes/:node/diff", (*Server).nodeDiff, opDoc{summary: "A forked node's changes since its fork point: files added, changed and deleted, with a unified diff per text file (text=false: without them); 404 when the node works on the shared workspace", status: 200, query: diffQuery{}}),
		op(http.MethodPost, "/sessions/:id/nodes/:node/merge", (*Server).nodeMerge, opDoc{summary: "Merge a forked node's changes into the workspace it was forked from in one transaction: paths both changed since the fork point are listed as conflicts and left as they are; the user or the node's parent's key", status: 200}),
	}
}

// forkOf returns the fork the request's node works on, after checking that
// the node is the user's.
func (s *Server) forkOf(c echo.Context) (vfs.ForkInfo, error) {
	ctx := c.Request().Context()
	n, err := s.sessions.GetNode(ctx, user(c).ID, c.Param("id"), c.Param("node"))
	if err != nil {
		return vfs.ForkInfo{}, err
	}
	fk, err := s.cfg.Files.ForkOfNode(ctx, n.ID)
	if vfs.IsErrno(err, syscall.ENOENT) {
		return vfs.ForkInfo{}, orchestrator.Errorf(orchestrator.ENotFound, "node %s works on the shared workspace: it has no fork to diff or merge", n.ID)
	}
	return fk, err
}

// diffQuery is the query of GET .../diff.
type diffQuery struct {
	Text string `query:"text" jsonschema:"enum=true,enum=false" jsonschema_description:"false: without the text diffs"`
}

func (s *Server) nodeDiff(c echo.Context) (vfs.ForkDiff, error) {
	fk, err := s.forkOf(c)
	if err != nil {
		return vfs.ForkDiff{}, err
	}
	var q diffQuery
	_ = bindQuery(c, &q) // strings only: no error
	return s.cfg.Files.Diff(c.Request().Context(), fk.ID, vfs.DiffOptions{Text: q.Text != "false"})
}

func (s *Server) nodeMerge(c echo.Context) (vfs.MergeResult, error) {
	ctx := c.Request().Context()
	fk, err := s.forkOf(c)
	if err != nil {
		return vfs.MergeResult{}, err
	}
	opt := vfs.MergeOptions{}
	if p := principal(c); p.NodeID != "" {
		// a node key merges only its own children, within its allowed paths
		n, err := s.sessions.NodeByID(ctx, c.Param("node"))
		if err != nil {
			return vfs.MergeResult{}, err
		}
		if n.ParentID == nil || *n.ParentID != p.NodeID {
			return vfs.MergeResult{}, orchestrator.Errorf(orchestrator.EForbidden, "this API key belongs to node %s and merges only the forks of its own children", p.NodeID)
		}
		// and only into the workspace it works on: a child moved under it
		// keeps the origin it was forked from
		ws, err := s.cfg.Files.WorkspaceOfNode(ctx, p.SessionID, p.NodeID)
		if err != nil {
			return vfs.MergeResult{}, err
		}
		if ws != fk.Origin {
			return vfs.MergeResult{}, orchestrator.Errorf(orchestrator.EForbidden, "node %s was forked from another workspace than the one node %s works on (it was moved); only the user merges it", n.ID, p.NodeID)
		}
		self, err := s.sessions.NodeByID(ctx, p.NodeID)
		if err != nil {
			return vfs.MergeResult{}, err
		}
		allowed, err := paths.AllowedPaths(self.Config)
		if err != nil {
			return vfs.MergeResult{}, err
		}
		opt = vfs.MergeOptions{NodeID: self.ID, Allowed: allowed}
	}
	return s.cfg.Files.Merge(ctx, fk.ID, opt)
}
