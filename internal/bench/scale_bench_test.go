package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/runner"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// The scale soak (docs/benchmarks/scale.md): N Docker agents in one session,
// each writing R stamped events per second for scaleSeconds, followed by
// scaleClients WebSocket clients; beside it, in the same command, the same
// containers' output read by the Docker engine's log stream alone (what
// `docker logs -f` reads) and by its attach stream alone (`docker attach`).
//
//	GOMAXPROCS=2 go test -run '^$' -bench 'Scale' -benchtime 1x -count 3 -timeout 2h ./internal/bench
//
// FILEPATH_BENCH_SCALE picks the loads ("agents x events/s", comma
// separated; default scaleLoads), FILEPATH_BENCH_SCALE_SECONDS the length
// of a run, FILEPATH_BENCH_CPUPROFILE a file prefix for a CPU profile of
// the server during each run's window.
const (
	scaleLoads   = "1x50,10x50,50x20,50x50,200x10,200x50"
	scaleSeconds = 10
	scaleClients = 20
	// scaleStarters start containers concurrently (Docker serialises much
	// of a start; more only queue).
	scaleStarters = 8
)

// scaleLoad is one line of the soak: agents × rate for seconds.
type scaleLoad struct{ agents, rate, seconds int }

func (l scaleLoad) events() int { return l.rate * l.seconds } // per agent

func scaleLoadsFromEnv(b *testing.B) []scaleLoad {
	spec := os.Getenv("FILEPATH_BENCH_SCALE")
	if spec == "" {
		spec = scaleLoads
	}
	secs := scaleSeconds
	if v := os.Getenv("FILEPATH_BENCH_SCALE_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("FILEPATH_BENCH_SCALE_SECONDS=%q: want a positive number", v)
		}
		secs = n
	}
	var out []scaleLoad
	for _, f := range strings.Split(spec, ",") {
		a, r, ok := strings.Cut(strings.TrimSpace(f), "x")
		na, err1 := strconv.Atoi(a)
		nr, err2 := strconv.Atoi(r)
		if !ok || err1 != nil || err2 != nil || na <= 0 || nr <= 0 {
			b.Fatalf("FILEPATH_BENCH_SCALE: %q is not AGENTSxRATE", f)
		}
		out = append(out, scaleLoad{na, nr, secs})
	}
	return out
}

// BenchmarkScale: the soak of issue 23. For each load, three modes:
// "logs" and "attach" (baselines: N containers of the test agent read
// through the engine's log stream, or its attach stream, by this process,
// one reader per container) and "server" (the whole orchestrator: N agents
// in one session, scaleClients WebSocket clients in a separate process,
// internal/cmd/streamclients). Metrics: offered/s (the agents' stamps),
// published/s (server: after commit; baselines: read), lag p50/p99 from the
// agent's stamp to the reader (server: to the WebSocket clients; durable:
// to the publish after commit; docker: to Docker's timestamp of the line,
// ms), CPU per event of this process (the server), of dockerd and of the
// containers' shims, and the load average at the start.
func BenchmarkScale(b *testing.B) {
	testkit.RequireImage(b, testImage)
	for _, l := range scaleLoadsFromEnv(b) {
		b.Run(fmt.Sprintf("agents=%d/rate=%d", l.agents, l.rate), func(b *testing.B) {
			for _, mode := range []string{"logs", "attach", "server"} {
				b.Run(mode, func(b *testing.B) {
					for range b.N {
						var res scaleResult
						if mode == "server" {
							res = scaleServer(b, l)
						} else {
							res = scaleBaseline(b, l, mode)
						}
						res.report(b)
					}
				})
			}
		})
	}
}

// scaleResult is one run's outcome.
type scaleResult struct {
	load                scaleLoad
	offered, published  float64 // events/s
	p50, p99            float64 // ms, to the reader (the clients)
	durP50, durP99      float64 // ms, to the publish after commit (server)
	dockP50, dockP99    float64 // ms, to Docker's timestamp (server)
	cpuSelf, cpuDockerd float64 // seconds in the window
	cpuShims            float64
	events              int
	drops               int
	lost                int // events never read (baselines) or never published (server)
	load1               float64
	clientCPU           float64
	frames              int64
	clientRecs          int64
}

