package agentapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/egress"
)

// askedPolicy is an egress.Policy whose questions the test answers.
type askedPolicy struct{ asks chan askedHost }

type askedHost struct {
	host   string
	answer chan egress.Decision
}

func (p askedPolicy) Node(context.Context, orchestrator.Caller, string) (string, error) {
	return "", nil
}

func (p askedPolicy) Ask(ctx context.Context, c orchestrator.Caller, host string, port int) (egress.Decision, error) {
	a := askedHost{host: host, answer: make(chan egress.Decision, 1)}
	select {
	case p.asks <- a:
	case <-ctx.Done():
		return egress.Decision{}, ctx.Err()
	}
	select {
	case d := <-a.answer:
		return d, nil
	case <-ctx.Done():
		return egress.Decision{}, ctx.Err()
	}
}

// loopbackResolver resolves every name to the host's loopback, where the
// test's servers listen.
type loopbackResolver struct{}

func (loopbackResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if strings.HasSuffix(host, ".test") {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestContainerEgress: an agent in a container without a network reaches
// an HTTP and an HTTPS server on the host's loopback only through the
// egress proxy on its listener (allowed by the operator's list, with
// private hosts allowed); a host off the list waits for the person's
// answer, goes through once approved and fails with the proxy's reason
// when denied; nothing reaches out around the proxy; every connection is
// audited; without a proxy nothing leaves the container.
func TestContainerEgress(t *testing.T) {
	f, ctx, d := dockerFixture(t, containers.DockerConfig{}, 3*time.Minute)

	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "plain:"+r.Host) }))
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tls:"+r.URL.Path) }))
	defer tlsSrv.Close()
	_, plainPort, _ := net.SplitHostPort(plain.Listener.Addr().String())
	_, tlsPort, _ := net.SplitHostPort(tlsSrv.Listener.Addr().String())

	pol := askedPolicy{asks: make(chan askedHost)}
	var mu sync.Mutex
	var audited []egress.Connection
	px, err := egress.New(egress.Config{Allow: []string{"allowed.test"}, AllowPrivate: true, Policy: pol, Resolver: loopbackResolver{},
		Audit: func(_ context.Context, c egress.Connection) {
			mu.Lock()
			audited = append(audited, c)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	s := f.server(t, Config{Netns: d, Egress: px})
	proxy := s.ProxyURL(f.keyA)
	a := startAgent(t, ctx, d, f.sid, f.nodeA.ID, map[string]string{"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "NO_PROXY": "127.0.0.1"})
	if err := s.Open(ctx, f.nodeA.ID, a.id); err != nil {
		t.Fatal(err)
	}
	copyFetch(t, a.ws)

	fetch := "/workspace/fetch "
	if got := a.run(fetch + "http://allowed.test:" + plainPort + "/"); got != "plain:allowed.test:"+plainPort {
		t.Fatalf("http through the proxy: %q", got)
	}
	if got := a.run(fetch + "https://allowed.test:" + tlsPort + "/x"); got != "tls:/x" {
		t.Fatalf("https through the proxy: %q", got)
	}
	// Around the proxy: the container has no route, and its loopback is
	// its own (only the agent-facing API listens there).
	if got := a.run("NO_PROXY='*' " + fetch + "http://" + plain.Listener.Addr().String() + "/"); !strings.Contains(got, "connection refused") {
		t.Fatalf("a direct connection to the host's loopback server: %q", got)
	}
	if got := a.run("NO_PROXY='*' " + fetch + "http://192.0.2.1/"); !strings.Contains(got, "network is unreachable") {
		t.Fatalf("a direct connection off the container: %q", got)
	}

	answer := func(host string, d egress.Decision) {
		go func() {
			select {
			case q := <-pol.asks:
				if q.host != host {
					t.Errorf("asked about %q, want %q", q.host, host)
				}
				q.answer <- d
			case <-ctx.Done():
			}
		}()
	}
	answer("asked.test", egress.Decision{Allowed: true, By: "alice"})
	if got := a.run(fetch + "https://asked.test:" + tlsPort + "/approved"); got != "tls:/approved" {
		t.Fatalf("https to a host approved in the inbox: %q", got)
	}
	answer("denied.test", egress.Decision{Allowed: false, By: "alice"})
	if got := a.run(fetch + "https://denied.test:" + tlsPort + "/"); !strings.Contains(got, "filepath egress: denied.test port "+tlsPort+" was denied by alice") {
		t.Fatalf("https to a host denied in the inbox: %q", got)
	}
	answer("denied.test", egress.Decision{Allowed: false, By: "alice"})
	if got := a.run(fetch + "http://denied.test:" + plainPort + "/"); !strings.Contains(got, "filepath egress: denied.test port "+plainPort+" was denied by alice") {
		t.Fatalf("http to a host denied in the inbox: %q", got)
	}

	mu.Lock()
	conns := append([]egress.Connection(nil), audited...)
	mu.Unlock()
	want := []struct {
		method, host, by string
		ok               bool
	}{
		{"GET", "allowed.test", egress.ByList, true},
		{"CONNECT", "allowed.test", egress.ByList, true},
		{"CONNECT", "asked.test", "alice", true},
		{"CONNECT", "denied.test", "alice", false},
		{"GET", "denied.test", "alice", false},
	}
	if len(conns) != len(want) {
		t.Fatalf("audited %d connections, want %d: %+v", len(conns), len(want), conns)
	}
	for i, w := range want {
		c := conns[i]
		if c.Method != w.method || c.Host != w.host || c.By != w.by || (c.Error == "") != w.ok || c.Caller.NodeID != f.nodeA.ID {
			t.Errorf("audit %d: %+v, want %+v", i, c, w)
		}
		if w.ok && (c.BytesIn == 0 || c.BytesOut == 0 || c.Addr == "") {
			t.Errorf("audit %d counts no bytes: %+v", i, c)
		}
	}
}

// TestContainerNoEgress: without an egress proxy a container without a
// network reaches nothing: the listener refuses proxy requests, and the
// container has no route.
func TestContainerNoEgress(t *testing.T) {
	f, ctx, d := dockerFixture(t, containers.DockerConfig{}, 2*time.Minute)
	s := f.server(t, Config{Netns: d})
	if s.ProxyURL(f.keyA) != "" {
		t.Fatalf("a proxy URL without a proxy: %q", s.ProxyURL(f.keyA))
	}
	a := startAgent(t, ctx, d, f.sid, f.nodeA.ID, nil)
	if err := s.Open(ctx, f.nodeA.ID, a.id); err != nil {
		t.Fatal(err)
	}
	copyFetch(t, a.ws)
	if got := a.run("HTTP_PROXY=http://agent:" + f.keyA + "@127.0.0.1:7428 /workspace/fetch http://example.test/"); !strings.Contains(got, "this server has no egress proxy") {
		t.Fatalf("a proxy request without a proxy: %q", got)
	}
	if got := a.run("/workspace/fetch http://192.0.2.1/"); !strings.Contains(got, "network is unreachable") {
		t.Fatalf("a direct connection off the container: %q", got)
	}
}

// copyFetch puts the test client (internal/cmd/fetch) at /workspace/fetch.
func copyFetch(t *testing.T, ws string) {
	t.Helper()
	b, err := os.ReadFile(testkit.Program(t, "../../internal/cmd/fetch"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "fetch"), b, 0o755); err != nil {
		t.Fatal(err)
	}
}
