package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
)

const testImage = "filepath/testagent:latest"

type env struct {
	t        *testing.T
	ctx      context.Context
	dir      string
	st       *store.Store
	users    *identity.Store
	sessions *sessions.Store
	collab   *collab.Store
	secrets  *secrets.Store
	pub      *storetest.Recorder // every record the store publishes, in order
	rt       *containers.Docker  // newEnv's runtime
	proc     *containers.Process // newProcessEnv's
	uid      string
	sid      string
	cfg      Config
	r        *Runner
	root     sessions.Node
}

func newEnv(t *testing.T, mod func(*Config)) *env {
	t.Helper()
	testkit.RequireImage(t, testImage)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, dir: t.TempDir(), pub: &storetest.Recorder{}}
	var err error
	e.st, err = store.Open(ctx, store.Config{Path: filepath.Join(e.dir, "filepath.db"), Publisher: e.pub})
	if err != nil {
		t.Fatal(err)
	}
	e.useStore(e.st)
	t.Cleanup(func() { e.st.Close() })
	e.rt, err = containers.NewDocker(ctx, containers.DockerConfig{Network: "none"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.rt.Close() })
	se := storetest.On(e.st)
	u := se.User(t, "alice")
	e.uid, e.sid = u.ID, se.Session(t, u.ID, "runner test").ID
	t.Cleanup(func() { // containers outlive runners: remove them
		ctx := context.Background()
		infos, _ := e.rt.List(ctx, map[string]string{containers.LabelSession: e.sid})
		for _, in := range infos {
			e.rt.Remove(ctx, in.ID)
		}
	})
	e.cfg = withNouns(Config{Store: e.st, Runtime: e.rt, DataDir: e.dir, StopGrace: 2 * time.Second, KillGrace: time.Second})
	if mod != nil {
		mod(&e.cfg)
	}
	e.r = e.newRunner()
	return e
}

func (e *env) newRunner() *Runner {
	e.t.Helper()
	r, err := New(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { r.Close() })
	if err := r.Reconcile(e.ctx); err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
	return r
}

// startRoot creates the root node (a custom agent on the test image) with
// the task and starts the session.
func (e *env) startRoot(task string) sessions.Node {
	e.t.Helper()
	n, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: "root", AgentType: AgentCustom, Image: testImage, Task: task})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.r.StartSession(e.ctx, e.uid, e.sid); err != nil {
		e.t.Fatalf("start session: %v", err)
	}
	e.root = n
	return n
}

// startedRoot is startRoot with the task "echo <said>", once the root has
// said it.
func (e *env) startedRoot(said string) sessions.Node {
	e.t.Helper()
	root := e.startRoot("echo " + said)
	e.waitFor(said, func() bool { return hasText(e.records(root.ID), said) })
	return root
}

// authorizes reports whether key is a working API key of node nodeID.
func (e *env) authorizes(key, nodeID string) bool {
	e.t.Helper()
	p, err := e.users.AuthAPIKey(e.ctx, key)
	if err != nil && orchestrator.ErrorCode(err) != orchestrator.EUnauthorized {
		e.t.Fatal(err)
	}
	return err == nil && p.NodeID == nodeID
}

func (e *env) records(nodeID string) []protocol.Record {
	e.t.Helper()
	var out []protocol.Record
	after := int64(0)
	for {
		recs, err := e.st.Records(e.ctx, e.sid, after, store.MaxRecordsLimit, nodeID)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, recs...)
		if len(recs) < store.MaxRecordsLimit {
			return out
		}
		after = recs[len(recs)-1].Seq
	}
}

func (e *env) node(id string) sessions.Node {
	e.t.Helper()
	n, err := e.sessions.NodeByID(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// waitFor polls cond for up to three minutes (each agent's start is two
// containers, its network sandbox first, on a loaded machine); a failure
// shows the session's records.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	testkit.EventuallyNil(e.t, 3*time.Minute, what, func() error {
		if cond() {
			return nil
		}
		return sessionRecords{e}
	})
}

// sessionRecords shows the records of an env's session in a failure.
type sessionRecords struct{ e *env }

func (s sessionRecords) Error() string { return "records:\n" + dump(s.e.records("")) }

