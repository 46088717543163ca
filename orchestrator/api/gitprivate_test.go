package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/api"
)

// A session's repository on the server's own loopback or private network is
// refused at creation with a 422 naming the host and the flag that allows
// it; with the flag it is accepted.
func TestCreateSessionRefusesPrivateGitHosts(t *testing.T) {
	e, a := newAlice(t)
	for u, host := range map[string]string{"http://127.0.0.1:9999/private.git": "127.0.0.1", "git@10.0.0.7:o/r.git": "10.0.0.7",
		"ssh://[::1]/r.git": "::1", "http://169.254.169.254/latest": "169.254.169.254"} {
		r := e.do("POST", "/api/v1/sessions", a.key, `{"name":"x","git_repo_url":"`+u+`"}`)
		if r.status != http.StatusUnprocessableEntity {
			t.Fatalf("%s: status %d %s, want 422", u, r.status, r.body)
		}
		code, msg, field := r.errorOf(t)
		if code != "invalid" || field != "git_repo_url" || !strings.Contains(msg, "--git-allow-private") || !strings.Contains(msg, host) {
			t.Fatalf("%s: error %s %q on %q, want one naming %s and the flag", u, code, msg, field, host)
		}
	}
	// A malformed URL still gets the store's error, not a lookup.
	if r := e.do("POST", "/api/v1/sessions", a.key, `{"name":"x","git_repo_url":"file:///etc/passwd"}`); r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "scheme") {
		t.Fatalf("file:// URL: %d %s", r.status, r.body)
	}

	allowed := newEnv(t, envOpts{cfg: func(c *api.Config) { c.GitAllowPrivate = true }})
	b := allowed.account("bob")
	if r := allowed.do("POST", "/api/v1/sessions", b.key, `{"name":"x","git_repo_url":"http://127.0.0.1:9999/private.git"}`); r.status != http.StatusCreated {
		t.Fatalf("with private hosts allowed: %d %s", r.status, r.body)
	}
}
