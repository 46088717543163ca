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
		out[i] = store.NewRecord{NodeID: r.NodeID, Kind: r.Kind, Data: r.Data}
	}
	return out
}

func seqsOf(recs []store.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

func (l storeLog) Append(ctx context.Context, sessionID string, recs ...relay.Record) ([]int64, error) {
	out, err := l.st.Append(ctx, sessionID, newRecords(recs)...)
	return seqsOf(out), err
}

// AppendWithCursor appends the records and sets the node's log cursor in one
// transaction (store.AppendWithCursor).
func (l storeLog) AppendWithCursor(ctx context.Context, sessionID, nodeID, cursor string, recs ...relay.Record) ([]int64, error) {
	out, err := l.st.AppendWithCursor(ctx, sessionID, nodeID, cursor, newRecords(recs)...)
	return seqsOf(out), err
}
