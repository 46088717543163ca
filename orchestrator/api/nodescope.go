package api

import (
	"context"
	"encoding/json"

	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
	"github.com/filepath-dev/filepath/protocol"
)

// subtree returns the ids of node id and its descendants in nodes.
func subtree(nodes []sessions.Node, id string) map[string]bool {
	kids := map[string][]string{}
	found := false
	for _, n := range nodes {
		if n.ParentID != nil {
			kids[*n.ParentID] = append(kids[*n.ParentID], n.ID)
		}
		found = found || n.ID == id
	}
	out := map[string]bool{}
	if !found {
		return out
	}
	stack := []string{id}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		out[n] = true
		stack = append(stack, kids[n]...)
	}
	return out
}

// nodeScope returns what node key p may read: its node and its
// descendants (DESIGN invariant 9).
func (s *Server) nodeScope(ctx context.Context, p identity.Principal) (map[string]bool, error) {
	nodes, err := s.sessions.Tree(ctx, p.User.ID, p.SessionID)
	if err != nil {
		return nil, err
	}
	return subtree(nodes, p.NodeID), nil
}

// recordScope decides which records of a session stream a node key may
// read: those of its node and its descendants, and file records of paths
// its allowed_paths let it see. It follows the tree as it changes (a child
// spawned later is included). Not safe for concurrent use: one per stream.
type recordScope struct {
	s     *Server
	p     identity.Principal
	nodes map[string]bool
	files *vfs.FS // nil: no file records
	// seen is the session's last seq before the last reload: the tree read
	// then reflects every record up to it, so replaying those needs no
	// reload.
	seen int64
}

func (s *Server) newRecordScope(ctx context.Context, p identity.Principal) (*recordScope, error) {
	sc := &recordScope{s: s, p: p}
	if err := sc.reload(ctx); err != nil {
		return nil, err
	}
	return sc, nil
}

// reload reads the tree and the node's files policy again.
func (sc *recordScope) reload(ctx context.Context) error {
	seen, err := sc.s.store.LastSeq(ctx, sc.p.SessionID)
	if err != nil {
		return err
	}
	sc.seen = seen
	nodes, err := sc.s.nodeScope(ctx, sc.p)
	if err != nil {
		return err
	}
	sc.nodes, sc.files = nodes, nil
	if sc.s.cfg.Files == nil {
		return nil
	}
	n, err := sc.s.sessions.NodeByID(ctx, sc.p.NodeID)
	if err != nil {
		return err
	}
	allowed, err := paths.AllowedPaths(n.Config)
	if err != nil {
		return nil // an unreadable policy shows no files, as the API refuses them
	}
	if fs, err := sc.s.cfg.Files.Session(sc.p.SessionID).ForNode(n.ID, allowed); err == nil {
		sc.files = fs
	}
	return nil
}

// allows reports whether rec may be sent. A node record that changes the
// tree (or the node's own config) makes the scope follow: a node that
// enters or leaves the subtree is told about it.
func (sc *recordScope) allows(ctx context.Context, rec protocol.Record) (bool, error) {
	switch rec.Kind {
	case protocol.KindFile:
		var d struct {
			Path string `json:"path"`
		}
		if sc.files == nil || json.Unmarshal(rec.Data, &d) != nil {
			return false, nil
		}
		p, err := paths.CleanPath(d.Path)
		return err == nil && sc.files.Visible(p), nil
	case protocol.KindNode:
		var d struct {
			Op string `json:"op"`
		}
		_ = json.Unmarshal(rec.Data, &d)
		if rec.Seq <= sc.seen || (d.Op == protocol.OpUpdated && rec.NodeID != sc.p.NodeID) {
			break
		}
		was := sc.nodes[rec.NodeID]
		if err := sc.reload(ctx); err != nil {
			return false, err
		}
		return was || sc.nodes[rec.NodeID], nil
	}
	return sc.nodes[rec.NodeID], nil
}