func (r scaleResult) report(b *testing.B) {
	b.ReportMetric(r.offered, "offered/s")
	b.ReportMetric(r.published, "published/s")
	b.ReportMetric(r.published/r.offered, "published/offered")
	b.ReportMetric(r.p50, "p50-ms")
	b.ReportMetric(r.p99, "p99-ms")
	if r.durP99 > 0 {
		b.ReportMetric(r.durP50, "durable-p50-ms")
		b.ReportMetric(r.durP99, "durable-p99-ms")
		b.ReportMetric(r.dockP50, "docker-p50-ms")
		b.ReportMetric(r.dockP99, "docker-p99-ms")
		b.ReportMetric(float64(r.drops), "drops")
		b.ReportMetric(r.clientCPU, "clients-cpu-s")
		if r.frames > 0 {
			b.ReportMetric(float64(r.clientRecs)/float64(r.frames), "records/frame")
		}
	}
	ev := float64(r.events)
	b.ReportMetric(r.cpuSelf/ev*1e6, "self-cpu-µs/event")
	b.ReportMetric(r.cpuDockerd/ev*1e6, "dockerd-cpu-µs/event")
	b.ReportMetric(r.cpuShims/ev*1e6, "shims-cpu-µs/event")
	b.ReportMetric(float64(r.lost), "lost")
	b.ReportMetric(r.load1, "load1")
}

// lagSet collects the lags of many readers; safe for concurrent use.
type lagSet struct {
	mu      sync.Mutex
	lags    []time.Duration
	first   int64 // earliest stamp
	lastTS  int64 // latest stamp
	lastAt  int64 // latest receipt
	pending atomic.Int64
	done    chan struct{}
}

func newLagSet(total int) *lagSet {
	s := &lagSet{lags: make([]time.Duration, 0, total), done: make(chan struct{})}
	s.pending.Store(int64(total))
	return s
}

// add records events stamped ns received at now.
func (s *lagSet) add(lags []int64, stamps []int64, now int64) {
	s.mu.Lock()
	for i, l := range lags {
		s.lags = append(s.lags, time.Duration(l))
		ts := stamps[i]
		if s.first == 0 || ts < s.first {
			s.first = ts
		}
		s.lastTS = max(s.lastTS, ts)
	}
	s.lastAt = max(s.lastAt, now)
	s.mu.Unlock()
	if s.pending.Add(-int64(len(lags))) == 0 {
		close(s.done)
	}
}

func (s *lagSet) rates() (offered, read float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := float64(len(s.lags))
	return n / time.Duration(s.lastTS-s.first).Seconds(), n / time.Duration(s.lastAt-s.first).Seconds()
}

// cpuMeter reads the CPU time of this process, of dockerd and of the
// shims of a set of containers.
type cpuMeter struct {
	dockerd string // pid
	shims   []string
}

func newCPUMeter(ids []string) cpuMeter {
	m := cpuMeter{}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		switch strings.TrimSpace(string(comm)) {
		case "dockerd":
			m.dockerd = e.Name()
		case "containerd-shim", "containerd-shim-runc-v2":
			cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			for _, a := range bytes.Split(cmd, []byte{0}) {
				if want[string(a)] {
					m.shims = append(m.shims, e.Name())
					break
				}
			}
		}
	}
	return m
}

// read returns seconds of CPU: this process, dockerd, the shims.
func (m cpuMeter) read() (self, dockerd, shims float64) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	dockerd = procCPU(m.dockerd)
	for _, p := range m.shims {
		shims += procCPU(p)
	}
	return
}

