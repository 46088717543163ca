package api_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/api"
)

func TestLoginFlow(t *testing.T) {
	e := newEnv(t, envOpts{})
	path := strings.TrimPrefix(e.login, e.base)

	r := e.do("GET", path, "", "")
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/" {
		t.Fatalf("login: %d Location=%q, want 303 /", r.status, r.header.Get("Location"))
	}
	resp := &http.Response{Header: r.header}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "filepath_session" {
			ck = c
		}
	}
	if ck == nil || ck.Value == "" {
		t.Fatalf("no filepath_session cookie in %v", r.header["Set-Cookie"])
	}
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.Path != "/" {
		t.Fatalf("cookie flags: HttpOnly=%v SameSite=%v Secure=%v Path=%q", ck.HttpOnly, ck.SameSite, ck.Secure, ck.Path)
	}

	if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("security headers missing: %v", r.header)
	}
	me := e.do("GET", "/api/v1/me", "", "", "Cookie", "filepath_session="+ck.Value)
	if me.status != 200 || !strings.Contains(string(me.body), `"name":"admin"`) {
		t.Fatalf("me with cookie: %d %s", me.status, me.body)
	}

	tests := []struct {
		name    string
		path    string
		wantSub string
	}{
		{name: "used token", path: path, wantSub: "already used or has expired"},
		{name: "unknown token", path: "/login?token=nope", wantSub: "already used or has expired"},
		{name: "no token", path: "/login", wantSub: "no token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("GET", tt.path, "", "")
			if r.status != http.StatusUnauthorized || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
				t.Fatalf("got %d %s, want 401 text/html", r.status, r.header.Get("Content-Type"))
			}
			if !strings.Contains(string(r.body), tt.wantSub) || !strings.Contains(string(r.body), "filepath user login") {
				t.Fatalf("page does not explain: %s", r.body)
			}
		})
	}
}

func TestLoginCookieSecureOverTLS(t *testing.T) {
	e := newEnv(t, envOpts{})
	ts := httptest.NewTLSServer(e.srv.Handler())
	defer ts.Close()
	client := ts.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	resp, err := client.Get(ts.URL + strings.TrimPrefix(e.login, e.base))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cs := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cs) != 1 || !cs[0].Secure {
		t.Fatalf("got %d cookies %v, want 303 with a Secure cookie", resp.StatusCode, cs)
	}
}

func TestUnauthenticated(t *testing.T) {
	e, a := newAlice(t)
	tests := []struct {
		name    string
		path    string
		hdr     []string
		status  int
		message string
	}{
		{name: "no credentials", path: "/api/v1/sessions", status: 401, message: "authentication required"},
		{name: "unknown api route without credentials", path: "/api/v1/nope", status: 401, message: "authentication required"},
		{name: "expired cookie", path: "/api/v1/me", hdr: []string{"Cookie", "filepath_session=stale"}, status: 401, message: "session expired; open a new login link"},
		{name: "bad bearer", path: "/api/v1/me", hdr: []string{"Authorization", "Bearer fp_nope"}, status: 401, message: "invalid API key"},
		{name: "malformed authorization", path: "/api/v1/me", hdr: []string{"Authorization", "Basic eA=="}, status: 401, message: "malformed Authorization"},
		{name: "good bearer", path: "/api/v1/me", hdr: []string{"Authorization", "Bearer " + a.key}, status: 200},
		{name: "healthz is public", path: "/healthz", status: 200},
		{name: "ui is public", path: "/session/abc", status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("GET", tt.path, "", "", tt.hdr...)
			if r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
			if tt.message != "" {
				code, msg, _ := r.errorOf(t)
				if code != "unauthorized" || !strings.Contains(msg, tt.message) {
					t.Fatalf("got %s %q, want unauthorized %q", code, msg, tt.message)
				}
			}
		})
	}
}

