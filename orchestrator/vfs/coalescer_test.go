package vfs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
)

// The Coalescer is the session filesystem's Notifier.
var _ Notifier = (*events.Coalescer)(nil)

// chanAppender sends each appended record, as "sid kind json", to its
// channel.
type chanAppender chan string

func (a chanAppender) Append(ctx context.Context, sid, node, kind string, data any) error {
	b, _ := json.Marshal(data)
	if node != "" {
		sid += "@" + node
	}
	a <- sid + " " + kind + " " + string(b)
	return nil
}

// TestCoalescerRun: the file's create and writes, committed by the session
// filesystem, reach the Coalescer, whose Run flushes them as one record once
// the window has passed.
func TestCoalescerRun(t *testing.T) {
	app := make(chanAppender, 16)
	clk := testkit.NewClock(time.Unix(1000, 0))
	c := events.NewCoalescer(app, 20*time.Millisecond, clk.Now, nil)
	f := newFixture(t, Config{Notifier: c})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	a, err := f.fs.Create(ctx, RootIno, "x.txt", 0o644, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := f.fs.WriteAt(ctx, a.Ino, []byte("0123456789"), int64(i*10)); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Second) // the window has passed; the real ticker flushes
	got := testkit.Recv(t, app, 5*time.Second, "the coalesced record")
	cancel()
	<-done
	if want := f.sid + ` file {"op":"created","path":"/x.txt","size":100}`; got != want {
		t.Fatalf("record %q, want %q", got, want)
	}
	select {
	case more := <-app:
		t.Fatalf("a second record %q", more)
	default:
	}
}

// TestCoalescerNamesTheWriter: a change made through a node's view is
// reported with that node (the record goes in its chat); the session's own
// view (a person) names none; the last writer in a window wins.
func TestCoalescerNamesTheWriter(t *testing.T) {
	app := make(chanAppender, 16)
	clk := testkit.NewClock(time.Unix(1000, 0))
	c := events.NewCoalescer(app, 20*time.Millisecond, clk.Now, nil)
	f := newFixture(t, Config{Notifier: c})
	ctx := context.Background()
	agent, err := f.fs.ForNode("n1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := agent.WriteFile(ctx, "/out.csv", []byte("a,b\n"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.fs.WriteFile(ctx, "/notes.md", []byte("# hi\n"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	c.Flush(ctx, false)
	got := []string{testkit.Recv(t, app, 5*time.Second, "the agent's record"), testkit.Recv(t, app, 5*time.Second, "the person's record")}
	want := []string{f.sid + `@n1 file {"op":"created","path":"/out.csv","size":4}`, f.sid + ` file {"op":"created","path":"/notes.md","size":5}`}
	if got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("records %q, want %q", got, want)
	}
}
