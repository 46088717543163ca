package runner

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// newProcessEnv is a runner on the process runtime (the test agent as a
// local process, checks as local processes in the workspace directory)
// over a store opened with sc (its path set here), with one session.
func newProcessEnv(t *testing.T, sc store.Config, sess sessions.NewSession, mod func(*Config)) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, dir: t.TempDir()}
	bin := testkit.Program(t, "../../adapters/testagent")
	var err error
	if e.proc, err = containers.NewProcess(containers.ProcessConfig{Dir: filepath.Join(e.dir, "proc")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.proc.Close() })
	sc.Path = filepath.Join(e.dir, "filepath.db")
	if e.st, err = store.Open(ctx, sc); err != nil {
		t.Fatal(err)
	}
	e.useStore(e.st)
	t.Cleanup(func() { e.st.Close() })
	u, err := e.users.CreateUser(ctx, "dana", false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.sessions.CreateSession(ctx, u.ID, sess)
	if err != nil {
		t.Fatal(err)
	}
	e.uid, e.sid = u.ID, s.ID
	e.cfg = withNouns(Config{Store: e.st, Runtime: e.proc, DataDir: e.dir, Cmd: func(sessions.Node) []string { return []string{bin} }, StopGrace: 2 * time.Second, KillGrace: time.Second})
	if mod != nil {
		mod(&e.cfg)
	}
	if e.r, err = New(e.cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.r.Close() })
	return e
}

// processRoot creates the root node of a process env's session with task.
func (e *env) processRoot(task string) sessions.Node {
	e.t.Helper()
	n, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: "root", AgentType: AgentCustom, Image: "local", Task: task})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// envRecorder is a runtime that remembers the environment of every agent
// container created through it, in order (not the health checks').
type envRecorder struct {
	containers.Runtime
	mu   sync.Mutex
	envs []map[string]string
}

func (e *envRecorder) Create(ctx context.Context, spec containers.Spec) (string, error) {
	if spec.Labels[LabelRole] == RoleCheck { // not an agent's
		return e.Runtime.Create(ctx, spec)
	}
	e.mu.Lock()
	env := make(map[string]string, len(spec.Env))
	for k, v := range spec.Env {
		env[k] = v
	}
	e.envs = append(e.envs, env)
	e.mu.Unlock()
	return e.Runtime.Create(ctx, spec)
}

// env returns the environment of the i-th container created.
func (e *envRecorder) env(t *testing.T, i int) map[string]string {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if i >= len(e.envs) {
		t.Fatalf("container %d was not created (%d were)", i, len(e.envs))
	}
	return e.envs[i]
}

// TestProcessRuntime runs the runner on the local-process runtime (no
// Docker): the test agent binary, a message round trip, a spawned child and
// a clean exit.
func TestProcessRuntime(t *testing.T) {
	e := newProcessEnv(t, store.Config{}, sessions.NewSession{Name: "process"}, nil)
	root := e.processRoot("spawn 1")
	if err := e.r.StartSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the child to finish", func() bool {
		tree, _ := e.sessions.Tree(e.ctx, e.uid, e.sid)
		return len(tree) == 2 && tree[1].Status == protocol.StateDone && !e.r.Running(tree[1].ID)
	})
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("echo pong; done")); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, protocol.StateDone)
	if !hasText(e.records(root.ID), "pong") {
		t.Fatalf("no pong:\n%s", dump(e.records("")))
	}
}

