package store_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/protocol"
)

// The hub is the Publisher the server wires in.
var _ store.Publisher = (*hub.Hub[protocol.Record])(nil)

func TestCloseTwice(t *testing.T) {
	s, err := store.Open(context.Background(), store.Config{Path: filepath.Join(t.TempDir(), "c.db")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestPublishesToHub(t *testing.T) {
	ctx := context.Background()
	h := hub.New[protocol.Record](hub.Config{})
	defer h.Close()
	e := storetest.NewWith(t, storetest.Options{Store: func(c *store.Config) { c.Publisher = h }})
	u := e.User(t, "alice")
	sess := e.Session(t, u.ID, "s")
	sub := h.Subscribe(sess.ID)
	if _, err := e.St.Append(ctx, sess.ID, protocol.Record{Kind: protocol.KindEvent, Data: json.RawMessage(`{"type":"text","content":"hi"}`)}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-sub.C():
		if r.Seq != 1 || string(r.Data) != `{"type":"text","content":"hi"}` {
			t.Fatalf("got %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no record published")
	}
}