// A user API key made with an expiry works until then; from then on it is
// refused like a revoked key (401 unauthorized), with a message that says
// it expired. A key without an expiry keeps working.
func TestAPIKeyExpiry(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	e := newEnv(t, envOpts{now: clock.Now})
	a := e.account("alice")
	until := clock.Now().Add(30 * 24 * time.Hour)
	key, _, err := e.users.CreateAPIKeyExpiring(ctx, a.user.ID, "ci", until)
	if err != nil {
		t.Fatal(err)
	}
	revoked, rk, err := e.users.CreateAPIKey(ctx, a.user.ID, "old")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.users.DeleteAPIKey(ctx, a.user.ID, rk.ID); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30*24*time.Hour - time.Second)
	if r := e.do("GET", "/api/v1/me", key, ""); r.status != 200 || !strings.Contains(string(r.body), `"name":"alice"`) {
		t.Fatalf("key before its expiry: %d %s", r.status, r.body)
	}
	clock.Advance(time.Second)
	for _, path := range []string{"/api/v1/me", "/api/v1/sessions"} {
		r := e.do("GET", path, key, "")
		code, msg, _ := r.errorOf(t)
		if r.status != http.StatusUnauthorized || code != "unauthorized" || !strings.Contains(msg, "API key expired at 2026-04-03T05:06:07Z") {
			t.Fatalf("GET %s with an expired key: %d %s %q", path, r.status, code, msg)
		}
		// The same answer as a revoked key's, but for the message.
		rr := e.do("GET", path, revoked, "")
		rcode, rmsg, _ := rr.errorOf(t)
		if rr.status != r.status || rcode != code || rmsg != "invalid API key" {
			t.Fatalf("GET %s with a revoked key: %d %s %q", path, rr.status, rcode, rmsg)
		}
	}
	if r := e.do("GET", "/api/v1/me", a.key, ""); r.status != 200 {
		t.Fatalf("the key without an expiry: %d %s", r.status, r.body)
	}
}