// TestProcessRestartLifecycle follows one node through a first start, an
// exit, a restart by a message and a crash of the orchestrator with its
// agents (the process runtime's agents die with it):
//
//   - the container's token works while it runs, is refused once it has
//     exited, and a restart gets a new one (the old one stays refused);
//   - only the first start gets FILEPATH_TASK; the restarted agent reads the
//     resume message first, then the message that restarted it;
//   - after the crash, reconciling marks the node error, revokes its token
//     and settles the session (error: its root is error), instead of
//     leaving it running for good.
func TestProcessRestartLifecycle(t *testing.T) {
	rec := &envRecorder{}
	e := newProcessEnv(t, store.Config{}, sessions.NewSession{Name: "restarts"}, func(c *Config) { rec.Runtime = c.Runtime; c.Runtime = rec })
	root := e.processRoot("echo first job")
	authorized := func(key string) bool { return e.authorizes(key, root.ID) }
	count := func(text string) int { return e.textCount(root.ID, text) }

	// First start: the task, a working token.
	if err := e.r.StartSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the first job", func() bool { return count("first job") == 1 })
	env1 := rec.env(t, 0)
	if env1[EnvTask] != "echo first job" {
		t.Fatalf("first start: %s = %q", EnvTask, env1[EnvTask])
	}
	if _, ok := env1[EnvStartMessage]; ok {
		t.Fatalf("first start without checks or memories: %s set; the agent would wait for a message that never comes", EnvStartMessage)
	}
	key1 := env1[EnvAPIKey]
	if !authorized(key1) {
		t.Fatal("the running container's token is refused")
	}

	// Exit: the token dies with the container.
	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("done")); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, protocol.StateDone)
	if authorized(key1) {
		t.Fatal("the token still works after its container exited")
	}

	// Restart by a message (what the API does for a message to a stopped
	// node): no task, a new token, the resume message first.
	if err := e.r.StartNode(e.ctx, e.uid, e.sid, root.ID); err != nil {
		t.Fatal(err)
	}
	in, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("echo second job"))
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the second job", func() bool { return count("second job") == 1 })
	env2 := rec.env(t, 1)
	if task, ok := env2[EnvTask]; !ok || task != "" || env2[EnvStartMessage] != "1" {
		t.Fatalf("restart: %s = %q (set %v), want empty; %s = %q, want 1", EnvTask, task, ok, EnvStartMessage, env2[EnvStartMessage])
	}
	key2 := env2[EnvAPIKey]
	if key2 == "" || key2 == key1 || !authorized(key2) || authorized(key1) {
		t.Fatalf("after restart: new token %v, old token refused %v", key2 != key1 && authorized(key2), !authorized(key1))
	}
	if c := count("first job"); c != 1 {
		t.Fatalf("the first job ran %d times", c)
	}
	var resume *protocol.Record
	var inputs []string
	for _, rc := range e.records(root.ID) {
		if rc.Kind != protocol.KindInput {
			continue
		}
		var m protocol.MessageInput
		json.Unmarshal(rc.Data, &m)
		inputs = append(inputs, m.From+": "+m.Content)
		if m.From == protocol.FromSystem && strings.HasPrefix(m.Content, ResumeMessage+"\n\n") {
			resume = &rc
		}
	}
	if resume == nil || resume.Seq > in.Seq {
		t.Fatalf("inputs %q: want the resume message before the message that restarted the node", inputs)
	}
	// What the agent read: the resume message (echoed back), then the message.
	order := e.textsAmong(root.ID, ResumeMessage, "second job")
	if len(order) != 2 || order[0] != ResumeMessage {
		t.Fatalf("the agent read %q, want the resume message first", order)
	}

	// The orchestrator and its agents die (for the process runtime a crash
	// takes the agents with it); the next start finds the container gone.
	if err := e.r.Close(); err != nil {
		t.Fatal(err)
	}
	e.proc.Close()
	proc, err := containers.NewProcess(containers.ProcessConfig{Dir: filepath.Join(e.dir, "proc")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Close() })
	e.cfg.Runtime = &envRecorder{Runtime: proc}
	e.r = e.newRunner() // reconciles
	if n := e.node(root.ID); n.Status != protocol.NodeLost || e.r.Running(root.ID) {
		t.Fatalf("lost node after reconcile: status %s, running %v", n.Status, e.r.Running(root.ID))
	}
	if authorized(key2) {
		t.Fatal("the lost container's token still works")
	}
	if sess, err := e.sessions.SessionByID(e.ctx, e.sid); err != nil || sess.Status != protocol.SessionError {
		t.Fatalf("session after reconcile: %q, %v; want error (nothing runs, its root is error)", sess.Status, err)
	}
}

