package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/orchestrator/runner"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

const testImage = "filepath/testagent:latest"

const (
	floodEvents   = 200000 // events per throughput run
	latencyRate   = 1000   // events/s of the latency runs
	latencyEvents = 5000   // events per latency run (5 s)
	idleNodes     = 1000   // idle agents of the memory benchmark
)

// stampPrefix starts every line (and every stored event) the test agent's
// `rate` command writes: {"type":"text","content":"t <unix ns> <i>"}.
var stampPrefix = []byte(`{"type":"text","content":"t `)

// stamp parses the emit time and index out of a rate event.
func stamp(data []byte) (ns int64, i int, ok bool) {
	if !bytes.HasPrefix(data, stampPrefix) {
		return 0, 0, false
	}
	rest := data[len(stampPrefix):]
	sp, q := bytes.IndexByte(rest, ' '), bytes.IndexByte(rest, '"')
	if sp < 0 || q < sp {
		return 0, 0, false
	}
	ns, err1 := strconv.ParseInt(string(rest[:sp]), 10, 64)
	i, err2 := strconv.Atoi(string(rest[sp+1 : q]))
	return ns, i, err1 == nil && err2 == nil
}

// run is the outcome of one agent run of `rate N PERSEC`.
type run struct {
	n           int
	first       int64           // emit time of event 1 (unix ns)
	lastEmit    int64           // emit time of event N
	lastRecv    int64           // receipt of event N by the reader
	lastDurable int64           // publish (after commit) of event N; 0 without a store
	recv        []time.Duration // per event: receipt - emit
	durable     []time.Duration // per event: publish - emit
	drops       int             // WebSocket reconnects after being dropped as too slow
	durableDone chan struct{}   // closed when event N is published
	// emit times of events 1 and N as the store saw them
	durableFirst, durableLastEmit int64
}

// see records the receipt of one line or record; it reports the last one.
func (r *run) see(data []byte, now time.Time) bool {
	ns, i, ok := stamp(data)
	if !ok {
		return false
	}
	r.recv = append(r.recv, time.Duration(now.UnixNano()-ns))
	if i == 1 {
		r.first = ns
	}
	if i == r.n {
		r.lastEmit, r.lastRecv = ns, now.UnixNano()
		return true
	}
	return false
}

func (r *run) delivered() float64 { return float64(r.n) / time.Duration(r.lastRecv-r.first).Seconds() }
func (r *run) emitted() float64   { return float64(r.n) / time.Duration(r.lastEmit-r.first).Seconds() }
func (r *run) committed() float64 {
	return float64(r.n) / time.Duration(r.lastDurable-r.first).Seconds()
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// tap is the store's publisher: it notes when each rate event is published
// (after its commit) and passes every record on to the hub.
type tap struct {
	next store.Publisher
	mu   sync.Mutex
	cur  *run
	hook func(string, protocol.Record, time.Time) // sees every record, with its session, at its publish time
}

func (t *tap) Publish(sessionID string, r protocol.Record) {
	t.mu.Lock()
	if t.hook != nil {
		t.hook(sessionID, r, time.Now())
	}
	t.mu.Unlock()
	if r.Kind == protocol.KindEvent {
		if ns, i, ok := stamp(r.Data); ok {
			now := time.Now().UnixNano()
			t.mu.Lock()
			if c := t.cur; c != nil {
				c.durable = append(c.durable, time.Duration(now-ns))
				if i == 1 {
					c.durableFirst = ns
				}
				if i == c.n {
					c.lastDurable, c.durableLastEmit = now, ns
					close(c.durableDone)
				}
			}
			t.mu.Unlock()
		}
	}
	t.next.Publish(sessionID, r)
}

func (t *tap) setHook(f func(string, protocol.Record, time.Time)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hook = f
}

func (t *tap) watch(r *run) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cur = r
}

