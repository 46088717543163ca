package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/runner"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/workspace"
	"github.com/filepath-dev/filepath/protocol"
)

// medianMS is the median of ds in milliseconds.
func medianMS(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}

// BenchmarkHandoff measures, on Docker with the test agent, the time from
// delivering a message that makes the agent hand off to the first event of
// the continuation (the old container stopped, the continuation record, the
// health check step, a fresh container, its first line), and in the same
// run a plain restart of the same node: StartNode of its exited agent to
// the first event of the new one. Each iteration does one of each. The
// session has no checks and /workspace no repository (the check step finds
// none), so both numbers are the lifecycle's own cost.
//
//	go test -run='^$' -bench=Handoff -benchtime=10x ./internal/bench/
func BenchmarkHandoff(b *testing.B) {
	testkit.RequireImage(b, testImage)
	ctx := context.Background()
	dir := b.TempDir()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(dir, "filepath.db")})
	if err != nil {
		b.Fatal(err)
	}
	ident, ss := identity.New(st), sessions.New(st, sessions.Config{})
	defer st.Close()
	rt, err := containers.NewDocker(ctx, containers.DockerConfig{Network: "none"})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	r, err := runner.New(runner.Config{Store: st, Users: ident, Sessions: ss, Collab: collab.New(st, ss, collab.Config{}), Runtime: rt, DataDir: dir,
		StopGrace: 5 * time.Second, KillGrace: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	u, _ := ident.CreateUser(ctx, "bench", false)
	s, _ := ss.CreateSession(ctx, u.ID, sessions.NewSession{Name: "handoff"})
	defer func() {
		r.DeleteSession(ctx, u.ID, s.ID)
	}()
	n, err := ss.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{Name: "root", AgentType: runner.AgentCustom, Image: testImage, Task: "echo first"})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.StartSession(ctx, u.ID, s.ID); err != nil {
		b.Fatal(err)
	}
	// firstEventAfter waits for the node's first event after seq and returns
	// its time (the time Docker stamped on the line). The benchmark's waits
	// poll every 2 ms, finer than testkit.Eventually: they are timed.
	firstEventAfter := func(after int64, what string) time.Time {
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			recs, err := st.Records(ctx, s.ID, after, store.MaxRecordsLimit, n.ID)
			if err != nil {
				b.Fatal(err)
			}
			for _, rec := range recs {
				if rec.Kind == protocol.KindEvent {
					return rec.At
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
		b.Fatalf("no event for %s", what)
		return time.Time{}
	}
	lastOf := func(kind, typ string) int64 {
		rec, err := st.LastRecordOf(ctx, s.ID, n.ID, kind, typ)
		if err != nil {
			b.Fatal(err)
		}
		return rec.Seq
	}
	waitStopped := func() {
		deadline := time.Now().Add(time.Minute)
		for r.Running(n.ID) {
			if time.Now().After(deadline) {
				b.Fatal("the agent did not stop")
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	firstEventAfter(0, "the first start")
	var handoffs, restarts []time.Duration
	b.ResetTimer()
	for i := range b.N {
		gen := func() int { m, _ := ss.NodeByID(ctx, n.ID); return m.Generation }()
		t0 := time.Now()
		if _, err := r.Deliver(ctx, s.ID, n.ID, protocol.MessageInput{Type: protocol.TypeMessage, From: protocol.FromUser, Content: fmt.Sprintf("handoff step %d", i)}); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for func() int { m, _ := ss.NodeByID(ctx, n.ID); return m.Generation }() == gen {
			if time.Now().After(deadline) {
				b.Fatal("no continuation")
			}
			time.Sleep(2 * time.Millisecond)
		}
		at := firstEventAfter(lastOf(protocol.KindSystem, protocol.SystemContinuation), "the continuation")
		handoffs = append(handoffs, at.Sub(t0))

		if _, err := r.Deliver(ctx, s.ID, n.ID, protocol.MessageInput{Type: protocol.TypeMessage, From: protocol.FromUser, Content: "done"}); err != nil {
			b.Fatal(err)
		}
		waitStopped()
		last, _ := st.LastSeq(ctx, s.ID)
		t0 = time.Now()
		if err := r.StartNode(ctx, u.ID, s.ID, n.ID); err != nil {
			b.Fatal(err)
		}
		restarts = append(restarts, firstEventAfter(last, "the restart").Sub(t0))
	}
	b.StopTimer()
	b.ReportMetric(medianMS(handoffs), "handoff-ms")
	b.ReportMetric(medianMS(restarts), "restart-ms")
	b.ReportMetric(0, "ns/op")
}

// checkImage is an agent image with a Go toolchain (images/shelley).
const checkImage = "filepath/agent-shelley:latest"

// goRepo writes a Go module of 2,000 files (100 packages of 20) into dir.
func goRepo(b *testing.B, dir string) {
	b.Helper()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module bench.example/repo\n\ngo 1.22\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	for p := range 100 {
		pkg := filepath.Join(dir, fmt.Sprintf("p%03d", p))
		if err := os.MkdirAll(pkg, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 20 {
			src := fmt.Sprintf("package p%03d\n\nimport \"strconv\"\n\n// F%02d formats x.\nfunc F%02d(x int) string { return strconv.Itoa(x*%d + %d) }\n", p, f, f, f+1, p)
			if f == 19 {
				src = strings.TrimSuffix(src, "\n") + fmt.Sprintf("\n\n// Sum%03d calls the others.\nfunc Sum%03d() int {\n\tn := 0\n\tfor i := range 3 {\n\t\tn += len(F00(i)) + len(F18(i))\n\t}\n\treturn n\n}\n", p, p)
			}
			if err := os.WriteFile(filepath.Join(pkg, fmt.Sprintf("f%02d.go", f)), []byte(src), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkHealthChecks runs the checks detected for a 2,000-file Go
// repository (go build -o /dev/null ./..., go vet ./...) as the runner runs
// them: each in a fresh, hardened container of an agent image with Go
// (no network, a cold build cache, as every check container has), on
// /workspace served over FUSE from the session filesystem ("fuse"), and in
// the same run on a plain ext4 directory ("ext4").
//
//	go test -run='^$' -bench=HealthChecks -benchtime=3x ./internal/bench/
func BenchmarkHealthChecks(b *testing.B) {
	testkit.RequireImage(b, checkImage)
	testkit.RequireFUSE(b)
	ctx := context.Background()
	rt, err := containers.NewDocker(ctx, containers.DockerConfig{Network: "none"})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	targets := []struct {
		name string
		dir  func(b *testing.B) (dir, propagation string)
	}{
		{"ext4", func(b *testing.B) (string, string) {
			d := b.TempDir()
			os.Chmod(d, 0o777)
			return d, ""
		}},
		{"fuse", func(b *testing.B) (string, string) {
			dir := b.TempDir()
			st, err := store.Open(ctx, store.Config{Path: filepath.Join(dir, "filepath.db")})
			if err != nil {
				b.Fatal(err)
			}
			ident, ss := identity.New(st), sessions.New(st, sessions.Config{})
			b.Cleanup(func() { st.Close() })
			u, _ := ident.CreateUser(ctx, "bench", false)
			s, _ := ss.CreateSession(ctx, u.ID, sessions.NewSession{Name: "checks"})
			v := vfs.New(st.SQL(), vfs.Config{MaxFileSize: 1 << 30, SessionQuota: 4 << 30})
			mnt := filepath.Join(dir, "mnt")
			mgr, err := workspace.NewManager(workspace.ManagerConfig{Dir: mnt,
				Open: func(context.Context, string) (workspace.FS, error) { return v.Session(s.ID), nil }})
			if err != nil {
				b.Fatal(err)
			}
			v.SetInvalidator(mgr.Fanout())
			b.Cleanup(func() { mgr.Close(); workspace.ClearMounts(mnt) })
			d, err := mgr.Mount(ctx, "node-1")
			if err != nil {
				b.Fatal(err)
			}
			return d, workspace.Propagation
		}},
	}
	for _, tt := range targets {
		b.Run(tt.name, func(b *testing.B) {
			dir, prop := tt.dir(b)
			goRepo(b, dir)
			checks := runner.DetectChecks(os.DirFS(dir))
			if len(checks) != 2 {
				b.Fatalf("detected %+v", checks)
			}
			var runs []time.Duration
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				for _, c := range checks {
					res, err := containers.Run(ctx, rt, containers.Spec{
						SessionID: "bench-checks", NodeID: "node-1", Image: checkImage,
						Entrypoint: []string{"sh", "-c"}, Cmd: []string{c.Command},
						WorkspaceDir: dir, WorkspacePropagation: prop, Network: "none",
					}, containers.RunOptions{Timeout: 10 * time.Minute})
					if err != nil || res.ExitCode != 0 {
						b.Fatalf("%s: %+v, %v", c.Command, res, err)
					}
				}
				runs = append(runs, time.Since(start))
			}
			b.StopTimer()
			b.ReportMetric(medianMS(runs)/1000, "s/checks")
			b.ReportMetric(0, "ns/op")
			out, _ := json.Marshal(runs)
			b.Logf("%s runs: %s", tt.name, out)
		})
	}
}
