package runner

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
	"github.com/filepath-dev/filepath/relay"
)

// memProcess serves a fixed, already complete container log.
type memProcess struct{ frames []byte }

func (p memProcess) Logs(_ context.Context, _ string, opts containers.LogOptions) (*containers.LogReader, error) {
	return containers.NewLogReader(io.NopCloser(bytes.NewReader(p.frames)), opts), nil
}
func (memProcess) AttachStdin(context.Context, string) (io.WriteCloser, error) {
	return nil, io.ErrClosedPipe
}
func (memProcess) Wait(context.Context, string) (int, error)         { return 0, nil }
func (memProcess) Stop(context.Context, string, time.Duration) error { return nil }
func (memProcess) Pause(context.Context, string) error               { return nil }
func (memProcess) Unpause(context.Context, string) error             { return nil }

type exitEffects struct{ done chan struct{} }

func (exitEffects) Spawn(context.Context, relay.Node, protocol.SpawnEvent) error          { return nil }
func (exitEffects) StatusChanged(context.Context, relay.Node, protocol.StatusEvent) error { return nil }
func (exitEffects) Done(context.Context, relay.Node, protocol.DoneEvent) error            { return nil }
func (exitEffects) Handoff(context.Context, relay.Node, protocol.HandoffEvent) error      { return nil }
func (e exitEffects) Exited(context.Context, relay.Node, relay.Exit) error {
	close(e.done)
	return nil
}

func frame(dst []byte, t time.Time, line string) []byte {
	ts := t.UTC().Format("2006-01-02T15:04:05.000000000Z07:00")
	var hdr [8]byte
	hdr[0] = byte(containers.Stdout)
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(ts)+2+len(line)))
	dst = append(dst, hdr[:]...)
	dst = append(dst, ts...)
	dst = append(dst, ' ')
	dst = append(dst, line...)
	return append(dst, '\n')
}

func benchStore(b *testing.B) (*store.Store, string, string) {
	e, _, n := rootNode(b, sessions.NewNode{Name: "root", AgentType: AgentCustom, Image: "x"})
	return e.St, n.SessionID, n.ID
}

// BenchmarkRelayToStore measures events/s from a container log through a
// relay into the real SQLite store: every event durable (committed with the
// node's log cursor) before it is published.
func BenchmarkRelayToStore(b *testing.B) {
	st, sid, nid := benchStore(b)
	t0 := time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC)
	var frames []byte
	for i := range b.N {
		frames = frame(frames, t0.Add(time.Duration(i)), fmt.Sprintf(`{"type":"text","content":"event %d of the benchmark, a line of ordinary length"}`, i))
	}
	eff := exitEffects{done: make(chan struct{})}
	b.ResetTimer()
	r, err := relay.Start(context.Background(), relay.Config{
		Node: relay.Node{SessionID: sid, ID: nid, ContainerID: "c"}, Log: storeLog{st, sessions.New(st, sessions.Config{})}, Process: memProcess{frames: frames}, Effects: eff,
	})
	if err != nil {
		b.Fatal(err)
	}
	<-eff.done
	b.StopTimer()
	r.Close()
	if last, _ := st.LastSeq(context.Background(), sid); last < int64(b.N) {
		b.Fatalf("last seq %d < %d", last, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRawSQLiteInsert is the baseline: the same rows inserted in
// transactions of 512 straight through database/sql on the store's file.
func BenchmarkRawSQLiteInsert(b *testing.B) {
	st, sid, nid := benchStore(b)
	db := st.SQL()
	ctx := context.Background()
	b.ResetTimer()
	for start := 0; start < b.N; start += 512 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO session_log (session_id, seq, node_id, kind, payload, created_at) VALUES (?,?,?,?,?,?)`)
		if err != nil {
			b.Fatal(err)
		}
		for i := start; i < min(b.N, start+512); i++ {
			if _, err := stmt.ExecContext(ctx, sid, int64(i+1000), nid, "event",
				fmt.Sprintf(`{"type":"text","content":"event %d of the benchmark, a line of ordinary length"}`, i), time.Now().UnixMilli()); err != nil {
				b.Fatal(err)
			}
		}
		stmt.Close()
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
