package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/protocol"
)

// Records limits.
const (
	DefaultRecordsLimit = 100
	MaxRecordsLimit     = 1000
)

// insertLogSQL inserts one row; more rows append ",(?,?,?,?,?,?)".
const insertLogSQL = `INSERT INTO session_log (session_id, seq, node_id, kind, payload, created_at) VALUES (?,?,?,?,?,?)`

// insertRowsSQL is the INSERT of n log rows.
func insertRowsSQL(n int) string {
	var q strings.Builder
	q.Grow(len(insertLogSQL) + 14*(n-1))
	q.WriteString(insertLogSQL)
	for i := 1; i < n; i++ {
		q.WriteString(",(?,?,?,?,?,?)")
	}
	return q.String()
}

// insertChunks are the row counts of the multi-row INSERTs prepared once
// at Open (largest first). Preparing a 512-row INSERT for every batch cost
// about a tenth of the relay path's CPU; statements cannot be prepared
// lazily because the one write connection is busy inside the transaction.
// 512 rows are 3,072 variables, under SQLite's bound of 32,766.
var insertChunks = []int{512, 256, 128, 64, 32, 16, 8, 4, 2, 1}

// logState is the per-session append state. Lock order: logState.mu, then
// the write connection (a transaction). Store.logsMu is only held briefly to
// find or drop a logState, never while waiting for either.
type logState struct {
	mu    sync.Mutex // held across insert, commit and publish
	last  int64      // last committed seq; valid when known
	known bool
	refs  int // guarded by Store.logsMu
}

func (s *Store) acquireLog(sessionID string) *logState {
	s.logsMu.Lock()
	st := s.logs[sessionID]
	if st == nil {
		st = &logState{}
		s.logs[sessionID] = st
	}
	st.refs++
	s.logsMu.Unlock()
	st.mu.Lock()
	return st
}

// releaseLog unlocks st and forgets it when nobody uses it and it holds
// nothing worth caching (so bogus session ids do not accumulate).
func (s *Store) releaseLog(sessionID string, st *logState, forget bool) {
	if forget {
		st.known = false
	}
	keep := st.known
	st.mu.Unlock()
	s.logsMu.Lock()
	st.refs--
	if st.refs == 0 && !keep && s.logs[sessionID] == st {
		delete(s.logs, sessionID)
	}
	s.logsMu.Unlock()
}

// Tx is a write transaction bound to one session's log: records appended
// through it get the next seqs, are committed with the transaction's other
// changes, and are published after the commit.
type Tx struct {
	ctx       context.Context
	g         *gorm.DB
	s         *Store
	sessionID string
	now       time.Time
	last      int64
	recs      []protocol.Record
	checked   bool // the records given to Append were checked already
}

// DB returns the transaction's gorm handle. Use it for every statement of
// the transaction; never call Store methods inside WithLog.
func (t *Tx) DB() *gorm.DB { return t.g }

// Now is the transaction's clock reading (the At of its records).
func (t *Tx) Now() time.Time { return t.now }

// Context is the context the transaction runs under.
func (t *Tx) Context() context.Context { return t.ctx }

// SessionID is the session whose log the transaction appends to.
func (t *Tx) SessionID() string { return t.sessionID }

// WithLog runs fn in one write transaction on sessionID's log and returns the
// records fn appended. After the commit it publishes those records in seq
// order; if fn returns an error or the commit fails, nothing is stored or
// published. Calls for the same session are serialized, so publish order is
// seq order (DESIGN invariants 1 and 2). fn must not call Store methods.
func (s *Store) WithLog(ctx context.Context, sessionID string, fn func(tx *Tx) error) ([]protocol.Record, error) {
	st := s.acquireLog(sessionID)
	failed := true
	defer func() { s.releaseLog(sessionID, st, failed) }()

	t := &Tx{ctx: ctx, s: s, sessionID: sessionID, now: s.now()}
	cached := st.known
	err := s.db.WithContext(ctx).Transaction(func(g *gorm.DB) error {
		t.g = g
		if !st.known {
			last, err := readLast(g, sessionID)
			if err != nil {
				return err
			}
			t.last = last
		} else {
			t.last = st.last
		}
		return fn(t)
	})
	if err != nil {
		if cached {
			// A foreign-key failure: most likely the session was deleted
			// since its last seq was cached (otherwise its existence was
			// checked in this transaction).
			return nil, s.appendError(ctx, sessionID, err)
		}
		return nil, err
	}
	st.last, st.known, failed = t.last, true, false
	for _, r := range t.recs {
		s.pub.Publish(sessionID, r)
	}
	return t.recs, nil
}

