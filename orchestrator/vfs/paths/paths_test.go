package paths

import (
	"path"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
)

func TestCleanPath(t *testing.T) {
	tests := []struct {
		name, in, want string
		bad            bool
	}{
		{name: "root", in: "/", want: "/"},
		{name: "file", in: "/a/b.txt", want: "/a/b.txt"},
		{name: "trailing slash", in: "/src/", want: "/src"},
		{name: "dunder", in: "/src/__init__.py", want: "/src/__init__.py"},
		{name: "relative", in: "a/b", bad: true},
		{name: "empty", in: "", bad: true},
		{name: "nul", in: "/a\x00b", bad: true},
		{name: "dotdot", in: "/a/../b", bad: true},
		{name: "dotdot at root", in: "/..", bad: true},
		{name: "dot", in: "/a/./b", bad: true},
		{name: "double slash", in: "/a//b", bad: true},
		{name: "long name", in: "/" + strings.Repeat("x", 256), bad: true},
		{name: "max name", in: "/" + strings.Repeat("x", 255), want: "/" + strings.Repeat("x", 255)},
		{name: "long path", in: strings.Repeat("/abcdefg", 513), bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CleanPath(tc.in)
			if tc.bad {
				if err == nil || orchestrator.ErrorCode(err) != orchestrator.EInvalid {
					t.Fatalf("CleanPath(%q) = %q, %v; want an invalid error", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("CleanPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
	if _, err := CleanPath("/a/../b"); !strings.Contains(err.Error(), "traversal") {
		t.Fatalf("message %q does not name traversal", err)
	}
}

func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b", "/a/../b", "//", "/./a", "a", "/a\x00", "/" + strings.Repeat("x", 300), "/a/b/", "/_/x", "/..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := CleanPath(in)
		if err != nil {
			if out != "" {
				t.Fatalf("output %q with error", out)
			}
			return
		}
		if !strings.HasPrefix(out, "/") || len(out) > MaxPathLen || strings.Contains(out, "\x00") || strings.Contains(out, "//") {
			t.Fatalf("invalid output %q for %q", out, in)
		}
		if path.Clean(out) != out {
			t.Fatalf("output %q for %q is not clean", out, in)
		}
		for _, seg := range Split(out) {
			if seg == ".." || seg == "." || len(seg) > MaxNameLen {
				t.Fatalf("bad segment %q in %q", seg, out)
			}
		}
		// never escapes the root: joining under a root stays under it
		if j := path.Join("/root", out); j != "/root" && !strings.HasPrefix(j, "/root/") {
			t.Fatalf("%q escapes the root as %q", out, j)
		}
		again, err := CleanPath(out)
		if err != nil || again != out {
			t.Fatalf("not idempotent: %q → %q, %v", out, again, err)
		}
	})
}