func (e *env) waitStatus(nodeID, status string) sessions.Node {
	e.t.Helper()
	var n sessions.Node
	e.waitFor("node "+nodeID+" "+status, func() bool {
		// Running first: once the relay is gone, Exited has written the
		// node (status, exit code), and the read below sees it. Read the
		// other way round, a node read before Exited's write (status done
		// from the done event, no exit code yet) could pass.
		if e.r.Running(nodeID) {
			return false
		}
		n = e.node(nodeID)
		return n.Status == status
	})
	return n
}

func dump(recs []protocol.Record) string {
	var b strings.Builder
	for _, r := range recs {
		d := string(r.Data)
		if len(d) > 200 {
			d = d[:200] + "..."
		}
		fmt.Fprintf(&b, "%d %s %.8s %s\n", r.Seq, r.Kind, r.NodeID, d)
	}
	return b.String()
}

func texts(recs []protocol.Record) []string {
	var out []string
	for _, r := range recs {
		if r.Kind != protocol.KindEvent {
			continue
		}
		var ev struct{ Type, Content string }
		json.Unmarshal(r.Data, &ev)
		if ev.Type == protocol.TypeText {
			out = append(out, ev.Content)
		}
	}
	return out
}

// textCount is how many of the node's text events say s.
func (e *env) textCount(nodeID, s string) int {
	return e.countTexts(nodeID, func(x string) bool { return x == s })
}

// textsAmong is the node's text events that say one of want, in order.
func (e *env) textsAmong(nodeID string, want ...string) []string {
	var out []string
	for _, x := range texts(e.records(nodeID)) {
		if slices.Contains(want, x) {
			out = append(out, x)
		}
	}
	return out
}

// isFlood matches the lines of the test agent's flood command.
func isFlood(s string) bool { return strings.HasPrefix(s, "flood ") }

// countTexts is how many of the node's text events match.
func (e *env) countTexts(nodeID string, match func(string) bool) int {
	n := 0
	for _, x := range texts(e.records(nodeID)) {
		if match(x) {
			n++
		}
	}
	return n
}

func hasText(recs []protocol.Record, s string) bool {
	for _, t := range texts(recs) {
		if t == s {
			return true
		}
	}
	return false
}

func msg(content string) protocol.MessageInput {
	return protocol.MessageInput{Type: protocol.TypeMessage, From: protocol.FromUser, Content: content}
}

func TestMessageRoundTrip(t *testing.T) {
	e := newEnv(t, nil)
	root := e.startedRoot("started")
	rec, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("echo pong"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Kind != protocol.KindInput || rec.Seq == 0 || string(rec.Data) != `{"type":"message","from":"user","content":"echo pong"}` {
		t.Fatalf("input record = %+v", rec)
	}
	e.waitFor("pong", func() bool { return hasText(e.records(root.ID), "pong") })
	for _, r := range e.records(root.ID) {
		if r.Kind == protocol.KindEvent && strings.Contains(string(r.Data), `"pong"`) && r.Seq < rec.Seq {
			t.Fatalf("reply seq %d before its input seq %d", r.Seq, rec.Seq)
		}
	}
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("done bye")); err != nil {
		t.Fatal(err)
	}
	n := e.waitStatus(root.ID, protocol.StateDone)
	if n.ExitCode == nil || *n.ExitCode != 0 {
		t.Fatalf("exit code = %v", n.ExitCode)
	}
	e.waitSessionStatus(protocol.SessionStopped) // nothing runs any more
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("hello?")); err == nil {
		t.Fatal("deliver to a finished node succeeded")
	}
	// The published stream is the store's log, in seq order.
	pub := e.pub.All()
	for i := 1; i < len(pub); i++ {
		if pub[i].Seq != pub[i-1].Seq+1 {
			t.Fatalf("published seq %d after %d", pub[i].Seq, pub[i-1].Seq)
		}
	}
}

