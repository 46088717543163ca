package runner

import (
	"context"

	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
	"github.com/filepath-dev/filepath/relay"
)

// storeLog is the store as a relay.Log: the log's Append, the sessions'
// AppendWithCursor (records with the node's log cursor), and the node's
// inputs read from its records.
type storeLog struct {
	*store.Store
	sessions *sessions.Store
}

// AppendWithCursor is sessions.Store.AppendWithCursor.
func (l storeLog) AppendWithCursor(ctx context.Context, sessionID, nodeID, cursor string, recs ...protocol.Record) ([]protocol.Record, error) {
	return l.sessions.AppendWithCursor(ctx, sessionID, nodeID, cursor, recs...)
}

var _ relay.Log = storeLog{}

// Inputs returns the node's input records with seq > after.
func (l storeLog) Inputs(ctx context.Context, sessionID, nodeID string, after int64) ([]protocol.Record, error) {
	var out []protocol.Record
	for {
		recs, err := l.Records(ctx, sessionID, after, store.MaxRecordsLimit, nodeID)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Kind == protocol.KindInput {
				out = append(out, r)
			}
		}
		if len(recs) < store.MaxRecordsLimit {
			return out, nil
		}
		after = recs[len(recs)-1].Seq
	}
}
