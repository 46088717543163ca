package api_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
	e := newEnv(t, envOpts{})
	a := e.account("alice")
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

func TestExpiry(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	e := newEnv(t, envOpts{now: clock.Now})
	// The first-start link expires after 24h.
	clock.Add(24*time.Hour + time.Minute)
	r := e.do("GET", strings.TrimPrefix(e.login, e.base), "", "")
	if r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), "expired") {
		t.Fatalf("expired link: %d %s", r.status, r.body)
	}
	// A fresh link works; its cookie expires after the session TTL.
	admin, err := e.st.UserByName(context.Background(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := e.st.CreateLoginToken(context.Background(), admin.ID, time.Hour)
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
	clock.Add(api.DefaultSessionTTL + time.Minute)
	r = e.do("GET", "/api/v1/me", "", "", cookie...)
	if r.status != http.StatusUnauthorized {
		t.Fatalf("expired cookie: %d %s", r.status, r.body)
	}
	if code, msg, _ := r.errorOf(t); code != "unauthorized" || msg != "session expired; open a new login link" {
		t.Fatalf("expired cookie: %s %q", code, msg)
	}
}
