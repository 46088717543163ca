package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/fakellm"
	"github.com/filepath-dev/filepath/internal/testkit"
)

// The end-to-end harness: a real `filepath serve` process, a client with an
// API key, sessions and nodes made through the API, waits on a node's
// records.

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

// server is a `filepath serve` child process on its data directory.
type server struct {
	t     *testing.T
	data  string
	flags []string
	cmd   *exec.Cmd
	base  string // http://127.0.0.1:PORT
}

var listeningRE = regexp.MustCompile(`msg=listening addr=\S+ url=(http://\S+)`)

// startServer starts `filepath serve --data data` with flags; the process
// is killed when the test ends.
func startServer(t *testing.T, data string, flags ...string) *server {
	t.Helper()
	s := &server{t: t, data: data, flags: flags}
	t.Cleanup(s.kill)
	s.start()
	return s
}

// llmServer starts the orchestrator (Docker, agents without network, plain
// directory workspaces) with OpenRouter served by the fake upstream through
// the gateway.
func llmServer(t *testing.T, up *fakellm.Server, data string, flags ...string) *server {
	t.Helper()
	t.Setenv("FILEPATH_OPENROUTER_API_KEY", "sk-or-test")
	t.Setenv("FILEPATH_OPENROUTER_BASE_URL", up.URL+"/v1")
	return startServer(t, data, append([]string{"--workspace", "dir", "--network", "none"}, flags...)...)
}

func (s *server) start() {
	s.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FILEPATH_TEST_MAIN=serve --addr 127.0.0.1:0 --data "+s.data+" "+strings.Join(s.flags, " "))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd = cmd
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
	u := testkit.Recv(s.t, found, 60*time.Second, "the server to say it is listening")
	if !strings.HasPrefix(u, "http://") {
		s.t.Fatalf("server did not start: %s", u)
	}
	s.base = u
}

