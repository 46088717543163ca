package vfs

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"
)

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

func TestCoalescer(t *testing.T) {
	type ch struct{ op, path string }
	tests := []struct {
		name    string
		changes []ch
		want    []string
	}{
		{name: "created then modified", changes: []ch{{"created", "/a"}, {"modified", "/a"}, {"modified", "/a"}}, want: []string{`s file {"op":"created","path":"/a","size":3}`}},
		{name: "created then deleted", changes: []ch{{"created", "/a"}, {"modified", "/a"}, {"deleted", "/a"}}},
		{name: "modified many", changes: []ch{{"modified", "/a"}, {"modified", "/a"}, {"modified", "/a"}}, want: []string{`s file {"op":"modified","path":"/a","size":3}`}},
		{name: "modified then deleted", changes: []ch{{"modified", "/a"}, {"deleted", "/a"}}, want: []string{`s file {"op":"deleted","path":"/a","size":2}`}},
		{name: "deleted then created", changes: []ch{{"deleted", "/a"}, {"created", "/a"}}, want: []string{`s file {"op":"modified","path":"/a","size":2}`}},
		{name: "created deleted created", changes: []ch{{"created", "/a"}, {"deleted", "/a"}, {"created", "/a"}}, want: []string{`s file {"op":"created","path":"/a","size":3}`}},
		{name: "two paths in order", changes: []ch{{"created", "/b"}, {"created", "/a"}, {"modified", "/b"}}, want: []string{`s file {"op":"created","path":"/b","size":3}`, `s file {"op":"created","path":"/a","size":2}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			app := &fakeAppender{}
			clk := &fakeClock{t: time.Unix(1000, 0)}
			c := NewCoalescer(app, 200*time.Millisecond, clk.Now, nil)
			for i, x := range tc.changes {
				c.FileChanged("s", x.op, x.path, int64(i+1))
			}
			c.Flush(context.Background(), false)
			if len(app.recs) != 0 {
				t.Fatalf("flushed inside the window: %v", app.recs)
			}
			clk.Add(200 * time.Millisecond)
			c.Flush(context.Background(), false)
			if len(app.recs) != len(tc.want) {
				t.Fatalf("got %q, want %q", app.recs, tc.want)
			}
			for i := range tc.want {
				if app.recs[i] != tc.want[i] {
					t.Fatalf("got %q, want %q", app.recs, tc.want)
				}
			}
		})
	}
}

func TestCoalescerRun(t *testing.T) {
	app := &fakeAppender{}
	clk := &fakeClock{t: time.Unix(1000, 0)}
	c := NewCoalescer(app, 20*time.Millisecond, clk.Now, nil)
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

func TestKVAndToolCalls(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	v, sid := f.v, f.sid
	if err := v.KVSet(ctx, sid, "user:prefs", json.RawMessage(`{"theme":"dark"}`)); err != nil {
		t.Fatal(err)
	}
	if err := v.KVSet(ctx, sid, "bad", json.RawMessage(`{nope`)); err == nil {
		t.Fatal("invalid JSON accepted")
	}
	if err := v.KVSet(ctx, sid, "user:prefs", json.RawMessage(`{"theme":"light"}`)); err != nil {
		t.Fatal(err)
	}
	got, err := v.KVGet(ctx, sid, "user:prefs")
	if err != nil || string(got) != `{"theme":"light"}` {
		t.Fatal(string(got), err)
	}
	if list, _ := v.KVList(ctx, sid); len(list) != 1 || list[0].Key != "user:prefs" {
		t.Fatalf("list %+v", list)
	}
	if err := v.KVDelete(ctx, sid, "user:prefs"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.KVGet(ctx, sid, "user:prefs"); err == nil {
		t.Fatal("deleted key found")
	}
	start := time.Unix(1000, 0)
	tests := []struct {
		name string
		call NewToolCall
		ok   bool
	}{
		{name: "result", call: NewToolCall{Name: "read_file", Params: json.RawMessage(`{"path":"/a"}`), Result: json.RawMessage(`"ok"`), StartedAt: start, CompletedAt: start.Add(2 * time.Second)}, ok: true},
		{name: "error", call: NewToolCall{Name: "read_file", Err: "not found", StartedAt: start, CompletedAt: start}, ok: true},
		{name: "both", call: NewToolCall{Name: "x", Result: json.RawMessage(`1`), Err: "e", StartedAt: start, CompletedAt: start}},
		{name: "neither", call: NewToolCall{Name: "x", StartedAt: start, CompletedAt: start}},
		{name: "bad params", call: NewToolCall{Name: "x", Params: json.RawMessage(`{`), Err: "e", StartedAt: start, CompletedAt: start}},
		{name: "backwards", call: NewToolCall{Name: "x", Err: "e", StartedAt: start, CompletedAt: start.Add(-time.Second)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.RecordToolCall(ctx, sid, tc.call)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, ok %v", err, tc.ok)
			}
		})
	}
	calls, err := v.ToolCalls(ctx, sid, "read_file", 10)
	if err != nil || len(calls) != 2 || calls[1].DurationMS != 2000 || calls[0].Error != "not found" {
		t.Fatalf("calls %+v %v", calls, err)
	}
	if _, err := f.db.Exec(`UPDATE tool_calls SET name='y'`); err == nil {
		t.Fatal("tool_calls accepted an update")
	}
}
