package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/store"
)

func TestEncodeRecordMatchesJSON(t *testing.T) {
	at := time.Date(2026, 11, 22, 2, 3, 4, 5006007, time.UTC)
	tests := []struct {
		name string
		rec  store.Record
	}{
		{name: "event", rec: store.Record{SessionID: "s", Seq: 42, Kind: "event", NodeID: "n-1", At: at, Data: json.RawMessage(`{"type":"text","content":"hi <b>&amp;</b> \u2028"}`)}},
		{name: "session level", rec: store.Record{Seq: 1, Kind: "node", At: at.Truncate(time.Second), Data: json.RawMessage(`{"op":"created","node":{"id":"x"}}`)}},
		{name: "commit with a ref", rec: store.Record{Seq: 9, Kind: "event", NodeID: "n", At: at, Ref: 8, Data: json.RawMessage(`{"type":"commit","hash":"h","message":"m"}`)}},
		{name: "odd node id", rec: store.Record{Seq: 7, Kind: "error", NodeID: "a\"b<\u0001", At: at, Data: json.RawMessage(`{"message":"m"}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := encodeRecord(tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("invalid JSON %s: %v", got, err)
			}
			json.Unmarshal(want, &w)
			gb, _ := json.Marshal(g)
			wb, _ := json.Marshal(w)
			if string(gb) != string(wb) {
				t.Fatalf("got %s\nwant %s", got, want)
			}
		})
	}
}

func BenchmarkEncodeRecord(b *testing.B) {
	rec := store.Record{Seq: 42, Kind: "event", NodeID: "0b7c9a4e-1f7e-4c55-9d7c-3a1b2c3d4e5f", At: time.Now(), Data: json.RawMessage(`{"type":"text","content":"record 1 of a benchmark, about as long as a short chat line"}`)}
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
