package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

const uiNotBuilt = "UI not built: run make web\n"

// inlineScriptRE finds a page's script elements: their attributes and text.
var inlineScriptRE = regexp.MustCompile(`(?is)<script(\s[^>]*)?>(.*?)</script\s*>`)

var srcAttrRE = regexp.MustCompile(`(?i)\ssrc\s*=`)

// pageCSP is the Content-Security-Policy of a UI page: code only from this
// server, and of the page's own inline scripts (the theme switch and
// SvelteKit's bootstrap) exactly these, by hash, so that an injected script
// never runs. Styles allow 'unsafe-inline' because Svelte's markup and
// SvelteKit's root element carry style attributes; CSS cannot run code.
// connect-src 'self' covers the WebSocket of the same host.
func pageCSP(page []byte) string {
	var b strings.Builder
	b.WriteString("default-src 'self'; script-src 'self'")
	for _, m := range inlineScriptRE.FindAllSubmatch(page, -1) {
		if srcAttrRE.Match(m[1]) {
			continue
		}
		sum := sha256.Sum256(m[2])
		b.WriteString(" 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'")
	}
	b.WriteString("; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; " +
		"object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'")
	return b.String()
}

// serveUI serves the embedded UI for a GET outside /api: a file when it
// exists, else index.html so that deep links (/session/ID) survive a reload.
// It runs from handleError for unrouted paths.
func (s *Server) serveUI(c echo.Context) error {
	r := c.Request()
	if isAPI(r.URL.Path) {
		return echo.ErrNotFound
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	if st, err := fs.Stat(s.cfg.UI, name); err != nil || st.IsDir() {
		name = "index.html"
	}
	if _, err := fs.Stat(s.cfg.UI, name); err != nil {
		return c.String(http.StatusOK, uiNotBuilt)
	}
	if name == "index.html" {
		c.Response().Header().Set("Cache-Control", "no-cache")
	} else if strings.HasPrefix(name, "_app/immutable/") {
		c.Response().Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	}
	if path.Ext(name) == ".html" {
		page, err := fs.ReadFile(s.cfg.UI, name)
		if err != nil {
			return err
		}
		csp, ok := s.uiCSP.Load(name)
		if !ok {
			csp, _ = s.uiCSP.LoadOrStore(name, pageCSP(page))
		}
		c.Response().Header().Set("Content-Security-Policy", csp.(string))
		http.ServeContent(c.Response(), r, name, time.Time{}, bytes.NewReader(page))
		return nil
	}
	f, err := s.cfg.UI.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	rs, ok := f.(io.ReadSeeker)
	if !ok {
		return c.Stream(http.StatusOK, mime.TypeByExtension(path.Ext(name)), f)
	}
	// The name is already cleaned, so ServeContent (unlike ServeFileFS)
	// need not refuse paths with dot segments.
	http.ServeContent(c.Response(), r, name, st.ModTime(), rs)
	return nil
}
