package streamjson

import (
	"testing"

	"github.com/filepath-dev/filepath/adapters/cli/internal/golden"
)

func TestClaudeGolden(t *testing.T) {
	golden.Run(t, "../testdata/claude", func() golden.Parser { return NewParser(Claude, "/workspace") })
}
