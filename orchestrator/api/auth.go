package api

import (
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
)

// CookieName is the name of the login session cookie.
const CookieName = "filepath_session"

const userKey = "filepath.user"

// Messages of 401 answers; the UI shows a page for msgSessionExpired.
const (
	msgAuthRequired   = "authentication required: open a login link or send Authorization: Bearer <api key>"
	msgSessionExpired = "session expired; open a new login link"
	msgBadAPIKey      = "invalid API key"
	msgExpiredAPIKey  = "API key expired at %s; create a new one with `filepath apikey create`"
)

// authenticate resolves the user of every /api request from the Bearer API
// key or the session cookie; anything else under /api answers 401. Other
// paths (/healthz, /login, the UI) pass through.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !isAPI(c.Request().URL.Path) {
			return next(c)
		}
		p, viaCookie, err := s.principalOf(c)
		if err != nil {
			return err
		}
		if viaCookie {
			if err := s.checkCSRF(c); err != nil {
				return err
			}
		}
		if p.NodeID != "" {
			if err := s.nodeKeyAllowed(c, p); err != nil {
				return err
			}
		}
		c.Set(userKey, p)
		// Every route under /sessions/:id, including routes other packages
		// register (the session files), answers 404 for a session the user
		// does not own, before its handler runs (DESIGN invariant 9).
		if sid := c.Param("id"); sid != "" && strings.HasPrefix(c.Path(), apiPrefix+"/sessions/:id") {
			if _, err := s.sessions.GetSession(c.Request().Context(), p.User.ID, sid); err != nil {
				return err
			}
		}
		return next(c)
	}
}

// principalOf returns who the request authenticates as, and whether by
// the session cookie (which a browser sends on its own, so that changes
// need a CSRF check), or a 401 error.
func (s *Server) principalOf(c echo.Context) (p identity.Principal, viaCookie bool, err error) {
	ctx := c.Request().Context()
	if h := c.Request().Header.Get(echo.HeaderAuthorization); h != "" {
		key, ok := strings.CutPrefix(h, "Bearer ")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return p, false, orchestrator.Errorf(orchestrator.EUnauthorized, "malformed Authorization header: want \"Bearer <api key>\"")
		}
		p, err := s.users.AuthAPIKey(ctx, key)
		if xe := (*identity.APIKeyExpiredError)(nil); errors.As(err, &xe) {
			// Only the key's holder gets here: the message is about that
			// key alone.
			return p, false, orchestrator.Errorf(orchestrator.EUnauthorized, msgExpiredAPIKey, xe.ExpiresAt.UTC().Format(time.RFC3339))
		}
		if err != nil {
			return p, false, authError(err, msgBadAPIKey)
		}
		return p, false, nil
	}
	ck, err := c.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return p, false, orchestrator.Errorf(orchestrator.EUnauthorized, msgAuthRequired)
	}
	u, err := s.users.UserByWebSession(ctx, ck.Value)
	if err != nil {
		return p, false, authError(err, msgSessionExpired)
	}
	return identity.Principal{User: u}, true, nil
}

// nodeKeyOpen are the routes a node key may call outside its session.
var nodeKeyOpen = map[string]bool{
	"GET " + apiPrefix + "/me":           true,
	"GET " + apiPrefix + "/agents":       true,
	"GET " + apiPrefix + "/models":       true,
	"GET " + apiPrefix + "/openapi.json": true,
}

