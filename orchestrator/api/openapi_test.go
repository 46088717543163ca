package api_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/filepath-dev/filepath/orchestrator/api"
)

// TestOpenAPIMatchesRoutes: every registered /api route is in the document
// and every documented operation is registered.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	e := newEnv(t, envOpts{})
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
