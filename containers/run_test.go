package containers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

// shellImage is a Debian image with sh whose ENTRYPOINT is an agent
// (images/byo-echo).
const shellImage = "filepath/byo-echo:latest"

// shellRuntimes returns a spec maker running `sh -c script` in a workspace
// directory, for the process runtime and (when the base image exists;
// required with CI=true) Docker.
func shellRuntimes(t *testing.T) []struct {
	name string
	rt   Runtime
	spec func(dir, script string) Spec
} {
	t.Helper()
	session := "test-run-" + newID()
	type h = struct {
		name string
		rt   Runtime
		spec func(dir, script string) Spec
	}
	pr, err := NewProcess(ProcessConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close() })
	hs := []h{{"process", pr, func(dir, script string) Spec {
		return Spec{SessionID: session, NodeID: "n-" + newID(), Entrypoint: []string{"sh", "-c"}, Cmd: []string{script}, WorkspaceDir: dir}
	}}}
	if os.Getenv("FILEPATH_TEST_NO_DOCKER") == "1" && !testkit.InCI() {
		return hs
	}
	testkit.RequireImage(t, shellImage)
	d, err := NewDocker(context.Background(), DockerConfig{Instance: "containers-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanup(t, d, session); d.Close() })
	return append(hs, h{"docker", d, func(dir, script string) Spec {
		return Spec{SessionID: session, NodeID: "n-" + newID(), Image: shellImage, Entrypoint: []string{"sh", "-c"}, Cmd: []string{script},
			WorkspaceDir: dir, Network: "none"}
	}})
}

// TestRun: a run to completion reports the exit code and the tail of the
// output (both streams) of a command run in /workspace (with Entrypoint
// replacing the image's agent), stops a command at its time limit, keeps the
// output within its bound, and leaves no container behind.
func TestRun(t *testing.T) {
	for _, h := range shellRuntimes(t) {
		t.Run(h.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("in the workspace"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chmod(dir, 0o777)

			res, err := Run(ctx, h.rt, h.spec(dir, "cat marker; echo; echo to stderr >&2; exit 3"), RunOptions{Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			// The two streams are copied apart: their lines may interleave
			// either way.
			if res.ExitCode != 3 || res.TimedOut || res.Truncated ||
				(res.Output != "in the workspace\nto stderr" && res.Output != "to stderr\nin the workspace") {
				t.Fatalf("result %+v", res)
			}

			start := time.Now()
			res, err = Run(ctx, h.rt, h.spec(dir, "echo started; sleep 60"), RunOptions{Timeout: time.Second, StopGrace: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if !res.TimedOut || res.ExitCode == 0 || res.Output != "started" || time.Since(start) > 30*time.Second {
				t.Fatalf("timed-out result %+v after %s", res, time.Since(start))
			}

			res, err = Run(ctx, h.rt, h.spec(dir, "i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done; echo last"), RunOptions{MaxOutput: 100})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Truncated || len(res.Output) > 100 || !strings.HasSuffix(res.Output, "line 1999\nlast") || !strings.HasPrefix(res.Output, "line ") {
				t.Fatalf("bounded output (%d bytes, truncated %v): %q", len(res.Output), res.Truncated, res.Output)
			}

			res, err = Run(ctx, h.rt, h.spec(dir, "head -c 500 /dev/zero | tr '\\0' x"), RunOptions{MaxOutput: 100})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Truncated || res.Output != strings.Repeat("x", 100) {
				t.Fatalf("one long line cut to its end: %d bytes, %+v", len(res.Output), res.Truncated)
			}

			infos, err := h.rt.List(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range infos {
				if strings.HasPrefix(in.SessionID, "test-run-") {
					t.Errorf("container %s of a run is left: %+v", in.ID, in)
				}
			}
		})
	}
}