// server is the whole orchestrator as serve.go builds it (with --workspace
// dir: plain workspace directories instead of FUSE, which is off the event
// path), on the docker or the process runtime.
type server struct {
	b         *testing.B
	ctx       context.Context
	dir       string
	st        *store.Store
	users     *identity.Store
	sessStore *sessions.Store
	collab    *collab.Store
	audit     *audit.Store
	hub       *hub.Hub[protocol.Record]
	tap       *tap
	rt        containers.Runtime
	run       *runner.Runner
	srv       *api.Server
	ws        string
	uid, key  string
	image     string
	agent     string // the test agent binary (process runtime)
	sessions  []string
}

func newServer(b *testing.B, kind string) *server {
	b.Helper()
	ctx := context.Background()
	s := &server{b: b, ctx: ctx, dir: b.TempDir(), image: testImage}
	log := slog.New(slog.DiscardHandler)
	// FILEPATH_BENCH_STREAM_BUFFER is serve's --stream-buffer (records
	// buffered per stream client before it is dropped as too slow).
	buffer, _ := strconv.Atoi(os.Getenv("FILEPATH_BENCH_STREAM_BUFFER"))
	s.hub = hub.New[protocol.Record](hub.Config{Buffer: buffer})
	s.tap = &tap{next: s.hub}
	var err error
	rcfg := runner.Config{DataDir: s.dir, Logger: log, StopGrace: 2 * time.Second, KillGrace: time.Second}
	var closeRT func() error
	switch kind {
	case "docker":
		testkit.RequireImage(b, testImage)
		d, err := containers.NewDocker(ctx, containers.DockerConfig{Network: "none"})
		if err != nil {
			b.Fatal(err)
		}
		s.rt, closeRT, rcfg.Network = d, d.Close, "none"
	case "process":
		s.agent = testkit.Program(b, "github.com/filepath-dev/filepath/adapters/testagent")
		p, err := containers.NewProcess(containers.ProcessConfig{Dir: filepath.Join(s.dir, "proc"), Logger: log})
		if err != nil {
			b.Fatal(err)
		}
		s.rt, closeRT, s.image = p, p.Close, "local"
		rcfg.Cmd = func(sessions.Node) []string { return []string{s.agent} }
	default:
		b.Fatalf("unknown runtime %q", kind)
	}
	s.st, err = store.Open(ctx, store.Config{Path: filepath.Join(s.dir, "filepath.db"), Publisher: s.tap})
	if err != nil {
		b.Fatal(err)
	}
	s.users, s.sessStore, s.audit = identity.New(s.st), sessions.New(s.st, sessions.Config{}), audit.New(s.st)
	s.collab = collab.New(s.st, s.sessStore, collab.Config{})
	rcfg.Store, rcfg.Users, rcfg.Sessions, rcfg.Collab, rcfg.Runtime = s.st, s.users, s.sessStore, s.collab, s.rt
	if s.run, err = runner.New(rcfg); err != nil {
		b.Fatal(err)
	}
	if err := s.run.Reconcile(ctx); err != nil {
		b.Fatal(err)
	}
	u, err := s.users.CreateUser(ctx, "bench", false) // before Run: no first-start bootstrap
	if err != nil {
		b.Fatal(err)
	}
	s.uid = u.ID
	if s.key, _, err = s.users.CreateAPIKey(ctx, u.ID, "bench"); err != nil {
		b.Fatal(err)
	}
	s.srv, err = api.New(api.Config{Addr: "127.0.0.1:0", Store: s.st, Users: s.users, Sessions: s.sessStore, Collab: s.collab, Audit: s.audit, Hub: s.hub, Runner: s.run, Logger: log, Stdout: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	s.ws = "ws://" + s.srv.Addr()
	runErr := make(chan error, 1)
	go func() { runErr <- s.srv.Run(ctx) }()
	b.Cleanup(func() {
		s.srv.Close()
		if err := <-runErr; err != nil {
			b.Errorf("api server: %v", err)
		}
		if kind == "docker" { // the process runtime kills its processes on Close
			for _, sid := range s.sessions {
				if err := s.run.DeleteSession(ctx, s.uid, sid); err != nil {
					b.Errorf("delete session %s: %v", sid, err)
				}
			}
		}
		s.run.Close()
		closeRT()
		s.hub.Close()
		s.st.Close()
	})
	return s
}

// session creates a session whose root runs the test agent with task.
func (s *server) session(task string) (sid, root string) {
	s.b.Helper()
	sess, err := s.sessStore.CreateSession(s.ctx, s.uid, sessions.NewSession{Name: "bench"})
	if err != nil {
		s.b.Fatal(err)
	}
	n, err := s.sessStore.CreateNode(s.ctx, s.uid, sess.ID, sessions.NewNode{Name: "root", AgentType: runner.AgentCustom, Image: s.image, Task: task})
	if err != nil {
		s.b.Fatal(err)
	}
	s.sessions = append(s.sessions, sess.ID)
	return sess.ID, n.ID
}

// finish deletes a session's containers (or processes) once it is over.
func (s *server) finish(sid string) {
	s.b.Helper()
	if err := s.run.DeleteSession(s.ctx, s.uid, sid); err != nil {
		s.b.Fatalf("delete session: %v", err)
	}
}

// follow reads the session's stream like the browser does, from after,
// reconnecting with after=<last seq> when the server drops it as too slow,
// until on returns true. ready is closed once the first connection is up
// (subscribed: every later record reaches it live).
func (s *server) follow(ctx context.Context, sid string, after int64, ready chan<- struct{}, on func(protocol.Record, time.Time) bool) (drops int, err error) {
	last := after
	hdr := http.Header{"Authorization": {"Bearer " + s.key}}
	for {
		c, _, err := websocket.Dial(ctx, fmt.Sprintf("%s/api/v1/sessions/%s/stream?after=%d", s.ws, sid, last), &websocket.DialOptions{HTTPHeader: hdr})
		if err != nil {
			return drops, err
		}
		c.SetReadLimit(1 << 20)
		if ready != nil {
			close(ready)
			ready = nil
		}
		for {
			_, msg, err := c.Read(ctx)
			now := time.Now()
			if err != nil {
				c.CloseNow()
				if websocket.CloseStatus(err) == websocket.StatusTryAgainLater {
					drops++
					break
				}
				return drops, err
			}
			var r protocol.Record
			if err := json.Unmarshal(msg, &r); err != nil {
				c.CloseNow()
				return drops, err
			}
			if r.Seq != last+1 {
				c.CloseNow()
				return drops, fmt.Errorf("stream: seq %d after %d", r.Seq, last)
			}
			last = r.Seq
			if on(r, now) {
				c.CloseNow()
				return drops, nil
			}
		}
	}
}

// e2e runs `rate n perSec; done` as a session's root agent and follows the
// session's stream until the last event arrives.
func (s *server) e2e(n, perSec int) *run { return s.agentRun(n, perSec, true) }

// durable is e2e without a stream client: until the last event is
// committed and published to the hub (no subscriber).
func (s *server) durable(n, perSec int) *run { return s.agentRun(n, perSec, false) }

func (s *server) agentRun(n, perSec int, client bool) *run {
	s.b.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Minute)
	defer cancel()
	sid, _ := s.session(fmt.Sprintf("rate %d %d; done", n, perSec))
	after, err := s.st.LastSeq(ctx, sid)
	if err != nil {
		s.b.Fatal(err)
	}
	r := &run{n: n, recv: make([]time.Duration, 0, n), durableDone: make(chan struct{})}
	s.tap.watch(r)
	defer s.tap.watch(nil)
	if !client {
		if err := s.run.StartSession(ctx, s.uid, sid); err != nil {
			s.b.Fatal(err)
		}
		select {
		case <-r.durableDone:
		case <-ctx.Done():
			s.b.Fatal("timed out waiting for the last event")
		}
		r.first, r.lastEmit, r.lastRecv = r.durableFirst, r.durableLastEmit, r.lastDurable
		r.recv = r.durable
		s.tap.watch(nil)
		s.finish(sid)
		return r
	}
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		drops, err := s.follow(ctx, sid, after, ready, func(rec protocol.Record, now time.Time) bool {
			return rec.Kind == protocol.KindEvent && r.see(rec.Data, now)
		})
		r.drops = drops
		done <- err
	}()
	select {
	case <-ready:
	case err := <-done:
		s.b.Fatalf("stream: %v", err)
	}
	if err := s.run.StartSession(ctx, s.uid, sid); err != nil {
		s.b.Fatal(err)
	}
	if err := <-done; err != nil {
		s.b.Fatalf("stream: %v", err)
	}
	s.tap.watch(nil)
	s.finish(sid)
	return r
}

