package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
)

func ev(text string) protocol.Record {
	return protocol.Record{Kind: protocol.KindEvent, Data: json.RawMessage(fmt.Sprintf(`{"type":"text","content":%q}`, text))}
}

func TestAppendConcurrentOrder(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	other := e.Session(t, u.ID, "other")

	const writers, perWriter, spawners, spawns = 8, 50, 2, 10
	root := e.Node(t, u.ID, s.ID, nil, "root")
	var wg sync.WaitGroup
	errs := make(chan error, writers+spawners)
	for range spawners { // tree changes share the log and its order
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range spawns {
				if _, err := e.Sessions.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{AgentType: "pi", ParentID: &root.ID, Task: "t"}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				recs := []protocol.Record{ev(fmt.Sprintf("w%d-%d", w, i))}
				if i%5 == 0 { // some batches
					recs = append(recs, ev("b1"), ev("b2"))
				}
				sid := s.ID
				if i%7 == 0 {
					sid = other.ID
				}
				got, err := e.St.Append(ctx, sid, recs...)
				if err != nil {
					errs <- err
					return
				}
				for j := 1; j < len(got); j++ {
					if got[j].Seq != got[j-1].Seq+1 {
						errs <- fmt.Errorf("batch seqs not consecutive: %d, %d", got[j-1].Seq, got[j].Seq)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Published in seq order per session, with no gap, matching the store.
	next := map[string]int64{}
	for _, r := range e.Pub.All() {
		if r.Seq != next[r.SessionID]+1 {
			t.Fatalf("session %s published seq %d after %d", r.SessionID, r.Seq, next[r.SessionID])
		}
		next[r.SessionID] = r.Seq
	}
	for _, sid := range []string{s.ID, other.ID} {
		last, err := e.St.LastSeq(ctx, sid)
		if err != nil || last != next[sid] {
			t.Fatalf("last seq %d, published up to %d (%v)", last, next[sid], err)
		}
		var stored []protocol.Record
		for after := int64(0); ; {
			page, err := e.St.Records(ctx, sid, after, 37, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			stored = append(stored, page...)
			after = page[len(page)-1].Seq
		}
		if int64(len(stored)) != last {
			t.Fatalf("paged %d records, last seq %d", len(stored), last)
		}
		for i, r := range stored {
			if r.Seq != int64(i+1) {
				t.Fatalf("stored seq %d at %d", r.Seq, i)
			}
		}
	}
	// appends + 2 records per spawned node + root's created record
	if next[s.ID]+next[other.ID] != writers*(perWriter+2*perWriter/5)+2*spawners*spawns+1 {
		t.Fatalf("total %d", next[s.ID]+next[other.ID])
	}
}

func TestAppendInvalidLeavesNothing(t *testing.T) {
	ctx := context.Background()
	e, _, s := storetest.NewSession(t)
	if _, err := e.St.Append(ctx, s.ID, ev("one")); err != nil {
		t.Fatal(err)
	}
	before, npub := storetest.Dump(t, e.St), len(e.Pub.All())

	tests := []struct {
		name  string
		recs  []protocol.Record
		field string
	}{
		{"bad json in batch", []protocol.Record{ev("ok"), {Kind: protocol.KindEvent, Data: json.RawMessage(`{"a":`)}}, "data"},
		{"not an object", []protocol.Record{{Kind: protocol.KindEvent, Data: json.RawMessage(`[1]`)}}, "data"},
		{"empty", []protocol.Record{{Kind: protocol.KindEvent}}, "data"},
		{"bad kind", []protocol.Record{ev("ok"), {Kind: "chat", Data: json.RawMessage(`{}`)}}, "kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.St.Append(ctx, s.ID, tt.recs...)
			storetest.WantCode(t, err, orchestrator.EInvalid, tt.field)
		})
	}
	// A WithLog whose function fails after appending rolls everything back.
	boom := errors.New("boom")
	_, err := e.St.WithLog(ctx, s.ID, func(tx *store.Tx) error {
		if _, err := tx.Append(ev("x"), ev("y")); err != nil {
			return err
		}
		if err := tx.DB().Exec(`UPDATE agent_session SET name = 'changed' WHERE id = ?`, s.ID).Error; err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WithLog error %v", err)
	}
	_, err = e.St.Append(ctx, "missing", ev("x"))
	storetest.WantCode(t, err, orchestrator.ENotFound, "")

	if storetest.Dump(t, e.St) != before || len(e.Pub.All()) != npub {
		t.Fatal("refused appends changed the database or published")
	}
	// The seq cache was not advanced by the failures.
	got, err := e.St.Append(ctx, s.ID, ev("two"))
	if err != nil || got[0].Seq != 2 {
		t.Fatalf("next append %+v, %v", got, err)
	}
}

func TestRecordsFilter(t *testing.T) {
	ctx := context.Background()
	e, _, s := storetest.NewSession(t)
	r1, r2 := ev("a"), ev("b")
	r1.NodeID, r2.NodeID = "n1", "n2"
	if _, err := e.St.Append(ctx, s.ID, r1, r2, r1, ev("session")); err != nil {
		t.Fatal(err)
	}
	recs, err := e.St.Records(ctx, s.ID, 0, 10, "n1")
	if err != nil || len(recs) != 2 || recs[0].Seq != 1 || recs[1].Seq != 3 {
		t.Fatalf("n1 records %+v, %v", recs, err)
	}
	recs, _ = e.St.Records(ctx, s.ID, 1, 2, "")
	if len(recs) != 2 || recs[0].Seq != 2 || recs[1].Seq != 3 {
		t.Fatalf("page %+v", recs)
	}
	b, _ := json.Marshal(recs[0])
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if _, ok := m["session_id"]; ok || m["kind"] != "event" || m["node_id"] != "n2" || m["data"].(map[string]any)["content"] != "b" {
		t.Fatalf("record JSON %s", b)
	}
	recs, _ = e.St.Records(ctx, s.ID, 4, 10, "")
	if len(recs) != 0 || recs == nil {
		t.Fatalf("past the end: %#v", recs)
	}
}

// TestRecordRefs: a record's ref is stored, published and read back; a
// relative ref names a record of the same append; a ref that is not earlier
// is refused and nothing of the append is stored.
func TestRecordRefs(t *testing.T) {
	ctx := context.Background()
	e, _, s := storetest.NewSession(t)
	commit := func(ref int64) protocol.Record {
		return protocol.Record{NodeID: "n1", Kind: protocol.KindEvent, Ref: ref, Data: json.RawMessage(`{"type":"commit","hash":"h","message":"m"}`)}
	}
	cmd := protocol.Record{NodeID: "n1", Kind: protocol.KindEvent, Data: json.RawMessage(`{"type":"command","cmd":"git commit","status":"done"}`)}
	first, err := e.St.Append(ctx, s.ID, cmd, ev("x"), commit(-2))
	if err != nil {
		t.Fatal(err)
	}
	if first[2].Ref != first[0].Seq || first[0].Ref != 0 {
		t.Fatalf("relative ref: %+v", first)
	}
	one, err := e.St.Append(ctx, s.ID, commit(first[0].Seq))
	if err != nil || one[0].Ref != first[0].Seq {
		t.Fatalf("absolute ref: %+v, %v", one, err)
	}
	recs, err := e.St.Records(ctx, s.ID, 0, 10, "")
	if err != nil || len(recs) != 4 || recs[2].Ref != 1 || recs[3].Ref != 1 || recs[0].Ref != 0 {
		t.Fatalf("read back: %+v, %v", recs, err)
	}
	pub := e.Pub.All()
	if len(pub) != 4 || pub[2].Ref != 1 || pub[3].Ref != 1 {
		t.Fatalf("published: %+v", pub)
	}
	b, _ := json.Marshal(recs[3])
	if !strings.Contains(string(b), `"ref":1`) {
		t.Fatalf("JSON of a record with a ref: %s", b)
	}
	if b, _ := json.Marshal(recs[1]); strings.Contains(string(b), `"ref"`) {
		t.Fatalf("JSON of a record without a ref: %s", b)
	}
	unchanged := storetest.Snapshot(t, e.St)
	for _, bad := range [][]protocol.Record{{ev("y"), commit(-2)}, {commit(5)}, {commit(99)}} {
		_, err := e.St.Append(ctx, s.ID, bad...)
		storetest.WantCode(t, err, orchestrator.EInvalid, "ref")
	}
	unchanged("a refused append")
}

func TestAppendWithCursor(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	root := e.Node(t, u.ID, s.ID, nil, "root")
	last, _ := e.St.LastSeq(ctx, s.ID)
	r := ev("recovered")
	r.NodeID = root.ID
	got, err := e.Sessions.AppendWithCursor(ctx, s.ID, root.ID, "2026-01-02T03:04:05.000000001Z", r)
	if err != nil || len(got) != 1 || got[0].Seq != last+1 {
		t.Fatalf("append %+v, %v", got, err)
	}
	n, _ := e.Sessions.NodeByID(ctx, root.ID)
	if n.LogCursor != "2026-01-02T03:04:05.000000001Z" {
		t.Fatalf("cursor %q", n.LogCursor)
	}
	unchanged := storetest.Snapshot(t, e.St)
	_, err = e.Sessions.AppendWithCursor(ctx, s.ID, "missing", "c", r)
	storetest.WantCode(t, err, orchestrator.ENotFound, "")
	unchanged("failed AppendWithCursor")
}

func TestAppendWhileSessionDeleted(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, err := e.St.Append(ctx, s.ID, ev("x"))
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Let some appends land, then delete the session under them.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if last, _ := e.St.LastSeq(ctx, s.ID); last >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("appends did not start")
		}
	}
	if err := e.Sessions.DeleteSession(ctx, u.ID, s.ID); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		storetest.WantCode(t, err, orchestrator.ENotFound, "")
	}
	if last, _ := e.St.LastSeq(ctx, s.ID); last != 0 {
		t.Fatalf("records survived the session: last seq %d", last)
	}
}

// TestAppendKeepsGivenAt: a record given an At (an agent's line, with the
// container's timestamp) keeps it, also in a batch and when it is older
// than the record before; one without gets the append time. Seq stays the
// order.
func TestAppendKeepsGivenAt(t *testing.T) {
	ctx := context.Background()
	e, _, s := storetest.NewSession(t)
	printed := time.Date(2025, 12, 31, 23, 59, 58, 123_000_000, time.UTC)
	r1, r2, r3 := ev("recovered"), ev("now"), ev("older")
	r1.At, r3.At = printed, printed.Add(-time.Second)
	for _, batch := range [][]protocol.Record{{r1}, {r1, r2, r3}} {
		got, err := e.St.Append(ctx, s.ID, batch...)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range got {
			want := batch[i].At
			if want.IsZero() {
				want = e.Clock.Now()
			}
			if !r.At.Equal(want) {
				t.Fatalf("batch of %d, record %d: At %v, want %v", len(batch), i, r.At, want)
			}
			stored, err := e.St.Records(ctx, s.ID, r.Seq-1, 1, "")
			if err != nil || len(stored) != 1 || !stored[0].At.Equal(want) {
				t.Fatalf("stored record %d: %+v, %v; want At %v", r.Seq, stored, err, want)
			}
		}
	}
	pub := e.Pub.All()
	if len(pub) != 4 || !pub[0].At.Equal(printed) || !pub[3].At.Equal(printed.Add(-time.Second)) {
		t.Fatalf("published %+v", pub)
	}
}
