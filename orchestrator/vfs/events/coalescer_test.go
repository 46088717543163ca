package events

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

// recorder records each appended record as "sid kind json".
type recorder struct{ testkit.Recorder[string] }

func (r *recorder) Append(ctx context.Context, sid, node, kind string, data any) error {
	b, _ := json.Marshal(data)
	if node != "" {
		sid += "@" + node
	}
	r.Publish(sid + " " + kind + " " + string(b))
	return nil
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
			app := &recorder{}
			clk := testkit.NewClock(time.Unix(1000, 0))
			c := NewCoalescer(app, 200*time.Millisecond, clk.Now, nil)
			for i, x := range tc.changes {
				c.FileChanged("s", "", x.op, x.path, int64(i+1))
			}
			c.Flush(context.Background(), false)
			if recs := app.All(); len(recs) != 0 {
				t.Fatalf("flushed inside the window: %v", recs)
			}
			clk.Advance(200 * time.Millisecond)
			c.Flush(context.Background(), false)
			if recs := app.All(); !slices.Equal(recs, tc.want) {
				t.Fatalf("got %q, want %q", recs, tc.want)
			}
		})
	}
}