// runtimeLog runs the same agent through the runtime alone (Create, Start,
// Logs(Follow) + LogReader): no relay, store or stream.
func (s *server) runtimeLog(n, perSec int) *run {
	s.b.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Minute)
	defer cancel()
	spec := containers.Spec{SessionID: "bench-log", NodeID: "n" + strconv.Itoa(len(s.sessions)), Image: s.image, Network: "none",
		Env: map[string]string{"FILEPATH_TASK": fmt.Sprintf("rate %d %d; done", n, perSec)}}
	if s.agent != "" {
		spec.Cmd = []string{s.agent}
	}
	id, err := s.rt.Create(ctx, spec)
	if err != nil {
		s.b.Fatal(err)
	}
	defer s.rt.Remove(context.WithoutCancel(ctx), id)
	if err := s.rt.Start(ctx, id); err != nil {
		s.b.Fatal(err)
	}
	lr, err := s.rt.Logs(ctx, id, containers.LogOptions{Stdout: true, Follow: true})
	if err != nil {
		s.b.Fatal(err)
	}
	defer lr.Close()
	r := &run{n: n, recv: make([]time.Duration, 0, n)}
	for {
		l, err := lr.Next()
		if err != nil {
			s.b.Fatalf("log: %v", err)
		}
		if r.see(l.Line, time.Now()) {
			return r
		}
	}
}