func TestExpiry(t *testing.T) {
	clock := testkit.NewClock(time.Now())
	e := newEnv(t, envOpts{now: clock.Now})
	// The first-start link expires after 24h.
	clock.Advance(24*time.Hour + time.Minute)
	r := e.do("GET", strings.TrimPrefix(e.login, e.base), "", "")
	if r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), "expired") {
		t.Fatalf("expired link: %d %s", r.status, r.body)
	}
	// A fresh link works; its cookie expires after the session TTL.
	admin, err := e.users.UserByName(context.Background(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := e.users.CreateLoginToken(context.Background(), admin.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r = e.do("GET", "/login?token="+tok, "", "")
	cs := (&http.Response{Header: r.header}).Cookies()
	if r.status != http.StatusSeeOther || len(cs) != 1 {
		t.Fatalf("login: %d %v", r.status, cs)
	}
	cookie := []string{"Cookie", cs[0].Name + "=" + cs[0].Value}
	if r := e.do("GET", "/api/v1/me", "", "", cookie...); r.status != 200 {
		t.Fatalf("fresh cookie: %d %s", r.status, r.body)
	}
	clock.Advance(api.DefaultSessionTTL + time.Minute)
	r = e.do("GET", "/api/v1/me", "", "", cookie...)
	if r.status != http.StatusUnauthorized {
		t.Fatalf("expired cookie: %d %s", r.status, r.body)
	}
	if code, msg, _ := r.errorOf(t); code != "unauthorized" || msg != "session expired; open a new login link" {
		t.Fatalf("expired cookie: %s %q", code, msg)
	}
}

// TestCSRF: a cookie-authenticated change must come from the server's own
// pages (Origin, else Sec-Fetch-Site or Referer) with a JSON body; a
// Bearer key is not sent by browsers on their own and needs neither.
func TestCSRF(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *api.Config) { c.AllowedOrigins = []string{"app.example.com"} }})
	a := e.account("alice")
	ctx := context.Background()
	ck, err := e.users.CreateWebSession(ctx, a.user.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s, n := e.session(a)
	own := e.base // http://127.0.0.1:PORT
	host := strings.TrimPrefix(own, "http://")
	otherPort := "http://127.0.0.1:1"
	if strings.HasSuffix(host, ":1") {
		otherPort = "http://127.0.0.1:2"
	}
	cookie := "filepath_session=" + ck
	const newSession = `{"name":"n"}`
	msgs := "/api/v1/sessions/" + s.ID + "/nodes/" + n.ID + "/messages"
	tests := []struct {
		name, method, path, body string
		bearer                   bool
		hdr                      []string // after Cookie (or Authorization) and a JSON Content-Type when there is a body
		status                   int
		msg                      string
	}{
		{name: "own origin", method: "POST", path: "/api/v1/sessions", body: newSession, hdr: []string{"Origin", own}, status: 201},
		{name: "evil origin", method: "POST", path: "/api/v1/sessions", body: newSession, hdr: []string{"Origin", "http://evil.example"}, status: 403, msg: `origin "http://evil.example" is not allowed`},
		{name: "another port of the same host", method: "POST", path: "/api/v1/sessions", body: newSession, hdr: []string{"Origin", otherPort}, status: 403, msg: "is not allowed"},
		{name: "opaque origin", method: "POST", path: "/api/v1/sessions", body: newSession, hdr: []string{"Origin", "null"}, status: 403},
		{name: "an allowed origin", method: "POST", path: "/api/v1/sessions", body: newSession, hdr: []string{"Origin", "https://app.example.com"}, status: 201},
		{name: "text/plain from evil", method: "POST", path: "/api/v1/sessions", body: newSession, hdr: []string{"Origin", "http://evil.example", "Content-Type", "text/plain"}, status: 403},
		{name: "text/plain from own origin", method: "POST", path: "/api/v1/sessions", body: newSession, hdr: []string{"Origin", own, "Content-Type", "text/plain"}, status: 403, msg: "application/json"},
		{name: "form-encoded message", method: "POST", path: msgs, body: "content=hi", hdr: []string{"Origin", own, "Content-Type", "application/x-www-form-urlencoded"}, status: 403, msg: "application/json"},
		{name: "no origin, same-origin fetch", method: "POST", path: "/api/v1/sessions", body: newSession, hdr: []string{"Sec-Fetch-Site", "same-origin"}, status: 201},
		{name: "no origin, cross-site fetch", method: "POST", path: "/api/v1/sessions", body: newSession, hdr: []string{"Sec-Fetch-Site", "cross-site"}, status: 403},
		{name: "no origin, same-site fetch", method: "POST", path: "/api/v1/sessions", body: newSession, hdr: []string{"Sec-Fetch-Site", "same-site"}, status: 403},
		{name: "no origin, own referer", method: "POST", path: "/api/v1/sessions", body: newSession, hdr: []string{"Referer", own + "/session/x"}, status: 201},
		{name: "no origin, evil referer", method: "POST", path: "/api/v1/sessions", body: newSession, hdr: []string{"Referer", "http://evil.example/x"}, status: 403},
		{name: "nothing tells where it comes from", method: "POST", path: "/api/v1/sessions", body: newSession, status: 403, msg: "Bearer"},
		{name: "no body, own origin", method: "POST", path: "/api/v1/sessions/" + s.ID + "/start", hdr: []string{"Origin", own}, status: 503},
		{name: "no body, evil origin", method: "POST", path: "/api/v1/sessions/" + s.ID + "/stop", hdr: []string{"Origin", "http://evil.example"}, status: 403},
		{name: "raw upload, own origin", method: "POST", path: "/api/v1/sessions/" + s.ID + "/fs/up.bin", body: "\x00\x01", hdr: []string{"Origin", own, "Content-Type", "application/octet-stream"}, status: 201},
		{name: "raw upload to a node's workspace, own origin", method: "POST", path: "/api/v1/sessions/" + s.ID + "/nodes/" + n.ID + "/fs/uploads/up.bin", body: "\x00\x01", hdr: []string{"Origin", own, "Content-Type", "application/octet-stream"}, status: 201},
		{name: "multipart upload to a node's workspace, own origin", method: "POST", path: "/api/v1/sessions/" + s.ID + "/nodes/" + n.ID + "/fs/_/upload?dir=/uploads", body: "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nhi\r\n--b--\r\n", hdr: []string{"Origin", own, "Content-Type", "multipart/form-data; boundary=b"}, status: 201},
		{name: "multipart upload to a node's workspace, evil origin", method: "POST", path: "/api/v1/sessions/" + s.ID + "/nodes/" + n.ID + "/fs/_/upload?dir=/uploads", body: "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.txt\"\r\n\r\nhi\r\n--b--\r\n", hdr: []string{"Origin", "http://evil.example", "Content-Type", "multipart/form-data; boundary=b"}, status: 403},
		{name: "raw upload, evil origin", method: "PUT", path: "/api/v1/sessions/" + s.ID + "/fs/up.bin", body: "\x00\x02", hdr: []string{"Origin", "http://evil.example", "Content-Type", "application/octet-stream"}, status: 403},
		{name: "raw body on a JSON route", method: "POST", path: "/api/v1/sessions/" + s.ID + "/fs/_/stat", body: `{"path":"/up.bin"}`, hdr: []string{"Origin", own, "Content-Type", "application/octet-stream"}, status: 403, msg: "application/json"},
		{name: "a read from another origin", method: "GET", path: "/api/v1/sessions", hdr: []string{"Origin", "http://evil.example"}, status: 200},
		{name: "delete, evil origin", method: "DELETE", path: "/api/v1/sessions/" + s.ID, hdr: []string{"Origin", "http://evil.example"}, status: 403},
		{name: "bearer without origin, text/plain", method: "POST", path: "/api/v1/sessions", body: newSession, bearer: true, hdr: []string{"Content-Type", "text/plain"}, status: 201},
		{name: "bearer from another origin", method: "POST", path: "/api/v1/sessions", body: newSession, bearer: true, hdr: []string{"Origin", "http://evil.example"}, status: 201},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, hdr := "", []string{"Cookie", cookie}
			if tt.bearer {
				key, hdr = a.key, nil
			}
			r := e.do(tt.method, tt.path, key, tt.body, append(hdr, tt.hdr...)...)
			if r.status != tt.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, tt.status)
			}
			if r.status == 403 {
				if code, msg, _ := r.errorOf(t); code != "forbidden" || !strings.Contains(msg, tt.msg) {
					t.Fatalf("%s %q, want forbidden containing %q", code, msg, tt.msg)
				}
			}
		})
	}
	if got, _ := e.sessions.ListSessions(ctx, a.user.ID); len(got) != 1+6 {
		t.Fatalf("%d sessions, want the first and the 6 allowed creations", len(got))
	}
}

