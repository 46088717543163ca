package store_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// TestKillDurability appends in a child process that prints each seq after
// Append returned (i.e. after commit, when it would be published), kills the
// child with SIGKILL mid-stream, and checks that every printed seq is in the
// database: synchronous=NORMAL in WAL mode survives a process crash.
func TestKillDurability(t *testing.T) {
	if os.Getenv("STORE_CRASH_CHILD") != "" {
		crashChild()
		return
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "crash.db")
	st, err := store.Open(ctx, store.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	ident, ss := identity.New(st), sessions.New(st, sessions.Config{})
	u, _ := ident.CreateUser(ctx, "alice", false)
	sess, err := ss.CreateSession(ctx, u.ID, sessions.NewSession{Name: "crash"})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestKillDurability$")
	cmd.Env = append(os.Environ(), "STORE_CRASH_CHILD="+path, "STORE_CRASH_SESSION="+sess.ID)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	var acked int64
	for sc.Scan() {
		v, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			continue // test framework output
		}
		acked = v
		if acked >= 2000 {
			break
		}
	}
	_ = cmd.Process.Kill() // SIGKILL
	if acked < 2000 {
		t.Fatalf("child acknowledged only %d records", acked)
	}

	st, err = store.Open(ctx, store.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	last, err := st.LastSeq(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if last < acked {
		t.Fatalf("after kill -9: last seq %d < acknowledged %d", last, acked)
	}
	// The seq continues after the last stored record.
	recs, err := st.Append(ctx, sess.ID, ev("after"))
	if err != nil || recs[0].Seq != last+1 {
		t.Fatalf("append after crash %+v, %v", recs, err)
	}
}

func crashChild() {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Path: os.Getenv("STORE_CRASH_CHILD")})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	sid := os.Getenv("STORE_CRASH_SESSION")
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		batch := []protocol.Record{ev("x"), ev("y"), ev("z")}
		recs, err := st.Append(ctx, sid, batch[:1+i%3]...)
		if err != nil {
			fmt.Println("append:", err)
			os.Exit(1)
		}
		fmt.Fprintln(w, recs[len(recs)-1].Seq)
		w.Flush()
	}
}