// pipe is the baseline: the same agent binary as a local process, its
// stdout read line by line from a pipe.
func pipe(b *testing.B, agent string, n, perSec int) *run {
	b.Helper()
	cmd := exec.Command(agent)
	cmd.Env = []string{fmt.Sprintf("FILEPATH_TASK=rate %d %d; done", n, perSec)}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	r := &run{n: n, recv: make([]time.Duration, 0, n)}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if r.see(sc.Bytes(), time.Now()) {
			io.Copy(io.Discard, out)
			return r
		}
	}
	b.Fatalf("agent ended before event %d: %v", n, sc.Err())
	return nil
}

// modes are the paths measured side by side: the whole server on each
// runtime, the runtime's log alone, and the raw pipe.
var modes = []string{"pipe", "process-log", "process-store", "process", "docker-log", "docker-store", "docker"}

// setup builds what mode measures (one server or agent binary per
// sub-benchmark call, shared by its b.N iterations) and returns the runner
// of one agent run of `rate n perSec`.
func setup(b *testing.B, mode string) func(n, perSec int) *run {
	if mode == "pipe" {
		agent := testkit.Program(b, "github.com/filepath-dev/filepath/adapters/testagent")
		return func(n, perSec int) *run { return pipe(b, agent, n, perSec) }
	}
	kind, suffix, _ := strings.Cut(mode, "-")
	s := newServer(b, kind)
	switch suffix {
	case "log":
		return s.runtimeLog
	case "store":
		return s.durable
	}
	return s.e2e
}

// BenchmarkE2EThroughput: events/s of an agent writing as fast as it can
// (`rate 200000 0`), from the agent's emit time of the first event to the
// WebSocket client's receipt of the last, through the whole server on the
// docker and process runtimes; beside it the runtime's log alone and a raw
// pipe of the same agent binary.
func BenchmarkE2EThroughput(b *testing.B) {
	for _, mode := range modes {
		b.Run(mode, func(b *testing.B) {
			measure := setup(b, mode)
			var delivered, emitted, committed float64
			drops := 0
			for range b.N {
				r := measure(floodEvents, 0)
				delivered += r.delivered()
				emitted += r.emitted()
				if r.lastDurable > 0 {
					committed += r.committed()
				}
				drops += r.drops
			}
			nf := float64(b.N)
			b.ReportMetric(delivered/nf, "events/s")
			b.ReportMetric(emitted/nf, "emitted/s")
			if committed > 0 {
				b.ReportMetric(committed/nf, "durable/s")
				b.ReportMetric(float64(drops)/nf, "drops")
			}
		})
	}
}

