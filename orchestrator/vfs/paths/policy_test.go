package paths

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
