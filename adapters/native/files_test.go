package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

// newTestWorkspace makes a workspace in a temp dir holding files (path →
// content).
func newTestWorkspace(t *testing.T, files map[string]string) *workspace {
	t.Helper()
	dir := t.TempDir()
	testkit.WriteFiles(t, dir, files)
	ws, err := newWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func TestResolve(t *testing.T) {
	ws := newTestWorkspace(t, map[string]string{"src/a.go": "package a\n"})
	outside := t.TempDir()
	testkit.WriteFile(t, filepath.Join(outside, "secret"), "s")
	if err := os.Symlink(outside, filepath.Join(ws.root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src", filepath.Join(ws.root, "inside")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, rel, err string
	}{
		{name: "relative", path: "src/a.go", rel: "src/a.go"},
		{name: "dot segments inside", path: "src/../src/./a.go", rel: "src/a.go"},
		{name: "root", path: ".", rel: "."},
		{name: "absolute under root", path: filepath.Join(ws.root, "src/a.go"), rel: "src/a.go"},
		{name: "absolute /workspace", path: "/workspace/src/a.go", rel: "src/a.go"},
		{name: "new file", path: "new/dir/b.go", rel: "new/dir/b.go"},
		{name: "symlink inside", path: "inside/a.go", rel: "src/a.go"},
		{name: "parent escape", path: "../x", err: "outside the workspace"},
		{name: "absolute elsewhere", path: "/etc/passwd", err: "outside the workspace"},
		{name: "symlink escape", path: "escape/secret", err: "through a symbolic link"},
		{name: "symlink escape new file", path: "escape/new", err: "through a symbolic link"},
		{name: "empty", path: " ", err: "path is required"},
		{name: "nul", path: "a\x00b", err: "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rel, err := ws.resolve(tt.path)
			if testkit.WantErr(t, err, tt.err) {
				return
			}
			if rel != tt.rel {
				t.Fatalf("resolve(%q) = %q, %v; want %q", tt.path, rel, err, tt.rel)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	var long strings.Builder
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	ws := newTestWorkspace(t, map[string]string{
		"a.txt":     "one\ntwo\r\nthree",
		"long.txt":  long.String(),
		"wide.txt":  strings.Repeat("x", 3000) + "\n",
		"empty.txt": "",
		"bin":       "ELF\x00\x01\x02",
		"dir/f":     "f",
	})
	tests := []struct {
		name          string
		path          string
		offset, limit int
		want          []string // substrings of the output
		absent        []string
		err           string
	}{
		{name: "numbered", path: "a.txt", want: []string{"     1\tone\n", "     2\ttwo\n", "     3\tthree\n"}, absent: []string{"\r", "lines"}},
		{name: "offset and limit", path: "a.txt", offset: 2, limit: 1, want: []string{"     2\ttwo\n", "(lines 2-2 of 3; read on with offset 3)"}, absent: []string{"one", "three"}},
		{name: "default limit", path: "long.txt", want: []string{"  2000\tline 2000\n", "(lines 1-2000 of 2500; read on with offset 2001)"}, absent: []string{"line 2001\n"}},
		{name: "last page", path: "long.txt", offset: 2001, want: []string{"  2500\tline 2500\n", "(lines 2001-2500 of 2500)"}, absent: []string{"read on"}},
		{name: "past the end", path: "a.txt", offset: 9, want: []string{"a.txt has 3 lines; offset 9 is past its end"}},
		{name: "long line cut", path: "wide.txt", want: []string{"…[line cut]"}, absent: []string{strings.Repeat("x", 2001)}},
		{name: "empty", path: "empty.txt", want: []string{"empty.txt is empty"}},
		{name: "binary", path: "bin", want: []string{"bin is a binary file of 6 bytes"}},
		{name: "directory", path: "dir", err: "is a directory: use glob"},
		{name: "missing", path: "nope.txt", err: "nope.txt does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, out, err := ws.readFile(tt.path, tt.offset, tt.limit)
			if testkit.WantErr(t, err, tt.err) {
				return
			}
			testkit.WantText(t, out, tt.want, tt.absent)
			if len(out) > readMaxBytes+200 {
				t.Errorf("output is %d bytes, over the bound", len(out))
			}
		})
	}
}

func TestReadFileByteBound(t *testing.T) {
	ws := newTestWorkspace(t, map[string]string{"big.txt": strings.Repeat(strings.Repeat("y", 1500)+"\n", 500)})
	_, out, err := ws.readFile("big.txt", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > readMaxBytes+100 || !strings.Contains(out, "read on with offset") {
		t.Fatalf("%d bytes, tail %q", len(out), out[max(0, len(out)-80):])
	}
}

func TestEditFile(t *testing.T) {
	const src = "package calc\n\nfunc Add(a, b int) int { return a - b }\n\nfunc Sub(a, b int) int { return a - b }\n"
	tests := []struct {
		name     string
		read     bool
		old, new string
		all      bool
		want     string // the file after, when the edit succeeds
		err      string
	}{
		{name: "unique", read: true, old: "return a - b }\n\nfunc Sub", new: "return a + b }\n\nfunc Sub",
			want: strings.Replace(src, "return a - b }\n\nfunc Sub", "return a + b }\n\nfunc Sub", 1)},
		{name: "not read first", old: "Add", new: "Plus", err: "read calc.go with read_file first"},
		{name: "ambiguous", read: true, old: "return a - b", new: "return 0", err: "occurs 2 times in calc.go"},
		{name: "replace all", read: true, old: "a - b", new: "b - a", all: true, want: strings.ReplaceAll(src, "a - b", "b - a")},
		{name: "not found", read: true, old: "return a * b", new: "x", err: "was not found in calc.go"},
		{name: "whitespace matters", read: true, old: "func  Add", new: "x", err: "was not found"},
		{name: "same", read: true, old: "Add", new: "Add", err: "are the same"},
		{name: "empty old", read: true, old: "", new: "x", err: "old_string is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := newTestWorkspace(t, map[string]string{"calc.go": src})
			if tt.read {
				if _, _, err := ws.readFile("calc.go", 0, 0); err != nil {
					t.Fatal(err)
				}
			}
			_, out, err := ws.editFile("calc.go", tt.old, tt.new, tt.all)
			got := testkit.ReadFile(t, filepath.Join(ws.root, "calc.go"))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				if got != src {
					t.Fatalf("a refused edit changed the file:\n%s", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("file:\n%s\nwant:\n%s", got, tt.want)
			}
			if !strings.Contains(out, "edited calc.go") {
				t.Fatalf("output %q", out)
			}
		})
	}
}

func TestEditFileChangedSinceRead(t *testing.T) {
	ws := newTestWorkspace(t, map[string]string{"a.txt": "hello\n"})
	if _, _, err := ws.readFile("a.txt", 0, 0); err != nil {
		t.Fatal(err)
	}
	// Someone else changes the file after the agent read it.
	p := filepath.Join(ws.root, "a.txt")
	testkit.WriteFile(t, p, "hello world\n")
	later := time.Now().Add(time.Minute)
	os.Chtimes(p, later, later)
	if _, _, err := ws.editFile("a.txt", "hello", "bye", false); err == nil || !strings.Contains(err.Error(), "changed since you read it") {
		t.Fatalf("err = %v", err)
	}
	// After reading again the edit goes through, and a second edit needs no new read.
	ws.readFile("a.txt", 0, 0)
	if _, _, err := ws.editFile("a.txt", "hello", "bye", false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ws.editFile("a.txt", "world", "there", false); err != nil {
		t.Fatal(err)
	}
	if got := testkit.ReadFile(t, p); got != "bye there\n" {
		t.Fatalf("file %q", got)
	}
}

func TestWriteFile(t *testing.T) {
	ws := newTestWorkspace(t, map[string]string{"old.sh": "echo old\n"})
	os.Chmod(filepath.Join(ws.root, "old.sh"), 0o755)

	_, out, err := ws.writeFile("new/deep/file.txt", "a\nb\n")
	if err != nil || !strings.Contains(out, "created new/deep/file.txt (4 bytes, 2 lines)") {
		t.Fatalf("create: %q, %v", out, err)
	}
	if got := testkit.ReadFile(t, filepath.Join(ws.root, "new/deep/file.txt")); got != "a\nb\n" {
		t.Fatalf("content %q", got)
	}
	if _, _, err := ws.writeFile("old.sh", "echo new\n"); err == nil || !strings.Contains(err.Error(), "read old.sh with read_file first") {
		t.Fatalf("overwrite unread: %v", err)
	}
	ws.readFile("old.sh", 0, 0)
	if _, out, err := ws.writeFile("old.sh", "echo new\n"); err != nil || !strings.HasPrefix(out, "overwrote old.sh") {
		t.Fatalf("overwrite: %q, %v", out, err)
	}
	fi, _ := os.Stat(filepath.Join(ws.root, "old.sh"))
	if fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v, want 0755 kept", fi.Mode())
	}
	if _, _, err := ws.writeFile("new", "x"); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("write over a directory: %v", err)
	}
	if _, _, err := ws.writeFile("../x", "x"); err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Fatalf("escape: %v", err)
	}
	// No temporary file is left behind.
	entries, _ := os.ReadDir(ws.root)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Fatalf("left %s", e.Name())
		}
	}
}

func TestGlob(t *testing.T) {
	ws := newTestWorkspace(t, map[string]string{
		"main.go":             "",
		"README.md":           "",
		"src/a.go":            "",
		"src/a_test.go":       "",
		"src/deep/b.go":       "",
		"src/deep/c.txt":      "",
		".git/config":         "",
		"vendor/x/y/z/lib.go": "",
	})
	tests := []struct {
		pattern string
		want    string
		err     string
	}{
		{pattern: "*.go", want: "main.go\n"},
		{pattern: "**/*.go", want: "main.go\nsrc/a.go\nsrc/a_test.go\nsrc/deep/b.go\nvendor/x/y/z/lib.go\n"},
		{pattern: "src/**/*.go", want: "src/a.go\nsrc/a_test.go\nsrc/deep/b.go\n"},
		{pattern: "src/*_test.go", want: "src/a_test.go\n"},
		{pattern: "src/*", want: "src/a.go\nsrc/a_test.go\nsrc/deep/\n"},
		{pattern: "/workspace/src/deep/*", want: "src/deep/b.go\nsrc/deep/c.txt\n"},
		{pattern: "**/config", want: "no paths match **/config"},
		{pattern: ".git/*", want: ".git/config\n"},
		{pattern: "*.rs", want: "no paths match *.rs"},
		{pattern: "nodir/*.go", want: "no paths match nodir/*.go"},
		{pattern: "../*", err: "outside the workspace"},
		{pattern: "/etc/*", err: "outside the workspace"},
		{pattern: "src/[", err: "bad pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			got, err := ws.glob(tt.pattern)
			if testkit.WantErr(t, err, tt.err) {
				return
			}
			if got != tt.want {
				t.Fatalf("glob(%q) = %q, %v; want %q", tt.pattern, got, err, tt.want)
			}
		})
	}
}

