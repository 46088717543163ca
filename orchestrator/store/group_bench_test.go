package store

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/filepath-dev/filepath/protocol"
)

// BenchmarkAppendRelays is the intake of many agents of one session: each of
// N relays appends one record at a time with its cursor (an UPDATE in the
// same transaction, as sessions.AppendWithCursor does), waiting for each
// append before the next. group=1 is the baseline in the same run: one
// transaction per append (GroupAppends 1, the store before group commit);
// group=default lets the appends waiting for the write connection commit
// together. Metrics: records/s and cpu-ns/record of the whole process.
//
//	go test -run '^$' -bench AppendRelays -count 5 ./orchestrator/store
func BenchmarkAppendRelays(b *testing.B) {
	for _, relays := range []int{1, 10, 50, 200} {
		for _, group := range []int{1, 0} {
			name := "default"
			if group == 1 {
				name = "1"
			}
			b.Run(fmt.Sprintf("relays=%d/group=%s", relays, name), func(b *testing.B) {
				ctx := context.Background()
				s, err := Open(ctx, Config{Path: filepath.Join(b.TempDir(), "bench.db"), GroupAppends: group})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				if err := s.DB().Exec(`INSERT INTO users (id, name, is_admin, created_at) VALUES ('bench', 'bench', 0, 0)`).Error; err != nil {
					b.Fatal(err)
				}
				sid, err := benchSession(s)
				if err != nil {
					b.Fatal(err)
				}
				cursor := func(tx *Tx, _ []protocol.Record) error {
					return tx.DB().Exec(`UPDATE agent_session SET updated_at = ? WHERE id = ?`, Millis(tx.Now()), sid).Error
				}
				var left atomic.Int64
				left.Store(int64(b.N))
				var wg sync.WaitGroup
				b.ResetTimer()
				stop := processCPU()
				for range relays {
					wg.Add(1)
					go func() {
						defer wg.Done()
						recs := []protocol.Record{{NodeID: "node-1", Kind: protocol.KindEvent, Data: benchPayload}}
						for left.Add(-1) >= 0 {
							if _, err := s.AppendWith(ctx, sid, recs, cursor); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				cpu := stop()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/record")
			})
		}
	}
}
