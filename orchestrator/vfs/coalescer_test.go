package vfs

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
)

// The Coalescer is the session filesystem's Notifier.
var _ Notifier = (*events.Coalescer)(nil)

type fakeAppender struct {
	mu   sync.Mutex
	recs []string
}

func (a *fakeAppender) Append(ctx context.Context, sid, kind string, data any) error {
	b, _ := json.Marshal(data)
	a.mu.Lock()
	a.recs = append(a.recs, sid+" "+kind+" "+string(b))
	a.mu.Unlock()
	return nil
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestCoalescerRun(t *testing.T) {
	app := &fakeAppender{}
	clk := &fakeClock{t: time.Unix(1000, 0)}
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
	clk.Add(time.Second) // the window has passed; the real ticker flushes
	deadline := time.Now().Add(5 * time.Second)
	for {
		app.mu.Lock()
		n := len(app.recs)
		app.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if len(app.recs) != 1 || app.recs[0] != f.sid+` file {"op":"created","path":"/x.txt","size":100}` {
		t.Fatalf("records %q", app.recs)
	}
}
