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
		// The shared test kit: the standard library only, so that the
		// tests of every layer above may use it.
		"internal/testkit/...": {"internal/testkit"},
	}
	for pkgs, ok := range allowed {
		check(t, pkgs, ok, "-deps")
		// Their tests may use the test helpers besides (testkit: the shared
		// test kit; fakellm: the scripted LLM upstream the native agents are
		// tested against).
		check(t, pkgs, append(ok, "internal/testkit", "internal/fakellm"), "-deps", "-test")
	}
}

func check(t *testing.T, pkgs string, ok []string, flags ...string) {
	t.Helper()
	args := append(append([]string{"list"}, flags...), "-f", "{{.ImportPath}}", "../../"+pkgs)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %v: %v", args, err)
	}
	for _, dep := range strings.Fields(string(out)) {
		rel, mine := strings.CutPrefix(dep, module)
		if !mine {
			continue
		}
		// test variants: "p [p.test]", "p_test", "p.test"
		rel = strings.TrimSuffix(strings.TrimSuffix(rel, ".test"), "_test")
		if !allowedDep(rel, ok) {
			t.Errorf("%s (go %v) depends on %s; DESIGN.md allows only %v", pkgs, flags, rel, ok)
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
