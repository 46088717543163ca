package workspace

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// gitImage is the local image with git the container tests use (built by
// `make images`).
const gitImage = "filepath/base:bookworm"

// startContainer runs a long-lived container with the node's workspace bound
// the way the runtime must bind it, and removes it at cleanup.
func startContainer(t *testing.T, mgr *Manager, nodeID string) string {
	t.Helper()
	name := fmt.Sprintf("filepath-test-ws-%d", time.Now().UnixNano())
	out, err := exec.Command("docker", "run", "-d", "--name", name,
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"-v", mgr.Bind(nodeID), gitImage, "sleep", "infinity").CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	return name
}

func dockerExec(t *testing.T, c, script string) string {
	t.Helper()
	out, err := exec.Command("docker", "exec", "-w", "/workspace", c, "sh", "-ec", script).CombinedOutput()
	if err != nil {
		t.Fatalf("in container: %s: %v\n%s", script, err, out)
	}
	return string(out)
}

// newManager returns a Manager whose every node serves e's session, with its
// Fanout installed in e's VFS as serve installs it.
func newManager(t *testing.T, dir string, e *env) *Manager {
	t.Helper()
	mgr, err := NewManager(ManagerConfig{
		Dir:  dir,
		Open: func(context.Context, string) (FS, error) { return e.fs, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	e.v.SetInvalidator(mgr.Fanout())
	return mgr
}

// sharedDir returns a mount directory for a Manager and undoes its
// shared bind mount at cleanup.
func sharedDir(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	os.Chmod(base, 0o755)
	dir := filepath.Join(base, "mnt")
	t.Cleanup(func() { ClearMounts(dir) })
	return dir
}

// containerEnv is a session whose node-1 workspace a Manager (closed when
// the test ends) mounts, and a container running on it.
func containerEnv(t *testing.T) (*env, *Manager, string) {
	t.Helper()
	testkit.RequireFUSE(t)
	testkit.RequireImage(t, gitImage)
	e := newEnv(t, vfs.Config{})
	mgr := newManager(t, sharedDir(t), e)
	t.Cleanup(func() { mgr.Close() })
	if _, err := mgr.Mount(ctxT(t), "node-1"); err != nil {
		t.Fatal(err)
	}
	return e, mgr, startContainer(t, mgr, "node-1")
}

func TestContainerGit(t *testing.T) {
	e, mgr, c := containerEnv(t)
	out := dockerExec(t, c, `
		export HOME=/tmp GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@x GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@x
		git init -q -b main
		mkdir -p src && echo 'package main' > src/main.go && echo hello > README
		git add -A && git commit -q -m first
		git checkout -q -b topic && echo changed > README && git commit -qam second
		git checkout -q main && cat README
		git status --porcelain
		git log --oneline --all | wc -l`)
	if out != "hello\n2\n" {
		t.Fatalf("git in the container printed %q", out)
	}
	// The host (Files tab, REST) sees the same bytes.
	wantContent(t, filepath.Join(mgr.Path("node-1"), "README"), "hello\n")
	e.check(t)

	// Unmounting under a running container ends the server anyway (the
	// container's bind keeps the connection alive, so it is aborted).
	done := make(chan error, 1)
	go func() { done <- mgr.Unmount("node-1") }()
	if err := testkit.Recv(t, done, 20*time.Second, "Unmount under a running container to return"); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("docker", "exec", c, "ls", "/workspace").CombinedOutput(); err == nil {
		t.Fatalf("after Unmount the container still lists /workspace: %q", out)
	}
	if _, err := os.Stat(mgr.Path("node-1")); !os.IsNotExist(err) {
		t.Fatalf("mount point left behind: %v", err)
	}
}

// TestContainerSeesOtherNodes: inside a container, changes made by another
// node of the session (its mount) and by the REST API show at once, though
// the container's kernel caches names, attributes and pages for 30 s; and
// the other node sees the container's changes at once too.
func TestContainerSeesOtherNodes(t *testing.T) {
	testkit.RequireFUSE(t)
	testkit.RequireImage(t, gitImage)
	e := newEnv(t, vfs.Config{})
	mgr := newManager(t, sharedDir(t), e)
	t.Cleanup(func() { mgr.Close() })
	ctx := ctxT(t)
	for _, id := range []string{"node-1", "node-2"} {
		if _, err := mgr.Mount(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	c := startContainer(t, mgr, "node-1")
	other := mgr.Path("node-2")
	// Cache in the container's kernel: a missing name, a file's pages.
	mustWrite(t, filepath.Join(other, "shared.txt"), "v1")
	if out := dockerExec(t, c, `test -e new.txt || echo missing; cat shared.txt`); out != "missing\nv1" {
		t.Fatalf("container printed %q", out)
	}
	mustWrite(t, filepath.Join(other, "new.txt"), "from node 2")
	mustWrite(t, filepath.Join(other, "shared.txt"), "v2") // same size
	if _, _, err := e.fs.WriteFile(ctx, "/api.txt", []byte("from the API"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNil(t, 3*time.Second, "the container sees the other node's and the API's changes", func() error {
		out, err := exec.Command("docker", "exec", "-w", "/workspace", c, "sh", "-c", `cat new.txt; echo; cat shared.txt; echo; cat api.txt`).CombinedOutput()
		if want := "from node 2\nv2\nfrom the API"; err != nil || string(out) != want {
			return fmt.Errorf("%q, %v; want %q", out, err, want)
		}
		return nil
	})
	wantContent(t, filepath.Join(other, "api.txt"), "from the API")
	dockerExec(t, c, `echo -n v3 > shared.txt; rm new.txt`)
	testkit.EventuallyNil(t, 3*time.Second, "the other node sees the container's changes", func() error {
		if err := readsAs(filepath.Join(other, "shared.txt"), "v3")(); err != nil {
			return err
		}
		return isGone(filepath.Join(other, "new.txt"))()
	})
}

// TestContainerReadonly: inside a container, a file made readonly through
// the API shows mode 444, and appending, overwriting or truncating it fails
// with "Permission denied" at once (not silently at close); the file is
// unchanged. Removing it still works.
func TestContainerReadonly(t *testing.T) {
	e, _, c := containerEnv(t)
	ctx := ctxT(t)
	dockerExec(t, c, `echo keep > ro.txt`)
	ro := true
	if _, _, err := e.fs.WriteFile(ctx, "/ro.txt", nil, vfs.WriteOptions{Readonly: &ro, NoContent: true}); err != nil {
		t.Fatal(err)
	}
	out := dockerExec(t, c, `
		stat -c %a ro.txt
		for cmd in 'echo x >> ro.txt' 'echo x > ro.txt' 'truncate -s 0 ro.txt' 'dd if=/dev/zero of=ro.txt bs=1 count=1 conv=notrunc status=none'; do
			if sh -c "$cmd" 2>err; then echo "$cmd: succeeded"; else grep -q 'Permission denied' err && echo denied || cat err; fi
		done
		cat ro.txt
		rm ro.txt && echo removed`)
	if want := "444\ndenied\ndenied\ndenied\ndenied\nkeep\nremoved\n"; out != want {
		t.Fatalf("in the container:\n%s\nwant:\n%s", out, want)
	}
}

// TestContainerAbsoluteSymlink: a symlink an agent makes to an absolute
// path under /workspace works in the container and through the session
// filesystem's path API (the REST API and the Files tab) alike.
func TestContainerAbsoluteSymlink(t *testing.T) {
	e, _, c := containerEnv(t)
	ctx := ctxT(t)
	if out := dockerExec(t, c, `mkdir sub && echo agent > sub/agent.txt && ln -s /workspace/sub/agent.txt abs-link && ln -s /workspace/sub abs-dir && cat abs-link abs-dir/agent.txt`); out != "agent\nagent\n" {
		t.Fatalf("in the container: %q", out)
	}
	for _, p := range []string{"/abs-link", "/abs-dir/agent.txt"} {
		if _, b, err := e.fs.ReadAll(ctx, p); err != nil || string(b) != "agent\n" {
			t.Fatalf("read %s through the VFS = %q, %v", p, b, err)
		}
	}
	list, err := e.fs.List(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range list {
		if f.Name == "abs-link" && f.Target != "/workspace/sub/agent.txt" {
			t.Fatalf("listed target %q", f.Target)
		}
	}
}

// TestRestartRecovery stops an orchestrator with Shutdown under a running
// container; a new VFS and Manager recover the node, and the same container
// sees a working /workspace again with the data it had fsynced. The dead
// layers earlier versions stacked at every start are cleared.
func TestRestartRecovery(t *testing.T) {
	testkit.RequireFUSE(t)
	testkit.RequireImage(t, gitImage)
	e := newEnv(t, vfs.Config{})
	dir := sharedDir(t)
	mgr := newManager(t, dir, e)
	if _, err := mgr.Mount(ctxT(t), "node-1"); err != nil {
		t.Fatal(err)
	}
	c := startContainer(t, mgr, "node-1")
	dockerExec(t, c, `echo before-crash > kept.txt && sync kept.txt`)

	// Stop serving as a stopping (or killed) orchestrator does: the
	// connection ends, the mount point stays, dead.
	if err := mgr.Shutdown(nil); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("docker", "exec", c, "ls", "/workspace").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not connected") {
		t.Fatalf("after the crash ls /workspace = %q, %v; want ENOTCONN", out, err)
	}

	// Earlier versions stacked a new mount on the dead one at every
	// start: two more dead layers, as two more crashed starts left them.
	for i := 0; i < 2; i++ {
		mt, err := Mount(ctxT(t), mgr.Path("node-1"), e.fs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := mt.Abort(); err != nil {
			t.Fatal(err)
		}
		<-mt.done
	}
	wantLayers(t, mgr.Path("node-1"), 3)

	// Restart: a new VFS over the same database and a new Manager.
	e2 := openEnv(t, e.st, e.sid, e.dir, vfs.Config{})
	if _, err := e2.v.PurgeOrphans(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	mgr2 := newManager(t, dir, e2)
	t.Cleanup(func() { mgr2.Close() })
	if err := mgr2.Recover(ctxT(t), []string{"node-1"}); err != nil {
		t.Fatal(err)
	}
	out2 := dockerExec(t, c, `cat kept.txt && echo after > new.txt && cat new.txt`)
	if out2 != "before-crash\nafter\n" {
		t.Fatalf("after recovery the container printed %q", out2)
	}
	wantContent(t, filepath.Join(mgr2.Path("node-1"), "new.txt"), "after\n")
	if got := mgr2.Mounted(); len(got) != 1 || got[0] != "node-1" {
		t.Fatalf("mounted = %v", got)
	}
	wantLayers(t, mgr2.Path("node-1"), 1)
}

// TestHelperServe is not a test: TestRestartAfterKill runs the test binary
// with FILEPATH_WS_HELPER set as a stand-in orchestrator that recovers the
// nodes listed in FILEPATH_WS_NODES (as serve does at start) and serves their
// workspaces until it is killed.
func TestHelperServe(t *testing.T) {
	if os.Getenv("FILEPATH_WS_HELPER") == "" {
		t.Skip("helper process only")
	}
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Path: os.Getenv("FILEPATH_WS_DB")})
	if err != nil {
		t.Fatal(err)
	}
	e := openEnv(t, st, os.Getenv("FILEPATH_WS_SESSION"), "", vfs.Config{})
	if _, err := e.v.PurgeOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	mgr, err := NewManager(ManagerConfig{
		Dir:  os.Getenv("FILEPATH_WS_MNT"),
		Open: func(context.Context, string) (FS, error) { return e.fs, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	e.v.SetInvalidator(mgr.Fanout())
	if err := mgr.Recover(ctx, strings.Split(os.Getenv("FILEPATH_WS_NODES"), ",")); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	select {} // until killed
}

// startHelper starts TestHelperServe serving nodes of e's session under dir
// and waits until it is ready; the returned function kills it with SIGKILL.
func startHelper(t *testing.T, e *env, dir string, nodes ...string) (kill func()) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^TestHelperServe$", "-test.v")
	child.Env = append(os.Environ(), "FILEPATH_WS_HELPER=1",
		"FILEPATH_WS_DB="+filepath.Join(e.dir, "filepath.db"), "FILEPATH_WS_SESSION="+e.sid,
		"FILEPATH_WS_MNT="+dir, "FILEPATH_WS_NODES="+strings.Join(nodes, ","))
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	kill = func() {
		if !killed {
			killed = true
			child.Process.Signal(syscall.SIGKILL)
			child.Wait()
		}
	}
	t.Cleanup(kill)
	ready := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		var got string
		for !strings.Contains(got, "ready\n") {
			n, err := stdout.Read(buf)
			if err != nil {
				ready <- fmt.Errorf("helper exited before ready: %v: %s", err, got)
				return
			}
			got += string(buf[:n])
		}
		ready <- nil
		io.Copy(io.Discard, stdout)
	}()
	if err := testkit.Recv(t, ready, 2*time.Minute, "the helper to be ready"); err != nil {
		t.Fatal(err)
	}
	return kill
}

// wantLayers checks how many mounts /proc/self/mountinfo lists at dir.
func wantLayers(t *testing.T, dir string, want int) {
	t.Helper()
	n, err := mountLayers(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("%d mounts at %s, want %d", n, dir, want)
	}
}

// TestRestartAfterKill kills -9, three times, a process serving the
// workspaces of a node whose container runs and of a node that finished,
// and each time starts a new one that recovers only the running node, as
// serve does. The container sees its fsynced data and a working /workspace
// after every restart, without a restart of its own; the running node's
// path holds exactly one mount however often the server died, the finished
// node's none.
func TestRestartAfterKill(t *testing.T) {
	testkit.RequireFUSE(t)
	testkit.RequireImage(t, gitImage)
	e := newEnv(t, vfs.Config{})
	dir := sharedDir(t)
	os.MkdirAll(dir, 0o755)

	kill := startHelper(t, e, dir, "node-1", "node-2")
	mgr := newManager(t, dir, e) // for Bind/Path only; mounts nothing yet
	c := startContainer(t, mgr, "node-1")
	dockerExec(t, c, `mkdir -p d && echo fsynced > d/kept.txt && sync d/kept.txt`)
	want := "fsynced\n"
	for round := 1; round <= 3; round++ {
		kill()
		testkit.EventuallyNil(t, 10*time.Second, "ENOTCONN in the container", func() error {
			out, err := exec.Command("docker", "exec", c, "ls", "/workspace").CombinedOutput()
			if err == nil || !strings.Contains(string(out), "not connected") {
				return fmt.Errorf("ls /workspace = %q, %v", out, err)
			}
			return nil
		})
		if round < 3 {
			// node-2 has finished: the next server does not mount it.
			kill = startHelper(t, e, dir, "node-1")
		} else {
			if _, err := e.v.PurgeOrphans(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { mgr.Close() })
			if err := mgr.Recover(ctxT(t), []string{"node-1"}); err != nil {
				t.Fatal(err)
			}
		}
		out := dockerExec(t, c, fmt.Sprintf(`cat d/kept.txt && echo round%d >> d/kept.txt && sync d/kept.txt`, round))
		if out != want {
			t.Fatalf("round %d: after recovery the container read %q, want %q", round, out, want)
		}
		want += fmt.Sprintf("round%d\n", round)
		wantLayers(t, mgr.Path("node-1"), 1)
		wantLayers(t, mgr.Path("node-2"), 0)
		if _, err := os.Stat(mgr.Path("node-2")); !os.IsNotExist(err) {
			t.Fatalf("round %d: the finished node's mount point is left: %v", round, err)
		}
	}
	wantContent(t, filepath.Join(mgr.Path("node-1"), "d", "kept.txt"), want)
	e.check(t)
}
