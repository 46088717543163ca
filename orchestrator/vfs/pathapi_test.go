package vfs

import (
	"fmt"
	"strings"
	"testing"
)

func TestGrepBounds(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	for i := 0; i < 5; i++ {
		body := strings.Repeat("needle line\n", 10) + strings.Repeat("x", 900) + " needle\n"
		if _, _, err := f.fs.WriteFile(ctx, fmt.Sprintf("/d/f%d.txt", i), []byte(body), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := f.fs.WriteFile(ctx, "/d/bin", []byte("needle\x00needle"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		opt       GrepOptions
		files     int
		matches   int
		truncated bool
	}{
		{name: "all", opt: GrepOptions{Pattern: "needle"}, files: 5, matches: 55},
		{name: "max matches", opt: GrepOptions{Pattern: "needle", MaxMatches: 12}, files: 2, matches: 12, truncated: true},
		{name: "max files", opt: GrepOptions{Pattern: "needle", MaxFiles: 2}, files: 2, matches: 22, truncated: true},
		{name: "glob on base name", opt: GrepOptions{Pattern: "needle", PathPattern: "f1.*"}, files: 1, matches: 11},
		{name: "no match", opt: GrepOptions{Pattern: "haystack"}, files: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := f.fs.Grep(ctx, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, gf := range r.Files {
				if gf.Path == "/d/bin" {
					t.Fatal("binary file searched")
				}
				for _, m := range gf.Matches {
					if len(m.Line) > 500 {
						t.Fatalf("line of %d bytes not cut", len(m.Line))
					}
				}
				n += len(gf.Matches)
			}
			if len(r.Files) != tc.files || n != tc.matches || r.Truncated != tc.truncated {
				t.Fatalf("files %d matches %d truncated %v", len(r.Files), n, r.Truncated)
			}
		})
	}
}

func TestPathEvents(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	fs := f.fs
	fs.WriteFile(ctx, "/a/b.txt", []byte("1"), WriteOptions{})
	fs.WriteFile(ctx, "/a/b.txt", []byte("22"), WriteOptions{})
	fs.Copy(ctx, "/a", "/c")
	fs.Move(ctx, "/c/b.txt", "/d.txt")
	fs.Delete(ctx, "/a", true)
	fs.WriteFile(ctx, "/e/f/g/h.txt", []byte("1"), WriteOptions{})
	got := strings.Join(f.rec.take(), ", ")
	// A copied, deleted or newly created directory has one event, which
	// stands for everything in it: the log grows with the calls, not with
	// the size of the trees they touch.
	want := "created /a, created /a/b.txt, modified /a/b.txt, created /c, deleted /c/b.txt, created /d.txt, deleted /a, created /e, created /e/f/g/h.txt"
	if got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
}
