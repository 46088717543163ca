package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/fakellm"
	"github.com/filepath-dev/filepath/internal/testenv"
	"github.com/filepath-dev/filepath/protocol"
)

// TestImageFixesATest runs the real shelley image (images/build.sh shelley)
// hardened as the orchestrator runs agents, on a bind-mounted Go module,
// against the fake upstream on this machine's loopback. Until the gateway's
// in-container listener exists the container shares the host's network
// (--network host); the traffic stays on loopback.
func TestImageFixesATest(t *testing.T) {
	const image = "filepath/agent-shelley:latest"
	testenv.RequireImage(t, image)
	gitEnv(t) // for the test's own git commands; the image has its own identity
	dir := t.TempDir()
	goModule(t, dir)
	f := fakellm.New()
	defer f.Close()
	f.SetModels(fakeModels)
	f.Script(fixScript()...)

	cidFile := filepath.Join(t.TempDir(), "cid")
	cmd := exec.Command("docker", "run", "-i", "--cidfile", cidFile,
		"--network", "host", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--init",
		"--pids-limit", "512", "--memory", "2g",
		"-v", dir+":/workspace",
		"-e", "FILEPATH_API_URL="+f.URL, "-e", "FILEPATH_API_KEY=fp_node_token",
		"-e", "FILEPATH_MODEL=fake/coder", "-e", "FILEPATH_AGENT_TYPE=shelley",
		"-e", "FILEPATH_TASK=add a failing test and fix it",
		image)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if id, err := os.ReadFile(cidFile); err == nil && len(id) > 0 {
			exec.Command("docker", "rm", "-f", string(id)).Run()
		}
	})
	exited := make(chan error, 1)
	var mu sync.Mutex
	var raw bytes.Buffer // every line the agent printed
	var events []protocol.Event
	go func() {
		br := bufio.NewReader(stdout)
		for {
			line, err := br.ReadBytes('\n')
			mu.Lock()
			raw.Write(line)
			if ev, derr := protocol.DecodeEvent(bytes.TrimSpace(line)); derr == nil {
				events = append(events, ev)
			}
			mu.Unlock()
			if err != nil {
				break
			}
		}
		exited <- cmd.Wait()
	}()
	snapshot := func() []protocol.Event {
		mu.Lock()
		defer mu.Unlock()
		return append([]protocol.Event(nil), events...)
	}
	// go test compiles the standard library on its first run in a fresh
	// container: allow minutes.
	deadline := time.Now().Add(5 * time.Minute)
	for !hasDone(snapshot()) {
		select {
		case err := <-exited:
			t.Fatalf("the container exited early (%v):\n%s\nstderr:\n%s", err, strings.Join(transcriptOf(snapshot()), "\n"), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no done event:\n%s\nstderr:\n%s", strings.Join(transcriptOf(snapshot()), "\n"), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop, _ := json.Marshal(protocol.SignalInput{Type: protocol.TypeSignal, Action: protocol.ActionStop})
	stdin.Write(append(stop, '\n'))
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the container did not exit after signal stop; stderr:\n%s", stderr.String())
	}

	// Everything it printed passes `filepath validate`.
	mu.Lock()
	out := append([]byte(nil), raw.Bytes()...)
	mu.Unlock()
	printed := filepath.Join(t.TempDir(), "events.ndjson")
	if err := os.WriteFile(printed, out, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "filepath")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/filepath")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/filepath: %v\n%s", err, b)
	}
	verdict, err := exec.Command(bin, "validate", printed).CombinedOutput()
	if err != nil {
		t.Fatalf("filepath validate: %v\n%s\nthe agent printed:\n%s", err, verdict, out)
	}
	evs := snapshot()
	if want := fmt.Sprintf("%d valid, 0 invalid\n", len(evs)); string(verdict) != want {
		t.Fatalf("filepath validate: %q, want %q", verdict, want)
	}
	// The same events as in-process, then the idle of the stop.
	sameLines(t, transcriptOf(evs), append(append([]string(nil), fixEvents...), "status idle"))

	// The files and the commit, as git on the host sees them.
	if got := readTestFile(t, filepath.Join(dir, "calc.go")); !strings.Contains(got, "if n < 0 {\n\t\treturn -n\n\t}") {
		t.Fatalf("calc.go:\n%s", got)
	}
	if got := readTestFile(t, filepath.Join(dir, "calc_test.go")); !strings.Contains(got, "func TestAbsNegative") {
		t.Fatalf("calc_test.go:\n%s", got)
	}
	log := run(t, dir, "git", "log", "--format=%H %an <%ae> %s")
	head := strings.TrimSpace(run(t, dir, "git", "rev-parse", "HEAD"))
	want := head + " shelley <shelley@agents.filepath.invalid> Abs: return the absolute value of negative numbers\n"
	if !strings.HasPrefix(log, want) || !strings.Contains(log, " initial\n") {
		t.Fatalf("git log:\n%s\nwant first:\n%s", log, want)
	}
	for _, e := range evs {
		if c, ok := e.(protocol.CommitEvent); ok && c.Hash != head {
			t.Fatalf("commit event %s, HEAD %s", c.Hash, head)
		}
	}
	// The model saw the real failure of go test in the container.
	reqs := chatRequests(t, f)
	var result string
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.ToolCallID == "c4" {
			result = content(m)
		}
	}
	if !strings.Contains(result, "exit code: 1") || !strings.Contains(result, "Abs(-2) = -2, want 2") {
		t.Fatalf("go test result:\n%s", result)
	}
	if auth := f.Requests()[0].Header.Get("Authorization"); auth != "Bearer fp_node_token" {
		t.Fatalf("Authorization %q", auth)
	}
}

func hasDone(evs []protocol.Event) bool {
	for _, e := range evs {
		if e.EventType() == protocol.TypeDone {
			return true
		}
	}
	return false
}