// Append stores records in the transaction with the next seqs and returns
// them as stored (published after commit by WithLog). Each record is read
// as Append's input (Store.Append).
func (t *Tx) Append(recs ...protocol.Record) ([]protocol.Record, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if !t.checked {
		for i := range recs {
			if err := checkRecord(&recs[i]); err != nil {
				return nil, err
			}
		}
	}
	out := make([]protocol.Record, len(recs))
	now := Millis(t.now)
	// One record (the common case) goes through a statement prepared once on
	// the write connection; batches use multi-row INSERTs.
	if sqlTx, ok := t.g.Statement.ConnPool.(*sql.Tx); ok && len(recs) == 1 && t.s.insertOne != nil {
		r := recs[0]
		seq, at := t.last+1, atOf(r, now)
		if _, err := sqlTx.StmtContext(t.ctx, t.s.insertOne).ExecContext(t.ctx, t.sessionID, seq, r.NodeID, r.Kind, string(r.Data), at); err != nil {
			return nil, fmt.Errorf("append to session %s log: %w", t.sessionID, err)
		}
		out[0] = protocol.Record{Seq: seq, Kind: r.Kind, NodeID: r.NodeID, At: FromMillis(at), Data: r.Data}
		if err := t.setRefs(recs, out); err != nil {
			return nil, err
		}
		t.last++
		t.recs = append(t.recs, out...)
		return out, nil
	}
	pool := t.g.Statement.ConnPool
	sqlTx, _ := pool.(*sql.Tx)
	args := make([]any, 0, 6*min(len(recs), insertChunks[0]))
	// Rows go in chunks of the prepared sizes (512, 256, ..., 1): at most
	// ten INSERTs for any batch, none of them prepared again.
	for start := 0; start < len(recs); {
		n := insertChunks[0]
		for _, c := range insertChunks {
			if c <= len(recs)-start {
				n = c
				break
			}
		}
		chunk := recs[start : start+n]
		args = args[:0]
		for i, r := range chunk {
			seq, at := t.last+int64(start+i)+1, atOf(r, now)
			args = append(args, t.sessionID, seq, r.NodeID, r.Kind, string(r.Data), at)
			out[start+i] = protocol.Record{Seq: seq, Kind: r.Kind, NodeID: r.NodeID, At: FromMillis(at), Data: r.Data}
		}
		var err error
		if stmt := t.s.insertN[n]; stmt != nil && sqlTx != nil {
			_, err = sqlTx.StmtContext(t.ctx, stmt).ExecContext(t.ctx, args...)
		} else {
			_, err = pool.ExecContext(t.ctx, insertRowsSQL(n), args...)
		}
		if err != nil {
			return nil, fmt.Errorf("append to session %s log: %w", t.sessionID, err)
		}
		start += n
	}
	if err := t.setRefs(recs, out); err != nil {
		return nil, err
	}
	t.last += int64(len(recs))
	t.recs = append(t.recs, out...)
	return out, nil
}

// setRefs stores the Ref of the records that have one (commits: rare, so a
// statement each instead of a wider INSERT for every record), resolving a
// relative Ref (-k: k records earlier in recs) to that record's seq.
func (t *Tx) setRefs(recs, out []protocol.Record) error {
	for i, r := range recs {
		ref := r.Ref
		switch {
		case ref == 0:
			continue
		case ref < 0:
			j := i + int(ref)
			if j < 0 {
				return orchestrator.FieldErrorf("ref", "record %d refers %d records back, before the first of its append", i, -ref)
			}
			ref = out[j].Seq
		case ref >= out[i].Seq:
			return orchestrator.FieldErrorf("ref", "record seq %d refers to seq %d, which is not earlier", out[i].Seq, ref)
		}
		if err := t.g.Exec(`UPDATE session_log SET ref = ? WHERE session_id = ? AND seq = ?`, ref, t.sessionID, out[i].Seq).Error; err != nil {
			return fmt.Errorf("set the ref of record %d: %w", out[i].Seq, err)
		}
		out[i].Ref = ref
	}
	return nil
}

// atOf is the stored time of r: its At when given, else the append time.
func atOf(r protocol.Record, now int64) int64 {
	if r.At.IsZero() {
		return now
	}
	return Millis(r.At)
}

// AppendJSON appends one record of nodeID ("" : the session) whose data is
// v (a protocol payload) encoded as JSON.
func (t *Tx) AppendJSON(nodeID, kind string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s record: %w", kind, err)
	}
	_, err = t.Append(protocol.Record{NodeID: nodeID, Kind: kind, Data: b})
	return err
}

func checkRecord(r *protocol.Record) error {
	switch r.Kind {
	case protocol.KindEvent, protocol.KindInput, protocol.KindNode, protocol.KindFile, protocol.KindError, protocol.KindSystem:
	default:
		return orchestrator.FieldErrorf("kind", "record kind %q: want event, input, node, file or error", r.Kind)
	}
	d := bytes.TrimSpace(r.Data)
	if len(d) == 0 || d[0] != '{' || !json.Valid(d) {
		return orchestrator.FieldErrorf("data", "record data must be a JSON object")
	}
	r.Data = d
	return nil
}

// Append stores recs in sessionID's log in one transaction, assigning
// consecutive seqs, and after the commit publishes them in seq order. It
// returns the records as stored. An unknown session is not_found.
//
// Of each record given, the store ignores Seq (it assigns the next one) and
// reads: NodeID ("" for a session-level record); Kind (a protocol.Kind*
// constant); Data (a JSON object); At, when the record's content happened
// (for an agent's output line the container runtime's timestamp of it, so
// that output recovered after a restart keeps the time it was printed;
// zero: the append time; At is information, not order, and may go
// backwards from one record to the next); Ref (> 0: the seq of an earlier
// record it links to; -k: the record k places before it in the same call,
// whose seq is not known until the append).
func (s *Store) Append(ctx context.Context, sessionID string, recs ...protocol.Record) ([]protocol.Record, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	return s.AppendWith(ctx, sessionID, recs, nil)
}

