package api

import (
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/labstack/echo/v4"
)

const uiNotBuilt = "UI not built: run make web\n"

// serveUI serves the embedded UI for every GET outside /api: a file when it
// exists, else index.html so that deep links (/session/ID) survive a reload.
func (s *Server) serveUI(c echo.Context) error {
	r := c.Request()
	if isAPI(r.URL.Path) {
		return echo.ErrNotFound
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return echo.ErrMethodNotAllowed
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
	http.ServeFileFS(c.Response(), r, s.cfg.UI, name)
	return nil
}
