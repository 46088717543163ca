package relay

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/filepath-dev/filepath/containers"
)

// idleProcess is a container that prints nothing and does not exit: its log
// follow blocks until the relay ends.
func idleProcess() *fakeProcess {
	return &fakeProcess{
		LogsFn: func(ctx context.Context, _ string, opts containers.LogOptions) (*containers.LogReader, error) {
			pr, pw := io.Pipe()
			context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
			return containers.NewLogReader(pr, opts), nil
		},
		WaitFn: func(ctx context.Context, _ string) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		},
	}
}

// memInUse is the live Go heap and the goroutine stacks in use.
func memInUse() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse
}

// idleRelays starts n relays of idle containers and returns the heap, the
// stacks and the goroutines they added, per relay; stop ends them.
func idleRelays(tb testing.TB, n int) (heapPerRelay, stackPerRelay, goroutinesPerRelay float64, stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := &countLog{}
	eff := &quietEffects{done: make(chan struct{})}
	g0 := runtime.NumGoroutine()
	h0, s0 := memInUse()
	relays := make([]*Relay, n)
	for i := range relays {
		node := testNode
		node.ID = fmt.Sprintf("n%d", i)
		r, err := Start(ctx, Config{Node: node, Log: log, Process: idleProcess(), Effects: eff})
		if err != nil {
			tb.Fatal(err)
		}
		relays[i] = r
	}
	// Wait until every relay is following its log (the pipe's reader
	// blocked): the goroutine count is stable.
	for prev := -1; ; {
		runtime.Gosched()
		g := runtime.NumGoroutine()
		if g == prev {
			break
		}
		prev = g
		runtime.GC()
	}
	h1, s1 := memInUse()
	g1 := runtime.NumGoroutine()
	per := func(a, b uint64) float64 { return (float64(b) - float64(a)) / float64(n) }
	return per(h0, h1), per(s0, s1), per(uint64(g0), uint64(g1)), func() {
		cancel()
		for _, r := range relays {
			r.Close()
		}
	}
}

// BenchmarkIdleRelay: the Go heap (and, apart, the goroutine stacks) of one idle relay (an agent that prints
// nothing), measured over 1,000 relays whose containers' logs are followed
// through containers.LogReader as Docker's are.
//
//	go test -run '^$' -bench IdleRelay -benchtime 1x -count 5 ./relay
func BenchmarkIdleRelay(b *testing.B) {
	const n = 1000
	for range b.N {
		heap, stack, gs, stop := idleRelays(b, n)
		stop()
		b.ReportMetric(heap/1024, "heap-KiB/relay")
		b.ReportMetric(stack/1024, "stack-KiB/relay")
		b.ReportMetric(gs, "goroutines/relay")
	}
}
