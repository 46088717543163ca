package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

// TestMain lets the test binary act as the real `filepath` binary when
// FILEPATH_TEST_MAIN holds its arguments, so that end-to-end tests can run
// (and kill -9) a real orchestrator process without building one.
func TestMain(m *testing.M) {
	if args := os.Getenv("FILEPATH_TEST_MAIN"); args != "" {
		ctx, stop := signalContext()
		code := Main(ctx, strings.Fields(args), os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// server is a `filepath serve` child process.
type server struct {
	cmd  *exec.Cmd
	base string // http://127.0.0.1:PORT
}

var listeningRE = regexp.MustCompile(`msg=listening addr=\S+ url=(http://\S+)`)

func startServer(t *testing.T, data string, flags ...string) *server {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FILEPATH_TEST_MAIN=serve --addr 127.0.0.1:0 --data "+data+" "+strings.Join(flags, " "))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd}
	t.Cleanup(func() { s.kill() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var log bytes.Buffer
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		found <- "exited: " + log.String()
	}()
	select {
	case u := <-found:
		if !strings.HasPrefix(u, "http://") {
			t.Fatalf("server did not start: %s", u)
		}
		s.base = u
	case <-time.After(60 * time.Second):
		t.Fatal("server did not say it is listening within 60 s")
	}
	return s
}

func (s *server) kill() {
	if s.cmd.ProcessState == nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

func (s *server) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("server exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("server did not stop within 30 s of SIGTERM")
		s.cmd.Process.Kill()
	}
}

type client struct {
	t    *testing.T
	key  string
	base func() string
}

func (c *client) do(method, path string, body any, out any) int {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base()+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	if resp.StatusCode >= 300 {
		c.t.Logf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode
}

type rec struct {
	Seq  int64           `json:"seq"`
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
	Ref  int64           `json:"ref"` // a commit's tool or command record
}

func (c *client) records(sid, nid string) []rec {
	c.t.Helper()
	var all []rec
	after := int64(0)
	for {
		var page struct {
			Data []rec `json:"data"`
		}
		if c.do("GET", fmt.Sprintf("/api/v1/sessions/%s/nodes/%s/messages?after=%d&limit=1000", sid, nid, after), nil, &page) != 200 {
			c.t.Fatal("read messages")
		}
		all = append(all, page.Data...)
		if len(page.Data) < 1000 {
			return all
		}
		after = page.Data[len(page.Data)-1].Seq
	}
}

// commandDone waits for a finished command event whose cmd is cmd and
// returns its stdout.
func (c *client) commandDone(sid, nid, cmd string) string {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range c.records(sid, nid) {
			var ev struct {
				Type, Cmd, Status, Stdout, Stderr string
			}
			if r.Kind == "event" && json.Unmarshal(r.Data, &ev) == nil && ev.Type == "command" && ev.Cmd == cmd && ev.Status != "start" {
				if ev.Status != "done" {
					c.t.Fatalf("command %q failed: %s", cmd, r.Data)
				}
				return ev.Stdout
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("command %q did not finish; records: %+v", cmd, c.records(sid, nid))
	return ""
}

// TestRestartKeepsAgentsAndWorkspaces runs the real orchestrator process
// with a real agent container whose /workspace is the FUSE-served session
// filesystem, kills the orchestrator with SIGKILL three times and then stops
// it gracefully, starting it again each time, and checks that the same
// container (not restarted) still takes messages, that its /workspace works
// again and holds what was written before, that no record was lost or
// duplicated, and that its workspace is one mount (not one more per start)
// while a finished agent's is none.
func TestRestartKeepsAgentsAndWorkspaces(t *testing.T) {
	testkit.RequireFUSE(t)
	testkit.RequireImage(t, "filepath/byo-echo:latest")
	testkit.RequireImage(t, "filepath/testagent:latest")
	data := t.TempDir()
	t.Cleanup(func() { unmountUnder(filepath.Join(data, "mnt")) })

	srv := startServer(t, data)
	var key bytes.Buffer
	if code := Main(context.Background(), []string{"apikey", "create", "--data", data}, nil, &key, io.Discard); code != 0 {
		t.Fatal("apikey create failed")
	}
	c := &client{t: t, key: strings.TrimSpace(key.String()), base: func() string { return srv.base }}

	var sess struct{ ID string }
	if c.do("POST", "/api/v1/sessions", map[string]any{"name": "restart"}, &sess) != 201 {
		t.Fatal("create session")
	}
	t.Cleanup(func() { // containers outlive the orchestrator: remove them
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=filepath.session="+sess.ID).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
		}
	})
	type nodeJSON struct {
		ID          string `json:"id"`
		Status      string `json:"status"`
		ContainerID string `json:"container_id"`
	}
	var node nodeJSON
	if c.do("POST", "/api/v1/sessions/"+sess.ID+"/nodes", map[string]any{"agent_type": "custom", "image": "filepath/byo-echo:latest"}, &node) != 201 {
		t.Fatal("spawn")
	}
	if node.Status != "running" || node.ContainerID == "" {
		t.Fatalf("spawned node is %s with container %q, want running", node.Status, node.ContainerID)
	}
	send := func(content string) {
		t.Helper()
		if code := c.do("POST", "/api/v1/sessions/"+sess.ID+"/nodes/"+node.ID+"/messages", map[string]any{"content": content}, nil); code != 202 {
			t.Fatalf("send %q: %d", content, code)
		}
	}
	first := "echo before > kept.txt && sync kept.txt && cat kept.txt"
	send("/cmd " + first)
	if out := c.commandDone(sess.ID, node.ID, first); out != "before" {
		t.Fatalf("first command printed %q", out)
	}
	// A second agent that finishes at once: its container exits, and its
	// workspace is unmounted then and stays so over every restart.
	var finished nodeJSON
	if c.do("POST", "/api/v1/sessions/"+sess.ID+"/nodes", map[string]any{"agent_type": "custom", "image": "filepath/testagent:latest", "task": "done", "parent_id": node.ID}, &finished) != 201 {
		t.Fatal("spawn the finishing agent")
	}
	statusOf := func(id string) string {
		var tree struct{ Data []nodeJSON }
		c.do("GET", "/api/v1/sessions/"+sess.ID+"/tree", nil, &tree)
		for _, n := range tree.Data {
			if n.ID == id {
				return n.Status
			}
		}
		return ""
	}
	mnt := filepath.Join(data, "mnt")
	wantMounts := func(when string) {
		t.Helper()
		if n := mountsAt(filepath.Join(mnt, node.ID)); n != 1 {
			t.Fatalf("%s: %d mounts at the running agent's workspace, want 1", when, n)
		}
		if n := mountsAt(filepath.Join(mnt, finished.ID)); n != 0 {
			t.Fatalf("%s: %d mounts at the finished agent's workspace, want 0", when, n)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for statusOf(finished.ID) != "done" || mountsAt(filepath.Join(mnt, finished.ID)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the finishing agent is %s with %d mounts", statusOf(finished.ID), mountsAt(filepath.Join(mnt, finished.ID)))
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantMounts("before any restart")

	// Three kills, then a graceful stop: each time the running agent's
	// container keeps working in the same /workspace, which stays one mount.
	for round := 1; round <= 4; round++ {
		before := c.records(sess.ID, node.ID)
		if round < 4 {
			srv.cmd.Process.Signal(syscall.SIGKILL)
			srv.cmd.Wait()
		} else {
			srv.stop(t)
		}
		srv = startServer(t, data)
		wantMounts(fmt.Sprintf("round %d", round))

		var got nodeJSON
		var tree struct{ Data []nodeJSON }
		c.do("GET", "/api/v1/sessions/"+sess.ID+"/tree", nil, &tree)
		for _, n := range tree.Data {
			if n.ID == node.ID {
				got = n
			}
		}
		if got.Status == "error" || got.Status == "done" || got.ContainerID != node.ContainerID {
			t.Fatalf("round %d: after the restart the node is %s in container %q, want it alive in the same container %q", round, got.Status, got.ContainerID, node.ContainerID)
		}
		cmd := fmt.Sprintf("cat kept.txt && echo after%d >> kept.txt", round)
		send("/cmd " + cmd)
		out := c.commandDone(sess.ID, node.ID, cmd)
		want := "before"
		for i := 1; i < round; i++ {
			want += fmt.Sprintf("\nafter%d", i)
		}
		if out != want {
			t.Fatalf("round %d: /workspace/kept.txt read %q in the container, want %q", round, out, want)
		}
		after := c.records(sess.ID, node.ID)
		seen := map[int64]bool{}
		for i, r := range after {
			if seen[r.Seq] || (i > 0 && r.Seq <= after[i-1].Seq) {
				t.Fatalf("round %d: record %d duplicated or out of order", round, r.Seq)
			}
			seen[r.Seq] = true
		}
		for _, r := range before {
			if !seen[r.Seq] {
				t.Fatalf("round %d: record %d lost over the restart", round, r.Seq)
			}
		}
	}
	var file struct{ Content string }
	if c.do("GET", "/api/v1/sessions/"+sess.ID+"/fs/kept.txt", nil, &file) != 200 || file.Content != "before\nafter1\nafter2\nafter3\nafter4\n" {
		t.Fatalf("kept.txt through the API: %q", file.Content)
	}
	// An edit through the API (the Files tab) shows in the container at
	// once, though its kernel has kept.txt's pages and attributes cached.
	send("/cmd cat kept.txt")
	if out := c.commandDone(sess.ID, node.ID, "cat kept.txt"); out != "before\nafter1\nafter2\nafter3\nafter4" {
		t.Fatalf("the container read %q", out)
	}
	if code := c.do("PUT", "/api/v1/sessions/"+sess.ID+"/fs/kept.txt", map[string]any{"content": "edited in the browser\n", "encoding": "text"}, nil); code != 200 {
		t.Fatalf("PUT kept.txt: %d", code)
	}
	send("/cmd cat ./kept.txt")
	if out := c.commandDone(sess.ID, node.ID, "cat ./kept.txt"); out != "edited in the browser" {
		t.Fatalf("after an edit through the API the container read %q", out)
	}
	c.do("DELETE", "/api/v1/sessions/"+sess.ID, nil, nil)
	srv.stop(t)
}

// mountsAt counts the mounts stacked at dir in /proc/self/mountinfo.
func mountsAt(dir string) int {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return -1
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			n++
		}
	}
	return n
}

// unmountUnder lazily unmounts every mount at or below dir (FUSE workspaces
// and the shared mount point serve leaves for the next start).
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}