func TestSpawnTree(t *testing.T) {
	e := newEnv(t, nil)
	root := e.startRoot("tree 2 2")
	// 1 root + 2 children + 4 grandchildren; the 6 descendants finish.
	var tree []sessions.Node
	e.waitFor("6 finished descendants", func() bool {
		var err error
		tree, err = e.sessions.Tree(e.ctx, e.uid, e.sid)
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, n := range tree {
			if n.ID != root.ID && n.Status == protocol.StateDone && !e.r.Running(n.ID) {
				done++
			}
		}
		return len(tree) == 7 && done == 6
	})
	byID := map[string]sessions.Node{}
	for _, n := range tree {
		byID[n.ID] = n
	}
	depth := func(n sessions.Node) int {
		d := 0
		for n.ParentID != nil {
			n = byID[*n.ParentID]
			d++
		}
		return d
	}
	count := map[int]int{}
	for _, n := range tree {
		d := depth(n)
		count[d]++
		if d > 0 && !strings.HasPrefix(n.Name, fmt.Sprintf("d%d-", 3-d)) {
			t.Fatalf("node %s at depth %d", n.Name, d)
		}
		if n.Image != testImage {
			t.Fatalf("child of a custom agent runs %q, want the parent's image", n.Image)
		}
	}
	if count[0] != 1 || count[1] != 2 || count[2] != 4 {
		t.Fatalf("tree shape %v", count)
	}
	// In the published stream, each child's "created" record comes after its
	// parent's spawn event, and each node's events after its creation.
	pub := e.pub.All()
	created := map[string]int64{}
	spawned := map[string][]int64{} // parent → seqs of its spawn events
	for _, r := range pub {
		var d struct {
			Op   string
			Type string
			Node sessions.Node
		}
		json.Unmarshal(r.Data, &d)
		switch {
		case r.Kind == protocol.KindNode && d.Op == protocol.OpCreated:
			created[d.Node.ID] = r.Seq
			if d.Node.ParentID != nil {
				sp := spawned[*d.Node.ParentID]
				if len(sp) == 0 || sp[0] > r.Seq {
					t.Fatalf("child %s created at seq %d before its parent's spawn event", d.Node.Name, r.Seq)
				}
				spawned[*d.Node.ParentID] = sp[1:]
			}
		case r.Kind == protocol.KindEvent:
			if _, ok := created[r.NodeID]; !ok {
				t.Fatalf("event of node %s at seq %d before the node was created", r.NodeID, r.Seq)
			}
			if d.Type == protocol.TypeSpawn {
				spawned[r.NodeID] = append(spawned[r.NodeID], r.Seq)
			}
		}
	}
	// The root was told about each child that finished.
	e.waitFor("finish messages at the root", func() bool {
		n := 0
		for _, r := range e.records(root.ID) {
			if r.Kind == protocol.KindInput && strings.Contains(string(r.Data), `"from":"system"`) && strings.Contains(string(r.Data), " finished") {
				n++
			}
		}
		return n == 2
	})
	if err := e.r.StopSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, protocol.NodeStopped) // testagent answers stop with done: it was stopped, not finished
}

func TestBadLinesKeepAgentRunning(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxLine = 64 << 10 })
	root := e.startRoot("bad; huge 100000; utf8; stderr oops; echo after; done")
	n := e.waitStatus(root.ID, protocol.StateDone)
	if *n.ExitCode != 0 {
		t.Fatalf("exit code %d", *n.ExitCode)
	}
	var errs []map[string]any
	for _, r := range e.records(root.ID) {
		if r.Kind == protocol.KindError {
			var m map[string]any
			json.Unmarshal(r.Data, &m)
			errs = append(errs, m)
		}
	}
	if len(errs) != 2 {
		t.Fatalf("%d error records, want 2:\n%s", len(errs), dump(e.records(root.ID)))
	}
	for i, want := range []string{"JSON", "65536-byte line limit"} {
		if !strings.Contains(errs[i]["message"].(string), want) || errs[i]["source"] != "stdout" || errs[i]["raw"] == "" {
			t.Fatalf("error %d = %v, want a stdout error about %s", i, errs[i], want)
		}
	}
	if len(errs[1]["raw"].(string)) > 4096 {
		t.Fatalf("raw of the cut line holds %d bytes", len(errs[1]["raw"].(string)))
	}
	// Docker's json-file log driver stores lines as JSON strings and replaces
	// invalid UTF-8 with U+FFFD before anyone reads it, so the relay sees a
	// valid line (the raw-byte path is covered by the relay's unit tests).
	if !hasText(e.records(root.ID), "bad \ufffd\ufffd utf8") {
		t.Fatalf("the non-UTF-8 line is not recorded:\n%s", dump(e.records(root.ID)))
	}
	if !hasText(e.records(root.ID), "after") {
		t.Fatal("the agent did not continue after the bad lines")
	}
	logs, err := e.r.NodeLog(e.ctx, e.sid, root.ID, 10)
	if err != nil || !strings.Contains(string(logs), "oops") {
		t.Fatalf("node log = %q, %v", logs, err)
	}
}

