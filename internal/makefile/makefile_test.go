// Package makefile tests the repository's Makefile.
package makefile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

// `make build` in a fresh clone (no web/node_modules) installs the UI's npm
// packages before building it, and does not reinstall them once they are
// there. Checked with `make -n` on a copy of the Makefile.
func TestMakeBuildInstallsWebPackages(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed")
	}
	dir := t.TempDir()
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteFiles(t, dir, map[string]string{"Makefile": string(mk), "web/package.json": "{}", "web/package-lock.json": "{}"})
	dry := func(target string) string {
		t.Helper()
		cmd := exec.Command("make", "-n", target, "VERSION=test")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		return string(out)
	}
	out := dry("build")
	ci, build := strings.Index(out, "npm ci"), strings.Index(out, "npm run build")
	if ci < 0 || build < 0 || ci > build {
		t.Fatalf("make build in a fresh clone does not run npm ci before npm run build:\n%s", out)
	}
	if out := dry("web-test"); !strings.Contains(out, "npm ci") {
		t.Fatalf("make web-test in a fresh clone does not install the packages:\n%s", out)
	}
	// Installed, and newer than the lock file: no reinstall.
	testkit.WriteFile(t, filepath.Join(dir, "web/node_modules/.package-lock.json"), "{}")
	later := time.Now().Add(time.Minute)
	os.Chtimes(filepath.Join(dir, "web/node_modules/.package-lock.json"), later, later)
	if out := dry("build"); strings.Contains(out, "npm ci") || !strings.Contains(out, "npm run build") {
		t.Fatalf("make build reinstalls the packages:\n%s", out)
	}
}
