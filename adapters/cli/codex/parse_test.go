package codex

import (
	"testing"

	"github.com/filepath-dev/filepath/adapters/cli/internal/golden"
)

func TestGolden(t *testing.T) {
	golden.Run(t, "../testdata/codex", func() golden.Parser { return NewParser("/workspace") })
}

func TestUnwrapShell(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"single quotes", `/bin/bash -lc 'cat README.md'`, "cat README.md"},
		{"double quotes", `/bin/bash -lc "git commit -qam 'Say hi' && echo \"ok\""`, `git commit -qam 'Say hi' && echo "ok"`},
		{"bare word", `/bin/bash -lc pwd`, "pwd"},
		{"two words stay", `/bin/bash -lc echo hi`, `/bin/bash -lc echo hi`},
		{"no wrapper", `ls -la`, `ls -la`},
		{"unterminated", `bash -lc 'ls`, `bash -lc 'ls`},
	} {
		if got := unwrapShell(c.in); got != c.want {
			t.Errorf("%s: unwrapShell(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}
