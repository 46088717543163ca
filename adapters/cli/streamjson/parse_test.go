package streamjson

import (
	"testing"

	"github.com/filepath-dev/filepath/adapters/cli/internal/golden"
)

func TestClaudeGolden(t *testing.T) {
	golden.Run(t, "../testdata/claude", func() golden.Parser { return NewParser(Claude, "/workspace") })
}

func TestAmpGolden(t *testing.T) {
	golden.Run(t, "../testdata/amp", func() golden.Parser { return NewParser(Amp, "/workspace") })
}

func TestCursorGolden(t *testing.T) {
	golden.Run(t, "../testdata/cursor", func() golden.Parser { return NewParser(Cursor, "/workspace") })
}
