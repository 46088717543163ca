package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/api"
)

// TestOpenAPIMatchesRoutes: every registered /api route is in the document
// and every documented operation is registered, with the session
// filesystem and without it.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	for _, files := range []bool{true, false} {
		t.Run("files "+strconv.FormatBool(files), func(t *testing.T) {
			e := newEnv(t, envOpts{cfg: func(c *api.Config) {
				if !files {
					c.Files = nil
				}
			}})
			a := e.account("alice")
			r := e.do("GET", "/api/v1/openapi.json", a.key, "")
			if r.status != 200 {
				t.Fatalf("openapi.json: %d", r.status)
			}
			var doc struct {
				OpenAPI string                                `json:"openapi"`
				Paths   map[string]map[string]json.RawMessage `json:"paths"`
			}
			if err := json.Unmarshal(r.body, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.OpenAPI != "3.1.0" {
				t.Fatalf("openapi %q", doc.OpenAPI)
			}
			param := regexp.MustCompile(`:([a-zA-Z_]+)`)
			registered := map[string]bool{}
			for _, key := range apiRouteKeys(e) {
				method, p, _ := strings.Cut(key, " ")
				p = strings.ReplaceAll(param.ReplaceAllString(p, "{$1}"), "*", "{path}")
				k := strings.ToLower(method) + " " + p
				registered[k] = true
				if _, ok := doc.Paths[p][strings.ToLower(method)]; !ok {
					t.Errorf("route %s is missing from openapi.json", k)
				}
			}
			for p, ops := range doc.Paths {
				for m := range ops {
					if !registered[m+" "+p] {
						t.Errorf("openapi.json documents %s %s, which is not registered", m, p)
					}
				}
			}
			if strings.Contains(string(r.body), "/fs") != files {
				t.Errorf("with files %v, the document has the file routes: %v", files, !files)
			}
		})
	}
}

// TestCommittedOpenAPIIsCurrent fails when openapi.json, which the UI's API
// types are generated from, no longer matches the routes' Go types.
func TestCommittedOpenAPIIsCurrent(t *testing.T) {
	want, err := api.Document()
	if err != nil {
		t.Fatal(err)
	}
	if got := testkit.ReadFile(t, "openapi.json"); got != string(want) {
		t.Fatal("orchestrator/api/openapi.json is stale: run `make gen` (go generate ./orchestrator/api/...) and commit the result")
	}
}

// TestServedOpenAPIIsCommitted: a server with the session filesystem serves
// every route, and GET /openapi.json is the committed document.
func TestServedOpenAPIIsCommitted(t *testing.T) {
	e, a := newAlice(t)
	r := e.do("GET", "/api/v1/openapi.json", a.key, "")
	committed := []byte(testkit.ReadFile(t, "openapi.json"))
	var served, want any
	for b, v := range map[*[]byte]*any{&r.body: &served, &committed: &want} {
		dec := json.NewDecoder(bytes.NewReader(*b))
		dec.UseNumber()
		if err := dec.Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(served, want) {
		t.Fatalf("the served document differs from openapi.json")
	}
}

// TestOpenAPIStatuses: the success status each route documents is the one
// it answers (ownerCalls, checked by TestAuthorizationEveryRoute).
func TestOpenAPIStatuses(t *testing.T) {
	e, a := newAlice(t)
	r := e.do("GET", "/api/v1/openapi.json", a.key, "")
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`:([a-zA-Z_]+)`)
	for key, call := range ownerCalls {
		if call.status < 200 || call.status > 299 {
			continue
		}
		method, p, _ := strings.Cut(key, " ")
		p = strings.ReplaceAll(param.ReplaceAllString(p, "{$1}"), "*", "{path}")
		op, ok := doc.Paths[p][strings.ToLower(method)]
		if !ok {
			t.Errorf("%s is not documented", key)
			continue
		}
		if _, ok := op.Responses[strconv.Itoa(call.status)]; !ok {
			t.Errorf("%s answers %d, but openapi.json documents %v", key, call.status, slices.Collect(maps.Keys(op.Responses)))
		}
	}
}

func TestUIServing(t *testing.T) {
	built := fstest.MapFS{
		"index.html":          {Data: []byte("<html>app</html>")},
		"_app/immutable/a.js": {Data: []byte("console.log(1)")},
		"favicon.svg":         {Data: []byte("<svg/>")},
	}
	tests := []struct {
		name     string
		ui       fstest.MapFS
		path     string
		status   int
		contains string
	}{
		{name: "root", ui: built, path: "/", status: 200, contains: "app"},
		{name: "deep link", ui: built, path: "/session/abc", status: 200, contains: "app"},
		{name: "asset", ui: built, path: "/_app/immutable/a.js", status: 200, contains: "console.log"},
		{name: "dot dot", ui: built, path: "/../index.html", status: 200, contains: "app"},
		{name: "not built", ui: fstest.MapFS{}, path: "/", status: 200, contains: "UI not built: run make web"},
		{name: "not built deep link", ui: fstest.MapFS{}, path: "/session/x", status: 200, contains: "UI not built"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOpts{cfg: func(c *api.Config) { c.UI = tt.ui }})
			r := e.do("GET", tt.path, "", "")
			if r.status != tt.status || !strings.Contains(string(r.body), tt.contains) {
				t.Fatalf("got %d %q, want %d containing %q", r.status, r.body, tt.status, tt.contains)
			}
		})
	}
}

// TestUICSP: UI pages carry a Content-Security-Policy that lets exactly
// their own inline scripts run (by hash) and scripts of this server.
func TestUICSP(t *testing.T) {
	theme := "\n\t\ttry { document.documentElement.classList.add('dark') } catch (e) {}\n\t"
	boot := "\n\t\timport('/_app/immutable/bundle.js').then((app) => app.start(document.body));\n\t"
	page := "<!doctype html><html><head><script>" + theme + "</script>" +
		`<script type="module" src="/_app/immutable/x.js"></script></head>` +
		"<body><div style=\"display: contents\"><SCRIPT>" + boot + "</script ></div></body></html>"
	ui := fstest.MapFS{"index.html": {Data: []byte(page)}, "_app/immutable/x.js": {Data: []byte("1")}}
	e := newEnv(t, envOpts{cfg: func(c *api.Config) { c.UI = ui }})
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	for _, p := range []string{"/", "/session/abc"} {
		r := e.do("GET", p, "", "")
		csp := r.header.Get("Content-Security-Policy")
		if r.status != 200 || string(r.body) != page {
			t.Fatalf("GET %s: %d %q", p, r.status, r.body)
		}
		want := "script-src 'self' " + hash(theme) + " " + hash(boot) + ";"
		if !strings.Contains(csp, want) || strings.Count(csp, "sha256-") != 2 {
			t.Fatalf("GET %s: CSP %q, want %q", p, csp, want)
		}
		for _, d := range []string{"default-src 'self'", "object-src 'none'", "base-uri 'self'", "frame-ancestors 'none'", "connect-src 'self'"} {
			if !strings.Contains(csp, d) {
				t.Fatalf("CSP %q lacks %q", csp, d)
			}
		}
	}
	if r := e.do("GET", "/_app/immutable/x.js", "", ""); r.status != 200 || r.header.Get("Content-Security-Policy") != "" {
		t.Fatalf("asset: %d CSP %q", r.status, r.header.Get("Content-Security-Policy"))
	}
}
