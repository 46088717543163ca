package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
)

// IsProxyRequest reports whether r asks a proxy for something: a CONNECT,
// or a request whose target is an absolute URL.
func IsProxyRequest(r *http.Request) bool {
	return r.Method == http.MethodConnect || r.URL.IsAbs()
}

// ServeHTTP serves one proxy request of the node orchestrator.CallerFrom
// names: a CONNECT becomes a tunnel, a plain http:// request is forwarded.
// A refused one answers 403 (or 502 when the destination cannot be
// reached) with the reason, in the status line of a CONNECT answer too,
// where clients show no body.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := orchestrator.CallerFrom(r.Context())
	if !ok || c.NodeID == "" {
		http.Error(w, "filepath egress: not an agent's request", http.StatusForbidden)
		return
	}
	if r.Method == http.MethodConnect {
		p.tunnel(w, r, c)
		return
	}
	p.forward(w, r, c)
}

// target is the host and port of a request (the port from the scheme when
// it names none).
func target(hostport, scheme string) (string, int, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		default:
			return "", 0, refuse(400, "filepath egress: %q names no port", hostport)
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return "", 0, refuse(400, "filepath egress: %q: the port is not a number", hostport)
	}
	return canonicalHost(strings.Trim(host, "[]")), n, nil
}

// tunnel serves a CONNECT: checks the destination, connects, answers 200
// and copies bytes both ways until either side ends.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) {
	conn := Connection{Caller: c, Method: http.MethodConnect, Start: p.clock()}
	host, port, err := target(r.Host, "")
	conn.Host, conn.Port = host, port
	var addrs []netip.Addr
	if err == nil {
		addrs, conn.By, err = p.decide(r.Context(), c, host, port)
	}
	var up net.Conn
	if err == nil {
		up, err = p.connect(r.Context(), host, addrs, port)
	}
	if err != nil {
		p.fail(w, r, &conn, err, true)
		return
	}
	defer up.Close()
	conn.Addr = up.RemoteAddr().String()
	rc := http.NewResponseController(w)
	down, buf, err := rc.Hijack()
	if err != nil {
		p.fail(w, r, &conn, refuse(500, "filepath egress: cannot tunnel on this connection: %v", err), true)
		return
	}
	defer down.Close()
	down.SetDeadline(time.Time{}) //nolint:errcheck // the server's timeouts are for requests, not tunnels
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Error = "write to the agent: " + err.Error()
		p.finish(r.Context(), &conn)
		return
	}
	var out, in atomic.Int64
	done := make(chan struct{}, 2)
	go func() { // agent → destination (what the client sent after its CONNECT first)
		n, _ := io.Copy(up, io.MultiReader(bufReader(buf), down))
		out.Add(n)
		closeWrite(up)
		done <- struct{}{}
	}()
	go func() { // destination → agent
		n, _ := io.Copy(down, up)
		in.Add(n)
		closeWrite(down)
		done <- struct{}{}
	}()
	select {
	case <-done:
	case <-r.Context().Done():
	}
	// One side ended (or the server closes): the tunnel ends when the
	// other side's copy ends too, or the conns are closed below.
	select {
	case <-done:
	case <-r.Context().Done():
	}
	up.Close()
	down.Close()
	conn.BytesOut, conn.BytesIn = out.Load(), in.Load()
	p.finish(r.Context(), &conn)
}

// bufReader is what the server read ahead of a hijacked connection.
func bufReader(rw *bufio.ReadWriter) io.Reader {
	if rw == nil || rw.Reader.Buffered() == 0 {
		return strings.NewReader("")
	}
	b, _ := rw.Reader.Peek(rw.Reader.Buffered())
	return strings.NewReader(string(b))
}

// closeWrite half-closes c so the other end sees EOF, or closes it.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite() //nolint:errcheck // closed already is fine
		return
	}
	c.Close()
}

// forward serves a plain http:// request in absolute form: checks the
// destination, and sends the request there over a connection of its own.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) {
	conn := Connection{Caller: c, Method: r.Method, Start: p.clock()}
	if r.URL.Scheme != "http" {
		p.fail(w, r, &conn, refuse(400, "filepath egress: only http:// requests are forwarded; use CONNECT (HTTPS_PROXY) for %s://", r.URL.Scheme), false)
		return
	}
	host, port, err := target(r.URL.Host, "http")
	conn.Host, conn.Port = host, port
	var addrs []netip.Addr
	if err == nil {
		addrs, conn.By, err = p.decide(r.Context(), c, host, port)
	}
	var up net.Conn
	if err == nil {
		up, err = p.connect(r.Context(), host, addrs, port)
	}
	if err != nil {
		p.fail(w, r, &conn, err, false)
		return
	}
	conn.Addr = up.RemoteAddr().String()
	counted := &countConn{Conn: up}
	used := false
	tr := &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			if used {
				return nil, errors.New("one connection per request")
			}
			used = true
			return counted, nil
		},
		DisableKeepAlives:  true,
		DisableCompression: true,
		Proxy:              nil,
	}
	defer tr.CloseIdleConnections()
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = r.URL
			pr.Out.Host = r.Host
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Del("Proxy-Connection")
			pr.Out.Header.Del("X-Forwarded-For")
		},
		Transport: tr,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			conn.Error = fmt.Sprintf("filepath egress: %s port %d: %v", host, port, err)
			http.Error(w, conn.Error, http.StatusBadGateway)
		},
	}
	rp.ServeHTTP(w, r)
	up.Close()
	conn.BytesOut, conn.BytesIn = counted.out.Load(), counted.in.Load()
	p.finish(r.Context(), &conn)
}

// countConn counts the bytes read from and written to a connection.
type countConn struct {
	net.Conn
	out, in atomic.Int64 // written (from the agent), read (to the agent)
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.in.Add(int64(n))
	return n, err
}

// Write counts b before it is sent: http.Transport writes a request in a
// goroutine of its own, and its answer can be read (and the connection
// audited) before that goroutine would count after the write. A short
// write takes back what was not sent.
func (c *countConn) Write(b []byte) (int, error) {
	c.out.Add(int64(len(b)))
	n, err := c.Conn.Write(b)
	if n < len(b) {
		c.out.Add(int64(n - len(b)))
	}
	return n, err
}

// fail answers a refused or failed request with its reason, and audits it.
func (p *Proxy) fail(w http.ResponseWriter, r *http.Request, conn *Connection, err error, connect bool) {
	status, msg := http.StatusBadGateway, err.Error()
	var rf *refusal
	switch {
	case errors.As(err, &rf):
		status = rf.status
	case r.Context().Err() != nil:
		msg = "filepath egress: the client went away"
	default:
		p.log.Warn("egress", "node", conn.Caller.NodeID, "host", conn.Host, "err", err)
		msg = "filepath egress: " + msg
	}
	conn.Error = msg
	w.Header().Set("X-Filepath-Egress", msg)
	if connect {
		// Clients show a CONNECT answer's status line, not its body: the
		// reason goes in both.
		if down, _, herr := http.NewResponseController(w).Hijack(); herr == nil {
			reason := strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
			fmt.Fprintf(down, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
				status, reason, len(msg)+1, msg)
			down.Close()
			p.finish(r.Context(), conn)
			return
		}
	}
	http.Error(w, msg, status)
	p.finish(r.Context(), conn)
}

func (p *Proxy) finish(ctx context.Context, conn *Connection) {
	conn.End = p.clock()
	p.audit(ctx, *conn)
}
