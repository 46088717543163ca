package runner

import (
	"context"

	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/relay"
)

// storeLog is the store as a relay.Log.
type storeLog struct{ st *store.Store }

var _ relay.Log = storeLog{}

func newRecords(recs []relay.Record) []store.NewRecord {
	out := make([]store.NewRecord, len(recs))
	for i, r := range recs {
		out[i] = store.NewRecord{NodeID: r.NodeID, Kind: r.Kind, Data: r.Data, At: r.At, Ref: r.Ref}
	}
	return out
}

func relayRecords(recs []store.Record) []relay.Record {
	out := make([]relay.Record, len(recs))
	for i, r := range recs {
		out[i] = relay.Record{Seq: r.Seq, Kind: r.Kind, NodeID: r.NodeID, At: r.At, Data: r.Data, Ref: r.Ref}
	}
	return out
}

func (l storeLog) Append(ctx context.Context, sessionID string, recs ...relay.Record) ([]relay.Record, error) {
	out, err := l.st.Append(ctx, sessionID, newRecords(recs)...)
	return relayRecords(out), err
}

// AppendWithCursor appends the records and sets the node's log cursor in one
// transaction (store.AppendWithCursor).
func (l storeLog) AppendWithCursor(ctx context.Context, sessionID, nodeID, cursor string, recs ...relay.Record) ([]relay.Record, error) {
	out, err := l.st.AppendWithCursor(ctx, sessionID, nodeID, cursor, newRecords(recs)...)
	return relayRecords(out), err
}

// Inputs returns the node's input records with seq > after.
func (l storeLog) Inputs(ctx context.Context, sessionID, nodeID string, after int64) ([]relay.Record, error) {
	var out []relay.Record
	for {
		recs, err := l.st.Records(ctx, sessionID, after, store.MaxRecordsLimit, nodeID)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Kind == store.KindInput {
				out = append(out, relay.Record{Seq: r.Seq, Kind: r.Kind, NodeID: r.NodeID, At: r.At, Data: r.Data})
			}
		}
		if len(recs) < store.MaxRecordsLimit {
			return out, nil
		}
		after = recs[len(recs)-1].Seq
	}
}
