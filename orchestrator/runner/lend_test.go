package runner

import (
	"context"
	"sync"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
)

// countingWorkspaces counts mounts and unmounts of plain directories.
type countingWorkspaces struct {
	plainDirs
	mu               sync.Mutex
	mounts, unmounts int
}

func (c *countingWorkspaces) Mount(ctx context.Context, nodeID string) (string, error) {
	c.mu.Lock()
	c.mounts++
	c.mu.Unlock()
	return c.plainDirs.Mount(ctx, nodeID)
}

func (c *countingWorkspaces) Unmount(nodeID string) error {
	c.mu.Lock()
	c.unmounts++
	c.mu.Unlock()
	return nil
}

func (c *countingWorkspaces) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mounts, c.unmounts
}

// TestWorkspaceLoan: the workspace of a node that does not run is mounted
// for a loan (a push) and unmounted when the last loan is given back; a
// container's exit meanwhile does not unmount it under the loan.
func TestWorkspaceLoan(t *testing.T) {
	ws := &countingWorkspaces{}
	e := newProcessEnv(t, store.Config{}, sessions.NewSession{Name: "s"}, func(c *Config) {
		ws.plainDirs = plainDirs{root: t.TempDir()}
		c.Workspaces = ws
	})
	n, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{AgentType: "shelley"})
	if err != nil {
		t.Fatal(err)
	}
	dir, release, err := e.r.Workspace(e.ctx, n.ID)
	if err != nil || dir == "" {
		t.Fatalf("lend: %q, %v", dir, err)
	}
	_, release2, err := e.r.Workspace(e.ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.r.releaseWorkspace(n.ID) // the node's container exits meanwhile
	release()
	release() // twice is once
	if _, un := ws.counts(); un != 0 {
		t.Fatalf("unmounted %d times under a loan", un)
	}
	release2()
	if m, un := ws.counts(); m != 2 || un != 1 {
		t.Fatalf("%d mounts, %d unmounts; want the workspace unmounted once after the last loan", m, un)
	}
}
