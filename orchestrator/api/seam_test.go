package api_test

import (
	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/runner"
)

// The lifecycle runner plugs into the server as its Runner, LogSource and
// Remover.
var (
	_ api.Runner    = (*runner.Runner)(nil)
	_ api.LogSource = (*runner.Runner)(nil)
	_ api.Remover   = (*runner.Runner)(nil)
)
