package runner

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// fakeMemories is a memory store of fixed memories; it records the queries.
type fakeMemories struct {
	mu      sync.Mutex
	mems    []Memory
	err     error
	queries []string
}

func (f *fakeMemories) Relevant(_ context.Context, userID, repoURL, query string, limit int) ([]Memory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, userID+"|"+repoURL+"|"+query)
	return f.mems, f.err
}

// createRoot creates the root node (the test agent) without starting it.
func (e *env) createRoot(task string) sessions.Node {
	e.t.Helper()
	n, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: "root", AgentType: AgentCustom, Image: testImage, Task: task})
	if err != nil {
		e.t.Fatal(err)
	}
	e.root = n
	return n
}

// workspace is the node's plain workspace directory, created.
func (e *env) workspace(nodeID string) string {
	e.t.Helper()
	dir := filepath.Join(e.dir, "nodes", nodeID)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		e.t.Fatal(err)
	}
	return dir
}

// systemBlocks returns the node's system records of type typ.
func systemBlocks(t *testing.T, recs []protocol.Record, typ string) []protocol.SystemData {
	t.Helper()
	var out []protocol.SystemData
	for _, r := range recs {
		if r.Kind != protocol.KindSystem {
			continue
		}
		var d protocol.SystemData
		if err := json.Unmarshal(r.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Type == typ {
			out = append(out, d)
		}
	}
	return out
}

// systemInputs returns the contents of the node's system messages.
func systemInputs(recs []protocol.Record) []string {
	var out []string
	for _, m := range decodedAs(recs, protocol.KindInput, func(m protocol.MessageInput) bool { return m.From == protocol.FromSystem }) {
		out = append(out, m.Content)
	}
	return out
}

// goRepo writes a Go module whose go vet fails (it builds) into dir and
// commits it.
func goRepo(t *testing.T, dir string) {
	t.Helper()
	testkit.WriteFile(t, filepath.Join(dir, "go.mod"), "module example.com/h\n\ngo 1.21\n")
	testkit.WriteFile(t, filepath.Join(dir, "main.go"), "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Printf(\"%d\\n\", \"not a number\")\n}\n")
	testkit.Git(t, dir, "init", "-q")
	testkit.Git(t, dir, "add", "-A")
	testkit.Git(t, dir, "commit", "-q", "-m", "start")
}

// TestHealthChecksBeforeStart: before its agent starts, a node's workspace
// (a Go repository with work left uncommitted) gets a rescue commit (shown
// as a commit), the detected checks run in it (go build passes, go vet
// fails and its output shows in a check block), the memories of the user
// are asked for the task, and the agent's first message says all of it;
// the failing check does not stop the agent.
func TestHealthChecksBeforeStart(t *testing.T) {
	mem := &fakeMemories{mems: []Memory{{Key: "style", Text: "wrap errors with %w"}}}
	e := newProcessEnv(t, store.Config{}, sessions.NewSession{Name: "health"}, func(c *Config) { c.Memories = mem })
	root := e.createRoot("echo started")
	ws := e.workspace(root.ID)
	goRepo(t, ws)
	testkit.WriteFile(t, filepath.Join(ws, "wip.go"), "package main\n\n// work in progress\n")

	if err := e.r.StartSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the agent", func() bool { return hasText(e.records(root.ID), "started") })
	recs := e.records(root.ID)

	// The rescue commit: in the repository, and shown as a commit event.
	if st := testkit.Git(t, ws, "status", "--porcelain"); st != "" {
		t.Fatalf("workspace not clean after the rescue:\n%s", st)
	}
	subject := testkit.Git(t, ws, "log", "-1", "--format=%an|%s")
	if !strings.HasPrefix(subject, "filepath|filepath: rescue uncommitted work of agent \"root\" (node "+root.ID+") before its start") {
		t.Fatalf("rescue commit %q", subject)
	}
	if files := testkit.Git(t, ws, "show", "--name-only", "--format=", "HEAD"); files != "wip.go" {
		t.Fatalf("rescue commit has %q", files)
	}
	head := testkit.Git(t, ws, "rev-parse", "HEAD")
	var commit *protocol.CommitEvent
	for _, r := range recs {
		var ev protocol.CommitEvent
		if r.Kind == protocol.KindEvent && json.Unmarshal(r.Data, &ev) == nil && ev.Type == protocol.TypeCommit {
			commit = &ev
		}
	}
	if commit == nil || commit.Hash != head {
		t.Fatalf("commit record %+v, want hash %s", commit, head)
	}

	checks := systemBlocks(t, recs, protocol.SystemCheck)
	if len(checks) != 2 || checks[0].Command != GoBuildCheck || checks[0].Exit == nil || *checks[0].Exit != 0 ||
		checks[1].Command != "go vet ./..." || checks[1].Exit == nil || *checks[1].Exit == 0 ||
		!strings.Contains(checks[1].Output, "Printf format %d has arg") || checks[1].DurationMS <= 0 {
		t.Fatalf("check blocks %+v", checks)
	}
	if _, err := os.Stat(filepath.Join(ws, "h")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the build check left its binary in the workspace (%v)", err)
	}
	mems := systemBlocks(t, recs, protocol.SystemMemory)
	if len(mems) != 1 || len(mems[0].Memories) != 1 || mems[0].Memories[0].Text != "wrap errors with %w" {
		t.Fatalf("memory blocks %+v", mems)
	}
	if len(mem.queries) != 1 || mem.queries[0] != e.uid+"||echo started" {
		t.Fatalf("memory queries %q", mem.queries)
	}
	msgs := systemInputs(recs)
	if len(msgs) != 1 {
		t.Fatalf("system messages %q, want one", msgs)
	}
	order := []string{"Health checks", "filepath committed them: " + head[:12], "go build", "passed", "go vet ./... failed", "Printf format %d has arg", "Memories", "wrap errors with %w"}
	at := 0
	for _, w := range order {
		i := strings.Index(msgs[0][at:], w)
		if i < 0 {
			t.Fatalf("first message lacks %q (in order):\n%s", w, msgs[0])
		}
		at += i + len(w)
	}
	// Order in the log: commit, checks, memories, the message, the agent
	// (the test agent echoes each line of the task, then of the message).
	var kinds []string
	for _, r := range recs {
		if r.Kind != protocol.KindNode {
			var d struct{ Type string }
			json.Unmarshal(r.Data, &d)
			kinds = append(kinds, r.Kind+":"+d.Type)
		}
	}
	want := "input:message event:commit system:check system:check system:memory input:message event:text"
	if got := strings.Join(kinds, " "); !strings.HasPrefix(got, want) {
		t.Fatalf("records %s, want %s", got, want)
	}
	if n := e.node(root.ID); n.Status != protocol.StateRunning || n.StartedAt == nil {
		t.Fatalf("node %s started %v", n.Status, n.StartedAt)
	}

	// A restart asks the memory store about the node's task again.
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("done")); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, protocol.StateDone)
	if err := e.r.StartNode(e.ctx, e.uid, e.sid, root.ID); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the restart's memories", func() bool {
		mem.mu.Lock()
		defer mem.mu.Unlock()
		return len(mem.queries) == 2
	})
	if mem.queries[1] != e.uid+"||echo started" {
		t.Fatalf("the restart's memory query %q", mem.queries[1])
	}
}

