package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/protocol"
)

const benchBatch = 100 // records per Append in the throughput benchmarks

func benchData(i int) json.RawMessage {
	return json.RawMessage(`{"type":"text","content":"record ` + strconv.Itoa(i) + ` of a benchmark, about as long as a short chat line"}`)
}

// appendBatches appends n records to sid in batches of benchBatch.
func appendBatches(b *testing.B, st *store.Store, sid, nid string, n int) {
	for i := 0; i < n; i += benchBatch {
		recs := make([]protocol.Record, 0, benchBatch)
		for j := i; j < min(n, i+benchBatch); j++ {
			recs = append(recs, protocol.Record{NodeID: nid, Kind: protocol.KindEvent, Data: benchData(j)})
		}
		if _, err := st.Append(context.Background(), sid, recs...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStoreAppend is the baseline: the raw store append rate with no
// subscriber, one record per transaction and benchBatch per transaction.
func BenchmarkStoreAppend(b *testing.B) {
	for _, batch := range []int{1, benchBatch} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			e := newEnv(b, envOpts{})
			a := e.account("bench")
			s, n := e.session(a)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i += batch {
				recs := make([]protocol.Record, 0, batch)
				for j := i; j < min(b.N, i+batch); j++ {
					recs = append(recs, protocol.Record{NodeID: n.ID, Kind: protocol.KindEvent, Data: benchData(j)})
				}
				if _, err := e.st.Append(context.Background(), s.ID, recs...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// benchClient reads a session stream until it has seq >= want, reconnecting
// with after=last when dropped as too slow. onRecord sees each record.
func benchClient(ctx context.Context, e *testEnv, key, sid string, after, want int64, ready chan<- struct{}, drops *atomic.Int64, onRecord func(wireRecord)) error {
	last := after
	first := true
	for last < want {
		c, _, err := e.dial(ctx, sid, last, key)
		if err != nil {
			return err
		}
		if first {
			ready <- struct{}{}
			first = false
		}
		for last < want {
			_, msg, err := c.Read(ctx)
			if err != nil {
				c.CloseNow()
				if websocket.CloseStatus(err) == websocket.StatusTryAgainLater {
					drops.Add(1)
					break
				}
				return err
			}
			var r wireRecord
			if err := json.Unmarshal(msg, &r); err != nil {
				return err
			}
			if r.Seq != last+1 {
				return fmt.Errorf("got %d after %d", r.Seq, last)
			}
			last = r.Seq
			if onRecord != nil {
				onRecord(r)
			}
		}
		c.CloseNow()
	}
	return nil
}

// streamBench is a session and clients WebSocket clients subscribed to it,
// each reading until it has b.N records appended after the start.
type streamBench struct {
	e     *testEnv
	sid   string
	nid   string
	ctx   context.Context
	after int64
	drops atomic.Int64
	errs  chan error
	wg    sync.WaitGroup
}

// startStream starts the clients and waits until the hub has them all;
// client returns each one's record callback (nil: none) and what it does
// when it has read all (nil: nothing); after is the last seq before the
// benchmark's records.
func startStream(b *testing.B, clients int, client func(after int64) (onRecord func(wireRecord), done func())) *streamBench {
	e := newEnv(b, envOpts{})
	a := e.account("bench")
	s, n := e.session(a)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	b.Cleanup(cancel)
	sb := &streamBench{e: e, sid: s.ID, nid: n.ID, ctx: ctx, errs: make(chan error, clients)}
	sb.after, _ = e.st.LastSeq(ctx, s.ID)
	want := sb.after + int64(b.N)
	ready := make(chan struct{}, clients)
	for range clients {
		onRecord, done := client(sb.after)
		sb.wg.Go(func() {
			sb.errs <- benchClient(ctx, e, a.key, s.ID, sb.after, want, ready, &sb.drops, onRecord)
			if done != nil {
				done()
			}
		})
	}
	for range clients {
		<-ready
	}
	testkit.Eventually(b, 10*time.Second, "subscriptions", func() bool { return e.hub.Subscribers(s.ID) == clients })
	return sb
}

// wait waits for the clients and fails on the first error of one (a
// canceled one too unless canceledOK).
func (sb *streamBench) wait(b *testing.B, canceledOK bool) {
	sb.wg.Wait()
	close(sb.errs)
	for err := range sb.errs {
		if err != nil && !(canceledOK && errors.Is(err, context.Canceled)) {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamThroughput: records/s delivered to 1, 10 and 100 WebSocket
// clients on loopback while one writer appends in batches.
func BenchmarkStreamThroughput(b *testing.B) {
	for _, clients := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			sb := startStream(b, clients, func(int64) (func(wireRecord), func()) { return nil, nil })
			b.ResetTimer()
			start := time.Now()
			appendBatches(b, sb.e.st, sb.sid, sb.nid, b.N)
			appended := time.Since(start)
			sb.wait(b, true)
			elapsed := time.Since(start)
			b.ReportMetric(float64(b.N)*float64(clients)/elapsed.Seconds(), "delivered/s")
			b.ReportMetric(float64(b.N)/appended.Seconds(), "appended/s")
			b.ReportMetric(float64(sb.drops.Load()), "drops")
		})
	}
}

// BenchmarkStreamLatency: append→client receipt latency at a fixed rate of
// 1,000 records/s (one record per Append), b.N records; the Append call's own
// latency is reported beside it.
func BenchmarkStreamLatency(b *testing.B) {
	const rate = 1000
	for _, clients := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			sent := make([]atomic.Int64, b.N) // unix ns before Append, by index
			var mu sync.Mutex
			lat := make([]time.Duration, 0, b.N*clients)
			sb := startStream(b, clients, func(after int64) (func(wireRecord), func()) {
				local := make([]time.Duration, 0, b.N)
				return func(r wireRecord) {
						now := time.Now().UnixNano()
						i := int(r.Seq - after - 1)
						local = append(local, time.Duration(now-sent[i].Load()))
					}, func() {
						mu.Lock()
						lat = append(lat, local...)
						mu.Unlock()
					}
			})
			b.ResetTimer()
			tick := time.NewTicker(time.Second / rate)
			defer tick.Stop()
			appendLat := make([]time.Duration, 0, b.N)
			for i := range b.N {
				<-tick.C
				t0 := time.Now()
				sent[i].Store(t0.UnixNano())
				if _, err := sb.e.st.Append(sb.ctx, sb.sid, protocol.Record{NodeID: sb.nid, Kind: protocol.KindEvent, Data: benchData(i)}); err != nil {
					b.Fatal(err)
				}
				appendLat = append(appendLat, time.Since(t0))
			}
			slices.Sort(appendLat)
			b.ReportMetric(float64(appendLat[len(appendLat)/2].Microseconds()), "append-p50-µs")
			b.ReportMetric(float64(appendLat[len(appendLat)*99/100].Microseconds()), "append-p99-µs")
			sb.wait(b, false)
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(sb.drops.Load()), "drops")
		})
	}
}
