package runner

import "github.com/filepath-dev/filepath/orchestrator/workspace"

// The FUSE workspace manager fits the runner's workspace seam.
var _ Workspaces = (*workspace.Manager)(nil)