func TestCrash(t *testing.T) {
	e := newEnv(t, nil)
	root := e.startRoot("stderr about to fail; crash 3")
	n := e.waitStatus(root.ID, protocol.StateError)
	if n.ExitCode == nil || *n.ExitCode != 3 {
		t.Fatalf("exit code = %v, want 3", n.ExitCode)
	}
	recs := e.records(root.ID)
	last := recs[len(recs)-1]
	for _, r := range recs {
		if r.Kind == protocol.KindError {
			last = r
		}
	}
	var d struct {
		Source     string
		ExitCode   *int   `json:"exit_code"`
		StderrTail string `json:"stderr_tail"`
	}
	json.Unmarshal(last.Data, &d)
	if d.Source != "exit" || d.ExitCode == nil || *d.ExitCode != 3 || !strings.Contains(d.StderrTail, "about to fail") {
		t.Fatalf("exit record = %s", last.Data)
	}
	e.waitSessionStatus(protocol.SessionError)
}

// waitSessionStatus waits for the session to show status.
func (e *env) waitSessionStatus(status string) {
	e.t.Helper()
	e.waitFor("session "+status, func() bool {
		s, err := e.sessions.SessionByID(e.ctx, e.sid)
		return err == nil && s.Status == status
	})
}

func TestStopEscalatesToKill(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.StopGrace = 500 * time.Millisecond; c.KillGrace = 500 * time.Millisecond })
	root := e.startRoot("ignore-stop; echo ready")
	e.waitFor("ready", func() bool { return hasText(e.records(root.ID), "ready") })
	start := time.Now()
	if err := e.r.StopSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	n := e.waitStatus(root.ID, protocol.NodeStopped)
	if n.ExitCode == nil || *n.ExitCode != 137 {
		t.Fatalf("exit code = %v, want 137 (SIGKILL)", n.ExitCode)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("killed after %v, before stop grace + kill grace", took)
	}
	logs, _ := e.r.NodeLog(e.ctx, e.sid, root.ID, 0)
	if !strings.Contains(string(logs), "ignoring signal stop") || !strings.Contains(string(logs), "ignoring SIGTERM") {
		t.Fatalf("stderr log:\n%s", logs)
	}
	sess, err := e.sessions.GetSession(e.ctx, e.uid, e.sid)
	if err != nil || sess.Status != protocol.SessionStopped {
		t.Fatalf("session status %q, %v", sess.Status, err)
	}
}

func TestPauseResume(t *testing.T) {
	e := newEnv(t, nil)
	root := e.startedRoot("ready")
	sig := func(a string) {
		t.Helper()
		if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, protocol.SignalInput{Type: protocol.TypeSignal, Action: a}); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	state := func() containers.State {
		in, err := e.rt.Inspect(e.ctx, e.node(root.ID).ContainerID)
		if err != nil {
			t.Fatal(err)
		}
		return in.State
	}
	sig("pause")
	if s := state(); s != containers.StatePaused {
		t.Fatalf("state after pause = %s", s)
	}
	// The node shows paused, whatever the agent said last (issue 27), and a
	// message to it is taken at once, then answered after the resume.
	if n := e.node(root.ID); n.Status != protocol.NodePaused {
		t.Fatalf("status while paused = %s", n.Status)
	}
	dctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	_, err := e.r.Deliver(dctx, e.sid, root.ID, msg("echo alive"))
	cancel()
	if err != nil {
		t.Fatalf("a message to the paused agent: %v", err)
	}
	if s := state(); s != containers.StatePaused {
		t.Fatalf("a message thawed the agent: %s", s)
	}
	sig("resume")
	if s := state(); s != containers.StateRunning {
		t.Fatalf("state after resume = %s", s)
	}
	// The agent reads the message and the resume after the thaw, and may
	// answer the message before it says it runs again: wait for both.
	statuses := func() []string {
		var out []string
		for _, r := range e.records(root.ID) {
			var ev struct{ Type, State string }
			json.Unmarshal(r.Data, &ev)
			if r.Kind == protocol.KindEvent && ev.Type == protocol.TypeStatus {
				out = append(out, ev.State)
			}
		}
		return out
	}
	e.waitFor("alive, and a status after the pause's", func() bool { return hasText(e.records(root.ID), "alive") && len(statuses()) >= 2 })
	if n := e.node(root.ID); n.Status == protocol.NodePaused {
		t.Fatal("still paused after the resume")
	}
	if states := statuses(); strings.Join(states, ",") != "idle,running" {
		t.Fatalf("status events %v, want idle then running", states)
	}
}