// AppendWith is Append and more in the same transaction: after recs are
// appended, fn (when not nil) runs with them as stored, and may make other
// changes through tx (a node's log cursor, the audit rows of its tools).
// The records are checked before the transaction begins. Appends that queue
// for the write connection commit together (group commit, group.go): fn
// runs under a savepoint of a transaction shared with other appends, and
// its error rolls back its own append only.
func (s *Store) AppendWith(ctx context.Context, sessionID string, recs []protocol.Record, fn func(tx *Tx, stored []protocol.Record) error) ([]protocol.Record, error) {
	for i := range recs {
		if err := checkRecord(&recs[i]); err != nil {
			return nil, err
		}
	}
	if s.cfg.GroupAppends > 1 {
		return s.appendGrouped(ctx, sessionID, recs, fn)
	}
	return s.WithLog(ctx, sessionID, func(tx *Tx) error {
		tx.checked = true
		stored, err := tx.Append(recs...)
		tx.checked = false
		if err != nil || fn == nil {
			return err
		}
		return fn(tx, stored)
	})
}

// EndLog runs del, which deletes the session sessionID (its log goes with it
// by foreign-key cascade), holding the session's log lock, so that no append
// interleaves with it, and forgets what the store cached of the log.
func (s *Store) EndLog(sessionID string, del func() error) error {
	st := s.acquireLog(sessionID)
	defer s.releaseLog(sessionID, st, true)
	return del()
}

// Records returns up to limit records of sessionID's log with seq > after,
// ascending; with nodeID != "" only that node's records. limit <= 0 means
// DefaultRecordsLimit; it is capped at MaxRecordsLimit. It does not check
// who owns the session: callers authorize first (GetSession).
func (s *Store) Records(ctx context.Context, sessionID string, after int64, limit int, nodeID string) ([]protocol.Record, error) {
	if limit <= 0 {
		limit = DefaultRecordsLimit
	}
	limit = min(limit, MaxRecordsLimit)
	q := `SELECT seq, node_id, kind, payload, created_at, ref FROM session_log WHERE session_id = ? AND seq > ?`
	args := []any{sessionID, after}
	if nodeID != "" {
		q += ` AND node_id = ?`
		args = append(args, nodeID)
	}
	q += ` ORDER BY seq LIMIT ?`
	args = append(args, limit)
	rows, err := s.rsql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read session %s log: %w", sessionID, err)
	}
	defer rows.Close()
	out := []protocol.Record{}
	for rows.Next() {
		var r protocol.Record
		var payload []byte
		var at int64
		var ref sql.NullInt64
		if err := rows.Scan(&r.Seq, &r.NodeID, &r.Kind, &payload, &at, &ref); err != nil {
			return nil, fmt.Errorf("read session %s log: %w", sessionID, err)
		}
		r.Data = json.RawMessage(payload)
		r.At = FromMillis(at)
		r.Ref = ref.Int64
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read session %s log: %w", sessionID, err)
	}
	return out, nil
}

// LastSeq returns the seq of the last record of sessionID's log (0 if none).
func (s *Store) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	var last int64
	err := s.rsql.QueryRowContext(ctx,
		`SELECT COALESCE(MAX(seq), 0) FROM session_log WHERE session_id = ?`, sessionID).Scan(&last)
	if err != nil {
		return 0, fmt.Errorf("read session %s last seq: %w", sessionID, err)
	}
	return last, nil
}

// lastOfTypeSQL finds a node's last record of one kind whose data has one
// "type" (newest first, through the node index).
func (s *Store) lastOfTypeSQL() string {
	return `SELECT seq, payload, created_at FROM session_log
	WHERE session_id = ? AND node_id = ? AND kind = ? AND ` + s.JSONText("payload", "type") + ` = ?
	ORDER BY seq DESC LIMIT 1`
}

// LastRecordOf returns the node's last record of kind whose data has the
// given "type" (e.g. the last handoff event); not_found when it has none.
func (s *Store) LastRecordOf(ctx context.Context, sessionID, nodeID, kind, typ string) (protocol.Record, error) {
	r := protocol.Record{NodeID: nodeID, Kind: kind}
	var payload string
	var at int64
	err := s.rsql.QueryRowContext(ctx, s.lastOfTypeSQL(), sessionID, nodeID, kind, typ).Scan(&r.Seq, &payload, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return protocol.Record{}, NotFound(kind+" "+typ+" of node", nodeID)
	}
	if err != nil {
		return protocol.Record{}, fmt.Errorf("read the last %s %s of node %s: %w", kind, typ, nodeID, err)
	}
	r.Data, r.At = json.RawMessage(payload), FromMillis(at)
	return r, nil
}
