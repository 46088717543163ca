package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

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
// A workspace lent by Workspace stays until it is given back.
func (r *Runner) releaseWorkspace(nodeID string) {
	r.mu.Lock()
	lent := r.lent[nodeID] > 0
	r.mu.Unlock()
	if lent {
		return
	}
	if err := r.ws.Unmount(nodeID); err != nil {
		r.log.Warn("unmount workspace", "node", nodeID, "err", err)
	}
}

// plainDirs is the workspace seam's stand-in until the FUSE manager is
// wired: a plain directory per node.
type plainDirs struct{ root string }

func (p plainDirs) Mount(_ context.Context, nodeID string) (string, error) {
	if nodeID == "" || filepath.Base(nodeID) != nodeID {
		return "", fmt.Errorf("node id %q is not a directory name", nodeID)
	}
	dir := filepath.Join(p.root, nodeID)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", fmt.Errorf("create workspace dir: %w", err)
	}
	// The agent may run as any user inside its container.
	if err := os.Chmod(dir, 0o777); err != nil {
		return "", fmt.Errorf("create workspace dir: %w", err)
	}
	return dir, nil
}

func (p plainDirs) Unmount(string) error { return nil }

// Workspace lends the host directory of nodeID's workspace (mounting it
// when its agent does not run) to the orchestrator's own work on it, such
// as a push; release gives it back, unmounting it unless the agent runs by
// then or another loan holds it.
func (r *Runner) Workspace(ctx context.Context, nodeID string) (dir string, release func(), err error) {
	r.mu.Lock()
	r.lent[nodeID]++
	r.mu.Unlock()
	giveBack := func() {
		r.mu.Lock()
		r.lent[nodeID]--
		last := r.lent[nodeID] == 0
		if last {
			delete(r.lent, nodeID)
		}
		running := r.relays[nodeID] != nil || r.starting[nodeID] != nil
		r.mu.Unlock()
		if last && !running {
			r.releaseWorkspace(nodeID)
		}
	}
	dir, err = r.ws.Mount(ctx, nodeID)
	if err != nil {
		giveBack()
		return "", nil, fmt.Errorf("mount the workspace of node %s: %w", nodeID, err)
	}
	var once sync.Once
	return dir, func() { once.Do(giveBack) }, nil
}
