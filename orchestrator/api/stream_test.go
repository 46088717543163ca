package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/protocol"
)

// dial opens the session stream after seq with the Bearer key.
func (e *testEnv) dial(ctx context.Context, sid string, after int64, key string, hdr ...string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Set(hdr[i], hdr[i+1])
	}
	u := strings.Replace(e.base, "http://", "ws://", 1) + fmt.Sprintf("/api/v1/sessions/%s/stream?after=%d", sid, after)
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h})
	if c != nil {
		c.SetReadLimit(1 << 20)
	}
	return c, resp, err
}

// stream dials the session stream after seq with key, failing the test if
// that fails; the connection closes when the test ends.
func (e *testEnv) stream(t *testing.T, ctx context.Context, sid string, after int64, key string) *websocket.Conn {
	t.Helper()
	c, _, err := e.dial(ctx, sid, after, key)
	if err != nil {
		t.Fatalf("dial after=%d: %v", after, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// live dials the session stream after its last record, as the only
// client, and waits until the hub has it; it returns that last seq too.
func (e *testEnv) live(t *testing.T, ctx context.Context, sid, key string) (*websocket.Conn, int64) {
	t.Helper()
	last, err := e.st.LastSeq(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	c := e.stream(t, ctx, sid, last, key)
	testkit.Eventually(t, 5*time.Second, "subscription", func() bool { return e.hub.Subscribers(sid) == 1 })
	return c, last
}

// readThrough reads the records after last up to want, failing on an
// error, a gap or a duplicate.
func readThrough(t *testing.T, ctx context.Context, c *websocket.Conn, last, want int64) {
	t.Helper()
	for last < want {
		r, err := readRecord(ctx, c)
		if err != nil {
			t.Fatalf("read after %d: %v", last, err)
		}
		if r.Seq != last+1 {
			t.Fatalf("got %d after %d", r.Seq, last)
		}
		last = r.Seq
	}
}

type wireRecord struct {
	Seq    int64           `json:"seq"`
	Kind   string          `json:"kind"`
	NodeID string          `json:"node_id"`
	At     time.Time       `json:"at"`
	Data   json.RawMessage `json:"data"`
}

func readRecord(ctx context.Context, c *websocket.Conn) (wireRecord, error) {
	typ, b, err := c.Read(ctx)
	if err != nil {
		return wireRecord{}, err
	}
	var r wireRecord
	if typ != websocket.MessageText {
		return r, fmt.Errorf("message type %v, want text", typ)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("decode %q: %w", b, err)
	}
	if r.Seq <= 0 || r.Kind == "" || r.At.IsZero() || len(r.Data) == 0 {
		return r, fmt.Errorf("incomplete record %s", b)
	}
	return r, nil
}

// TestStreamContinuity appends from several writers while a client reads,
// disconnecting mid-replay and mid-live and reconnecting with after=N: the
// client must see every seq exactly once, in order.
func TestStreamContinuity(t *testing.T) {
	const (
		preloaded = 3000
		writers   = 4
		perWriter = 1500
		total     = preloaded + writers*perWriter
	)
	e := newEnv(t, envOpts{buffer: 256, cfg: func(c *api.Config) { c.ReplayPage = 200 }})
	a := e.account("alice")
	s, n := e.session(a)
	base, err := e.st.LastSeq(context.Background(), s.ID) // node-created record(s)
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, e.st, s.ID, n.ID, preloaded)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range perWriter {
				data := fmt.Sprintf(`{"type":"text","content":"w%d-%d"}`, w, i)
				if _, err := e.st.Append(ctx, s.ID, protocol.Record{NodeID: n.ID, Kind: protocol.KindEvent, Data: json.RawMessage(data)}); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		}()
	}

	var last int64
	reconnects, slowCloses := 0, 0
	// Disconnect points: mid-replay (first connection, after 500 of the
	// 3000 preloaded), then every 1000 records while writers run.
	cut := []int64{500, 1700, 2900, 4100, 5300, 6500, 7700}
	started := false
	want := base + total
	for last < want {
		c, _, err := e.dial(ctx, s.ID, last, a.key)
		if err != nil {
			t.Fatalf("dial after=%d: %v", last, err)
		}
		if !started {
			close(start) // writers start while the first replay is in progress
			started = true
		}
		for last < want {
			r, err := readRecord(ctx, c)
			if err != nil {
				if websocket.CloseStatus(err) == websocket.StatusTryAgainLater {
					var ce websocket.CloseError
					errors.As(err, &ce)
					if wantReason := fmt.Sprintf("too slow; reconnect with after=%d", last); ce.Reason != wantReason {
						t.Fatalf("close reason %q, want %q", ce.Reason, wantReason)
					}
					slowCloses++
					break
				}
				t.Fatalf("read after seq %d: %v", last, err)
			}
			if r.Seq != last+1 {
				t.Fatalf("got seq %d after %d: gap or duplicate", r.Seq, last)
			}
			last = r.Seq
			if len(cut) > 0 && last-base >= cut[0] {
				cut = cut[1:]
				c.CloseNow()
				reconnects++
				break
			}
		}
		c.CloseNow()
	}
	wg.Wait()
	got, _ := e.st.LastSeq(context.Background(), s.ID)
	if last != got {
		t.Fatalf("client ended at %d, store at %d", last, got)
	}
	t.Logf("%d records, %d client reconnects, %d too-slow closes", last, reconnects, slowCloses)
	if reconnects < 3 {
		t.Fatalf("only %d reconnects: the test did not cut the stream", reconnects)
	}
}

// TestStreamGapFilledFromStore: records the hub never delivers (a publish
// gap) are read from the store before the next live record is sent.
func TestStreamGapFilledFromStore(t *testing.T) {
	e := newEnv(t, envOpts{publisher: func(h *hub.Hub[protocol.Record]) store.Publisher {
		return publisherFunc(func(sid string, r protocol.Record) {
			if r.Seq%7 == 0 {
				return // lost on the way to the hub
			}
			h.Publish(sid, r)
		})
	}})
	a := e.account("alice")
	s, n := e.session(a)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, last := e.live(t, ctx, s.ID, a.key)
	appendEvents(t, e.st, s.ID, n.ID, 50)
	readThrough(t, ctx, c, last, last+50)
}

// TestStreamSlowClientDropped: a client that does not read is dropped by the
// hub without slowing the writer, and closed with 1013 and the resume hint.
func TestStreamSlowClientDropped(t *testing.T) {
	e := newEnv(t, envOpts{buffer: 16})
	a := e.account("alice")
	s, n_node := e.session(a)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, start := e.live(t, ctx, s.ID, a.key)

	// 8 KiB records: enough to fill the loopback socket buffers so that the
	// server's writes block and the hub buffer overflows.
	content := strings.Repeat("x", 8<<10)
	data := json.RawMessage(fmt.Sprintf(`{"type":"text","content":%q}`, content))
	appendTimed := func(n int, stop func() bool) []time.Duration {
		lat := make([]time.Duration, 0, n)
		for range n {
			t0 := time.Now()
			if _, err := e.st.Append(ctx, s.ID, protocol.Record{NodeID: n_node.ID, Kind: protocol.KindEvent, Data: data}); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			if stop != nil && stop() {
				break
			}
		}
		slices.Sort(lat)
		return lat
	}
	// Baseline: the same appends to another session nobody watches.
	const maxAppends = 6000
	dropped := 0
	lat := appendTimed(maxAppends, func() bool {
		if e.hub.Dropped() >= 1 {
			dropped++
		}
		return dropped > 200 // keep writing a while after the drop
	})
	appended := int64(len(lat))
	base := e.baselineAppends(t, len(lat), data)
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	t.Logf("%d appends with a stuck client: p50 %v p99 %v; baseline without subscribers: p50 %v p99 %v", len(lat), p50, p99, base[len(base)/2], base[len(base)*99/100])
	if p50 > 10*base[len(base)/2]+5*time.Millisecond {
		t.Errorf("the stuck client slowed the writer: p50 %v vs baseline %v", p50, base[len(base)/2])
	}
	testkit.Eventually(t, 10*time.Second, "the slow subscriber to be dropped", func() bool { return e.hub.Dropped() >= 1 })

	last := start
	for {
		r, err := readRecord(ctx, c)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.StatusTryAgainLater {
				t.Fatalf("read ended with %v, want close 1013", err)
			}
			if want := fmt.Sprintf("too slow; reconnect with after=%d", last); ce.Reason != want {
				t.Fatalf("reason %q, want %q", ce.Reason, want)
			}
			break
		}
		if r.Seq != last+1 {
			t.Fatalf("got %d after %d", r.Seq, last)
		}
		last = r.Seq
	}
	if last >= start+appended {
		t.Fatalf("client got everything (%d): it was never too slow", last)
	}
	// Resuming with after=last gets the rest.
	readThrough(t, ctx, e.stream(t, ctx, s.ID, last, a.key), last, start+appended)
}

func TestStreamAuthAndOrigin(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *api.Config) { c.AllowedOrigins = []string{"good.example"} }})
	a := e.account("alice")
	b := e.account("bob")
	s, _ := e.session(a)
	tests := []struct {
		name   string
		key    string
		hdr    []string
		sid    string
		status int // 101 = upgraded
	}{
		{name: "bearer owner", key: a.key, sid: s.ID, status: 101},
		{name: "anonymous", sid: s.ID, status: 401},
		{name: "other user", key: b.key, sid: s.ID, status: 404},
		{name: "unknown session", key: a.key, sid: "nope", status: 404},
		{name: "same origin", key: a.key, sid: s.ID, hdr: []string{"Origin", e.base}, status: 101},
		{name: "allowed origin", key: a.key, sid: s.ID, hdr: []string{"Origin", "https://good.example"}, status: 101},
		{name: "foreign origin", key: a.key, sid: s.ID, hdr: []string{"Origin", "https://evil.example"}, status: 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, resp, err := e.dial(ctx, tt.sid, 0, tt.key, tt.hdr...)
			if tt.status == 101 {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				c.Close(websocket.StatusNormalClosure, "")
				return
			}
			if err == nil {
				c.CloseNow()
				t.Fatalf("dial succeeded, want %d", tt.status)
			}
			if resp == nil || resp.StatusCode != tt.status {
				t.Fatalf("dial: %v (resp %v), want %d", err, resp, tt.status)
			}
		})
	}
}

