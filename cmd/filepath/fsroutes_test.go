package main

import (
	"regexp"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// TestFSRouteDocs: every route the session filesystem registers is in the
// OpenAPI document that serve builds, and nothing else is.
func TestFSRouteDocs(t *testing.T) {
	e := echo.New()
	vfs.NewHandler(nil).Register(e.Group("/sessions/:id/fs"))
	param := regexp.MustCompile(`:([a-zA-Z_]+)`)
	registered := map[string]bool{}
	for _, r := range e.Routes() {
		p := param.ReplaceAllString(r.Path, "{$1}")
		if len(p) > 0 && p[len(p)-1] == '*' {
			p = p[:len(p)-1] + "{path}"
		}
		registered[r.Method+" "+p] = true
	}
	documented := map[string]bool{}
	for _, d := range fsRouteDocs() {
		documented[d.Method+" "+d.Path] = true
		if !registered[d.Method+" "+d.Path] {
			t.Errorf("documented but not registered: %s %s", d.Method, d.Path)
		}
	}
	for k := range registered {
		if !documented[k] {
			t.Errorf("registered but not documented: %s", k)
		}
	}
}
