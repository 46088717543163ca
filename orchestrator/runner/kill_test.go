package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// Environment of the helper process of TestKill9Recovery.
const (
	envHelperData = "FILEPATH_RUNNER_HELPER_DATA" // the data dir; set only in the helper
	envHelperSend = "FILEPATH_RUNNER_HELPER_SEND" // "session node message": start the session and deliver
)

// TestHelperRunner is not a test: it is the orchestrator process that
// TestKill9Recovery starts and kills with SIGKILL. It opens the store in the
// data dir, reconciles, optionally starts a session and delivers a message,
// and then runs until killed.
func TestHelperRunner(t *testing.T) {
	dir := os.Getenv(envHelperData)
	if dir == "" {
		t.Skip("helper process only")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(dir, "filepath.db")})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := containers.NewDocker(ctx, containers.DockerConfig{Network: "none"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(withNouns(Config{Store: st, Runtime: rt, DataDir: dir}))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if send := os.Getenv(envHelperSend); send != "" {
		f := strings.SplitN(send, " ", 4)
		if err := r.StartSession(ctx, f[0], f[1]); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, time.Minute, "the message to be delivered", func() bool {
			_, err := r.Deliver(ctx, f[1], f[2], msg(f[3]))
			return err == nil
		})
	}
	fmt.Println("helper ready")
	<-ctx.Done()
}

// TestKill9Recovery: a real orchestrator process (the test binary as
// helper) is killed with SIGKILL twice during a 10,000-event flood; after
// each kill a new process reconciles and resumes. Every event must be in
// the log exactly once, in order.
func TestKill9Recovery(t *testing.T) {
	const n = 10000
	e := newEnv(t, nil)
	e.r.Close() // the helper processes are the orchestrator here
	root, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: "root", AgentType: AgentCustom, Image: testImage, Task: "echo ready"})
	if err != nil {
		t.Fatal(err)
	}
	// The first half is printed while no orchestrator runs at all; the
	// second kill lands wherever the catch-up is.
	script := fmt.Sprintf("sleep 300; flood %d; sleep 1500; flood %d; sleep 300; done", n/2, n/2)
	floods := func() int { return e.countTexts(root.ID, isFlood) }
	spawn := func(send string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRunner$", "-test.v")
		cmd.Env = append(os.Environ(), envHelperData+"="+e.dir, envHelperSend+"="+send)
		out, err := os.Create(filepath.Join(t.TempDir(), "helper.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); out.Close() })
		return cmd
	}
	kill := func(cmd *exec.Cmd) {
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
	}
	inputs := func() int {
		c := 0
		for _, r := range e.records(root.ID) {
			if r.Kind == protocol.KindInput {
				c++
			}
		}
		return c
	}
	p := spawn(strings.Join([]string{e.uid, e.sid, root.ID, script}, " "))
	// Killed as soon as the script's input record is committed: possibly
	// before it was written to stdin, which the next relay then does.
	e.waitFor("the script to be appended", func() bool { return inputs() == 2 })
	kill(p)
	t.Logf("kill -9 #1 with %d of %d flood events in the log", floods(), n)
	p = spawn("")
	e.waitFor("the catch-up to start", func() bool { return floods() >= 300 })
	kill(p)
	t.Logf("kill -9 #2 with %d of %d flood events in the log", floods(), n)
	p = spawn("")
	e.waitFor("the node to finish", func() bool { return e.node(root.ID).Status == protocol.StateDone })
	kill(p)
	wantFloods(t, texts(e.records(root.ID)), n)
}
