package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/protocol"
)

// countLog is a Log that only counts: the relay's own cost, without a store.
type countLog struct{ n atomic.Int64 }

func (l *countLog) Append(_ context.Context, _ string, recs ...protocol.Record) ([]protocol.Record, error) {
	l.n.Add(int64(len(recs)))
	return recs, nil
}

func (l *countLog) AppendWithCursor(_ context.Context, _, _, _ string, recs ...protocol.Record) ([]protocol.Record, error) {
	l.n.Add(int64(len(recs)))
	return recs, nil
}

func (l *countLog) Inputs(context.Context, string, string, int64) ([]protocol.Record, error) {
	return nil, nil
}

func benchLines(n int) [][]byte {
	kinds := []string{
		`{"type":"text","content":"working on line %d of the task, nothing special"}`,
		`{"type":"tool","name":"read","path":"/workspace/src/file%d.go","status":"done"}`,
		`{"type":"status","state":"thinking","context_pct":0.%d}`,
		`{"type":"command","cmd":"go test ./... # %d","status":"done","exit":0}`,
	}
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, kinds[i%len(kinds)], i%10)
	}
	return out
}

// BenchmarkRelay measures events/s from a container log (Docker framing,
// parsed by containers.LogReader) through validation, re-encoding, batching
// and side effects, into a Log that only counts.
func BenchmarkRelay(b *testing.B) {
	lines := benchLines(b.N)
	t0 := time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC)
	var frames []byte
	for i, l := range lines {
		frames = appendFrame(frames, containers.Stdout, t0.Add(time.Duration(i)), string(l)+"\n")
	}
	log := &countLog{}
	p := &fakeProcess{
		LogsFn: func(_ context.Context, _ string, opts containers.LogOptions) (*containers.LogReader, error) {
			return containers.NewLogReader(io.NopCloser(bytes.NewReader(frames)), opts), nil
		},
		WaitFn: func(context.Context, string) (int, error) { return 0, nil },
	}
	quiet := &quietEffects{done: make(chan struct{})}
	b.ReportAllocs()
	b.SetBytes(int64(len(frames) / max(b.N, 1)))
	b.ResetTimer()
	r, err := Start(context.Background(), Config{Node: testNode, Log: log, Process: p, Effects: quiet})
	if err != nil {
		b.Fatal(err)
	}
	<-quiet.done
	b.StopTimer()
	r.Close()
	if got := log.n.Load(); got < int64(b.N) {
		b.Fatalf("%d records for %d lines", got, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkDecodeBaseline is the floor: protocol.DecodeEvent and re-encoding
// of the same lines, nothing else.
func BenchmarkDecodeBaseline(b *testing.B) {
	lines := benchLines(1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		ev, err := protocol.DecodeEvent(lines[i%len(lines)])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(ev); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

type quietEffects struct{ done chan struct{} }

func (quietEffects) Spawn(context.Context, Node, protocol.SpawnEvent) error          { return nil }
func (quietEffects) StatusChanged(context.Context, Node, protocol.StatusEvent) error { return nil }
func (quietEffects) Done(context.Context, Node, protocol.DoneEvent) error            { return nil }
func (quietEffects) Handoff(context.Context, Node, protocol.HandoffEvent) error      { return nil }
func (e *quietEffects) Exited(context.Context, Node, Exit) error {
	close(e.done)
	return nil
}
