package api

import (
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/labstack/echo/v4"
)

const uiNotBuilt = "UI not built: run make web\n"

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
