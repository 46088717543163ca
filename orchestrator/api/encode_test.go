package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/protocol"
)

// TestEncodeRecordBytes: a stream message is the record's JSON with its
// data as the store keeps it ('<', '>', '&' and U+2028 not escaped), the
// exact bytes the stream sent before records were encoded by encoding/json.
func TestEncodeRecordBytes(t *testing.T) {
	at := time.Date(2026, 11, 22, 2, 3, 4, 5006007, time.UTC)
	tests := []struct {
		name string
		rec  protocol.Record
		want string
	}{
		{name: "event",
			rec:  protocol.Record{Seq: 42, Kind: "event", NodeID: "n-1", At: at, Data: json.RawMessage(`{"type":"text","content":"hi <b>&amp;</b> \u2028 ` + "\u2028 é" + `"}`)},
			want: `{"seq":42,"kind":"event","node_id":"n-1","at":"2026-11-22T02:03:04.005006007Z","data":{"type":"text","content":"hi <b>&amp;</b> \u2028 ` + "\u2028 é" + `"}}`},
		{name: "session level",
			rec:  protocol.Record{Seq: 1, Kind: "node", At: at.Truncate(time.Second), Data: json.RawMessage(`{"op":"created","node":{"id":"x"}}`)},
			want: `{"seq":1,"kind":"node","node_id":"","at":"2026-11-22T02:03:04Z","data":{"op":"created","node":{"id":"x"}}}`},
		{name: "commit with a ref",
			rec:  protocol.Record{Seq: 9, Kind: "event", NodeID: "n", At: at, Ref: 8, Data: json.RawMessage(`{"type":"commit","hash":"h","message":"m"}`)},
			want: `{"seq":9,"kind":"event","node_id":"n","at":"2026-11-22T02:03:04.005006007Z","data":{"type":"commit","hash":"h","message":"m"},"ref":8}`},
		{name: "no data",
			rec:  protocol.Record{Seq: 8, Kind: "input", NodeID: "0b7c9a4e-1f7e-4c55-9d7c-3a1b2c3d4e5f", At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))},
			want: `{"seq":8,"kind":"input","node_id":"0b7c9a4e-1f7e-4c55-9d7c-3a1b2c3d4e5f","at":"2026-01-02T03:04:05+01:00","data":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := encodeRecord(tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func BenchmarkEncodeRecord(b *testing.B) {
	rec := protocol.Record{Seq: 42, Kind: "event", NodeID: "0b7c9a4e-1f7e-4c55-9d7c-3a1b2c3d4e5f", At: time.Now(), Data: json.RawMessage(`{"type":"text","content":"record 1 of a benchmark, about as long as a short chat line"}`)}
	b.Run("encodeRecord", func(b *testing.B) {
		for b.Loop() {
			encodeRecord(rec)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			json.Marshal(rec)
		}
	})
}