// BenchmarkE2ELatency: the agent emits 5,000 stamped events at 1,000/s;
// latency from each event's emit time to its receipt by the WebSocket client
// (p50, p99), and to its publish after commit (durable-p50/p99).
func BenchmarkE2ELatency(b *testing.B) {
	for _, mode := range modes {
		b.Run(mode, func(b *testing.B) {
			measure := setup(b, mode)
			var recv, durable []time.Duration
			drops := 0
			for range b.N {
				r := measure(latencyEvents, latencyRate)
				recv = append(recv, r.recv...)
				durable = append(durable, r.durable...)
				drops += r.drops
			}
			b.ReportMetric(ms(percentile(recv, 0.50)), "p50-ms")
			b.ReportMetric(ms(percentile(recv, 0.99)), "p99-ms")
			if len(durable) > 0 {
				b.ReportMetric(ms(percentile(durable, 0.50)), "durable-p50-ms")
				b.ReportMetric(ms(percentile(durable, 0.99)), "durable-p99-ms")
				b.ReportMetric(float64(drops)/float64(b.N), "drops")
			}
		})
	}
}

// BenchmarkE2ESpawn: a root agent emits one spawn; from the spawn record's
// `at` to the `at` of the child's first event record (the runner creates
// the child node and starts its container in between). Baselines: a bare
// `docker run` of the same image, and a bare exec of the agent binary, to
// their first stdout line.
func BenchmarkE2ESpawn(b *testing.B) {
	for _, mode := range []string{"docker-run", "docker", "exec", "process"} {
		b.Run(mode, func(b *testing.B) {
			var once func() time.Duration
			switch mode {
			case "docker-run":
				testkit.RequireImage(b, testImage)
				once = func() time.Duration {
					return firstLine(b, "docker", "run", "--rm", "--pull", "never", "--network", "none", "-e", "FILEPATH_TASK=echo hi; done", testImage)
				}
			case "exec":
				agent := testkit.Program(b, "github.com/filepath-dev/filepath/adapters/testagent")
				once = func() time.Duration { return firstLine(b, agent) }
			default:
				once = newServer(b, mode).spawn
			}
			var total time.Duration
			for range b.N {
				total += once()
			}
			b.ReportMetric(ms(total)/float64(b.N), "ms/spawn")
		})
	}
}

// firstLine runs argv (with FILEPATH_TASK="echo hi; done" for a bare
// agent) until its first stdout line.
func firstLine(b *testing.B, argv ...string) time.Duration {
	b.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	if len(argv) == 1 {
		cmd.Env = []string{"FILEPATH_TASK=echo hi; done"}
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadBytes('\n'); err != nil {
		b.Fatal(err)
	}
	d := time.Since(t0)
	io.Copy(io.Discard, out)
	cmd.Wait()
	return d
}

// spawn starts a session whose root spawns one child and returns the time
// from the publish (after commit) of the spawn record to the publish of the
// child's first event record.
func (s *server) spawn() time.Duration {
	s.b.Helper()
	sid, root := s.session("spawn 1")
	var spawned, first time.Time
	got := make(chan struct{})
	s.tap.setHook(func(rsid string, r protocol.Record, now time.Time) {
		switch {
		case rsid != sid || r.Kind != protocol.KindEvent || !first.IsZero():
		case r.NodeID == root && bytes.Contains(r.Data, []byte(`"type":"spawn"`)):
			spawned = now
		case r.NodeID != root && !spawned.IsZero():
			first = now
			close(got)
		}
	})
	defer s.tap.setHook(nil)
	if err := s.run.StartSession(s.ctx, s.uid, sid); err != nil {
		s.b.Fatal(err)
	}
	defer s.finish(sid)
	select {
	case <-got:
	case <-time.After(time.Minute):
		s.b.Fatalf("no child event within a minute")
	}
	s.tap.setHook(nil)
	return first.Sub(spawned)
}

// BenchmarkE2EIdleMemory: 1,000 idle test agents on the process runtime
// (each waits on stdin). The orchestrator's Go heap, RSS and goroutines are
// measured before and after starting them; the delta per node is reported.
// "runner" starts each as a session's root through the runner (a relay per
// node: log follower, stdin, actor); "runtime" starts the same processes
// through containers.Process alone, so runner - runtime is the relay's
// share. The agents' own RSS is summed from /proc.
func BenchmarkE2EIdleMemory(b *testing.B) {
	for _, mode := range []string{"runtime", "runner"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				idleMemory(b, mode)
			}
		})
	}
}