// nodeKeyDenied are routes of its own session that a node key may not call:
// they act on the whole session, which belongs to the user.
var nodeKeyDenied = map[string]bool{
	"DELETE " + apiPrefix + "/sessions/:id":     true,
	"PATCH " + apiPrefix + "/sessions/:id":      true, // checks and the LLM budget are the user's to set, never an agent's
	"POST " + apiPrefix + "/sessions/:id/start": true,
	"POST " + apiPrefix + "/sessions/:id/stop":  true,
	"POST " + apiPrefix + "/sessions/:id/nodes": true,
	// The tree is the user's: a node key neither deletes its node (its
	// subtree and history with it) nor moves it.
	"DELETE " + apiPrefix + "/sessions/:id/nodes/:node":    true,
	"POST " + apiPrefix + "/sessions/:id/nodes/:node/move": true,
	// Vendor keys are the user's: an agent neither lists nor sets them.
	"GET " + apiPrefix + "/sessions/:id/secrets":          true,
	"PUT " + apiPrefix + "/sessions/:id/secrets/:name":    true,
	"DELETE " + apiPrefix + "/sessions/:id/secrets/:name": true,
	// The audit logs name paths outside a node's allowed_paths, and the
	// session's names every node's calls.
	"GET " + apiPrefix + "/sessions/:id/fs/_/audit": true,
	"GET " + apiPrefix + "/sessions/:id/audit":      true,
	// The approvals inbox is the user's: an agent never answers, nor reads
	// the other agents' requests.
	"GET " + apiPrefix + "/sessions/:id/approvals":            true,
	"POST " + apiPrefix + "/sessions/:id/approvals/:approval": true,
	// Review and downloads are the user's: they read the whole workspace,
	// past a node's allowed_paths, and a comment is the user's message.
	"GET " + apiPrefix + "/sessions/:id/changes":                      true,
	"GET " + apiPrefix + "/sessions/:id/changes/file":                 true,
	"GET " + apiPrefix + "/sessions/:id/changes/download":             true,
	"GET " + apiPrefix + "/sessions/:id/download":                     true,
	"GET " + apiPrefix + "/sessions/:id/nodes/:node/changes":          true,
	"GET " + apiPrefix + "/sessions/:id/nodes/:node/changes/file":     true,
	"GET " + apiPrefix + "/sessions/:id/nodes/:node/changes/download": true,
	"GET " + apiPrefix + "/sessions/:id/nodes/:node/download":         true,
	"POST " + apiPrefix + "/sessions/:id/nodes/:node/comments":        true,
}

// nodeKeyParent are routes on another node that a node key may call when
// it is that node's parent; the handler checks the parenthood.
var nodeKeyParent = map[string]bool{
	"POST " + apiPrefix + "/sessions/:id/nodes/:node/merge": true,
}

// nodeKeyAllowed enforces a node key's scope (DESIGN invariant 9): its own
// session's routes but those of nodeKeyDenied, reads (GET) of its own node
// and its descendants, and changes of its own node only. Other sessions are
// 404, like another user's. The tree, the stream and the files narrow what
// they answer themselves (getTree, recordScope, filesOf).
func (s *Server) nodeKeyAllowed(c echo.Context, p identity.Principal) error {
	route := c.Request().Method + " " + c.Path()
	if nodeKeyOpen[route] {
		return nil
	}
	if sid := c.Param("id"); sid == "" || sid != p.SessionID {
		if sid == "" {
			return orchestrator.Errorf(orchestrator.EForbidden, "this API key belongs to node %s and reaches only its own session", p.NodeID)
		}
		return orchestrator.Errorf(orchestrator.ENotFound, "session %s not found", sid)
	}
	if nodeKeyDenied[route] {
		return orchestrator.Errorf(orchestrator.EForbidden, "this API key belongs to node %s and cannot %s", p.NodeID, route)
	}
	nid := c.Param("node")
	if nid == "" || nid == p.NodeID || nodeKeyParent[route] {
		return nil
	}
	if c.Request().Method != http.MethodGet {
		return orchestrator.Errorf(orchestrator.EForbidden, "this API key belongs to node %s and changes only that node", p.NodeID)
	}
	scope, err := s.nodeScope(c.Request().Context(), p)
	if err != nil {
		return err
	}
	if !scope[nid] {
		return orchestrator.Errorf(orchestrator.EForbidden, "this API key belongs to node %s and reads only that node and its descendants", p.NodeID)
	}
	return nil
}

// authError turns a failed credential lookup into a 401 with msg; store
// failures stay internal.
func authError(err error, msg string) error {
	switch orchestrator.ErrorCode(err) {
	case orchestrator.ENotFound, orchestrator.EUnauthorized, orchestrator.EInvalid:
		return orchestrator.Errorf(orchestrator.EUnauthorized, "%s", msg)
	}
	return err
}

// principal returns who the request authenticates as (set by authenticate).
func principal(c echo.Context) identity.Principal {
	p, _ := c.Get(userKey).(identity.Principal)
	return p
}

