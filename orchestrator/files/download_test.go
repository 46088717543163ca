package files

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// fakeDNS answers every name with the addresses of addr's host.
type fakeDNS struct{ addr string }

func (d fakeDNS) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr(d.addr)}, nil
}

func TestDownload(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("elsewhere")) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/img/logo":
			w.Write([]byte(png))
		case "/moved":
			http.Redirect(w, r, "/img/logo", http.StatusFound)
		case "/away":
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
		case "/big":
			w.Write(make([]byte, 3000))
		case "/missing":
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)

	// The test server is on loopback: refused by default, with the flag
	// that allows it named.
	f := newFixture(t, Config{}, vfs.Config{})
	_, err := f.call(t, Caller{}, "file_download", map[string]any{"url": srv.URL + "/img/logo"})
	if orchestrator.ErrorCode(err) != orchestrator.EForbidden || !strings.Contains(err.Error(), "--git-allow-private") {
		t.Fatalf("a loopback URL: %v", err)
	}
	// A name that resolves to loopback is refused the same way.
	f = newFixture(t, Config{Resolver: fakeDNS{"127.0.0.1"}}, vfs.Config{})
	if _, err := f.call(t, Caller{}, "file_download", map[string]any{"url": "http://files.example:" + u.Port() + "/img/logo"}); orchestrator.ErrorCode(err) != orchestrator.EForbidden {
		t.Fatalf("a name of a loopback address: %v", err)
	}

	f = newFixture(t, Config{DownloadAllowPrivate: true, Resolver: fakeDNS{"127.0.0.1"}}, vfs.Config{MaxFileSize: 2000})
	agent, _ := f.fs.ForNode("n1", nil)
	c := Caller{SessionID: f.sid, NodeID: "n1", FS: agent}
	// the name is resolved once, by the server's rules, and the
	// connection goes to that address
	out, err := f.call(t, c, "file_download", map[string]any{"url": "http://files.example:" + u.Port() + "/img/logo"})
	if err != nil || out["id"] != "/logo" || out["mime_type"] != "image/png" || out["size"] != float64(len(png)) {
		t.Fatalf("download: %v %v", out, err)
	}
	d, _ := f.fs.Info(f.ctx, "/logo")
	if d.Source != vfs.SourceCreated || d.NodeID != "n1" {
		t.Fatalf("downloaded file's meta: %+v", d.Meta)
	}
	out, err = f.call(t, c, "file_download", map[string]any{"url": srv.URL + "/moved", "filename": "assets/logo.png"})
	if err != nil || out["id"] != "/assets/logo.png" {
		t.Fatalf("a redirect on the same host: %v %v", out, err)
	}
	if _, err := f.call(t, c, "file_download", map[string]any{"url": srv.URL + "/away"}); orchestrator.ErrorCode(err) != orchestrator.EForbidden || !strings.Contains(err.Error(), "another host") {
		t.Fatalf("a redirect to another host: %v", err)
	}
	if _, err := f.call(t, c, "file_download", map[string]any{"url": srv.URL + "/big"}); orchestrator.ErrorCode(err) != orchestrator.ETooLarge || !strings.Contains(err.Error(), "--file-max") {
		t.Fatalf("over the file limit: %v", err)
	}
	if _, err := f.fs.Stat(f.ctx, "/big"); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("a refused download left a file: %v", err)
	}
	if _, err := f.call(t, c, "file_download", map[string]any{"url": srv.URL + "/missing"}); orchestrator.ErrorCode(err) != orchestrator.EUnavailable || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a 404: %v", err)
	}
	for _, bad := range []string{"ftp://example.com/x", "file:///etc/passwd", "http://user:pw@example.com/x", "not a url"} {
		if _, err := f.call(t, c, "file_download", map[string]any{"url": bad}); orchestrator.ErrorField(err) != "url" {
			t.Fatalf("%s: %v", bad, err)
		}
	}
	// a node's allowed paths hold for downloads
	kept, _ := f.fs.ForNode("n2", []string{"/src"})
	if _, err := f.call(t, Caller{SessionID: f.sid, NodeID: "n2", FS: kept}, "file_download", map[string]any{"url": srv.URL + "/img/logo"}); orchestrator.ErrorCode(err) != orchestrator.EForbidden {
		t.Fatalf("outside allowed paths: %v", err)
	}
}
