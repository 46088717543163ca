package api

import (
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
)

// checkCSRF guards the changes a browser makes with the session cookie,
// which it also sends when another site's page posts a form or a fetch to
// this server (SameSite does not cover another port of the same host). An
// unsafe request must come from this server's own pages or an allowed
// origin, and carry its body as application/json (raw uploads to the files
// also as application/octet-stream): a cross-site page can send neither
// without a CORS preflight, which this server never grants. Bearer-key
// requests are not checked: browsers do not add that header on their own.
func (s *Server) checkCSRF(c echo.Context) error {
	r := c.Request()
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if err := checkSameOrigin(r, s.cfg.AllowedOrigins); err != nil {
		return err
	}
	ct := r.Header.Get(echo.HeaderContentType)
	if ct == "" && r.ContentLength == 0 {
		return nil // no body
	}
	mt, _, _ := mime.ParseMediaType(ct)
	if mt == echo.MIMEApplicationJSON || (mt == echo.MIMEOctetStream && isUploadRoute(c)) {
		return nil
	}
	// A form can post multipart/form-data across sites without a
	// preflight: the upload route takes it on the origin check above alone.
	if mt == echo.MIMEMultipartForm && (c.Path() == apiPrefix+"/sessions/:id/fs/_/upload" || c.Path() == apiPrefix+"/sessions/:id/nodes/:node/fs/_/upload") {
		return nil
	}
	if ct == "" {
		ct = "none"
	}
	return orchestrator.Errorf(orchestrator.EForbidden, "a request authenticated by the login cookie must send its body as application/json, not %s", ct)
}

// isUploadRoute reports whether the request writes a file of the session
// filesystem, which takes raw bytes.
func isUploadRoute(c echo.Context) bool {
	m := c.Request().Method
	if m != http.MethodPost && m != http.MethodPut {
		return false
	}
	switch c.Path() {
	case apiPrefix + "/sessions/:id/fs", apiPrefix + "/sessions/:id/fs/", apiPrefix + "/sessions/:id/fs/*",
		apiPrefix + "/sessions/:id/nodes/:node/fs", apiPrefix + "/sessions/:id/nodes/:node/fs/", apiPrefix + "/sessions/:id/nodes/:node/fs/*":
		return true
	}
	return false
}

// checkSameOrigin accepts a request whose Origin is this server's (its
// host) or matches an allowed pattern; without Origin, one a browser marks
// Sec-Fetch-Site same-origin (or none: typed by the user), else one whose
// Referer is of an accepted origin. Anything else is refused: a browser
// always says where an unsafe request comes from.
func checkSameOrigin(r *http.Request, patterns []string) error {
	if origin := r.Header.Get("Origin"); origin != "" {
		return checkOriginValue(origin, r.Host, patterns)
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "same-origin", "none":
		return nil
	case "":
	default:
		return orchestrator.Errorf(orchestrator.EForbidden, "a %s request (Sec-Fetch-Site: %s) cannot change anything with the login cookie", site, site)
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		u, err := url.Parse(ref)
		if err != nil || u.Host == "" {
			return orchestrator.Errorf(orchestrator.EForbidden, "referer %q is not a valid URL with a host", ref)
		}
		return checkOriginValue(u.Scheme+"://"+u.Host, r.Host, patterns)
	}
	return orchestrator.Errorf(orchestrator.EForbidden, "a %s authenticated by the login cookie must say where it comes from (Origin); scripts authenticate with an API key (Authorization: Bearer)", r.Method)
}

// checkOriginValue accepts an origin (scheme://host[:port]) on the request's
// own host, or one that matches a pattern (path.Match on the host, or on
// scheme://host when the pattern has "://"). "null" (an opaque origin) is
// refused.
func checkOriginValue(origin, host string, patterns []string) error {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return orchestrator.Errorf(orchestrator.EForbidden, "origin %q is not a valid URL with a host", origin)
	}
	if strings.EqualFold(u.Host, host) {
		return nil
	}
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(target)); ok {
			return nil
		}
	}
	return orchestrator.Errorf(orchestrator.EForbidden, "origin %q is not allowed for host %q: add it with --allowed-origins", origin, host)
}