// TestRestartRecovery floods 10,000 events while the runner is torn down
// twice without any shutdown work reaching the store: every line must be in
// the log exactly once, in order.
func TestRestartRecovery(t *testing.T) {
	const n = 10000
	e := newEnv(t, nil)
	root := e.startedRoot("ready")
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg(fmt.Sprintf("flood %d; sleep 300; flood %d", n/2, n/2))); err != nil {
		t.Fatal(err)
	}
	floods := func() int { return e.countTexts(root.ID, isFlood) }
	for round, atLeast := range []int{200, n/2 + 200} {
		e.waitFor(fmt.Sprintf("round %d: %d flood events", round, atLeast), func() bool { return floods() >= atLeast })
		e.r.Close() // the relays stop wherever they are; only the store and the containers remain
		e.r = e.newRunner()
	}
	e.waitFor("all flood events", func() bool { return floods() >= n })
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("done")); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, protocol.StateDone)
	wantFloods(t, texts(e.records(root.ID)), n)
}

// wantFloods checks that texts hold the n events of two floods of n/2
// ("flood 1" … "flood n/2", twice), in order: none lost or duplicated.
func wantFloods(t *testing.T, texts []string, n int) {
	t.Helper()
	var fl []string
	for _, s := range texts {
		if strings.HasPrefix(s, "flood ") {
			fl = append(fl, s)
		}
	}
	if len(fl) != n {
		t.Fatalf("%d flood events, want %d", len(fl), n)
	}
	for i, s := range fl {
		if want := fmt.Sprintf("flood %d", i%(n/2)+1); s != want {
			t.Fatalf("flood event %d = %q, want %q (lost or duplicated)", i, s, want)
		}
	}
}

// TestReconcileGhost: a node marked running whose container is gone
// (docker rm -f while the orchestrator was down) becomes error at start-up,
// its token is revoked, and its session, in which nothing runs any more,
// becomes error instead of showing running for good.
func TestReconcileGhost(t *testing.T) {
	rec := &envRecorder{}
	e := newEnv(t, func(c *Config) { rec.Runtime = c.Runtime; c.Runtime = rec })
	root := e.startedRoot("ready")
	key := rec.env(t, 0)[EnvAPIKey]
	if _, err := e.users.AuthAPIKey(e.ctx, key); err != nil {
		t.Fatalf("the running container's token: %v", err)
	}
	e.r.Close()
	if err := e.rt.Remove(e.ctx, e.node(root.ID).ContainerID); err != nil {
		t.Fatal(err)
	}
	e.r = e.newRunner()
	n := e.node(root.ID)
	if n.Status != protocol.NodeLost || n.ContainerID != "" || e.r.Running(root.ID) {
		t.Fatalf("ghost node after reconcile: status %s container %q", n.Status, n.ContainerID)
	}
	if sess, err := e.sessions.SessionByID(e.ctx, e.sid); err != nil || sess.Status != protocol.SessionError {
		t.Fatalf("ghost session after reconcile: %q, %v; want error", sess.Status, err)
	}
	if _, err := e.users.AuthAPIKey(e.ctx, key); orchestrator.ErrorCode(err) != orchestrator.EUnauthorized {
		t.Fatalf("the removed container's token: %v, want unauthorized", err)
	}
	found := false
	for _, r := range e.records(root.ID) {
		found = found || r.Kind == protocol.KindError && strings.Contains(string(r.Data), "is gone")
	}
	if !found {
		t.Fatalf("no error record for the lost container:\n%s", dump(e.records(root.ID)))
	}
}

