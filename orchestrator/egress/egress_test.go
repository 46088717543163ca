package egress_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/egress"
)

// policy is an egress.Policy from function fields.
type policy struct {
	node func(host string) string
	ask  func(ctx context.Context, host string) (egress.Decision, error)
}

func (p policy) Node(_ context.Context, _ orchestrator.Caller, host string) (string, error) {
	if p.node == nil {
		return "", nil
	}
	return p.node(host), nil
}

func (p policy) Ask(ctx context.Context, _ orchestrator.Caller, host string, _ int) (egress.Decision, error) {
	if p.ask == nil {
		return egress.Decision{By: "nobody"}, nil
	}
	return p.ask(ctx, host)
}

// resolver resolves names under .test to the host's loopback, and
// private.example to a private address.
type resolver struct{}

func (resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	switch {
	case strings.HasSuffix(host, ".test"):
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	case host == "private.example":
		return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
	case host == "public.example":
		return []netip.Addr{netip.MustParseAddr("192.0.2.10")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// proxyEnv serves p as the proxy of node "n1", and returns a client that
// uses it for every URL.
func proxyEnv(t *testing.T, cfg egress.Config) (*http.Client, func() []egress.Connection) {
	t.Helper()
	var mu sync.Mutex
	var conns []egress.Connection
	audited := func() []egress.Connection {
		mu.Lock()
		defer mu.Unlock()
		return append([]egress.Connection(nil), conns...)
	}
	cfg.Resolver = resolver{}
	cfg.Audit = func(_ context.Context, c egress.Connection) { mu.Lock(); conns = append(conns, c); mu.Unlock() }
	// No connection leaves the machine: anything not on loopback fails here.
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if ap, err := netip.ParseAddrPort(addr); err != nil || !ap.Addr().IsLoopback() {
			return nil, fmt.Errorf("test dialer: %s is off loopback", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	p, err := egress.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.ServeHTTP(w, r.WithContext(orchestrator.WithCaller(r.Context(), orchestrator.Caller{UserID: "u", SessionID: "s", NodeID: "n1"})))
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	t.Cleanup(c.CloseIdleConnections)
	return c, audited
}

func get(c *http.Client, u string) (string, error) {
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	return string(b), nil
}

func TestDecisions(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	tests := []struct {
		name    string
		cfg     egress.Config
		host    string
		want    string // "ok" or a part of the error
		wantBy  string
		wantErr bool
	}{
		{name: "listed", cfg: egress.Config{Allow: []string{"a.test"}, AllowPrivate: true}, host: "a.test", want: "ok", wantBy: egress.ByList},
		{name: "listed by wildcard", cfg: egress.Config{Allow: []string{"*.a.test"}, AllowPrivate: true}, host: "x.y.a.test", want: "ok", wantBy: egress.ByList},
		{name: "a wildcard is not its own domain", cfg: egress.Config{Allow: []string{"*.a.test"}, AllowPrivate: true}, host: "a.test", want: "was denied by nobody", wantBy: "nobody"},
		{name: "loopback refused without allow-private", cfg: egress.Config{Allow: []string{"a.test"}}, host: "a.test", want: "--egress-allow-private", wantBy: egress.ByPrivate},
		{name: "a private address refused", cfg: egress.Config{Allow: []string{"private.example"}}, host: "private.example", want: "10.1.2.3", wantBy: egress.ByPrivate},
		{name: "a loopback literal refused", cfg: egress.Config{}, host: "127.0.0.1", want: "loopback, private or link-local", wantBy: egress.ByPrivate},
		{name: "node policy allows", cfg: egress.Config{Allow: []string{}, AllowPrivate: true, Policy: policy{node: func(string) string { return "allow" }}}, host: "b.test", want: "ok", wantBy: egress.ByPolicy},
		{name: "node policy denies", cfg: egress.Config{Allow: []string{}, AllowPrivate: true, Policy: policy{node: func(string) string { return "deny" }}}, host: "b.test", want: "denied by this agent's policy", wantBy: egress.ByPolicy},
		{name: "asked, approved", cfg: egress.Config{Allow: []string{}, AllowPrivate: true, Policy: policy{ask: func(context.Context, string) (egress.Decision, error) {
			return egress.Decision{Allowed: true, By: "alice"}, nil
		}}}, host: "c.test", want: "ok", wantBy: "alice"},
		{name: "asked, nobody answered", cfg: egress.Config{Allow: []string{}, AllowPrivate: true, Policy: policy{ask: func(context.Context, string) (egress.Decision, error) {
			return egress.Decision{By: "timeout"}, nil
		}}}, host: "c.test", want: "nobody answered", wantBy: "timeout"},
		{name: "does not resolve", cfg: egress.Config{AllowPrivate: true}, host: "nowhere.invalid", want: "does not resolve"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.Policy == nil {
				tt.cfg.Policy = policy{}
			}
			c, conns := proxyEnv(t, tt.cfg)
			got, err := get(c, "https://"+net.JoinHostPort(tt.host, port)+"/")
			if tt.want == "ok" && (err != nil || got != "ok") {
				t.Fatalf("got %q, %v; want ok", got, err)
			}
			if tt.want != "ok" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("got %q, %v; want an error with %q", got, err, tt.want)
			}
			c.CloseIdleConnections() // the tunnel ends, and is audited
			testkit.Eventually(t, 10*time.Second, "the audit", func() bool { return len(conns()) == 1 })
			if a := conns()[0]; a.By != tt.wantBy || a.Host != tt.host || (a.Error == "") != (tt.want == "ok") {
				t.Fatalf("audit %+v", a)
			}
		})
	}
}

// TestOneQuestion: connections of a node to one host that wait at the
// same time ask the person once.
func TestOneQuestion(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var asked, arrived atomic.Int32
	release := make(chan struct{})
	c, _ := proxyEnv(t, egress.Config{Allow: []string{}, AllowPrivate: true, Policy: policy{node: func(string) string {
		arrived.Add(1)
		return ""
	}, ask: func(ctx context.Context, _ string) (egress.Decision, error) {
		asked.Add(1)
		<-release
		return egress.Decision{Allowed: true, By: "alice"}, nil
	}}})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := get(c, "http://d.test:"+port+"/")
			errs <- err
		}()
	}
	testkit.Eventually(t, 10*time.Second, "the connections to wait for the question", func() bool { return asked.Load() == 1 && arrived.Load() == 4 })
	close(release)
	for range 4 {
		if err := testkit.Recv(t, errs, 30*time.Second, "a connection"); err != nil {
			t.Fatal(err)
		}
	}
	if n := asked.Load(); n > 2 {
		// At most one more for a connection caught between its policy
		// check and joining the question when the answer came.
		t.Fatalf("asked %d times", n)
	}
}

func TestCheckAllow(t *testing.T) {
	for _, ok := range []string{"example.com", "*.example.com", "Example.COM."} {
		if err := egress.CheckAllow([]string{ok}); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "*", "a.*.com", "http://x.com", "x.com:443"} {
		if err := egress.CheckAllow([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestAuditCountsTheRequest: every plain request's audit counts the bytes
// it sent as well as those it got back. The request is written by the
// transport's own goroutine, and the answer can be back before that
// goroutine runs again: the bytes must be counted before they are sent.
func TestAuditCountsTheRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	c, audited := proxyEnv(t, egress.Config{Allow: []string{"a.test"}, AllowPrivate: true, Policy: policy{}})
	const n = 300
	for range n {
		if _, err := get(c, "http://a.test:"+port+"/"); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 30*time.Second, "every request audited", func() bool { return len(audited()) == n })
	for i, conn := range audited() {
		if conn.BytesOut == 0 || conn.BytesIn == 0 {
			t.Fatalf("request %d: %d bytes out, %d in", i, conn.BytesOut, conn.BytesIn)
		}
	}
}
