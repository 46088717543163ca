package vfs

import (
	"strings"
	"testing"
)

func TestAllowedPathsConfig(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		want    []string
		wantErr bool
	}{
		{name: "no config", config: ``},
		{name: "empty object", config: `{}`},
		{name: "other settings", config: `{"systemPrompt":"x"}`},
		{name: "null", config: `{"allowed_paths":null}`},
		{name: "two prefixes", config: `{"allowed_paths":["/src","/docs"]}`, want: []string{"/src", "/docs"}},
		{name: "not a list", config: `{"allowed_paths":"/src"}`, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AllowedPaths([]byte(tc.config))
			if (err != nil) != tc.wantErr || strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("AllowedPaths(%s) = %v, %v", tc.config, got, err)
			}
		})
	}
}

func TestVisible(t *testing.T) {
	f := newFixture(t, Config{})
	node, err := f.fs.ForNode("n1", []string{"/src/app"})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{"/": true, "/src": true, "/src/app": true, "/src/app/x.go": true, "/src/other": false, "/docs": false, "/src/apple": false} {
		if got := node.Visible(p); got != want {
			t.Errorf("Visible(%s) = %v, want %v", p, got, want)
		}
		if !f.fs.Visible(p) {
			t.Errorf("without a policy, %s is not visible", p)
		}
	}
}