// procCPU is utime+stime of a process in seconds (0 when it is gone).
func procCPU(pid string) float64 {
	if pid == "" {
		return 0
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func loadavg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// rateScript is the message that makes every agent start its events at t0.
func rateScript(l scaleLoad, t0 time.Time) string {
	wait := max(time.Until(t0).Milliseconds(), 0)
	return fmt.Sprintf("sleep %d; rate %d %d", wait, l.events(), l.rate)
}

// startCPUProfile starts a CPU profile of the window when asked for.
func startCPUProfile(b *testing.B, l scaleLoad, mode string) func() {
	prefix := os.Getenv("FILEPATH_BENCH_CPUPROFILE")
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%dx%d.%s", prefix, l.agents, l.rate, mode))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// concurrently runs f(i) for i in [0, n) on k goroutines; the first error wins.
func concurrently(n, k int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(k, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// scaleBaseline runs N containers of the test agent without the
// orchestrator and reads their stdout through the engine's log stream
// ("logs") or its attach stream ("attach").
func scaleBaseline(b *testing.B, l scaleLoad, mode string) scaleResult {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rt, err := containers.NewDocker(ctx, containers.DockerConfig{Network: "none"})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	ids := make([]string, l.agents)
	stdins := make([]io.WriteCloser, l.agents)
	defer func() {
		concurrently(len(ids), scaleStarters, func(i int) error {
			if stdins[i] != nil {
				stdins[i].Close()
			}
			if ids[i] != "" {
				rt.Remove(context.Background(), ids[i])
			}
			return nil
		})
	}()
	err = concurrently(l.agents, scaleStarters, func(i int) error {
		id, err := rt.Create(ctx, containers.Spec{SessionID: "bench-scale", NodeID: "n" + strconv.Itoa(i), Image: testImage, Network: "none"})
		if err != nil {
			return err
		}
		ids[i] = id
		if err := rt.Start(ctx, id); err != nil {
			return err
		}
		stdins[i], err = rt.AttachStdin(ctx, id)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	total := l.agents * l.events()
	lags := newLagSet(total)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	var readers sync.WaitGroup
	for _, id := range ids {
		var rd io.ReadCloser
		switch mode {
		case "logs":
			lr, err := rt.Logs(rctx, id, containers.LogOptions{Stdout: true, Follow: true})
			if err != nil {
				b.Fatal(err)
			}
			rd = lineReader{lr}
		case "attach":
			hr, err := cli.ContainerAttach(rctx, id, container.AttachOptions{Stream: true, Stdout: true})
			if err != nil {
				b.Fatal(err)
			}
			rd = &demux{r: hr.Reader, c: hr.Conn}
		}
		readers.Go(func() {
			defer rd.Close()
			stop := context.AfterFunc(rctx, func() { rd.Close() })
			defer stop()
			sc := bufio.NewScanner(rd)
			var ls, ts []int64
			for sc.Scan() {
				now := time.Now().UnixNano()
				if ns, _, ok := stamp(sc.Bytes()); ok {
					ls, ts = append(ls[:0], now-ns), append(ts[:0], ns)
					lags.add(ls, ts, now)
				}
			}
		})
	}
	cpu := newCPUMeter(ids)
	t0 := time.Now().Add(time.Second + time.Duration(l.agents)*5*time.Millisecond)
	err = concurrently(l.agents, scaleStarters, func(i int) error {
		line, _ := json.Marshal(protocol.MessageInput{Type: protocol.TypeMessage, Content: rateScript(l, t0)})
		_, err := stdins[i].Write(append(line, '\n'))
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	res := scaleResult{load: l, events: total, load1: loadavg()}
	time.Sleep(time.Until(t0))
	stopProf := startCPUProfile(b, l, mode)
	s0, d0, h0 := cpu.read()
	window := time.Duration(l.seconds)*time.Second + time.Minute
	select {
	case <-lags.done:
	case <-time.After(window):
	}
	s1, d1, h1 := cpu.read()
	stopProf()
	rcancel()
	readers.Wait()
	res.cpuSelf, res.cpuDockerd, res.cpuShims = s1-s0, d1-d0, h1-h0
	res.offered, res.published = lags.rates()
	lags.mu.Lock()
	res.lost = total - len(lags.lags)
	res.p50, res.p99 = ms(percentile(lags.lags, 0.5)), ms(percentile(lags.lags, 0.99))
	lags.mu.Unlock()
	return res
}

// lineReader turns a LogReader back into newline-terminated bytes.
type lineReader struct{ lr *containers.LogReader }

func (r lineReader) Read(p []byte) (int, error) {
	l, err := r.lr.Next()
	if err != nil {
		return 0, err
	}
	if len(l.Line)+1 > len(p) {
		return 0, io.ErrShortBuffer
	}
	n := copy(p, l.Line)
	p[n] = '\n'
	return n + 1, nil
}

func (r lineReader) Close() error { return r.lr.Close() }

// demux reads the stdout frames of Docker's multiplexed attach stream
// (8-byte header {stream, 0, 0, 0, size}, then the bytes).
type demux struct {
	r    *bufio.Reader
	c    io.Closer
	left int
}

func (d *demux) Read(p []byte) (int, error) {
	for d.left == 0 {
		var hdr [8]byte
		if _, err := io.ReadFull(d.r, hdr[:]); err != nil {
			return 0, err
		}
		d.left = int(binary.BigEndian.Uint32(hdr[4:]))
		if hdr[0] != 1 {
			if _, err := d.r.Discard(d.left); err != nil {
				return 0, err
			}
			d.left = 0
		}
	}
	n, err := d.r.Read(p[:min(len(p), d.left)])
	d.left -= n
	return n, err
}

func (d *demux) Close() error { return d.c.Close() }

// scaleServer runs the whole orchestrator with N agents in one session and
// scaleClients WebSocket clients in a process of their own.
func scaleServer(b *testing.B, l scaleLoad) scaleResult {
	s := newServer(b, "docker")
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Minute)
	defer cancel()
	sess, err := s.sessStore.CreateSession(ctx, s.uid, sessions.NewSession{Name: "scale"})
	if err != nil {
		b.Fatal(err)
	}
	s.sessions = append(s.sessions, sess.ID)
	nodes := make([]string, l.agents)
	for i := range nodes {
		nn := sessions.NewNode{Name: fmt.Sprintf("a%d", i), AgentType: runner.AgentCustom, Image: s.image}
		if i > 0 {
			nn.ParentID = &nodes[0]
		}
		n, err := s.sessStore.CreateNode(ctx, s.uid, sess.ID, nn)
		if err != nil {
			b.Fatal(err)
		}
		nodes[i] = n.ID
	}
	if err := s.run.StartSession(ctx, s.uid, sess.ID); err != nil {
		b.Fatal(err)
	}
	if err := concurrently(len(nodes)-1, scaleStarters, func(i int) error {
		return s.run.StartNode(ctx, s.uid, sess.ID, nodes[i+1])
	}); err != nil {
		b.Fatal(err)
	}
	testkit.Eventually(b, 5*time.Minute, "every agent's relay runs", func() bool {
		for _, id := range nodes {
			if !s.run.Running(id) {
				return false
			}
		}
		return true
	})
	var cids []string
	for _, id := range nodes {
		n, err := s.sessStore.NodeByID(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		cids = append(cids, n.ContainerID)
	}

	total := l.agents * l.events()
	// The publish of each event (after its commit), and Docker's stamp.
	var dmu sync.Mutex
	durable := make([]time.Duration, 0, total)
	docker := make([]time.Duration, 0, total)
	var firstTS, lastTS, lastPub int64
	allPublished := make(chan struct{})
	s.tap.setHook(func(rsid string, r protocol.Record, now time.Time) {
		if rsid != sess.ID || r.Kind != protocol.KindEvent {
			return
		}
		ns, _, ok := stamp(r.Data)
		if !ok {
			return
		}
		dmu.Lock()
		durable = append(durable, time.Duration(now.UnixNano()-ns))
		docker = append(docker, time.Duration(r.At.UnixNano()-ns))
		if firstTS == 0 || ns < firstTS {
			firstTS = ns
		}
		lastTS, lastPub = max(lastTS, ns), now.UnixNano()
		if len(durable) == total {
			close(allPublished)
		}
		dmu.Unlock()
	})
	defer s.tap.setHook(nil)

	after, err := s.st.LastSeq(ctx, sess.ID)
	if err != nil {
		b.Fatal(err)
	}
	bin := testkit.Program(b, "github.com/filepath-dev/filepath/internal/cmd/streamclients")
	window := time.Duration(l.seconds)*time.Second + 2*time.Minute
	cmd := exec.CommandContext(ctx, bin, "--url", s.ws, "--session", sess.ID, "--key", s.key,
		"--clients", strconv.Itoa(scaleClients), "--after", strconv.FormatInt(after, 10),
		"--events", strconv.Itoa(total), "--timeout", window.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	br := bufio.NewReader(out)
	if line, err := br.ReadString('\n'); err != nil || line != "ready\n" {
		cmd.Process.Kill()
		b.Fatalf("streamclients: %q, %v", line, err)
	}

	cpu := newCPUMeter(cids)
	t0 := time.Now().Add(time.Second + time.Duration(l.agents)*5*time.Millisecond)
	if err := concurrently(len(nodes), scaleStarters, func(i int) error {
		data, _ := json.Marshal(protocol.MessageInput{Type: protocol.TypeMessage, From: protocol.FromUser, Content: rateScript(l, t0)})
		in, err := protocol.DecodeInput(data)
		if err != nil {
			return err
		}
		_, err = s.run.Deliver(ctx, sess.ID, nodes[i], in)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	res := scaleResult{load: l, events: total, load1: loadavg()}
	time.Sleep(time.Until(t0))
	stopProf := startCPUProfile(b, l, "server")
	s0, d0, h0 := cpu.read()
	select {
	case <-allPublished:
	case <-time.After(window):
	}
	s1, d1, h1 := cpu.read()
	stopProf()
	var sum struct {
		P50      float64 `json:"p50_ms"`
		P99      float64 `json:"p99_ms"`
		Received int64   `json:"received"`
		Records  int64   `json:"records"`
		Frames   int64   `json:"frames"`
		Drops    int     `json:"drops"`
		CPU      float64 `json:"cpu_s"`
		Errors   []string
	}
	rest, _ := io.ReadAll(br)
	werr := cmd.Wait()
	if err := json.Unmarshal(bytes.TrimSpace(rest), &sum); err != nil {
		b.Fatalf("streamclients: %v (%v): %s", err, werr, rest)
	}
	if werr != nil {
		b.Errorf("streamclients: %v: %s", werr, rest)
	}
	res.cpuSelf, res.cpuDockerd, res.cpuShims = s1-s0, d1-d0, h1-h0
	res.p50, res.p99, res.drops, res.clientCPU = sum.P50, sum.P99, sum.Drops, sum.CPU
	res.frames, res.clientRecs = sum.Frames, sum.Records
	dmu.Lock()
	res.lost = total - len(durable)
	res.offered = float64(len(durable)) / time.Duration(lastTS-firstTS).Seconds()
	res.published = float64(len(durable)) / time.Duration(lastPub-firstTS).Seconds()
	res.durP50, res.durP99 = ms(percentile(durable, 0.5)), ms(percentile(durable, 0.99))
	res.dockP50, res.dockP99 = ms(percentile(docker, 0.5)), ms(percentile(docker, 0.99))
	dmu.Unlock()
	if want := int64(total * scaleClients); sum.Received != want {
		b.Errorf("the clients received %d timed events, want %d (%d clients × %d)", sum.Received, want, scaleClients, total)
	}
	s.tap.setHook(nil)
	s.finish(sess.ID)
	s.sessions = s.sessions[:len(s.sessions)-1]
	return res
}