// kill ends the process with SIGKILL, as a crash does.
func (s *server) kill() {
	if s.cmd != nil && s.cmd.ProcessState == nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

// restart kills the process and starts it again with its flags and more
// (a flag given again wins).
func (s *server) restart(more ...string) {
	s.t.Helper()
	s.kill()
	s.flags = append(s.flags, more...)
	s.start()
}

// stop ends the process with SIGTERM, as an administrator does, and wants
// it to exit cleanly.
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

// client calls the API of a server (the one it runs now, after restarts)
// with an API key.
type client struct {
	t   *testing.T
	key string
	srv *server
}

// newClient makes an API key for the server's first user with `filepath
// apikey create`.
func newClient(t *testing.T, srv *server) *client {
	t.Helper()
	var key bytes.Buffer
	if code := Main(context.Background(), []string{"apikey", "create", "--data", srv.data}, nil, &key, io.Discard); code != 0 {
		t.Fatal("apikey create failed")
	}
	return &client{t: t, key: strings.TrimSpace(key.String()), srv: srv}
}

// with is the client reporting to t (a parallel subtest).
func (c *client) with(t *testing.T) *client {
	d := *c
	d.t = t
	return &d
}

// do calls the API and returns the status; a 2xx answer is decoded into
// out (unless nil), another is logged.
func (c *client) do(method, path string, body any, out any) int {
	c.t.Helper()
	r := testkit.Request(c.t, nil, method, c.srv.base+path, c.key, body)
	if r.Status >= 300 {
		c.t.Logf("%s %s: %d %s", method, path, r.Status, r.Body)
	} else if out != nil {
		r.JSON(c.t, out)
	}
	return r.Status
}

// session creates a session with body's fields; its containers are
// removed when the test ends (they outlive the orchestrator).
func (c *client) session(body map[string]any) string {
	c.t.Helper()
	var sess struct{ ID string }
	if c.do("POST", "/api/v1/sessions", body, &sess) != 201 {
		c.t.Fatalf("create session %v", body)
	}
	t := c.t
	t.Cleanup(func() { testkit.RemoveContainers(t, "filepath.session="+sess.ID) })
	return sess.ID
}

// nodeJSON is a node as the API shows it.
type nodeJSON struct {
	ID             string  `json:"id"`
	Name           string  `json:"name"`
	Status         string  `json:"status"`
	ParentID       *string `json:"parent_id"`
	Model          string  `json:"model"`
	ContainerID    string  `json:"container_id"`
	ExitCode       *int    `json:"exit_code"`
	Tokens         int64   `json:"tokens"`
	CostUSD        float64 `json:"cost_usd"`
	SubtreeTokens  int64   `json:"subtree_tokens"`
	SubtreeCostUSD float64 `json:"subtree_cost_usd"`
	Generation     int     `json:"generation"`
}

// spawn creates a node in session sid (body: its fields; a parent_id ""
// is left out: a root).
func (c *client) spawn(sid string, body map[string]any) nodeJSON {
	c.t.Helper()
	if body["parent_id"] == "" {
		delete(body, "parent_id")
	}
	var n nodeJSON
	if code := c.do("POST", "/api/v1/sessions/"+sid+"/nodes", body, &n); code != 201 {
		c.t.Fatalf("spawn %v: %d", body, code)
	}
	return n
}

// tree lists the nodes of session sid.
func (c *client) tree(sid string) []nodeJSON {
	c.t.Helper()
	var tree struct{ Data []nodeJSON }
	if c.do("GET", "/api/v1/sessions/"+sid+"/tree", nil, &tree) != 200 {
		c.t.Fatal("read the tree")
	}
	return tree.Data
}

// node reads one node of the tree.
func (c *client) node(sid, nid string) nodeJSON {
	c.t.Helper()
	tree := c.tree(sid)
	for _, n := range tree {
		if n.ID == nid {
			return n
		}
	}
	c.t.Fatalf("node %s is not in the tree %+v", nid, tree)
	return nodeJSON{}
}

// send sends the node a message.
func (c *client) send(sid, nid, content string) {
	c.t.Helper()
	if code := c.do("POST", "/api/v1/sessions/"+sid+"/nodes/"+nid+"/messages", map[string]any{"content": content}, nil); code != 202 {
		c.t.Fatalf("send %q: %d", content, code)
	}
}

// run has a byo-echo node run cmd (its /cmd) and returns the command's
// stdout.
func (c *client) run(sid, nid, cmd string) string {
	c.t.Helper()
	c.send(sid, nid, "/cmd "+cmd)
	return c.commandDone(sid, nid, cmd)
}

// rec is a record as the messages API gives it.
type rec struct {
	Seq  int64           `json:"seq"`
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
	Ref  int64           `json:"ref"` // a commit's tool or command record
}

// records reads all of a node's records.
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

// records is a node's records, shown one a line in a failure.
type records []rec

func (rs records) Error() string {
	var b strings.Builder
	b.WriteString("records:\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "%d %s ref=%d %.600s\n", r.Seq, r.Kind, r.Ref, r.Data)
	}
	return b.String()
}

// waitRecords polls a node's records until cond holds, within a deadline;
// a failure shows them.
func (c *client) waitRecords(what, sid, nid string, within time.Duration, cond func([]rec) bool) []rec {
	c.t.Helper()
	var recs []rec
	testkit.EventuallyNil(c.t, within, what, func() error {
		if recs = c.records(sid, nid); cond(recs) {
			return nil
		}
		return records(recs)
	})
	return recs
}

// logRecordsOnFailure logs the records of the nodes if the test fails.
func (c *client) logRecordsOnFailure(sid string, nodes ...nodeJSON) {
	c.t.Cleanup(func() {
		if c.t.Failed() {
			for _, n := range nodes {
				c.t.Logf("%s %s", n.Name, records(c.records(sid, n.ID)))
			}
		}
	})
}

// commandDone waits for a finished command event whose cmd is cmd and
// returns its stdout.
func (c *client) commandDone(sid, nid, cmd string) string {
	c.t.Helper()
	type command struct{ Type, Cmd, Status, Stdout, Stderr string }
	var ev command
	c.waitRecords(fmt.Sprintf("command %q to finish", cmd), sid, nid, 60*time.Second, func(recs []rec) bool {
		for _, r := range recs {
			var e command
			if r.Kind == "event" && json.Unmarshal(r.Data, &e) == nil && e.Type == "command" && e.Cmd == cmd && e.Status != "start" {
				ev = e
				return true
			}
		}
		return false
	})
	if ev.Status != "done" {
		c.t.Fatalf("command %q failed: %+v", cmd, ev)
	}
	return ev.Stdout
}

// hasRecord reports whether a record of kind holds every part.
func hasRecord(recs []rec, kind string, parts ...string) bool {
	for _, r := range recs {
		if r.Kind == kind && containsAll(string(r.Data), parts) {
			return true
		}
	}
	return false
}

// hasRecordAfter reports whether a record after seq holds every part.
func hasRecordAfter(recs []rec, after int64, parts ...string) bool {
	for _, r := range recs {
		if r.Seq > after && containsAll(string(r.Data), parts) {
			return true
		}
	}
	return false
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// answerApproval decides a pending approval ("approve" or "deny").
func (c *client) answerApproval(sid, id, decision string) {
	c.t.Helper()
	if c.do("POST", "/api/v1/sessions/"+sid+"/approvals/"+id, map[string]any{"decision": decision}, nil) != 200 {
		c.t.Fatalf("%s approval %s", decision, id)
	}
}

// wantPending wants exactly the approval id pending in session sid.
func (c *client) wantPending(sid, id string) {
	c.t.Helper()
	var pending struct{ Data []struct{ ID string } }
	if c.do("GET", "/api/v1/sessions/"+sid+"/approvals?status=pending", nil, &pending) != 200 || len(pending.Data) != 1 || pending.Data[0].ID != id {
		c.t.Fatalf("pending approvals %+v, want only %s", pending, id)
	}
}

// docker runs the docker CLI with stdin and returns its stdout; it fails
// the test unless docker succeeds (or a `docker exec` command exits 1).
func docker(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("docker", args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || args[0] != "exec" {
			t.Fatalf("docker %v: %v\n%s%s", args, err, out, stderr.String())
		}
	}
	return string(out)
}

// containerRunning says whether a container runs (docker inspect).
func containerRunning(id string) bool {
	out, err := exec.Command("docker", "inspect", "--format", "{{.State.Running}}", id).Output()
	return err == nil && strings.TrimSpace(string(out)) == "true" // an error: removed
}

func unsetenv(t *testing.T, k string) {
	t.Helper()
	if err := os.Unsetenv(k); err != nil {
		t.Fatal(err)
	}
}