func TestStreamCookieAuth(t *testing.T) {
	e := newEnv(t, envOpts{})
	r := e.do("GET", strings.TrimPrefix(e.login, e.base), "", "")
	ck := (&http.Response{Header: r.header}).Cookies()[0]
	admin, err := e.users.UserByName(context.Background(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := e.session(account{user: admin})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := e.dial(ctx, s.ID, 0, "", "Cookie", ck.Name+"="+ck.Value)
	if err != nil {
		t.Fatalf("dial with cookie: %v", err)
	}
	if _, err := readRecord(ctx, c); err != nil { // the node-created record
		t.Fatalf("read: %v", err)
	}
	c.Close(websocket.StatusNormalClosure, "")
}

func TestStreamShutdownGoingAway(t *testing.T) {
	e, a := newAlice(t)
	s, _ := e.session(a)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _ := e.live(t, ctx, s.ID, a.key)
	done := make(chan struct{})
	go func() { defer close(done); e.srv.Close() }()
	_, _, err := c.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("read: %v, want close 1001", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
}

// TestStreamClosedWhenSessionDeleted: deleting a session closes the streams
// open on it (4404), so that a second tab or device stops showing a session
// that no longer exists; a new stream is refused with 404.
func TestStreamClosedWhenSessionDeleted(t *testing.T) {
	e, a := newAlice(t)
	s, _ := e.session(a)
	other, _ := e.session(a)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := e.stream(t, ctx, s.ID, 0, a.key)
	e.stream(t, ctx, other.ID, 0, a.key)
	testkit.Eventually(t, 5*time.Second, "subscriptions", func() bool {
		return e.hub.Subscribers(s.ID) == 1 && e.hub.Subscribers(other.ID) == 1
	})
	if r := e.doT(t, "DELETE", "/api/v1/sessions/"+s.ID, a.key, ""); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	var err error
	for err == nil {
		_, _, err = c.Read(ctx)
	}
	if websocket.CloseStatus(err) != 4404 {
		t.Fatalf("read: %v, want close 4404", err)
	}
	if _, resp, err := e.dial(ctx, s.ID, 0, a.key); err == nil || resp == nil || resp.StatusCode != 404 {
		t.Fatalf("new stream on the deleted session: %v, %v; want 404", resp, err)
	}
	if n := e.hub.Subscribers(other.ID); n != 1 {
		t.Fatalf("the other session's stream was closed too (%d subscribers)", n)
	}
}

// TestStreamAfterBeyondLast: a WebSocket asking for records after a seq
// the session does not have (a client of another database) is closed at
// once with 4422, since a browser cannot read a handshake's HTTP status;
// the client then reloads (web/src/lib/live).
func TestStreamAfterBeyondLast(t *testing.T) {
	e, a := newAlice(t)
	other, _ := e.session(a)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	last, _ := e.st.LastSeq(ctx, other.ID)
	if _, _, err := e.stream(t, ctx, other.ID, last+10, a.key).Read(ctx); websocket.CloseStatus(err) != 4422 {
		t.Fatalf("read: %v, want close 4422", err)
	}
}

func TestStreamPingTimeoutCloses(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *api.Config) {
		// Generous for a loaded machine under -race: a reading client must
		// never miss a pong deadline because its goroutine was not scheduled.
		c.PingInterval = 50 * time.Millisecond
		c.PingTimeout = 500 * time.Millisecond
	}})
	a := e.account("alice")
	s, _ := e.session(a)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	last, _ := e.st.LastSeq(ctx, s.ID)
	// A reading client answers pings and stays connected.
	readCtx := e.stream(t, ctx, s.ID, last, a.key).CloseRead(ctx)
	// A client that never reads cannot answer pings and is dropped.
	e.stream(t, ctx, s.ID, last, a.key)
	testkit.Eventually(t, 10*time.Second, "the silent client to be closed", func() bool { return e.hub.Subscribers(s.ID) == 1 })
	time.Sleep(time.Second) // many ping intervals: the reading client must survive them
	if readCtx.Err() != nil || e.hub.Subscribers(s.ID) != 1 {
		t.Fatal("the reading client was closed")
	}
}