// TestRecoveredOutputKeepsItsTime: what an agent printed while no
// orchestrator listened is recorded, after the restart, with the time the
// container's log gives it, not the time of the recovery; and Deliver
// answers with the input record as stored.
func TestRecoveredOutputKeepsItsTime(t *testing.T) {
	// The store's clock runs an hour ahead once the orchestrator is down,
	// so that a record stamped at its append cannot pass for one stamped
	// when the line was printed.
	var ahead atomic.Int64
	e := newProcessEnv(t, store.Config{Now: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }}, sessions.NewSession{Name: "recovery"}, nil)
	root := e.processRoot("echo ready")
	ctx, st, rt, s := e.ctx, e.st, e.proc, e.sid
	if err := e.r.StartSession(ctx, e.uid, s); err != nil {
		t.Fatal(err)
	}
	e.waitFor("ready", func() bool { return hasText(e.records(root.ID), "ready") })
	in, err := e.r.Deliver(ctx, s, root.ID, msg("echo pong"))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.Records(ctx, s, in.Seq-1, 1, "")
	if err != nil || len(stored) != 1 || stored[0].Seq != in.Seq || !stored[0].At.Equal(in.At) || string(stored[0].Data) != string(in.Data) || in.NodeID != root.ID {
		t.Fatalf("Deliver answered %+v; stored %+v, %v", in, stored, err)
	}
	e.waitFor("pong", func() bool { return hasText(e.records(root.ID), "pong") })

	// The orchestrator stops; the agent, still running, prints a line.
	if err := e.r.Close(); err != nil {
		t.Fatal(err)
	}
	cid := e.node(root.ID).ContainerID
	w, err := rt.AttachStdin(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(`{"type":"message","from":"user","content":"echo printed while down"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var printed time.Time
	e.waitFor("the line in the container's log", func() bool {
		lr, err := rt.Logs(ctx, cid, containers.LogOptions{Stdout: true})
		if err != nil {
			t.Fatal(err)
		}
		defer lr.Close()
		for {
			ln, err := lr.Next()
			if err != nil {
				return false
			}
			if strings.Contains(string(ln.Line), "printed while down") {
				printed = ln.Time
				return true
			}
		}
	})
	ahead.Store(int64(time.Hour))
	e.r = e.newRunner() // reconciles
	e.waitFor("the recovered line", func() bool { return hasText(e.records(root.ID), "printed while down") })
	for _, rc := range e.records(root.ID) {
		if rc.Kind == protocol.KindEvent && strings.Contains(string(rc.Data), "printed while down") {
			if want := printed.Truncate(time.Millisecond); !rc.At.Equal(want) {
				t.Fatalf("recovered record at %v, want the time it was printed, %v", rc.At, want)
			}
		}
	}
}

// TestSettleRacesRestart: a node's relay ends (its agent exited) and the
// node is started again before the ended relay's settle writes the session:
// the session must end running, not stopped with an agent running. The
// settle is held after it found no relay of the session until the new relay
// is attached.
func TestSettleRacesRestart(t *testing.T) {
	e := newProcessEnv(t, store.Config{}, sessions.NewSession{Name: "race"}, nil)
	root := e.processRoot("echo up")
	ctx, r, s, u := e.ctx, e.r, e.sid, e.uid
	if err := r.StartSession(ctx, u, s); err != nil {
		t.Fatal(err)
	}
	entered, release, settled := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once, onceDone sync.Once
	r.settleHook = func() { once.Do(func() { close(entered); <-release }) }
	r.settledHook = func() { onceDone.Do(func() { close(settled) }) }
	if _, err := r.Deliver(ctx, s, root.ID, msg("done")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the ended relay did not settle its session")
	}
	started := make(chan error, 1)
	go func() { started <- r.StartNode(ctx, u, s, root.ID) }()
	e.waitFor("the restarted relay", func() bool { return r.Running(root.ID) })
	close(release)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	<-settled
	if sess, err := e.sessions.SessionByID(ctx, s); err != nil || sess.Status != protocol.SessionRunning {
		t.Fatalf("session %q, %v with its agent running; want running", sess.Status, err)
	}
}
