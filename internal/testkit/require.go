package testkit

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// InCI reports whether the tests run under CI (env CI=true), where nothing
// may be skipped for lack of a tool.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing fails the test under CI and skips it elsewhere.
func Missing(t testing.TB, what string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s is required when CI=true but is not available", what)
	}
	t.Skipf("%s not available", what)
}

// RequireDocker makes sure a Docker engine answers.
func RequireDocker(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").Run(); err != nil {
		Missing(t, "a Docker engine ("+err.Error()+")")
	}
}

// RequireImage makes sure a local Docker image exists (built by `make images`).
func RequireImage(t testing.TB, image string) {
	t.Helper()
	RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := exec.CommandContext(ctx, "docker", "image", "inspect", image).Run(); err != nil {
		Missing(t, "docker image "+image+" (run `make images`)")
	}
}

// ChromiumPath returns the Chromium binary to drive, or fails/skips.
func ChromiumPath(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("FILEPATH_CHROMIUM"), "/usr/lib/chromium/chromium", "/usr/bin/chromium"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	Missing(t, "chromium")
	return ""
}

// RequireFUSE makes sure /dev/fuse exists and the test runs as root.
func RequireFUSE(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		Missing(t, "FUSE (/dev/fuse as root)")
	}
}