func TestStreamBadRequests(t *testing.T) {
	e, a := newAlice(t)
	s, _ := e.session(a)
	tests := []struct {
		name   string
		path   string
		status int
		field  string
	}{
		{name: "not an upgrade", path: "/api/v1/sessions/" + s.ID + "/stream", status: 400},
		{name: "bad after", path: "/api/v1/sessions/" + s.ID + "/stream?after=x", status: 400, field: "after"},
		{name: "negative after", path: "/api/v1/sessions/" + s.ID + "/stream?after=-1", status: 400, field: "after"},
		{name: "after beyond the last record", path: "/api/v1/sessions/" + s.ID + "/stream?after=1000000", status: 422, field: "after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("GET", tt.path, a.key, "")
			if r.status != tt.status {
				t.Fatalf("got %d %s", r.status, r.body)
			}
			if _, _, f := r.errorOf(t); f != tt.field {
				t.Fatalf("field %q, want %q", f, tt.field)
			}
		})
	}
}

// baselineAppends times n appends of data to a fresh session with no
// subscriber.
func (e *testEnv) baselineAppends(t *testing.T, n int, data json.RawMessage) []time.Duration {
	t.Helper()
	a := e.account(fmt.Sprintf("base%d", time.Now().UnixNano()%1e6))
	s, node := e.session(a)
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := e.st.Append(context.Background(), s.ID, protocol.Record{NodeID: node.ID, Kind: protocol.KindEvent, Data: data}); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return lat
}