// TestCheckTimeLimit: a check that runs past its time limit is stopped and
// shown as timed out; the agent starts anyway and is told.
func TestCheckTimeLimit(t *testing.T) {
	e := newProcessEnv(t, store.Config{}, sessions.NewSession{Name: "slow", Checks: []protocol.Check{{Command: "echo begun; sleep 60", Timeout: 1}}}, nil)
	root := e.createRoot("echo started")
	started := time.Now()
	if err := e.r.StartSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the agent", func() bool { return hasText(e.records(root.ID), "started") })
	if took := time.Since(started); took > 30*time.Second {
		t.Fatalf("the agent started after %s: the limit was not enforced", took)
	}
	checks := systemBlocks(t, e.records(root.ID), protocol.SystemCheck)
	if len(checks) != 1 || !checks[0].TimedOut || checks[0].Exit != nil || checks[0].Output != "begun" ||
		checks[0].DurationMS < 900 || !strings.Contains(checks[0].Text, "timed out") {
		t.Fatalf("check blocks %+v", checks)
	}
	if msgs := systemInputs(e.records(root.ID)); len(msgs) != 1 || !strings.Contains(msgs[0], "timed out: stopped at its limit of 1s") {
		t.Fatalf("system messages %q", msgs)
	}
}

// TestStopWhileChecking: a stop while the health checks run cancels the
// start: the check's process ends, the node is idle without a container,
// the session stopped; a message delivered meanwhile is refused.
func TestStopWhileChecking(t *testing.T) {
	e := newProcessEnv(t, store.Config{}, sessions.NewSession{Name: "stop", Checks: []protocol.Check{{Command: "sleep 60"}}}, nil)
	root := e.createRoot("echo started")
	if err := e.r.StartSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	if !e.r.Running(root.ID) {
		t.Fatal("a node whose checks run is not running")
	}
	delivered := make(chan error, 1)
	go func() {
		_, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("echo hi"))
		delivered <- err
	}()
	stopped := time.Now()
	if err := e.r.StopSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	if err := <-delivered; err == nil {
		t.Fatal("a message to a node whose start was stopped was delivered")
	}
	n := e.waitStatus(root.ID, protocol.NodeStopped)
	if n.ContainerID != "" || n.StartedAt != nil || time.Since(stopped) > 20*time.Second {
		t.Fatalf("after the stop: container %q, started %v, after %s", n.ContainerID, n.StartedAt, time.Since(stopped))
	}
	if sess, _ := e.sessions.SessionByID(e.ctx, e.sid); sess.Status != protocol.SessionStopped {
		t.Fatalf("session %s", sess.Status)
	}
	if hasText(e.records(root.ID), "started") {
		t.Fatal("the agent ran")
	}
}
