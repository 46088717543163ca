package runner

import (
	"context"
	"fmt"

	"github.com/filepath-dev/filepath/containers"
)

// LiveNodes returns the nodes whose container has not exited (running,
// paused, or created and not yet started): the workspaces to serve at start,
// before Reconcile, so that those containers see a live /workspace again.
// Finished nodes are mounted only when they start again.
func (r *Runner) LiveNodes(ctx context.Context) ([]string, error) {
	nodes, err := r.sessions.ActiveNodes(ctx)
	if err != nil {
		return nil, err
	}
	infos, err := r.rt.List(ctx, map[string]string{LabelInstance: r.instance})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	live := make(map[string]bool, len(infos))
	for _, in := range infos {
		if in.State != containers.StateExited {
			live[in.ID] = true
		}
	}
	var ids []string
	for _, n := range nodes {
		if n.ContainerID != "" && live[n.ContainerID] {
			ids = append(ids, n.ID)
		}
	}
	return ids, nil
}

// releaseWorkspace unmounts the workspace of a node whose container is gone
// for good (it exited, or never started); its next start mounts it again.
func (r *Runner) releaseWorkspace(nodeID string) {
	if err := r.ws.Unmount(nodeID); err != nil {
		r.log.Warn("unmount workspace", "node", nodeID, "err", err)
	}
}