// TestDeletedUnderRelay: a session deleted in the store while its agent runs
// (without DeleteSession) ends the relay at its next append, and the runner
// removes the container.
func TestDeletedUnderRelay(t *testing.T) {
	e := newEnv(t, nil)
	root := e.startedRoot("ready")
	cid := e.node(root.ID).ContainerID
	if err := e.sessions.DeleteSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Stop(e.ctx, cid, time.Second); err != nil { // the exit makes the relay append
		t.Fatal(err)
	}
	e.waitFor("the deleted node's container to be removed", func() bool { _, err := e.rt.Inspect(e.ctx, cid); return err != nil })
	if e.r.Running(root.ID) {
		t.Fatal("relay of a deleted node still registered")
	}
}

// TestDeleteSessionRemovesContainers: DeleteSession (before the store's
// delete) closes the relays and removes the containers.
func TestDeleteSessionRemovesContainers(t *testing.T) {
	e := newEnv(t, nil)
	root := e.startRoot("spawn 2")
	e.waitFor("two children", func() bool {
		tree, _ := e.sessions.Tree(e.ctx, e.uid, e.sid)
		return len(tree) == 3
	})
	if err := e.r.DeleteSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	infos, err := e.rt.List(e.ctx, map[string]string{containers.LabelSession: e.sid})
	if err != nil || len(infos) != 0 || e.r.Running(root.ID) {
		t.Fatalf("%d containers left (%v), root running %v", len(infos), err, e.r.Running(root.ID))
	}
	if err := e.sessions.DeleteSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
}

// TestStartAgainFreshStdin: starting a finished session again runs a fresh
// container without the task (it was the first start's job, done already);
// the agent reads the resume message first, and earlier inputs are history,
// not written again.
func TestStartAgainFreshStdin(t *testing.T) {
	rec := &envRecorder{}
	e := newEnv(t, func(c *Config) { rec.Runtime = c.Runtime; c.Runtime = rec })
	root := e.startRoot("echo started")
	count := func(s string) int { return e.textCount(root.ID, s) }
	e.waitFor("started", func() bool { return count("started") == 1 })
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("echo one; done")); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, protocol.StateDone)
	if err := e.r.StartSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the resume message", func() bool { return count(ResumeMessage) == 1 })
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("echo two; done")); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, protocol.StateDone)
	if c := count("one"); c != 1 {
		t.Fatalf(`"one" %d times: an old input was written to the new container`, c)
	}
	if c := count("started"); c != 1 {
		t.Fatalf(`"started" %d times: the restart ran the task again`, c)
	}
	if task := rec.env(t, 1)[EnvTask]; task != "" {
		t.Fatalf("restart: %s = %q, want empty", EnvTask, task)
	}
}

// TestTokenDiesWithContainer: a container's token works while it runs and is
// refused once it has exited (done, or stopped); a restart gets a new token
// and the old one stays refused.
func TestTokenDiesWithContainer(t *testing.T) {
	rec := &envRecorder{}
	e := newEnv(t, func(c *Config) { rec.Runtime = c.Runtime; c.Runtime = rec })
	root := e.startedRoot("started")
	works := func(key string) bool { return e.authorizes(key, root.ID) }
	key1 := rec.env(t, 0)[EnvAPIKey]
	if !works(key1) {
		t.Fatal("the running container's token is refused")
	}
	// A request for approval the agent still waits on when it exits is
	// withdrawn with its token: nobody is left to receive the answer.
	asked, _, err := e.collab.RequestApproval(e.ctx, e.sid, root.ID, collab.NewApproval{Action: "bash: git push", Kind: "bash", Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("done")); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, protocol.StateDone)
	if works(key1) {
		t.Fatal("the token works after its container exited")
	}
	if a, err := e.collab.GetApproval(e.ctx, e.sid, asked.ID); err != nil || a.Status != protocol.ApprovalDenied || a.AnsweredBy != protocol.AnsweredByAgent {
		t.Fatalf("the exited agent's pending approval: %+v %v", a, err)
	}
	if err := e.r.StartNode(e.ctx, e.uid, e.sid, root.ID); err != nil {
		t.Fatal(err)
	}
	key2 := rec.env(t, 1)[EnvAPIKey]
	if key2 == key1 || !works(key2) || works(key1) {
		t.Fatalf("after the restart: new token works %v, old token refused %v", key2 != key1 && works(key2), !works(key1))
	}
	// Once the restarted agent runs (it echoes its resume message), a stop
	// ends its container.
	e.waitFor("the restarted agent", func() bool { return hasText(e.records(root.ID), ResumeMessage) })
	if err := e.r.StopSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, protocol.NodeStopped) // testagent answers stop with done: stopped, not finished
	if works(key2) {
		t.Fatal("the token works after its container was stopped")
	}
}