// cookieOf returns the login cookie an answer sets, or nil.
func cookieOf(r reply) *http.Cookie {
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == api.CookieName {
			return c
		}
	}
	return nil
}

// TestLogout: POST /api/v1/logout ends this browser session and clears the
// cookie; ?all=true ends every browser session of the user; an API key is
// not a browser session.
func TestLogout(t *testing.T) {
	e, a := newAlice(t)
	b := e.account("bob")
	ctx := context.Background()
	browser := func(u account) []string {
		t.Helper()
		v, err := e.users.CreateWebSession(ctx, u.user.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return []string{"Cookie", api.CookieName + "=" + v, "Origin", e.base}
	}
	me := func(hdr []string) int { return e.do("GET", "/api/v1/me", "", "", hdr...).status }
	laptop, phone, tablet, bobs := browser(a), browser(a), browser(a), browser(b)

	if r := e.do("POST", "/api/v1/logout", "", "", laptop[0], laptop[1], "Origin", "http://evil.example"); r.status != 403 || me(laptop) != 200 {
		t.Fatalf("logout from another origin: %d %s", r.status, r.body)
	}
	r := e.do("POST", "/api/v1/logout", "", "", laptop...)
	if ck := cookieOf(r); r.status != 204 || ck == nil || ck.Value != "" || ck.MaxAge >= 0 || !ck.HttpOnly {
		t.Fatalf("logout: %d %v %s", r.status, r.header["Set-Cookie"], r.body)
	}
	if me(laptop) != 401 || me(phone) != 200 {
		t.Fatalf("after logout: laptop %d (want 401), phone %d (want 200)", me(laptop), me(phone))
	}
	if r := e.do("POST", "/api/v1/logout?all=true", "", "", phone...); r.status != 204 || cookieOf(r) == nil {
		t.Fatalf("logout everywhere: %d %s", r.status, r.body)
	}
	if me(phone) != 401 || me(tablet) != 401 || me(bobs) != 200 {
		t.Fatalf("after logout everywhere: phone %d, tablet %d (want 401), bob %d (want 200)", me(phone), me(tablet), me(bobs))
	}
	if r := e.do("POST", "/api/v1/logout", a.key, ""); r.status != 400 || !strings.Contains(string(r.body), "API key") {
		t.Fatalf("logout with an API key: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/me", a.key, ""); r.status != 200 {
		t.Fatalf("the API key after its logout attempt: %d", r.status)
	}
}

// TestSessionTTL: the login cookie lives Config.SessionTTL (default 7 days).
func TestSessionTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		want time.Duration
	}{
		{name: "default", want: 7 * 24 * time.Hour},
		{name: "configured", ttl: 90 * time.Minute, want: 90 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testkit.NewClock(time.Now())
			e := newEnv(t, envOpts{now: clock.Now, cfg: func(c *api.Config) { c.SessionTTL = tc.ttl }})
			r := e.do("GET", strings.TrimPrefix(e.login, e.base), "", "")
			ck := cookieOf(r)
			if ck == nil || ck.MaxAge != int(tc.want/time.Second) {
				t.Fatalf("cookie %v, want Max-Age %d", r.header["Set-Cookie"], int(tc.want/time.Second))
			}
			hdr := []string{"Cookie", ck.Name + "=" + ck.Value}
			clock.Advance(tc.want - time.Minute)
			if r := e.do("GET", "/api/v1/me", "", "", hdr...); r.status != 200 {
				t.Fatalf("before expiry: %d", r.status)
			}
			clock.Advance(2 * time.Minute)
			if r := e.do("GET", "/api/v1/me", "", "", hdr...); r.status != 401 {
				t.Fatalf("after expiry: %d", r.status)
			}
		})
	}
}

