package files

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/gitnet"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// file_download: the orchestrator fetches a URL into the workspace, by the
// rules of a session's git clone (orchestrator/gitnet): only http and
// https; a host that is or resolves to a loopback, private, link-local or
// shared address is refused unless the server allows private hosts
// (--git-allow-private); the connection is pinned to the addresses
// checked (a second DNS answer cannot move it); a redirect is followed
// only to the same scheme, host and port; no credentials, cookies or
// proxies of the server's; the body streams into the file (vfs Upload)
// under the per-file limit and the session's quota.

// maxRedirects bounds the redirects one download follows (same host only).
const maxRedirects = 5

// Downloaded is file_download's answer.
type Downloaded struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	MimeType string `json:"mime_type"`
}

// Download fetches rawURL into file p of fs ("": a name from the URL, at
// the workspace's top), replacing a file there.
func (s *Service) Download(ctx context.Context, fs *vfs.FS, rawURL, p string) (Downloaded, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return Downloaded{}, orchestrator.FieldErrorf("url", "url %q is not an http or https URL with a host", cutText(rawURL, 200))
	}
	if u.User != nil {
		return Downloaded{}, orchestrator.FieldErrorf("url", "url has credentials in it; the server sends none")
	}
	if p == "" {
		name := path.Base(u.Path)
		if name == "/" || name == "." || name == "" {
			name = "download"
		}
		p = "/" + name
	}
	if p, err = CleanID("filename", p); err != nil {
		return Downloaded{}, err
	}
	addrs, err := s.resolve(ctx, u.Hostname())
	if err != nil {
		return Downloaded{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DownloadTimeout)
	defer cancel()
	client := s.pinnedClient(u, addrs)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Downloaded{}, orchestrator.FieldErrorf("url", "url: %v", err)
	}
	req.Header.Set("User-Agent", "filepath file_download")
	resp, err := client.Do(req)
	if err != nil {
		var oe *orchestrator.Error
		if errors.As(err, &oe) {
			return Downloaded{}, oe
		}
		return Downloaded{}, orchestrator.Errorf(orchestrator.EUnavailable, "download %s: %s", u.Redacted(), strings.TrimPrefix(err.Error(), "Get "))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Downloaded{}, orchestrator.Errorf(orchestrator.EUnavailable, "download %s: the server answered %s", u.Redacted(), resp.Status)
	}
	max := s.v.Config().MaxFileSize
	if resp.ContentLength > max {
		return Downloaded{}, orchestrator.Errorf(orchestrator.ETooLarge, "download %s is %d bytes: over the %s per-file limit (--file-max)", u.Redacted(), resp.ContentLength, humanBytes(max))
	}
	up, err := fs.NewUpload(ctx, p)
	if err != nil {
		return Downloaded{}, err
	}
	defer up.Abort()
	if _, err := io.Copy(up, resp.Body); err != nil {
		if c := orchestrator.ErrorCode(err); c == orchestrator.ETooLarge || c == orchestrator.EInsufficientStorage {
			return Downloaded{}, LimitError(err)
		}
		return Downloaded{}, orchestrator.Errorf(orchestrator.EUnavailable, "download %s: %v", u.Redacted(), err)
	}
	d, _, err := up.Commit(ctx, vfs.WriteOptions{})
	if err != nil {
		return Downloaded{}, LimitError(err)
	}
	return Downloaded{ID: d.Path, Name: d.Name, Size: d.Size, MimeType: d.MimeType}, nil
}

// resolve returns host's addresses, refusing private ones unless allowed.
func (s *Service) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a.Unmap()}
	} else {
		r := s.cfg.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		got, err := r.LookupNetIP(ctx, "ip", host)
		if err != nil || len(got) == 0 {
			return nil, orchestrator.FieldErrorf("url", "url host %q does not resolve: %v", host, err)
		}
		for _, a := range got {
			addrs = append(addrs, a.Unmap())
		}
	}
	if s.cfg.DownloadAllowPrivate {
		return addrs, nil
	}
	for _, a := range addrs {
		if gitnet.Private(a) {
			what := fmt.Sprintf("host %q resolves to %s", host, a)
			if a.String() == host {
				what = "host " + host
			}
			return nil, orchestrator.Errorf(orchestrator.EForbidden,
				"url %s, a loopback, private or link-local address; this server downloads only from public hosts unless started with %s", what, gitnet.AllowFlag)
		}
	}
	return addrs, nil
}

// pinnedClient is an HTTP client that connects to addrs whatever host a
// request names, follows redirects only within u's scheme, host and port,
// and uses nothing of the server's (proxy, cookies).
func (s *Service) pinnedClient(u *url.URL, addrs []netip.Addr) *http.Client {
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var last error
			for _, a := range addrs {
				c, err := dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
				if err == nil {
					return c, nil
				}
				last = err
			}
			return nil, last
		},
		TLSClientConfig:       &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: time.Minute,
		MaxIdleConns:          1,
		DisableCompression:    true, // the file's bytes, as served
	}
	origin := u.Scheme + "://" + u.Host
	return &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > maxRedirects {
			return orchestrator.Errorf(orchestrator.EUnavailable, "download %s: more than %d redirects", u.Redacted(), maxRedirects)
		}
		if to := req.URL.Scheme + "://" + req.URL.Host; to != origin {
			return orchestrator.Errorf(orchestrator.EForbidden, "download %s: redirected to %s, another host; a download follows redirects only within %s", u.Redacted(), req.URL.Redacted(), origin)
		}
		return nil
	}}
}

// LimitError is a limit the session filesystem refused a stream with, as
// a 413 that names the limit and its flag (any other error as it is).
func LimitError(err error) error {
	switch orchestrator.ErrorCode(err) {
	case orchestrator.ETooLarge:
		return orchestrator.Errorf(orchestrator.ETooLarge, "%s (--file-max)", orchestrator.ErrorMessage(err))
	case orchestrator.EInsufficientStorage:
		return orchestrator.Errorf(orchestrator.ETooLarge, "%s (--session-quota)", orchestrator.ErrorMessage(err))
	}
	return err
}

// humanBytes prints a limit the way the flags take it.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
