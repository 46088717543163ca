package compose_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
	data := testkit.DataDir(t) // what is mounted in it is detached at the end
	run(t, ctx, "", nil, "mount", "--bind", data, data)
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
			testkit.RemoveContainers(t, "filepath.session="+s)
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
	testkit.EventuallyNil(t, 90*time.Second, "the container to be healthy", func() error {
		st, err := output(ctx, "", nil, "docker", "inspect", "-f", "{{.State.Status}} {{.State.Health.Status}}", container)
		if err != nil { // no Health: compose.yaml has no healthcheck
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(st))
		}
		switch st = strings.TrimSpace(st); st {
		case "running healthy":
			return nil
		case "running starting":
			return fmt.Errorf("state %q", st)
		}
		t.Fatalf("container state %q", st)
		return nil
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
	testkit.EventuallyNil(t, 20*time.Second, "git daemon in the container", func() error {
		_, err := output(ctx, "", nil, "docker", "exec", container, "git", "ls-remote", "git://127.0.0.1/demo.git")
		return err
	})

	var sess struct{ ID string }
	c.do(t, "POST", "/sessions", map[string]any{"name": "compose", "git_repo_url": "git://127.0.0.1/demo.git"}, 201, &sess)
	sessions = append(sessions, sess.ID)
	var node struct{ ID string }
	c.do(t, "POST", "/sessions/"+sess.ID+"/nodes", map[string]any{"agent_type": "custom", "image": agent, "task": "/cmd cat README.md"}, 201, &node)
	msgs := "/sessions/" + sess.ID + "/nodes/" + node.ID + "/messages"
	waitEvent := func(what string, match func(map[string]any) bool) {
		t.Helper()
		testkit.EventuallyNil(t, 60*time.Second, what, func() error {
			var page struct {
				Data []struct {
					Kind string
					Data map[string]any
				}
			}
			c.do(t, "GET", msgs+"?limit=1000", nil, 200, &page)
			for _, r := range page.Data {
				if r.Kind == "error" {
					t.Fatalf("waiting for %s: error record: %v", what, r.Data)
				}
				if r.Kind == "event" && match(r.Data) {
					return nil
				}
			}
			return fmt.Errorf("%d records so far", len(page.Data))
		})
	}
	waitEvent("the clone in the agent's /workspace", func(e map[string]any) bool {
		return e["type"] == "command" && e["cmd"] == "cat README.md" && e["stdout"] == "# demo from compose"
	})
	c.do(t, "POST", msgs, map[string]any{"content": "hello through compose"}, 202, nil)
	waitEvent("the echo", func(e map[string]any) bool { return e["type"] == "text" && e["content"] == "hello through compose" })

	c.do(t, "DELETE", "/sessions/"+sess.ID, nil, 204, nil)
	testkit.EventuallyNil(t, 30*time.Second, "the agent container to be removed", func() error {
		ids, err := output(ctx, "", nil, "docker", "ps", "-aq", "--filter", "label=filepath.session="+sess.ID)
		if err == nil && strings.TrimSpace(ids) != "" {
			err = fmt.Errorf("still there: %s", ids)
		}
		return err
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

type client struct{ base, key string }

func (c *client) do(t *testing.T, method, path string, body any, status int, out any) {
	t.Helper()
	r := testkit.Request(t, &http.Client{Timeout: 30 * time.Second}, method, c.base+path, c.key, body)
	if r.Status != status {
		t.Fatalf("%s %s: %d %s, want %d", method, path, r.Status, r.Body, status)
	}
	if out != nil {
		r.JSON(t, out)
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