func TestStartMissingImage(t *testing.T) {
	e := newEnv(t, nil)
	n, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: "root", AgentType: AgentCustom, Image: "filepath/no-such-image:latest"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.r.StartSession(e.ctx, e.uid, e.sid); err == nil || !strings.Contains(err.Error(), "no-such-image") {
		t.Fatalf("start with a missing image: %v", err)
	}
	got := e.node(n.ID)
	if got.Status != protocol.StateError || got.ContainerID != "" || e.r.Running(n.ID) {
		t.Fatalf("node after a failed start: status %s container %q", got.Status, got.ContainerID)
	}
	errs := func() int {
		k := 0
		for _, r := range e.records(n.ID) {
			if r.Kind == protocol.KindError && strings.Contains(string(r.Data), "no-such-image") {
				k++
			}
		}
		return k
	}
	if errs() != 1 {
		t.Fatalf("want one error record:\n%s", dump(e.records(n.ID)))
	}
	e.waitSessionStatus(protocol.SessionError)
	// A message tries again and fails the same way: the error is answered,
	// not put in the chat a second time (issue 27).
	if err := e.r.StartNode(e.ctx, e.uid, e.sid, n.ID); err == nil || !strings.Contains(err.Error(), "no-such-image") {
		t.Fatalf("second start: %v", err)
	}
	if errs() != 1 {
		t.Fatalf("the same start error recorded twice:\n%s", dump(e.records(n.ID)))
	}
}

// TestSeveralTopLevelNodes: starting a session starts each of its top-level
// nodes (issue 27: a session may have several).
func TestSeveralTopLevelNodes(t *testing.T) {
	e := newEnv(t, nil)
	var ids []string
	for _, name := range []string{"one", "two"} {
		n, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: name, AgentType: AgentCustom, Image: testImage, Task: "echo " + name})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, n.ID)
	}
	if err := e.r.StartSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	e.waitFor("both top-level agents", func() bool {
		return hasText(e.records(ids[0]), "one") && hasText(e.records(ids[1]), "two")
	})
}

// TestStartCatalogAgentWithoutImage: a built-in agent whose image is not on
// the machine fails with a message that says what to do instead.
func TestStartCatalogAgentWithoutImage(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ProviderKeys = func(string) bool { return true } })
	n, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: "root", AgentType: "shelley"})
	if err != nil {
		t.Fatal(err)
	}
	// make images builds the catalog's images: name one that is not built.
	if _, err := e.st.SQL().Exec(`UPDATE agent_node SET image = 'filepath/agent-shelley-missing:latest' WHERE id = ?`, n.ID); err != nil {
		t.Fatal(err)
	}
	err = e.r.StartNode(e.ctx, e.uid, e.sid, n.ID)
	if err == nil || !strings.Contains(err.Error(), "the shelley agent's image") || !strings.Contains(err.Error(), "make images") || !strings.Contains(err.Error(), "agent-shelley-missing") {
		t.Fatalf("start: %v", err)
	}
	e.waitSessionStatus(protocol.SessionError)
}

// TestLongLinesArriveWhileRunning: lines longer than the log driver's 16 KiB
// pieces (one within the limit, one over it) are recorded while the agent
// keeps running, in order with what follows them: nothing waits for the
// container to exit.
func TestLongLinesArriveWhileRunning(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxLine = 64 << 10 })
	root := e.startRoot("huge 40000; echo middle; huge 200000; echo after; sleep 60000")
	e.waitFor("the lines after the long ones, while the agent runs", func() bool {
		return hasText(e.records(root.ID), "after")
	})
	if !e.r.Running(root.ID) {
		t.Fatal("the agent is not running any more: the lines came at exit")
	}
	var kinds []string
	for _, r := range e.records(root.ID) {
		switch {
		case r.Kind == protocol.KindEvent && strings.Contains(string(r.Data), `"text"`) && len(r.Data) > 30000:
			kinds = append(kinds, "long")
		case r.Kind == protocol.KindEvent && strings.Contains(string(r.Data), `"middle"`):
			kinds = append(kinds, "middle")
		case r.Kind == protocol.KindError && strings.Contains(string(r.Data), "65536-byte line limit"):
			kinds = append(kinds, "cut")
		case r.Kind == protocol.KindEvent && strings.Contains(string(r.Data), `"after"`):
			kinds = append(kinds, "after")
		}
	}
	if strings.Join(kinds, ",") != "long,middle,cut,after" {
		t.Fatalf("records %v, want long,middle,cut,after:\n%s", kinds, dump(e.records(root.ID)))
	}
}

