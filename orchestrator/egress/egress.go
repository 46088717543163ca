// Package egress is the agents' way to the network: an HTTP proxy (plain
// requests in absolute form, and CONNECT tunnels for HTTPS and anything
// else) served on each node's agent-facing listener, that connects only
// where the node may go and asks the person about anywhere else.
//
// A destination is checked in this order: its host must resolve, and to
// no loopback, private, link-local or shared address unless the server
// allows private hosts (--egress-allow-private); then a host on the
// operator's list (Config.Allow) goes through, one the node's policy
// allows or denies (approvals["network:<host>"], set by an "Always"
// answer) is decided by it, and any other waits for a person's answer in
// the approvals inbox (kind network, scope the host). The connection is
// made to the address that was checked, never resolved again. Every
// connection, let through or refused, is audited.
package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/gitnet"
)

// AllowPrivateFlag names the setting that lets agents reach private hosts,
// for error messages.
const AllowPrivateFlag = "--egress-allow-private (FILEPATH_EGRESS_ALLOW_PRIVATE=1)"

// DefaultAllow is the operator's list when none is configured: the common
// package registries and forges, which an agent's tools fetch from.
var DefaultAllow = []string{
	// Go
	"proxy.golang.org", "sum.golang.org", "storage.googleapis.com",
	// JavaScript
	"registry.npmjs.org", "registry.yarnpkg.com",
	// Python
	"pypi.org", "files.pythonhosted.org",
	// Rust
	"crates.io", "index.crates.io", "static.crates.io",
	// Ruby
	"rubygems.org", "index.rubygems.org",
	// Debian and Ubuntu packages
	"deb.debian.org", "security.debian.org", "archive.ubuntu.com", "security.ubuntu.com",
	// forges
	"github.com", "*.github.com", "*.githubusercontent.com", "gitlab.com", "bitbucket.org", "codeberg.org",
}

// How a connection was let through or refused (Connection.By).
const (
	ByList    = "list"    // the operator's list (Config.Allow)
	ByPolicy  = "policy"  // the node's approvals["network:<host>"]
	ByPrivate = "private" // refused: a private address without AllowPrivate
)

// Decision is an answer about one destination.
type Decision struct {
	Allowed bool
	// By is who decided: ByList, ByPolicy, ByPrivate, the name of the
	// person who answered, "timeout" or "agent".
	By string
}

// Policy is what the proxy asks about a host that is not on the
// operator's list. agenttools.Server implements it over the approvals.
type Policy interface {
	// Node returns the node's own policy for host ("allow", "deny", or ""
	// when it has none: ask).
	Node(ctx context.Context, c orchestrator.Caller, host string) (string, error)
	// Ask asks the person whether c's node may connect to host:port and
	// waits for the answer (or ctx's end).
	Ask(ctx context.Context, c orchestrator.Caller, host string, port int) (Decision, error)
}

// Connection is one connection's audit: where, how much, how long, and
// why it was let through (or the error that refused or ended it).
type Connection struct {
	Caller   orchestrator.Caller
	Method   string // CONNECT, or the plain request's method
	Host     string
	Port     int
	Addr     string // the address connected to; "" when refused
	By       string // who decided (Decision.By)
	BytesOut int64  // from the agent
	BytesIn  int64  // to the agent
	Start    time.Time
	End      time.Time
	Error    string // why it was refused or failed; "" when it went through
}

// Config configures a Proxy.
type Config struct {
	// Allow is the operator's list of hosts any node may reach without
	// asking: "example.com", or "*.example.com" for its subdomains (nil:
	// DefaultAllow; empty, not nil: none).
	Allow []string
	// AllowPrivate lets agents reach loopback, private and link-local
	// addresses (still each by the list, the policy or a person's answer).
	AllowPrivate bool
	Policy       Policy          // required
	Resolver     gitnet.Resolver // nil: net.DefaultResolver
	// Dial connects to a checked address (nil: a net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Audit records each connection (nil: none).
	Audit       func(ctx context.Context, c Connection)
	DialTimeout time.Duration // DefaultDialTimeout
	Logger      *slog.Logger
}

// DefaultDialTimeout bounds connecting to a destination once it is allowed.
const DefaultDialTimeout = 30 * time.Second

// Proxy is the egress proxy. Serve it with ServeHTTP on an authenticated
// request (orchestrator.CallerFrom tells the node).
type Proxy struct {
	cfg   Config
	log   *slog.Logger
	allow []string

	mu    sync.Mutex // guards asks
	asks  map[askKey]*ask
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)
	clock func() time.Time
}

// askKey is one question: concurrent connections of a node to one host
// share it, so the person is asked once.
type askKey struct{ node, host string }

type ask struct {
	done chan struct{}
	d    Decision
	err  error
}

// New checks cfg and returns a Proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Policy == nil {
		return nil, errors.New("egress config: Policy is required")
	}
	if cfg.Allow == nil {
		cfg.Allow = DefaultAllow
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := CheckAllow(cfg.Allow); err != nil {
		return nil, fmt.Errorf("egress config: %w", err)
	}
	allow := make([]string, 0, len(cfg.Allow))
	for _, h := range cfg.Allow {
		allow = append(allow, canonicalHost(h))
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger, allow: allow, asks: map[askKey]*ask{}, clock: time.Now}
	p.dial = cfg.Dial
	if p.dial == nil {
		var d net.Dialer
		p.dial = d.DialContext
	}
	return p, nil
}