// TestTrustedProxies: only behind a trusted proxy do X-Forwarded-Proto
// (https → Secure cookie) and X-Forwarded-For (the client's address)
// count; an https --public-url makes the cookie Secure whatever the
// request says (a TLS-terminating proxy that sends no header).
func TestTrustedProxies(t *testing.T) {
	tests := []struct {
		name    string
		trusted string
		public  string
		noProto bool
		secure  bool
		ip      string
	}{
		{name: "no proxy configured", trusted: "", secure: false, ip: "127.0.0.1"},
		{name: "the peer is a trusted proxy", trusted: "10.1.2.3, 127.0.0.0/8", secure: true, ip: "203.0.113.9"},
		{name: "the peer is not a trusted proxy", trusted: "10.0.0.0/8", secure: false, ip: "127.0.0.1"},
		{name: "https public url", public: "https://filepath.example.com", noProto: true, secure: true, ip: "127.0.0.1"},
		{name: "http public url", public: "http://filepath.example.com", noProto: true, secure: false, ip: "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nets, err := api.ParseCIDRs(tt.trusted)
			if err != nil {
				t.Fatal(err)
			}
			logs := &testkit.Buffer{}
			e := newEnv(t, envOpts{cfg: func(c *api.Config) {
				c.TrustedProxies = nets
				c.PublicURL = tt.public
				c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			}})
			hdr := []string{"X-Forwarded-Proto", "https", "X-Forwarded-For", "198.51.100.1, 203.0.113.9"}
			if tt.noProto {
				hdr = nil
			}
			r := e.do("GET", strings.TrimPrefix(e.login, e.base), "", "", hdr...)
			ck := cookieOf(r)
			if r.status != http.StatusSeeOther || ck == nil || ck.Secure != tt.secure {
				t.Fatalf("login: %d, cookie %v, want Secure=%v", r.status, r.header["Set-Cookie"], tt.secure)
			}
			if !strings.Contains(logs.String(), "msg=login user=admin ip="+tt.ip) {
				t.Fatalf("login log does not name ip %s:\n%s", tt.ip, logs.String())
			}
		})
	}
}

func TestParseCIDRs(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "", want: ""},
		{in: "10.0.0.0/8", want: "10.0.0.0/8"},
		{in: " 192.0.2.7 , fd00::/8", want: "192.0.2.7/32,fd00::/8"},
		{in: "::1", want: "::1/128"},
		{in: "10.0.0.0/33", wantErr: true},
		{in: "proxy.local", wantErr: true},
	}
	for _, tt := range tests {
		nets, err := api.ParseCIDRs(tt.in)
		var got []string
		for _, n := range nets {
			got = append(got, n.String())
		}
		if (err != nil) != tt.wantErr || strings.Join(got, ",") != tt.want {
			t.Errorf("ParseCIDRs(%q) = %v, %v", tt.in, got, err)
		}
	}
}