// TestDeleteSessionWhileSpawning: deleting a session whose agent is busy
// spawning children leaves no container behind, not even one whose spawn
// raced the delete.
func TestDeleteSessionWhileSpawning(t *testing.T) {
	e := newEnv(t, nil)
	root := e.startRoot("tree 4 4")
	e.waitFor("some children", func() bool {
		nodes, _ := e.sessions.Tree(e.ctx, e.uid, e.sid)
		return len(nodes) > 3
	})
	if err := e.r.DeleteSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := e.sessions.DeleteSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatalf("store delete: %v", err)
	}
	left := func() int {
		infos, err := e.rt.List(e.ctx, map[string]string{containers.LabelSession: e.sid})
		if err != nil {
			t.Fatal(err)
		}
		return len(infos)
	}
	e.waitFor("no containers of the deleted session", func() bool { return left() == 0 })
	// Time is the point: none may appear in the next 2 s.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		if n := left(); n != 0 {
			t.Fatalf("%d containers of the deleted session appeared after the delete (root %s)", n, root.ID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMessageWhileStopping: a message sent after a stop, while the agent is
// still on its way out, is not written to that agent (which would drop it):
// it waits for the container to end and starts the node again with it, as a
// message to a stopped node does.
func TestMessageWhileStopping(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.StopGrace = 500 * time.Millisecond; c.KillGrace = 500 * time.Millisecond })
	root := e.startRoot("ignore-stop; echo ready")
	e.waitFor("ready", func() bool { return hasText(e.records(root.ID), "ready") })
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, protocol.SignalInput{Type: protocol.TypeSignal, Action: protocol.ActionStop}); err != nil {
		t.Fatal(err)
	}
	// The agent ignores the stop and would still read its stdin: written to
	// it, the message would be echoed before the kill, by the old agent.
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("after the stop")); err != nil {
		t.Fatalf("a message while the agent stops: %v", err)
	}
	e.waitFor("the message answered", func() bool { return hasText(e.records(root.ID), "after the stop") })
	order := e.textsAmong(root.ID, ResumeMessage, "after the stop")
	if len(order) != 2 || order[0] != ResumeMessage {
		t.Fatalf("texts %q: the message must reach the restarted agent, after its resume message", order)
	}
}

// withNouns sets cfg's Users, Sessions, Collab and VendorKeys to the
// store's noun packages over cfg.Store (default limits; the tests'
// secrets key).
func withNouns(cfg Config) Config {
	ss := sessions.New(cfg.Store, sessions.Config{})
	cfg.Users, cfg.Sessions = identity.New(cfg.Store), ss
	cfg.Collab = collab.New(cfg.Store, ss, collab.Config{})
	cfg.VendorKeys = secrets.New(cfg.Store, secrets.Config{Key: testSecretsKey})
	return cfg
}

// useStore sets e's store and its noun packages over it.
func (e *env) useStore(st *store.Store) {
	nouns := withNouns(Config{Store: st})
	e.st, e.users, e.sessions, e.collab = st, nouns.Users, nouns.Sessions, nouns.Collab
	e.secrets = nouns.VendorKeys.(*secrets.Store)
}

// TestAgentStatusImage: with Docker, a catalog agent whose image is not on
// the machine is not offered, with the command that builds it.
func TestAgentStatusImage(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ProviderKeys = func(string) bool { return true } })
	a, _ := orchestrator.AgentByType("shelley")
	a.Image = "filepath/agent-shelley-missing:latest"
	reason, fix := e.r.AgentStatus(e.ctx, a)
	if !strings.Contains(reason, "filepath/agent-shelley-missing:latest is not on this machine") || !strings.Contains(fix, "images/build.sh shelley") {
		t.Fatalf("missing image: %q, %q", reason, fix)
	}
	a.Image = testImage
	if reason, fix := e.r.AgentStatus(e.ctx, a); reason != "" || fix != "" {
		t.Fatalf("an image on the machine: %q, %q", reason, fix)
	}
}