// user returns the authenticated user set by authenticate.
func user(c echo.Context) identity.User { return principal(c).User }

// Me is the authenticated user (GET /me); a node's key names its session
// and node too.
type Me struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	SessionID string `json:"session_id,omitempty"` // node keys only
	NodeID    string `json:"node_id,omitempty"`    // node keys only
}

func (s *Server) getMe(c echo.Context) (Me, error) {
	p, _ := c.Get(userKey).(identity.Principal)
	return Me{ID: p.User.ID, Name: p.User.Name, SessionID: p.SessionID, NodeID: p.NodeID}, nil
}

var loginFailedPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>filepath: login link not valid</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;line-height:1.5}code{background:#eee;padding:.1rem .3rem}</style>
</head><body>
<h1>This login link cannot be used</h1>
<p>{{.}}</p>
<p>Login links work once and expire. To get a new one, run on the server:</p>
<pre><code>filepath user login NAME</code></pre>
<p>or create a new user with <code>filepath user add NAME</code>. Each prints a fresh login link.</p>
</body></html>
`))

// login consumes a one-time token, sets the session cookie and sends the
// browser to the UI. A bad token gets a readable page, not JSON.
func (s *Server) login(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("Referrer-Policy", "no-referrer")
	tok := c.QueryParam("token")
	if tok == "" {
		return s.loginFailed(c, "The link has no token.")
	}
	ctx := c.Request().Context()
	u, err := s.users.ConsumeLoginToken(ctx, tok)
	if err != nil {
		if orchestrator.ErrorCode(err) == orchestrator.EInternal {
			return err
		}
		return s.loginFailed(c, "The link was already used or has expired.")
	}
	val, err := s.users.CreateWebSession(ctx, u.ID, s.cfg.SessionTTL)
	if err != nil {
		return err
	}
	s.setSessionCookie(c, val, s.cfg.SessionTTL)
	s.log.Info("login", "user", u.Name, "ip", c.RealIP())
	return c.Redirect(http.StatusSeeOther, "/")
}

// setSessionCookie sets the login cookie for ttl, or clears it (ttl 0).
// It is Secure over HTTPS, including behind a trusted proxy that says so.
func (s *Server) setSessionCookie(c echo.Context, val string, ttl time.Duration) {
	ck := &http.Cookie{
		Name:     CookieName,
		Value:    val,
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   s.isHTTPS(c.Request()),
	}
	if ttl > 0 {
		ck.Expires, ck.MaxAge = time.Now().Add(ttl), int(ttl/time.Second)
	} else {
		ck.MaxAge = -1 // Max-Age=0: delete it now
	}
	c.SetCookie(ck)
}

// logout serves POST /api/v1/logout: it ends this browser session (or,
// with ?all=true, every browser session of the user) and clears the
// cookie. API keys are not sessions: they end when revoked (deleted) or at
// their expiry.
func (s *Server) logout(c echo.Context) error {
	ck, err := c.Cookie(CookieName)
	if err != nil || ck.Value == "" || c.Request().Header.Get(echo.HeaderAuthorization) != "" {
		return badRequest("", "logout ends a browser session; this request authenticates with an API key, which stays valid until it is revoked (filepath apikey revoke) or expires")
	}
	var q logoutQuery
	if err := bindQuery(c, &q); err != nil {
		return err
	}
	ctx := c.Request().Context()
	u := user(c)
	if q.All {
		n, err := s.users.DeleteWebSessionsOf(ctx, u.ID)
		if err != nil {
			return err
		}
		s.log.Info("logout everywhere", "user", u.Name, "sessions", n)
	} else {
		if err := s.users.DeleteWebSession(ctx, ck.Value); err != nil {
			return err
		}
		s.log.Info("logout", "user", u.Name)
	}
	s.setSessionCookie(c, "", 0)
	return c.NoContent(http.StatusNoContent)
}

// logoutQuery is the query of POST /logout.
type logoutQuery struct {
	All bool `query:"all" jsonschema_description:"true: end every browser session of the user"`
}

func (s *Server) loginFailed(c echo.Context, why string) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	c.Response().WriteHeader(http.StatusUnauthorized)
	return loginFailedPage.Execute(c.Response(), why)
}
