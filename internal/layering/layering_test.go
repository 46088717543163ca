// Package layering holds the test of DESIGN.md's import arrows:
// protocol ← containers ← relay ← orchestrator ← cmd.
package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/filepath-dev/filepath/"

// TestImportArrows fails when a package imports (directly or not) a package
// of this module that DESIGN.md does not allow it to.
func TestImportArrows(t *testing.T) {
	allowed := map[string][]string{
		"protocol/...":   {"protocol"},
		"containers/...": {"containers", "protocol"},
		"relay/...":      {"relay", "containers", "protocol"},
		"adapters/...":   {"adapters", "protocol"},
	}
	for pkgs, ok := range allowed {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../../"+pkgs).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkgs, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			rel, mine := strings.CutPrefix(dep, module)
			if !mine {
				continue
			}
			if !allowedDep(rel, ok) {
				t.Errorf("%s depends on %s; DESIGN.md allows only %v", pkgs, rel, ok)
			}
		}
	}
}

func allowedDep(rel string, ok []string) bool {
	for _, a := range ok {
		if rel == a || strings.HasPrefix(rel, a+"/") {
			return true
		}
	}
	return false
}
