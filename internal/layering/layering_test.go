// Package layering holds the test of the import arrows of docs/design.md:
// protocol ← containers ← relay ← orchestrator ← cmd, and inside the
// orchestrator those of the store (orchestrator/store and its noun
// packages), the session filesystem (orchestrator/vfs), the model
// catalogue and the gateway.
package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/filepath-dev/filepath/"

// TestImportArrows fails when a package imports (directly or not) a package
// of this module that docs/design.md does not allow it to.
func TestImportArrows(t *testing.T) {
	allowed := map[string][]string{
		"protocol/...":   {"protocol"},
		"containers/...": {"containers", "protocol"},
		"relay/...":      {"relay", "containers", "protocol"},
		"adapters/...":   {"adapters", "protocol"},
		// The session filesystem: the inode store (orchestrator/vfs) over
		// its leaves, which know nothing of the store; none of it knows
		// the packages that use it (api, runner, workspace, store, hub).
		// "=p" is p alone, without the packages below it.
		"orchestrator/vfs/...":      {"orchestrator/vfs", "=orchestrator", "protocol", "internal/pgsql"},
		"orchestrator/vfs/errno":    {"orchestrator/vfs/errno", "=orchestrator"},
		"orchestrator/vfs/paths":    {"orchestrator/vfs/paths", "orchestrator/vfs/errno", "=orchestrator"},
		"orchestrator/vfs/events":   {"orchestrator/vfs/events", "protocol"},
		"orchestrator/vfs/textdiff": {"orchestrator/vfs/textdiff"},
		"orchestrator/vfs/treediff": {"orchestrator/vfs/treediff"},
		// The review of a workspace's changes reads the session filesystem
		// and the store; the API serves it, the runner records its base
		// (its tests mount a workspace to run git in it).
		"orchestrator/changes": {"orchestrator/changes", "=orchestrator", "orchestrator/vfs", "orchestrator/store", "protocol", "orchestrator/workspace", "internal/pgsql"},
		// The model catalogue is a leaf the gateway and the API share (its
		// test checks the agent catalog's defaults against it).
		"orchestrator/models": {"orchestrator/models", "=orchestrator"},
		// The file tiers and tools (the format tier, orchestrator/files/format,
		// among them) work on the session filesystem and know nothing of the
		// store or of the APIs that serve them.
		"orchestrator/files/...": {"orchestrator/files", "orchestrator/vfs", "orchestrator/gitnet", "=orchestrator", "protocol", "internal/pgsql"},
		// The shared test kit: no package of this module, so that the
		// tests of every layer above may use it.
		"internal/testkit/...": {"internal/testkit"},
		// The PostgreSQL connection of the store and the vfs: a leaf.
		"internal/pgsql": {"internal/pgsql"},
	}
	for pkgs, ok := range allowed {
		check(t, pkgs, ok, "-deps")
		// Their tests may use the test helpers besides (testkit: the shared
		// test kit; fakellm: the scripted LLM upstream the native agents are
		// tested against).
		check(t, pkgs, append(ok, "internal/testkit", "internal/fakellm"), "-deps", "-test")
	}
}

// TestStoreArrows: the store's base (the database, the migrations, the
// session log) knows none of its noun packages; identity and audit only
// the base; sessions the audit (a relay's append writes its rows); collab
// the sessions (approvals change a node's config). None knows the packages
// that use them. Their tests may use storetest (every noun package over one
// database), the hub (the publisher the server wires in) and the schemas.
func TestStoreArrows(t *testing.T) {
	base := []string{"=orchestrator/store", "=orchestrator", "protocol", "internal/pgsql"}
	allowed := map[string][]string{
		"orchestrator/store":           base,
		"orchestrator/store/identity":  append([]string{"orchestrator/store/identity"}, base...),
		"orchestrator/store/audit":     append([]string{"orchestrator/store/audit"}, base...),
		"orchestrator/store/sessions":  append([]string{"orchestrator/store/sessions", "orchestrator/store/audit"}, base...),
		"orchestrator/store/collab":    append([]string{"orchestrator/store/collab", "orchestrator/store/sessions", "orchestrator/store/audit"}, base...),
		"orchestrator/store/storetest": append([]string{"orchestrator/store", "internal/testkit"}, base...),
	}
	for pkgs, ok := range allowed {
		check(t, pkgs, ok, "-deps")
		check(t, pkgs, append(ok, "orchestrator/store", "orchestrator/hub", "internal/schematest", "internal/testkit"), "-deps", "-test")
	}
}

// TestOrchestratorArrows fails when a package of the orchestrator depends
// (directly or not) on a sibling that builds on it: the edges the packages
// serve, api among them, come last.
func TestOrchestratorArrows(t *testing.T) {
	forbidden := map[string][]string{
		// the gateway serves agents; the model list it fetches lives in
		// orchestrator/models, which the user API serves too
		"orchestrator/gateway/...": {"orchestrator/api"},
	}
	for pkgs, no := range forbidden {
		deny(t, pkgs, no, "-deps")
		deny(t, pkgs, no, "-deps", "-test")
	}
}

// deny fails when a package of pkgs depends on one of no.
func deny(t *testing.T, pkgs string, no []string, flags ...string) {
	t.Helper()
	for _, dep := range deps(t, pkgs, flags...) {
		if allowedDep(dep, no) {
			t.Errorf("%s (go %v) depends on %s, which must not be", pkgs, flags, dep)
		}
	}
}

// deps lists the packages of this module that pkgs depend on (test
// variants named as their package).
func deps(t *testing.T, pkgs string, flags ...string) []string {
	t.Helper()
	args := append(append([]string{"list"}, flags...), "-f", "{{.ImportPath}}", "../../"+pkgs)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %v: %v", args, err)
	}
	var rels []string
	for _, dep := range strings.Fields(string(out)) {
		rel, mine := strings.CutPrefix(dep, module)
		if !mine {
			continue
		}
		// test variants: "p [p.test]", "p_test", "p.test"
		rels = append(rels, strings.TrimSuffix(strings.TrimSuffix(rel, ".test"), "_test"))
	}
	return rels
}

func check(t *testing.T, pkgs string, ok []string, flags ...string) {
	t.Helper()
	for _, rel := range deps(t, pkgs, flags...) {
		if !allowedDep(rel, ok) {
			t.Errorf("%s (go %v) depends on %s; docs/design.md allows only %v", pkgs, flags, rel, ok)
		}
	}
}

func allowedDep(rel string, ok []string) bool {
	for _, a := range ok {
		if exact, ok := strings.CutPrefix(a, "="); ok {
			if rel == exact {
				return true
			}
			continue
		}
		if rel == a || strings.HasPrefix(rel, a+"/") {
			return true
		}
	}
	return false
}