type memSample struct {
	heap, rss   uint64
	goroutines  int
	childRSS    uint64
	childrenNum int
}

func sampleMem() memSample {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	s := memSample{heap: m.HeapAlloc, rss: rssOf("self"), goroutines: runtime.NumGoroutine()}
	me := strconv.Itoa(os.Getpid())
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 && f[1] == me && strings.Contains(string(stat), "(testagent)") {
			s.childRSS += rssOf(e.Name())
			s.childrenNum++
		}
	}
	return s
}

// rssOf reads VmRSS of /proc/<pid>/status in bytes.
func rssOf(pid string) uint64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func idleMemory(b *testing.B, mode string) {
	s := newServer(b, "process")
	ctx := s.ctx
	var sids []string
	for range idleNodes {
		sid, _ := s.session("")
		sids = append(sids, sid)
	}
	var ids []string // runtime mode: the processes to remove
	defer func() {
		for _, id := range ids {
			s.rt.Remove(ctx, id)
		}
	}()
	before := sampleMem()
	t0 := time.Now()
	for i, sid := range sids {
		if mode == "runner" {
			if err := s.run.StartSession(ctx, s.uid, sid); err != nil {
				b.Fatal(err)
			}
			continue
		}
		id, err := s.rt.Create(ctx, containers.Spec{SessionID: sid, NodeID: "n" + strconv.Itoa(i), Image: "local", Cmd: []string{s.agent},
			Env: map[string]string{"FILEPATH_TASK": ""}})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
		if err := s.rt.Start(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	started := time.Since(t0)
	// Let the agents and relays settle: sample until two samples agree on
	// the number of agent processes and goroutines.
	var after memSample
	for prev := (memSample{}); ; prev = after {
		time.Sleep(200 * time.Millisecond)
		after = sampleMem()
		if after.childrenNum >= idleNodes && after.goroutines == prev.goroutines {
			break
		}
		if time.Since(t0) > 2*time.Minute {
			b.Fatalf("agents did not settle: %d of %d running", after.childrenNum, idleNodes)
		}
	}
	if path := os.Getenv("FILEPATH_BENCH_HEAPPROFILE"); path != "" {
		// The live heap with every agent idle, for `go tool pprof`.
		f, err := os.Create(path + "." + mode)
		if err != nil {
			b.Fatal(err)
		}
		pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
	}
	per := func(a, b uint64) float64 { return (float64(a) - float64(b)) / idleNodes }
	b.ReportMetric(per(after.heap, before.heap)/1024, "heap-KiB/node")
	b.ReportMetric(per(after.rss, before.rss)/1024, "rss-KiB/node")
	b.ReportMetric(float64(after.goroutines-before.goroutines)/idleNodes, "goroutines/node")
	b.ReportMetric(float64(after.childRSS)/float64(after.childrenNum)/1024, "agent-rss-KiB")
	b.ReportMetric(float64(before.heap)/(1<<20), "base-heap-MiB")
	b.ReportMetric(float64(before.rss)/(1<<20), "base-rss-MiB")
	b.ReportMetric(ms(started)/idleNodes, "ms/start")
}
