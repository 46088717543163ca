package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/protocol"
)

// benchPayload is a typical agent text event.
var benchPayload = json.RawMessage(`{"type":"text","content":"I read the file and will now change the function to return an error instead of panicking."}`)

// benchStore opens a store with one user and one session.
func benchStore(b *testing.B, sync string) (*Store, string) {
	b.Helper()
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(b.TempDir(), "bench.db"), Synchronous: sync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.DB().WithContext(ctx).Exec(`INSERT INTO users (id, name, is_admin, created_at) VALUES ('bench', 'bench', 0, 0)`).Error; err != nil {
		b.Fatal(err)
	}
	sid, err := benchSession(s)
	if err != nil {
		b.Fatal(err)
	}
	return s, sid
}

// benchSession inserts a session of the user "bench" (the sessions package
// builds on this one, so its benchmarks write the row themselves).
func benchSession(s *Store) (string, error) {
	id := NewID()
	return id, s.DB().Exec(`INSERT INTO agent_session (id, user_id, name, status, created_at, updated_at, checks)
		VALUES (?, 'bench', 'bench', 'draft', 0, 0, '[]')`, id).Error
}

func benchAppend(b *testing.B, batch int) {
	for _, sync := range []string{SyncNormal, SyncFull} {
		name := "sync=" + sync
		if batch > 1 {
			name = fmt.Sprintf("batch=%d/%s", batch, name)
		}
		b.Run(name, func(b *testing.B) {
			s, sid := benchStore(b, sync)
			ctx := context.Background()
			recs := make([]protocol.Record, batch)
			for i := range recs {
				recs[i] = protocol.Record{NodeID: "node-1", Kind: protocol.KindEvent, Data: benchPayload}
			}
			stop := threadCPU()
			for b.Loop() {
				if _, err := s.Append(ctx, sid, recs...); err != nil {
					b.Fatal(err)
				}
			}
			report(b, batch, stop())
		})
	}
}

// BenchmarkAppend appends one record per transaction (the relay's worst case).
func BenchmarkAppend(b *testing.B) { benchAppend(b, 1) }

// BenchmarkAppendBatch appends 16 or 256 records per transaction.
func BenchmarkAppendBatch(b *testing.B) {
	for _, batch := range []int{16, 256} {
		benchAppend(b, batch)
	}
}

// BenchmarkRawSQLiteInsert is the baseline: plain database/sql inserting into
// the same session_log table of a store-made file, with the same connection
// settings (DSN), one prepared INSERT per row, batch rows per transaction.
func BenchmarkRawSQLiteInsert(b *testing.B) {
	for _, batch := range []int{1, 16, 256} {
		for _, sync := range []string{SyncNormal, SyncFull} {
			b.Run(fmt.Sprintf("batch=%d/sync=%s", batch, sync), func(b *testing.B) {
				s, sid := benchStore(b, sync)
				cfg := s.cfg
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				db, err := sql.Open("sqlite3", dsn(cfg, false))
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				db.SetMaxOpenConns(1)
				ctx := context.Background()
				payload := string(benchPayload)
				var seq int64
				stop := threadCPU()
				for b.Loop() {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						b.Fatal(err)
					}
					stmt, err := tx.PrepareContext(ctx, `INSERT INTO session_log (session_id, seq, node_id, kind, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)`)
					if err != nil {
						b.Fatal(err)
					}
					for range batch {
						seq++
						if _, err := stmt.ExecContext(ctx, sid, seq, "node-1", protocol.KindEvent, payload, int64(1700000000000)); err != nil {
							b.Fatal(err)
						}
					}
					stmt.Close()
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
				report(b, batch, stop())
			})
		}
	}
}

// report adds records/s (wall clock) and cpu-ns/record (CPU time of the
// benchmark's thread, SQLite included: stable on a busy machine).
func report(b *testing.B, batch int, cpu time.Duration) {
	n := float64(b.N * batch)
	b.ReportMetric(n/b.Elapsed().Seconds(), "records/s")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/record")
	}
}

// BenchmarkAppendParallel has 8 relays per CPU, each appending batches of 16
// records to its own session: the single writer shared by many sessions.
func BenchmarkAppendParallel(b *testing.B) {
	s, _ := benchStore(b, SyncNormal)
	ctx := context.Background()
	const batch = 16
	recs := make([]protocol.Record, batch)
	for i := range recs {
		recs[i] = protocol.Record{NodeID: "node-1", Kind: protocol.KindEvent, Data: benchPayload}
	}
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		sid, err := benchSession(s)
		if err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			if _, err := s.Append(ctx, sid, recs...); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
}
