package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// gitAgentImage is the test agent on Debian with sh and git (built from
// filepath/base:bookworm by gitAgent), so that a rescue commit and shell
// checks can run in the agent's own image.
const gitAgentImage = "filepath/test-testagent-git:e2e"

// gitAgent builds gitAgentImage (the test agent on the Debian base, which
// has git) once per test binary.
func gitAgent(t *testing.T) string {
	t.Helper()
	testkit.RequireImage(t, "filepath/base:bookworm")
	testkit.Image(t, gitAgentImage, "FROM filepath/base:bookworm\nCOPY testagent /usr/local/bin/testagent\nENTRYPOINT [\"/usr/local/bin/testagent\"]\n",
		map[string]string{"testagent": testkit.Program(t, "../../adapters/testagent")})
	return gitAgentImage
}

// kindsOf lists the node's records as kind:type (node records left out).
func kindsOf(recs []protocol.Record) []string {
	var out []string
	for _, r := range recs {
		if r.Kind == protocol.KindNode {
			continue
		}
		var d struct{ Type string }
		json.Unmarshal(r.Data, &d)
		out = append(out, r.Kind+":"+d.Type)
	}
	return out
}

// TestHandoffContinuation follows a node whose agent hands off, in real
// containers: the agent is stopped and a fresh one starts in the same node
// and workspace as generation 2, with FILEPATH_TASK the summary; before it,
// the log gets the continuation record, the rescue commit of the file the
// first agent left uncommitted, the failing check's block and the memory
// block; its first input is one system message with the summary, the
// rescue, the failing check's output and the memory, in that order. Both
// generations are one chat. A commit made during a command links to the
// command's record; tokens roll up to the parent and the session.
func TestHandoffContinuation(t *testing.T) {
	img := gitAgent(t)
	mem := &fakeMemories{mems: []Memory{{Key: "parser", Text: "the grammar lives in parse.y"}}}
	rec := &envRecorder{}
	e := newEnv(t, func(c *Config) { c.Memories = mem; rec.Runtime = c.Runtime; c.Runtime = rec })
	lint := "echo 'lint: parse.go:3: x declared and not used' >&2; exit 2"
	if _, err := e.sessions.SetSessionChecks(e.ctx, e.uid, e.sid, []protocol.Check{{Command: lint}}); err != nil {
		t.Fatal(err)
	}
	root, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: "root", AgentType: AgentCustom, Image: img, Task: "command; commit; echo generation one"})
	if err != nil {
		t.Fatal(err)
	}
	child, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: "helper", AgentType: AgentCustom, Image: img, ParentID: &root.ID})
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(e.dir, "nodes", root.ID)
	if err := os.MkdirAll(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, filepath.Join(ws, "parse.go"), "package parse\n")
	testkit.Git(t, ws, "init", "-q")
	testkit.Git(t, ws, "add", "-A")
	testkit.Git(t, ws, "commit", "-q", "-m", "start")

	if err := e.r.StartSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	e.waitFor("generation one", func() bool { return hasText(e.records(root.ID), "generation one") })

	// The commit the agent reported during its command links to it.
	var cmdSeq, commitRef int64
	for _, r := range e.records(root.ID) {
		var ev struct{ Type, Status string }
		json.Unmarshal(r.Data, &ev)
		switch {
		case r.Kind == protocol.KindEvent && ev.Type == protocol.TypeCommand && ev.Status == protocol.StepDone:
			cmdSeq = r.Seq
		case r.Kind == protocol.KindEvent && ev.Type == protocol.TypeCommit:
			commitRef = r.Ref
		}
	}
	if cmdSeq == 0 || commitRef != cmdSeq {
		t.Fatalf("the commit links to %d, want the command's record %d", commitRef, cmdSeq)
	}

	// Tokens and cost, metered as the gateway meters them, roll up.
	cost := 0.01
	if err := e.sessions.RecordUsage(e.ctx,
		sessions.Usage{UserID: e.uid, SessionID: e.sid, NodeID: root.ID, Provider: "openrouter", Model: "m", InputTokens: 1000, OutputTokens: 200, CostUSD: &cost, Status: 200},
		sessions.Usage{UserID: e.uid, SessionID: e.sid, NodeID: child.ID, Provider: "openrouter", Model: "m", InputTokens: 30, OutputTokens: 4, CostUSD: &cost, Status: 200},
	); err != nil {
		t.Fatal(err)
	}
	if n, err := e.sessions.GetNode(e.ctx, e.uid, e.sid, root.ID); err != nil || n.SubtreeTokens != 1234 || n.SubtreeCostUSD < 0.0199 || n.SubtreeCostUSD > 0.0201 {
		t.Fatalf("root's subtree tokens %d cost %v, %v", n.SubtreeTokens, n.SubtreeCostUSD, err)
	}
	if s, err := e.sessions.GetSession(e.ctx, e.uid, e.sid); err != nil || s.TokensUsed != 1234 {
		t.Fatalf("session tokens %d, %v", s.TokensUsed, err)
	}

	// The agent leaves work uncommitted, then hands off.
	testkit.WriteFile(t, filepath.Join(ws, "notes.txt"), "the parser handles lists; maps next\n")
	const summary = "The parser is half done: lists work, maps are next"
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("handoff "+summary)); err != nil {
		t.Fatal(err)
	}
	e.waitFor("generation two", func() bool {
		return e.node(root.ID).Generation == 2 && hasText(e.records(root.ID), summary)
	})
	recs := e.records(root.ID)

	// In the log: the handoff, the stop, the continuation, the rescue, the
	// check, the memory, the first message, then the new agent.
	kinds := strings.Join(kindsOf(recs), " ")
	want := "event:handoff input:signal event:done system:continuation event:commit system:check system:memory input:message event:text"
	if !strings.Contains(kinds, want) {
		t.Fatalf("records:\n%s\nwant in them:\n%s", kinds, want)
	}
	if i, j := strings.Index(kinds, "event:text"), strings.Index(kinds, "event:handoff"); i > j {
		t.Fatal("the first generation's records are not before the handoff")
	}
	cont := systemBlocks(t, recs, protocol.SystemContinuation)
	if len(cont) != 1 || cont[0].Generation != 2 || cont[0].Summary != summary {
		t.Fatalf("continuation blocks %+v", cont)
	}

	// The rescue commit holds the file, names the node and why.
	head := testkit.Git(t, ws, "rev-parse", "HEAD")
	if files := testkit.Git(t, ws, "show", "--name-only", "--format=", "HEAD"); files != "notes.txt" {
		t.Fatalf("rescue commit has %q", files)
	}
	subject := testkit.Git(t, ws, "log", "-1", "--format=%s")
	if !strings.Contains(subject, root.ID) || !strings.Contains(subject, "continuation (generation 2)") {
		t.Fatalf("rescue commit message %q", subject)
	}
	var rescued protocol.CommitEvent
	for _, r := range recs {
		var ev protocol.CommitEvent
		if r.Kind == protocol.KindEvent && json.Unmarshal(r.Data, &ev) == nil && ev.Type == protocol.TypeCommit && ev.Hash == head {
			rescued = ev
		}
	}
	if rescued.Message != subject {
		t.Fatalf("no commit record for the rescue %s (%q)", head, subject)
	}

	checks := systemBlocks(t, recs, protocol.SystemCheck)
	last := checks[len(checks)-1]
	if len(checks) != 2 || last.Command != lint || last.Exit == nil || *last.Exit != 2 || last.Output != "lint: parse.go:3: x declared and not used" {
		t.Fatalf("check blocks (first start, continuation) %+v", checks)
	}
	if mems := systemBlocks(t, recs, protocol.SystemMemory); len(mems) != 2 || mems[1].Memories[0].Key != "parser" {
		t.Fatalf("memory blocks %+v", mems)
	}
	if len(mem.queries) != 2 || !strings.HasSuffix(mem.queries[1], "|"+summary) {
		t.Fatalf("memory queries %q: the continuation asks with the summary", mem.queries)
	}

	msgs := systemInputs(recs)
	first := msgs[len(msgs)-1]
	at := 0
	for _, w := range []string{ContinuationMessage, summary, "Health checks", head[:12], "failed with exit code 2", "| lint: parse.go:3: x declared and not used", "Memories", "the grammar lives in parse.y"} {
		i := strings.Index(first[at:], w)
		if i < 0 {
			t.Fatalf("the continuation's first message lacks %q (in order):\n%s", w, first)
		}
		at += i + len(w)
	}
	if env := rec.env(t, 1); env[EnvTask] != summary || env[EnvStartMessage] != "1" {
		t.Fatalf("the continuation's %s = %q, %s = %q (want 1: its first stdin line is the report)", EnvTask, env[EnvTask], EnvStartMessage, env[EnvStartMessage])
	}
	n := e.node(root.ID)
	if n.Status != protocol.StateRunning || !e.r.Running(root.ID) {
		t.Fatalf("after the continuation: %s, running %v", n.Status, e.r.Running(root.ID))
	}
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("done finished")); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, protocol.StateDone)
}