func TestGrep(t *testing.T) {
	ws := newTestWorkspace(t, map[string]string{
		"a.go":        "package a\n// TODO: one\nfunc A() {}\n",
		"sub/b.go":    "package sub\n// todo: two\n",
		"bin.dat":     "TODO\x00binary",
		".git/HEAD":   "TODO in git\n",
		"many.txt":    strings.Repeat("hit\n", grepMaxMatches+5),
		"sub/wide.md": "TODO " + strings.Repeat("w", 1000) + "\n",
	})
	tests := []struct {
		name, pattern, path string
		want                []string
		absent              []string
		err                 string
	}{
		{name: "case sensitive", pattern: "TODO", want: []string{"a.go:2: // TODO: one", "sub/wide.md:1: TODO www"}, absent: []string{"sub/b.go", "bin.dat", ".git"}},
		{name: "flags", pattern: "(?i)todo:", want: []string{"a.go:2:", "sub/b.go:2: // todo: two"}},
		{name: "path dir", pattern: "package", path: "sub", want: []string{"sub/b.go:1: package sub"}, absent: []string{"a.go:1"}},
		{name: "path file", pattern: `func \w+`, path: "a.go", want: []string{"a.go:3: func A() {}"}},
		{name: "bounded", pattern: "^hit$", path: "many.txt", want: []string{fmt.Sprintf("many.txt:%d: hit", grepMaxMatches), "stopped after 200 matches"}, absent: []string{fmt.Sprintf("many.txt:%d:", grepMaxMatches+1)}},
		{name: "long line cut", pattern: "www", path: "sub", want: []string{" …\n"}, absent: []string{strings.Repeat("w", 400)}},
		{name: "none", pattern: "nothing here", want: []string{`no matches for "nothing here" in .`}},
		{name: "bad regexp", pattern: "(", err: "bad regular expression"},
		{name: "escape", pattern: "x", path: "/etc", err: "outside the workspace"},
		{name: "missing", pattern: "x", path: "nope", err: "nope does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, out, err := ws.grep(tt.pattern, tt.path)
			if testkit.WantErr(t, err, tt.err) {
				return
			}
			testkit.WantText(t, out, tt.want, tt.absent)
		})
	}
}
