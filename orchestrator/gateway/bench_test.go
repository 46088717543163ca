package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/fakellm"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
)

// benchTurn is the scripted answer of the latency benchmarks: 33 SSE events
// of chat completions, about 6 KiB, with usage.
func benchTurn(fakellm.Request) fakellm.Turn {
	return fakellm.Turn{Text: strings.Repeat("lorem ipsum dolor sit amet ", 6) + "end.",
		Usage: fakellm.Usage{Input: 1000, Output: 30, CacheRead: 200, Cost: 0.001}}
}

// streamOnce posts one streamed request and returns the time to the first
// body byte and to the end of the body.
func streamOnce(c *http.Client, url, auth, body string) (ttfb, ttlb time.Duration, err error) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", auth)
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var one [1]byte
	if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
		return 0, 0, err
	}
	ttfb = time.Since(start)
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, 0, err
	}
	if resp.StatusCode != 200 {
		return 0, 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	return ttfb, time.Since(start), nil
}

func pct(ds []time.Duration, p float64) float64 {
	slices.Sort(ds)
	i := min(len(ds)-1, int(p*float64(len(ds))))
	return float64(ds[i].Microseconds()) / 1000
}

// BenchmarkStream measures time to first byte and to last byte of a streamed
// chat completion through the gateway and, as the same-run baseline,
// directly from the same fake upstream, at 1, 10 and 100 concurrent streams.
// The upstream sends its 33 events as fast as it can: at 10 and 100 streams
// the two cores are saturated and latency measures CPU per request.
// Metrics: ttfb/ttlb p50 and p99 in ms. Run with -benchtime Nx (N streams).
func BenchmarkStream(b *testing.B) { benchStreams(b, 0) }

// BenchmarkStreamPaced is BenchmarkStream with the upstream pacing its
// events 10 ms apart, as a model streaming 100 tokens/s does: the latency
// the gateway adds to a live stream.
func BenchmarkStreamPaced(b *testing.B) { benchStreams(b, 10*time.Millisecond) }