// TestHandoffAcrossRestart: the orchestrator stops while the agent that
// handed off is being stopped (it ignores the stop); the next orchestrator
// finishes the stop and starts the continuation.
func TestHandoffAcrossRestart(t *testing.T) {
	e := newEnv(t, nil)
	root := e.startRoot("ignore-stop; echo generation one")
	e.waitFor("generation one", func() bool { return hasText(e.records(root.ID), "generation one") })
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("handoff next: the rest")); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the handoff", func() bool {
		return strings.Contains(strings.Join(kindsOf(e.records(root.ID)), " "), "event:handoff input:signal")
	})
	e.r.Close()
	if n := e.node(root.ID); n.Generation != 1 {
		t.Fatalf("generation %d before the restart", n.Generation)
	}
	e.r = e.newRunner()
	e.waitFor("generation two", func() bool {
		return e.node(root.ID).Generation == 2 && hasText(e.records(root.ID), "next: the rest")
	})
	if c := systemBlocks(t, e.records(root.ID), protocol.SystemContinuation); len(c) != 1 {
		t.Fatalf("continuations %+v", c)
	}
}

// TestReconcileInterruptedStart: the orchestrator stops while a node's
// health checks run (its container created, never started); the next one
// removes any health check container left behind and starts the node
// again, as the first start it still is (its task runs once).
func TestReconcileInterruptedStart(t *testing.T) {
	img := gitAgent(t)
	e := newEnv(t, nil)
	if _, err := e.sessions.SetSessionChecks(e.ctx, e.uid, e.sid, []protocol.Check{{Command: "sleep 30", Timeout: 2}}); err != nil {
		t.Fatal(err)
	}
	root, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: "root", AgentType: AgentCustom, Image: img, Task: "echo the task ran"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.r.StartSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	checking := func() bool {
		infos, _ := e.rt.List(e.ctx, map[string]string{LabelRole: RoleCheck, containers.LabelNode: root.ID})
		return len(infos) > 0
	}
	e.waitFor("the check's container", checking)
	e.r.Close()
	// A check container a crash left behind (Close removes its own).
	stray, err := e.rt.Create(e.ctx, containers.Spec{SessionID: e.sid, NodeID: root.ID, Image: img,
		Labels: map[string]string{LabelInstance: e.r.instance, LabelRole: RoleCheck}})
	if err != nil {
		t.Fatal(err)
	}
	if n := e.node(root.ID); n.ContainerID == "" || n.Status != protocol.StateRunning || n.StartedAt != nil {
		t.Fatalf("interrupted start left: container %q, %s, started %v", n.ContainerID, n.Status, n.StartedAt)
	}
	e.r = e.newRunner()
	if _, err := e.rt.Inspect(e.ctx, stray); err == nil {
		t.Fatal("Reconcile left a health check's container")
	}
	e.waitFor("the task", func() bool { return hasText(e.records(root.ID), "the task ran") })
	if n := len(systemBlocks(t, e.records(root.ID), protocol.SystemCheck)); n != 1 {
		t.Fatalf("%d check blocks, want the one of the finished start", n)
	}
	if n := e.textCount(root.ID, "the task ran"); n != 1 {
		t.Fatalf("the task ran %d times", n)
	}
}
