package agentapi

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/egress"
)

// TestProxyAuth: a proxy request needs the node's token as its
// Proxy-Authorization password (407 without, 401 for a wrong one); an open
// tunnel ends when its listener closes (it is a hijacked connection the
// HTTP server no longer tracks).
func TestProxyAuth(t *testing.T) {
	f := newFixture(t)
	dest, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dest.Close()
	go func() {
		for {
			c, err := dest.Accept()
			if err != nil {
				return
			}
			go io.Copy(io.Discard, c) // holds the connection open
		}
	}()
	px, err := egress.New(egress.Config{Allow: []string{"127.0.0.1"}, AllowPrivate: true, Policy: askedPolicy{}})
	if err != nil {
		t.Fatal(err)
	}
	s := f.server(t, Config{Egress: px})
	addr := strings.TrimPrefix(s.URL(), "http://")
	connect := func(auth string) (net.Conn, *http.Response) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", dest.Addr(), dest.Addr())
		if auth != "" {
			fmt.Fprintf(c, "Proxy-Authorization: Basic %s\r\n", base64.StdEncoding.EncodeToString([]byte("agent:"+auth)))
		}
		io.WriteString(c, "\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		return c, resp
	}
	if _, r := connect(""); r.StatusCode != http.StatusProxyAuthRequired || r.Header.Get("Proxy-Authenticate") == "" {
		t.Fatalf("without credentials: %s %v", r.Status, r.Header)
	}
	if _, r := connect("fp_wrong"); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %s", r.Status)
	}
	if u := s.ProxyURL(f.keyA); !strings.HasPrefix(u, "http://agent:"+f.keyA+"@127.0.0.1:") {
		t.Fatalf("ProxyURL %q", u)
	}
	c, r := connect(f.keyA)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("the node's token: %s", r.Status)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		ended <- err
	}()
	s.Shutdown()
	if err := testkit.Recv(t, ended, 10*time.Second, "the tunnel to end with its listener"); err == nil {
		t.Fatal("read data from a tunnel that should have ended")
	}
}
