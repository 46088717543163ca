// Command streamclients follows one session's live stream with many
// WebSocket clients, as many browsers would, and reports what they got: the
// scale benchmark (internal/bench, docs/benchmarks/scale.md) runs it as a
// process of its own, so that the server's CPU time is the server's alone.
//
//	streamclients --url ws://127.0.0.1:8080 --session ID --key KEY [--clients 20] [--after 0] --events N [--timeout 5m]
//
// Each client reads the stream from --after like the browser does: every
// record must have the next seq (no gap, no duplicate; a frame may hold one
// record or an array of them), and a client dropped as too slow (1013)
// reconnects with after=<last seq>. Events written by the test agent's
// `rate` command ("t <unix ns> <i>") are timed: receipt − the agent's stamp.
// Once every client is subscribed it prints "ready"; when every client has
// received N such events (or at the timeout) it prints one JSON line of
// Summary and exits (1 when a client failed).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// Summary is what the command prints at the end.
type Summary struct {
	Clients  int     `json:"clients"`
	Events   int     `json:"events"`   // timed events every client was to receive
	Received int64   `json:"received"` // timed events received, all clients
	Records  int64   `json:"records"`  // records received, all clients
	Frames   int64   `json:"frames"`   // WebSocket messages received, all clients
	Drops    int     `json:"drops"`    // reconnects after 1013 (too slow), all clients
	P50MS    float64 `json:"p50_ms"`   // lag agent → client, over every timed event of every client
	P90MS    float64 `json:"p90_ms"`
	P99MS    float64 `json:"p99_ms"`
	MaxMS    float64 `json:"max_ms"`
	// First and Last are the agent's stamp of the earliest timed event and
	// the receipt of the last one (unix ns), for rates.
	First    int64    `json:"first"`
	Last     int64    `json:"last"`
	CPUSec   float64  `json:"cpu_s"` // this process's CPU time
	Errors   []string `json:"errors,omitempty"`
	TimedOut bool     `json:"timed_out,omitempty"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("streamclients", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "the server's base URL, ws://host:port")
	sid := fs.String("session", "", "session id")
	key := fs.String("key", "", "API key")
	clients := fs.Int("clients", 20, "WebSocket clients")
	after := fs.Int64("after", 0, "follow from this seq")
	events := fs.Int("events", 0, "timed events each client waits for")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *url == "" || *sid == "" || *events <= 0 || *clients <= 0 {
		fmt.Fprintln(stderr, "streamclients: --url, --session, --events are required")
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	cs := make([]*client, *clients)
	var ready, done sync.WaitGroup
	for i := range cs {
		c := &client{url: *url, sid: *sid, key: *key, last: *after, want: *events, lags: make([]int64, 0, *events)}
		cs[i] = c
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			c.err = c.follow(ctx, ready.Done)
		}()
	}
	ready.Wait()
	fmt.Fprintln(stdout, "ready")
	done.Wait()

	sum := Summary{Clients: len(cs), Events: *events, TimedOut: ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)}
	var all []int64
	for _, c := range cs {
		sum.Received += int64(len(c.lags))
		sum.Records += c.records
		sum.Frames += c.frames
		sum.Drops += c.drops
		all = append(all, c.lags...)
		if c.first != 0 && (sum.First == 0 || c.first < sum.First) {
			sum.First = c.first
		}
		sum.Last = max(sum.Last, c.lastRecv)
		if c.err != nil {
			sum.Errors = append(sum.Errors, c.err.Error())
		}
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[min(len(all)-1, int(p*float64(len(all))))]) / 1e6
	}
	sum.P50MS, sum.P90MS, sum.P99MS = pct(0.50), pct(0.90), pct(0.99)
	if len(all) > 0 {
		sum.MaxMS = float64(all[len(all)-1]) / 1e6
	}
	sum.CPUSec = cpuSeconds()
	json.NewEncoder(stdout).Encode(sum)
	if len(sum.Errors) > 0 || sum.TimedOut {
		return 1
	}
	return 0
}

// client is one follower of the stream.
type client struct {
	url, sid, key string
	want          int
	last          int64 // seq of the last record received
	lags          []int64
	first         int64 // stamp of the earliest timed event
	lastRecv      int64
	records       int64
	frames        int64
	drops         int
	err           error
}

// follow reads the stream until the client has want timed events; it calls
// ready once, after its first connection is up.
func (c *client) follow(ctx context.Context, ready func()) error {
	hdr := http.Header{"Authorization": {"Bearer " + c.key}}
	for {
		conn, _, err := websocket.Dial(ctx, fmt.Sprintf("%s/api/v1/sessions/%s/stream?after=%d", c.url, c.sid, c.last), &websocket.DialOptions{HTTPHeader: hdr})
		if ready != nil {
			ready()
			ready = nil
		}
		if err != nil {
			return fmt.Errorf("dial: %w", err)
		}
		conn.SetReadLimit(64 << 20)
		err = c.read(ctx, conn)
		conn.CloseNow()
		if websocket.CloseStatus(err) == websocket.StatusTryAgainLater {
			c.drops++
			continue
		}
		return err
	}
}

// read handles messages until the client has what it wants (nil) or the
// connection ends (the error).
func (c *client) read(ctx context.Context, conn *websocket.Conn) error {
	for {
		_, msg, err := conn.Read(ctx)
		now := time.Now().UnixNano()
		if err != nil {
			return err
		}
		c.frames++
		if err := eachRecord(msg, func(rec []byte) error { return c.record(rec, now) }); err != nil {
			return err
		}
		if len(c.lags) >= c.want {
			return nil
		}
	}
}

// record checks one record's seq and times it when it is a rate event.
func (c *client) record(rec []byte, now int64) error {
	seq, ok := intAfter(rec, `"seq":`)
	if !ok {
		return fmt.Errorf("record without seq: %.200s", rec)
	}
	if seq != c.last+1 {
		return fmt.Errorf("seq %d after %d", seq, c.last)
	}
	c.last = seq
	c.records++
	if ns, ok := intAfter(rec, `"content":"t `); ok {
		c.lags = append(c.lags, now-ns)
		if c.first == 0 || ns < c.first {
			c.first = ns
		}
		c.lastRecv = now
	}
	return nil
}

// eachRecord calls fn with each record of a frame: the frame itself, or
// each element of a JSON array of records.
func eachRecord(msg []byte, fn func([]byte) error) error {
	msg = bytes.TrimSpace(msg)
	if len(msg) == 0 || msg[0] != '[' {
		return fn(msg)
	}
	var recs []json.RawMessage
	if err := json.Unmarshal(msg, &recs); err != nil {
		return fmt.Errorf("frame: %w", err)
	}
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// intAfter parses the decimal integer that follows the first key in b.
func intAfter(b []byte, key string) (int64, bool) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	b = b[i+len(key):]
	j := 0
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	n, err := strconv.ParseInt(string(b[:j]), 10, 64)
	return n, err == nil
}

// cpuSeconds is the CPU time (user + system) this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
