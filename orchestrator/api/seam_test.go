package api_test

import (
	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/runner"
)

// The lifecycle runner is the server's Runner (cmd/filepath checks it too).
var _ api.Runner = (*runner.Runner)(nil)
