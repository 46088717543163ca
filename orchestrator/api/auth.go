package api

import (
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
)

// CookieName is the name of the login session cookie.
const CookieName = "filepath_session"

const userKey = "filepath.user"

// Messages of 401 answers; the UI shows a page for msgSessionExpired.
const (
	msgAuthRequired   = "authentication required: open a login link or send Authorization: Bearer <api key>"
	msgSessionExpired = "session expired; open a new login link"
	msgBadAPIKey      = "invalid API key"
)

// authenticate resolves the user of every /api request from the Bearer API
// key or the session cookie; anything else under /api answers 401. Other
// paths (/healthz, /login, the UI) pass through.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !isAPI(c.Request().URL.Path) {
			return next(c)
		}
		u, err := s.userOf(c)
		if err != nil {
			return err
		}
		c.Set(userKey, u)
		return next(c)
	}
}

// userOf returns the authenticated user of the request or a 401 error.
func (s *Server) userOf(c echo.Context) (store.User, error) {
	ctx := c.Request().Context()
	if h := c.Request().Header.Get(echo.HeaderAuthorization); h != "" {
		key, ok := strings.CutPrefix(h, "Bearer ")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return store.User{}, orchestrator.Errorf(orchestrator.EUnauthorized, "malformed Authorization header: want \"Bearer <api key>\"")
		}
		u, err := s.store.UserByAPIKey(ctx, key)
		if err != nil {
			return store.User{}, authError(err, msgBadAPIKey)
		}
		return u, nil
	}
	ck, err := c.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return store.User{}, orchestrator.Errorf(orchestrator.EUnauthorized, msgAuthRequired)
	}
	u, err := s.store.UserByWebSession(ctx, ck.Value)
	if err != nil {
		return store.User{}, authError(err, msgSessionExpired)
	}
	return u, nil
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

// user returns the authenticated user set by authenticate.
func user(c echo.Context) store.User {
	u, _ := c.Get(userKey).(store.User)
	return u
}

func (s *Server) getMe(c echo.Context) error {
	u := user(c)
	return c.JSON(http.StatusOK, map[string]any{"id": u.ID, "name": u.Name})
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
	u, err := s.store.ConsumeLoginToken(ctx, tok)
	if err != nil {
		if orchestrator.ErrorCode(err) == orchestrator.EInternal {
			return err
		}
		return s.loginFailed(c, "The link was already used or has expired.")
	}
	val, err := s.store.CreateWebSession(ctx, u.ID, s.cfg.SessionTTL)
	if err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{
		Name:     CookieName,
		Value:    val,
		Path:     "/",
		Expires:  time.Now().Add(s.cfg.SessionTTL),
		MaxAge:   int(s.cfg.SessionTTL / time.Second),
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   c.IsTLS(),
	})
	s.log.Info("login", "user", u.Name)
	return c.Redirect(http.StatusSeeOther, "/")
}

func (s *Server) loginFailed(c echo.Context, why string) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(http.StatusUnauthorized)
	return loginFailedPage.Execute(c.Response(), why)
}