// spread calls f(0) … f(n-1) from workers goroutines and waits for them;
// a worker stops at its first error, which fails the benchmark.
func spread(b *testing.B, workers, n int, f func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := f(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func benchStreams(b *testing.B, gap time.Duration) {
	e := newEnv(b, envOpts{})
	e.up.Fallback(func(r fakellm.Request) fakellm.Turn {
		t := benchTurn(r)
		t.ChunkDelay = gap
		return t
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 1000, MaxIdleConnsPerHost: 1000, DisableCompression: true}}
	body := `{"model":"anthropic/claude-sonnet-4","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	// A second baseline: the floor of any proxy hop. The same pass-through
	// loop as the gateway (read, write, flush), without authentication,
	// budget, key swap or metering.
	proxy := httptest.NewServer(plainProxy(e.up.URL))
	defer proxy.Close()
	targets := []struct{ name, url, auth string }{
		{"direct", e.up.URL + "/api/v1/chat/completions", "Bearer or-key"},
		{"proxy", proxy.URL + "/api/v1/chat/completions", "Bearer or-key"},
		{"gateway", e.srv.URL + "/openrouter/v1/chat/completions", "Bearer " + nodeToken},
	}
	for _, conc := range []int{1, 10, 100} {
		for _, tg := range targets {
			b.Run(fmt.Sprintf("conc=%d/%s", conc, tg.name), func(b *testing.B) {
				// Warm the connection pools.
				var wg sync.WaitGroup
				for range conc {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, _, err := streamOnce(client, tg.url, tg.auth, body); err != nil {
							b.Error(err)
						}
					}()
				}
				wg.Wait()
				e.gw.Flush()
				ttfb := make([]time.Duration, b.N)
				ttlb := make([]time.Duration, b.N)
				b.ResetTimer()
				spread(b, conc, b.N, func(i int) (err error) {
					ttfb[i], ttlb[i], err = streamOnce(client, tg.url, tg.auth, body)
					return err
				})
				b.StopTimer()
				e.gw.Flush()
				b.ReportMetric(pct(ttfb, 0.5), "ttfb-p50-ms")
				b.ReportMetric(pct(ttfb, 0.99), "ttfb-p99-ms")
				b.ReportMetric(pct(ttlb, 0.5), "ttlb-p50-ms")
				b.ReportMetric(pct(ttlb, 0.99), "ttlb-p99-ms")
			})
		}
	}
}

// BenchmarkMeteringExact sends b.N streamed requests (-benchtime 10000x),
// 10 at a time, through the three wire formats, each with its own reported
// usage, and fails unless every request has exactly one usage row with the
// tokens and cost its upstream reported, and the node's total is their sum.
func BenchmarkMeteringExact(b *testing.B) {
	e := newEnv(b, envOpts{})
	e.up.Fallback(func(r fakellm.Request) fakellm.Turn {
		return fakellm.Turn{Text: "a b c", Usage: want(numberOf(r))}
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100}}
	paths := []string{"/openrouter/v1/chat/completions", "/anthropic/v1/messages", "/openai/v1/responses"}
	b.ResetTimer()
	spread(b, 10, b.N, func(n int) error {
		body := fmt.Sprintf(`{"model":"m-%d","stream":true,"n":%d,"messages":[]}`, n, n)
		_, _, err := streamOnce(client, e.srv.URL+paths[n%3], "Bearer "+nodeToken, body)
		return err
	})
	e.gw.Flush()
	b.StopTimer()
	var rows []sessions.Usage
	for after := int64(0); ; {
		page, err := e.sessions.SessionUsage(context.Background(), e.caller.SessionID, after, 5000)
		if err != nil {
			b.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		rows = append(rows, page...)
		after = page[len(page)-1].ID
	}
	if len(rows) != b.N {
		b.Fatalf("%d usage rows for %d requests", len(rows), b.N)
	}
	seen := make([]bool, b.N)
	var total int64
	for _, r := range rows {
		var n int
		if _, err := fmt.Sscanf(r.Model, "m-%d", &n); err != nil || n < 0 || n >= b.N || seen[n] {
			b.Fatalf("row %+v: unknown or repeated request", r)
		}
		seen[n] = true
		w := want(n)
		cost := r.CostUSD != nil && *r.CostUSD == w.Cost || r.CostUSD == nil && w.Cost == 0 || n%3 != 0
		if r.InputTokens != int64(w.Input) || r.OutputTokens != int64(w.Output) || r.CacheReadTokens != int64(w.CacheRead) ||
			r.CacheWriteTokens != int64(w.CacheWrite) || !cost || r.Status != 200 || r.Note != "" {
			b.Fatalf("request %d (%s): metered %+v, reported %+v", n, paths[n%3], r, w)
		}
		total += r.Tokens()
	}
	if got := e.node(b).Tokens; got != total {
		b.Fatalf("node tokens %d, rows add up to %d", got, total)
	}
	b.ReportMetric(float64(b.N), "exact-rows")
}

// want is the usage the fake upstream reports for request n. Cache writes
// exist only in Anthropic's format (n%3 == 1); cost only in chat's.
func want(n int) fakellm.Usage {
	u := fakellm.Usage{Input: 1 + n%997, Output: 1 + n%89, CacheRead: n % 7}
	if n%3 == 1 {
		u.CacheWrite = n % 5
	}
	if n%3 == 0 {
		u.Cost = float64(n%100+1) / 1e4
	}
	return u
}

// plainProxy forwards every request to upstream and copies the answer back,
// flushing after each read.
func plainProxy(upstream string) http.Handler {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression, t.MaxIdleConnsPerHost = true, 1000
	client := &http.Client{Transport: t}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, _ := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.Path, r.Body)
		out.Header = r.Header.Clone()
		resp, err := client.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		rc := http.NewResponseController(w)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, err := w.Write(buf[:n]); err != nil {
					return
				}
				rc.Flush()
			}
			if err != nil {
				return
			}
		}
	})
}
