package compose_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

const (
	baseImage = "filepath/base:bookworm"
	agent     = "filepath/byo-echo:latest"
)

// TestCompose builds the orchestrator's image, brings compose.yaml up with
// docker-compose (on a fresh data directory and port), waits for the
// healthcheck to say healthy, and runs a git-URL session through it: the
// orchestrator clones a repository (served by git daemon inside its own
// container, from the data volume) and starts a byo-echo agent whose
// /workspace (FUSE, propagated to the host) holds the clone; the agent
// answers a message. Everything it starts is removed at the end.
func TestCompose(t *testing.T) {
	testkit.RequireFUSE(t) // root, which the shared mount below needs too
	testkit.RequireImage(t, baseImage)
	testkit.RequireImage(t, agent)
	if _, err := exec.LookPath("docker-compose"); err != nil {
		testkit.Missing(t, "docker-compose (apt-get install docker-compose)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	id := randomID(t)

	image := "filepath/filepath:compose-test-" + id
	buildImage(t, ctx, root, image)

	// The data directory: the same path inside and outside, a shared mount
	// (compose.yaml's rshared bind needs one).
	data := t.TempDir()
	run(t, ctx, "", nil, "mount", "--bind", data, data)
	t.Cleanup(func() { unmountUnder(t, data) })
	run(t, ctx, "", nil, "mount", "--make-rshared", data)

	env := append(os.Environ(), "FILEPATH_IMAGE="+image, "FILEPATH_DATA_DIR="+data, "FILEPATH_PORT="+freePort(t),
		"FILEPATH_GIT_ALLOW_PRIVATE=1") // the repository is served on the container's loopback
	project := "fpcompose" + id
	compose := func(ctx context.Context, args ...string) (string, error) {
		return output(ctx, root, env, "docker-compose", append([]string{"-p", project, "-f", filepath.Join(root, "compose.yaml")}, args...)...)
	}
	var sessions []string
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if t.Failed() {
			logs, _ := compose(cctx, "logs", "--no-color", "--tail", "60")
			t.Logf("orchestrator logs:\n%s", logs)
		}
		// Agent containers are the host engine's, not the compose project's.
		for _, s := range sessions {
			if ids, _ := output(cctx, "", nil, "docker", "ps", "-aq", "--filter", "label=filepath.session="+s); strings.TrimSpace(ids) != "" {
				output(cctx, "", nil, "docker", append([]string{"rm", "-f"}, strings.Fields(ids)...)...)
			}
		}
		if out, err := compose(cctx, "down", "-v", "--remove-orphans", "--timeout", "10"); err != nil {
			t.Errorf("docker-compose down: %v\n%s", err, out)
		}
	})
	if out, err := compose(ctx, "up", "-d"); err != nil {
		t.Fatalf("docker-compose up: %v\n%s", err, out)
	}
	out, err := compose(ctx, "ps", "-q", "filepath")
	container := strings.TrimSpace(out)
	if err != nil || container == "" {
		t.Fatalf("docker-compose ps: %v %q", err, out)
	}

	// The healthcheck (filepath healthcheck in the container) turns healthy.
	checkFor(t, ctx, 90*time.Second, "the container to be healthy", func() (bool, error) {
		st, err := output(ctx, "", nil, "docker", "inspect", "-f", "{{.State.Status}} {{.State.Health.Status}}", container)
		if err != nil { // no Health: compose.yaml has no healthcheck
			return false, fmt.Errorf("%v: %s", err, strings.TrimSpace(st))
		}
		switch st = strings.TrimSpace(st); st {
		case "running healthy":
			return true, nil
		case "running starting":
			return false, fmt.Errorf("state %q", st)
		}
		return false, &fatal{fmt.Errorf("container state %q", st)}
	})
	if v := run(t, ctx, "", nil, "docker", "exec", container, "git", "--version"); !strings.HasPrefix(v, "git version") {
		t.Fatalf("git --version in the image: %q", v)
	}
	port := strings.TrimSpace(run(t, ctx, "", nil, "docker", "port", container, "8080/tcp"))
	c := &client{base: "http://" + port + "/api/v1"}
	c.key = strings.TrimSpace(lastLine(run(t, ctx, "", nil, "docker", "exec", container, "filepath", "apikey", "create", "--data", data)))

	// A repository in the data volume, served over git:// inside the
	// orchestrator's container (the store refuses file:// URLs).
	repo := filepath.Join(data, "repos", "demo.git")
	work := t.TempDir()
	run(t, ctx, "", nil, "git", "init", "-q", "--bare", repo)
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("# demo from compose\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, work, nil, "git", "init", "-q")
	run(t, ctx, work, nil, "git", "add", "README.md")
	run(t, ctx, work, nil, "git", "-c", "user.name=test", "-c", "user.email=test@filepath.local", "commit", "-qm", "init")
	run(t, ctx, work, nil, "git", "push", "-q", repo, "HEAD:refs/heads/main")
	run(t, ctx, "", nil, "git", "--git-dir", repo, "symbolic-ref", "HEAD", "refs/heads/main")
	run(t, ctx, "", nil, "docker", "exec", "-d", container, "git", "daemon", "--export-all", "--reuseaddr",
		"--base-path="+filepath.Dir(repo), "--listen=127.0.0.1", "--port=9418")
	checkFor(t, ctx, 20*time.Second, "git daemon in the container", func() (bool, error) {
		_, err := output(ctx, "", nil, "docker", "exec", container, "git", "ls-remote", "git://127.0.0.1/demo.git")
		return err == nil, err
	})

	var sess struct{ ID string }
	c.do(t, "POST", "/sessions", map[string]any{"name": "compose", "git_repo_url": "git://127.0.0.1/demo.git"}, 201, &sess)
	sessions = append(sessions, sess.ID)
	var node struct{ ID string }
	c.do(t, "POST", "/sessions/"+sess.ID+"/nodes", map[string]any{"agent_type": "custom", "image": agent, "task": "/cmd cat README.md"}, 201, &node)
	msgs := "/sessions/" + sess.ID + "/nodes/" + node.ID + "/messages"
	waitEvent := func(what string, match func(map[string]any) bool) {
		t.Helper()
		checkFor(t, ctx, 60*time.Second, what, func() (bool, error) {
			var page struct {
				Data []struct {
					Kind string
					Data map[string]any
				}
			}
			c.do(t, "GET", msgs+"?limit=1000", nil, 200, &page)
			for _, r := range page.Data {
				if r.Kind == "error" {
					return false, &fatal{fmt.Errorf("error record: %v", r.Data)}
				}
				if r.Kind == "event" && match(r.Data) {
					return true, nil
				}
			}
			return false, fmt.Errorf("%d records so far", len(page.Data))
		})
	}
	waitEvent("the clone in the agent's /workspace", func(e map[string]any) bool {
		return e["type"] == "command" && e["cmd"] == "cat README.md" && e["stdout"] == "# demo from compose"
	})
	c.do(t, "POST", msgs, map[string]any{"content": "hello through compose"}, 202, nil)
	waitEvent("the echo", func(e map[string]any) bool { return e["type"] == "text" && e["content"] == "hello through compose" })

	c.do(t, "DELETE", "/sessions/"+sess.ID, nil, 204, nil)
	checkFor(t, ctx, 30*time.Second, "the agent container to be removed", func() (bool, error) {
		ids, err := output(ctx, "", nil, "docker", "ps", "-aq", "--filter", "label=filepath.session="+sess.ID)
		return err == nil && strings.TrimSpace(ids) == "", err
	})
}

// buildImage builds the orchestrator's image from a fresh binary.
func buildImage(t *testing.T, ctx context.Context, root, image string) {
	t.Helper()
	dir := t.TempDir()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	run(t, ctx, root, nil, goBin, "build", "-o", filepath.Join(dir, "bin", "filepath"), "./cmd/filepath")
	df := filepath.Join(dir, "images", "filepath", "Dockerfile")
	if err := os.MkdirAll(filepath.Dir(df), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "images", "filepath", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(df, b, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, dir, append(os.Environ(), "DOCKER_BUILDKIT=0"), "docker", "build", "-q", "-f", df, "--build-arg", "BASE="+baseImage, "-t", image, dir)
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", image).Run() })
}

// unmountUnder detaches every mount at or below dir, deepest first: the
// shared bind, and what the orchestrator mounted under it (mnt/, FUSE).
func unmountUnder(t *testing.T, dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Error(err)
		return
	}
	var mounts []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			mounts = append(mounts, f[4])
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	for _, m := range mounts {
		if out, err := exec.Command("umount", "-l", m).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", m, err, out)
		}
	}
}

type client struct{ base, key string }

func (c *client) do(t *testing.T, method, path string, body any, status int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, status)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// fatal ends checkFor at once.
type fatal struct{ error }

// checkFor polls f until it says done, the deadline passes or it fails fatally.
func checkFor(t *testing.T, ctx context.Context, d time.Duration, what string, f func() (bool, error)) {
	t.Helper()
	end := time.Now().Add(d)
	for {
		done, err := f()
		if done {
			return
		}
		if fe, ok := err.(*fatal); ok {
			t.Fatalf("waiting for %s: %v", what, fe.error)
		}
		if time.Now().After(end) || ctx.Err() != nil {
			t.Fatalf("timed out after %s waiting for %s (last: %v)", d, what, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func run(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := output(ctx, dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func output(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

func randomID(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
