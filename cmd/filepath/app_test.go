package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/runner"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/workspace"
	"github.com/filepath-dev/filepath/protocol"
)

// goroutines returns the stacks of every goroutine by id.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if id, _, ok := strings.Cut(strings.TrimPrefix(g, "goroutine "), " "); ok {
			out[id] = g
		}
	}
	return out
}

// leftover returns the stacks of goroutines not in before and not run by
// this test file; with ours, only those running the module's own code.
func leftover(before map[string]string, ours bool) []string {
	var out []string
	for id, g := range goroutines() {
		if _, old := before[id]; old || strings.Contains(g, "_test.go:") {
			continue
		}
		if ours && !regexp.MustCompile(`\ngithub\.com/filepath-dev/filepath/`).MatchString(g) {
			continue
		}
		out = append(out, g)
	}
	return out
}

// TestServeLeavesNoGoroutines runs the whole app on each runtime (FUSE
// workspaces, an agent running, a file written through the API side of the
// session filesystem so that its invalidation reaches the agent's mount, a
// request to the API), closes it, and checks that nothing it started still
// runs: none of the module's goroutines at once when Close returns (each is
// joined), and no other goroutine (the Docker client's connections, the
// HTTP server's) shortly after. Close is safe twice.
func TestServeLeavesNoGoroutines(t *testing.T) {
	testkit.RequireFUSE(t)
	testkit.RequireImage(t, "filepath/testagent:latest")
	agent := testkit.Program(t, "../../adapters/testagent")
	for _, tt := range []struct {
		name string
		args []string
	}{
		{name: "docker", args: []string{"--network", "none"}},
		{name: "process", args: []string{"--runtime", "process", "--agent-cmd", agent}},
	} {
		t.Run(tt.name, func(t *testing.T) { testServeLeavesNoGoroutines(t, tt.args) })
	}
}

func testServeLeavesNoGoroutines(t *testing.T, args []string) {
	data := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := goroutines()

	cfg, err := parseServe(append([]string{"--addr", "127.0.0.1:0", "--data", data}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	a, err := newApp(ctx, cfg, io.Discard, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	var sid string
	t.Cleanup(func() {
		// The agent's container outlives the app, and its mount stays
		// (dead) for the next start to stack on: remove both.
		if d, err := containers.NewDocker(context.Background(), containers.DockerConfig{}); err == nil {
			infos, _ := d.List(context.Background(), map[string]string{containers.LabelSession: sid})
			for _, in := range infos {
				d.Remove(context.Background(), in.ID)
				workspace.ClearMounts(filepath.Join(data, "mnt", in.NodeID))
			}
			d.Close()
		}
		syscall.Unmount(filepath.Join(data, "mnt"), syscall.MNT_DETACH)
	})
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- a.Run(runCtx) }()

	u, err := a.users.CreateUser(ctx, "leaks", false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.sessions.CreateSession(ctx, u.ID, sessions.NewSession{Name: "leaks"})
	if err != nil {
		t.Fatal(err)
	}
	sid = s.ID
	root, err := a.sessions.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{Name: "root", AgentType: runner.AgentCustom, Image: "filepath/testagent:latest", Task: "echo ready"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.run.StartSession(ctx, u.ID, s.ID); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNil(t, time.Minute, "the agent to start", func() error {
		recs, err := a.st.Records(ctx, s.ID, 0, 100, root.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(recsData(recs), []byte(`"ready"`)) {
			return fmt.Errorf("logs:\n%s", logs.String())
		}
		return nil
	})
	if _, _, err := a.fsys.Session(s.ID).WriteFile(ctx, "/notes.txt", []byte("hello\n"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	key, _, err := a.users.CreateAPIKey(ctx, u.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{}}
	r := testkit.Request(t, client, "GET", a.srv.URL()+"/api/v1/sessions/"+s.ID+"/fs/notes.txt", key, nil)
	client.CloseIdleConnections()
	if r.Status != 200 {
		t.Fatalf("read a file: %d", r.Status)
	}

	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("close again: %v", err)
	}
	if left := leftover(before, true); len(left) > 0 {
		t.Fatalf("%d goroutines of the module still run after Close:\n\n%s", len(left), strings.Join(left, "\n\n"))
	}
	testkit.EventuallyNil(t, 10*time.Second, "every goroutine to end after Close", func() error {
		if left := leftover(before, false); len(left) > 0 {
			return fmt.Errorf("%d still run:\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
		return nil
	})
}

func recsData(recs []protocol.Record) []byte {
	var b bytes.Buffer
	for _, r := range recs {
		b.Write(r.Data)
	}
	return b.Bytes()
}
