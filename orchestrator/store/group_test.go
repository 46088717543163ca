package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
	"gorm.io/gorm"
)

// durablePublisher records what is published after checking, through the
// read pool (another connection), that the record is committed: durable
// before visible.
type durablePublisher struct {
	st        atomic.Pointer[store.Store]
	rec       storetest.Recorder
	notStored atomic.Int64
}

func (p *durablePublisher) Publish(sid string, r protocol.Record) {
	var n int
	if err := p.st.Load().ReadSQL().QueryRow(`SELECT COUNT(*) FROM session_log WHERE session_id = ? AND seq = ?`, sid, r.Seq).Scan(&n); err != nil || n != 1 {
		p.notStored.Add(1)
	}
	p.rec.Publish(sid, r)
}

// TestAppendGroupCommit: appends that queue while another commits go into
// one transaction; one that fails there rolls back alone; seqs stay
// gap-free per session and every record is committed before it is published.
func TestAppendGroupCommit(t *testing.T) {
	ctx := context.Background()
	pub := &durablePublisher{}
	e := storetest.NewWith(t, storetest.Options{Store: func(c *store.Config) { c.Publisher = pub }})
	pub.st.Store(e.St)
	u := e.User(t, "alice")
	sids := []string{e.Session(t, u.ID, "a").ID, e.Session(t, u.ID, "b").ID}
	e.Pub = &pub.rec

	// The first append holds the write connection until released.
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	releaseLeader := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseLeader) // before the store closes, should the test fail
	leaderDone := make(chan error, 1)
	go func() {
		_, err := e.St.AppendWith(ctx, sids[0], []protocol.Record{ev("leader")}, func(*store.Tx, []protocol.Record) error {
			close(entered)
			<-release
			return nil
		})
		leaderDone <- err
	}()
	testkit.Recv(t, entered, 10*time.Second, "leader in its transaction")

	const n, bad = 10, 3
	errBad := errors.New("this append fails")
	txs := make([]*gorm.DB, n)
	got := make([][]protocol.Record, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = e.St.AppendWith(ctx, sids[i%2], []protocol.Record{ev(fmt.Sprint("r", i)), ev(fmt.Sprint("r", i, "b"))}, func(tx *store.Tx, _ []protocol.Record) error {
				txs[i] = tx.DB()
				if i == bad {
					return errBad
				}
				return nil
			})
		}()
	}
	testkit.Eventually(t, 10*time.Second, "appends queued", func() bool { return e.St.QueuedAppends() == n })
	releaseLeader()
	wg.Wait()
	if err := testkit.Recv(t, leaderDone, 10*time.Second, "leader"); err != nil {
		t.Fatal(err)
	}

	for i := range n {
		if i == bad {
			if !errors.Is(errs[i], errBad) || got[i] != nil {
				t.Errorf("append %d: got %v, %v; want its own error and nothing", i, got[i], errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("append %d: %v", i, errs[i])
		}
		if txs[i] != txs[0] {
			t.Errorf("append %d ran in another transaction than append 0: not grouped", i)
		}
		if len(got[i]) != 2 || got[i][1].Seq != got[i][0].Seq+1 {
			t.Errorf("append %d: stored %v, want two consecutive seqs", i, got[i])
		}
	}
	// Per session: gap-free from 1, published in seq order, matching the
	// store, and nothing of the failed append.
	for _, sid := range sids {
		stored, err := e.St.Records(ctx, sid, 0, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		var published []protocol.Record
		for _, p := range pub.rec.All() {
			if p.SessionID == sid {
				published = append(published, p.Record)
			}
		}
		if len(published) != len(stored) {
			t.Fatalf("session %s: %d published, %d stored", sid, len(published), len(stored))
		}
		for i, r := range stored {
			if r.Seq != int64(i+1) || published[i].Seq != r.Seq {
				t.Fatalf("session %s record %d: stored seq %d, published %d; want %d", sid, i, r.Seq, published[i].Seq, i+1)
			}
			if string(r.Data) == string(ev("r3").Data) {
				t.Fatalf("the failed append's record was stored: %s", r.Data)
			}
		}
	}
	if k := pub.notStored.Load(); k != 0 {
		t.Fatalf("%d records published before they were committed", k)
	}
}

// TestAppendPanicIsItsError: an append whose callback panics fails alone;
// the log and the group commit go on (no lock or lead left held).
func TestAppendPanicIsItsError(t *testing.T) {
	ctx := context.Background()
	e, _, s := storetest.NewSession(t)
	_, err := e.St.AppendWith(ctx, s.ID, []protocol.Record{ev("x")}, func(*store.Tx, []protocol.Record) error { panic("boom") })
	if err == nil {
		t.Fatal("an append whose callback panicked succeeded")
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.St.Append(ctx, s.ID, ev("y"))
		done <- err
	}()
	if err := testkit.Recv(t, done, 10*time.Second, "the next append"); err != nil {
		t.Fatal(err)
	}
	recs, err := e.St.Records(ctx, s.ID, 0, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Seq != 1 {
		t.Fatalf("stored %v, want only the second append, at seq 1", recs)
	}
}