// ParseAllow splits a comma-separated list of hosts ("" is none).
func ParseAllow(s string) []string {
	out := []string{}
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// CheckAllow checks a list of allowed hosts: each a host name, or
// *.name for its subdomains.
func CheckAllow(hosts []string) error {
	for _, h := range hosts {
		c := canonicalHost(h)
		name := strings.TrimPrefix(c, "*.")
		if name == "" || strings.ContainsAny(name, "*/:@ ") {
			return fmt.Errorf("allowed host %q: want a host name like example.com, or *.example.com for its subdomains", h)
		}
	}
	return nil
}

// canonicalHost lowercases a host name and drops a final dot.
func canonicalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

// listed reports whether host is on the operator's list.
func (p *Proxy) listed(host string) bool {
	for _, a := range p.allow {
		if a == host || strings.HasPrefix(a, "*.") && strings.HasSuffix(host, a[1:]) {
			return true
		}
	}
	return false
}

// refusal is an error that tells the agent why its connection was refused
// (status: what the proxy answers).
type refusal struct {
	status int
	msg    string
}

func (r *refusal) Error() string { return r.msg }

func refuse(status int, format string, args ...any) error {
	return &refusal{status: status, msg: fmt.Sprintf(format, args...)}
}

// decide checks host:port for c's node and returns the addresses to
// connect to (the ones checked) and who allowed it, or a *refusal.
func (p *Proxy) decide(ctx context.Context, c orchestrator.Caller, host string, port int) ([]netip.Addr, string, error) {
	if host == "" || port <= 0 || port > 65535 {
		return nil, "", refuse(400, "filepath egress: %q is not a host and port", net.JoinHostPort(host, strconv.Itoa(port)))
	}
	addrs, err := p.resolve(ctx, host)
	if err != nil {
		return nil, "", err
	}
	if !p.cfg.AllowPrivate {
		for _, a := range addrs {
			if gitnet.Private(a) {
				return nil, ByPrivate, refuse(403, "filepath egress: %s is refused: it is or resolves to %s, a loopback, private or link-local address, which agents may not reach unless the server runs with %s", host, a, AllowPrivateFlag)
			}
		}
	}
	if p.listed(host) {
		return addrs, ByList, nil
	}
	switch pol, err := p.cfg.Policy.Node(ctx, c, host); {
	case err != nil:
		return nil, "", fmt.Errorf("read the node's network policy: %w", err)
	case pol == "allow":
		return addrs, ByPolicy, nil
	case pol == "deny":
		return nil, ByPolicy, refuse(403, "filepath egress: %s is denied by this agent's policy (network:%s = deny)", host, host)
	}
	d, err := p.ask(ctx, c, host, port)
	if err != nil {
		return nil, "", err
	}
	if !d.Allowed {
		switch d.By {
		case "timeout":
			return nil, d.By, refuse(403, "filepath egress: %s port %d is refused: nobody answered the approval request in time", host, port)
		case "agent":
			return nil, d.By, refuse(403, "filepath egress: %s port %d is refused: the request was withdrawn", host, port)
		}
		return nil, d.By, refuse(403, "filepath egress: %s port %d was denied by %s", host, port, d.By)
	}
	return addrs, d.By, nil
}

// ask asks the person once for all of a node's connections to host that
// wait at the same time.
func (p *Proxy) ask(ctx context.Context, c orchestrator.Caller, host string, port int) (Decision, error) {
	k := askKey{c.NodeID, host}
	p.mu.Lock()
	a := p.asks[k]
	if a == nil {
		a = &ask{done: make(chan struct{})}
		p.asks[k] = a
		p.mu.Unlock()
		// Asked under this connection's ctx: should it go away first, the
		// request is withdrawn and the others waiting ask again.
		a.d, a.err = p.cfg.Policy.Ask(ctx, c, host, port)
		p.mu.Lock()
		delete(p.asks, k)
		p.mu.Unlock()
		close(a.done)
		return a.d, a.err
	}
	p.mu.Unlock()
	select {
	case <-a.done:
		if a.err != nil && ctx.Err() == nil && errors.Is(a.err, context.Canceled) {
			// The asking connection went away; this one asks again.
			return p.ask(ctx, c, host, port)
		}
		return a.d, a.err
	case <-ctx.Done():
		return Decision{}, ctx.Err()
	}
}

// resolve returns host's addresses (itself when it is an address).
func (p *Proxy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	r := p.cfg.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	got, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil || len(got) == 0 {
		return nil, refuse(502, "filepath egress: %s does not resolve: %v", host, err)
	}
	out := make([]netip.Addr, 0, len(got))
	for _, a := range got {
		out = append(out, a.Unmap())
	}
	return out, nil
}

// connect dials the first of addrs that answers.
func (p *Proxy) connect(ctx context.Context, host string, addrs []netip.Addr, port int) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	var errs []error
	for _, a := range addrs {
		conn, err := p.dial(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, refuse(502, "filepath egress: connect to %s port %d: %v", host, port, errors.Join(errs...))
}

func (p *Proxy) audit(ctx context.Context, c Connection) {
	if p.cfg.Audit != nil {
		p.cfg.Audit(context.WithoutCancel(ctx), c)
	}
}
