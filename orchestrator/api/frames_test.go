package api

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/protocol"
)

func frameRecord(seq int64) protocol.Record {
	return protocol.Record{Seq: seq, Kind: protocol.KindEvent, NodeID: "n-1", At: time.Unix(1700000000, 0).UTC(),
		Data: json.RawMessage(fmt.Sprintf(`{"type":"text","content":"record %d <b>"}`, seq))}
}

// TestFramesEncodeOnce: the streams of a session share one encoding of each
// record (the same bytes, not a copy), a slot reused by a later seq encodes
// that record, and the session's entry goes with its last stream.
func TestFramesEncodeOnce(t *testing.T) {
	var f frames
	a, b := f.acquire("s"), f.acquire("s")
	if a != b {
		t.Fatal("two streams of one session got different encodings")
	}
	other := f.acquire("t")
	for _, seq := range []int64{1, 2, 1 + frameSlots, 1} {
		rec := frameRecord(seq)
		want, err := encodeRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		x, err := a.encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		y, err := b.encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if string(x) != string(want) || string(y) != string(want) {
			t.Fatalf("seq %d: got %s and %s, want %s", seq, x, y, want)
		}
		if &x[0] != &y[0] {
			t.Fatalf("seq %d: encoded twice for one session", seq)
		}
		z, _ := other.encode(rec)
		if &z[0] == &x[0] {
			t.Fatalf("seq %d: another session's stream got this session's bytes", seq)
		}
	}
	f.release("s", a)
	if f.sessions["s"] == nil {
		t.Fatal("released with a stream left")
	}
	f.release("s", b)
	f.release("t", other)
	if len(f.sessions) != 0 {
		t.Fatalf("%d sessions kept without a stream", len(f.sessions))
	}
}

// BenchmarkFanoutEncode: the encoding work of one record sent to N streams
// of its session: "each" encodes it per stream (before issue 23), "once"
// through the session's shared encodings; in the same run.
//
//	go test -run '^$' -bench FanoutEncode -count 5 ./orchestrator/api
func BenchmarkFanoutEncode(b *testing.B) {
	recs := make([]protocol.Record, 1024)
	for i := range recs {
		recs[i] = frameRecord(int64(i + 1))
	}
	for _, clients := range []int{1, 20, 100} {
		b.Run(fmt.Sprintf("clients=%d/each", clients), func(b *testing.B) {
			i := 0
			for b.Loop() {
				rec := recs[i%len(recs)]
				for range clients {
					if _, err := encodeRecord(rec); err != nil {
						b.Fatal(err)
					}
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("clients=%d/once", clients), func(b *testing.B) {
			var f frames
			sf := f.acquire("s")
			i := 0
			for b.Loop() {
				rec := recs[i%len(recs)]
				rec.Seq = int64(i + 1) // each record new, as live records are
				for range clients {
					if _, err := sf.encode(rec); err != nil {
						b.Fatal(err)
					}
				}
				i++
			}
		})
	}
}
