package workspace

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// TestLazyForkMount: a lazy fork served by a mount (the kernel's lookups,
// listings and changes copy its directories as it uses them) reads as its
// origin did at the fork, hard links, symlinks and deep trees included,
// while the origin changes; removing a tree whose directories the fork has
// not copied, moving one, and writing a file through a name in a directory
// not yet copied work as on any workspace, and the origin sees none of it.
func TestLazyForkMount(t *testing.T) {
	testkit.RequireFUSE(t)
	e := newEnv(t, vfs.Config{})
	ctx := ctxT(t)
	for p, s := range map[string]string{"/src/a.go": "package a\n", "/src/pkg/b.go": "package pkg\n", "/docs/x.md": "# x\n", "/deep/1/2/3/f": "deep\n"} {
		if _, _, err := e.fs.WriteFile(ctx, p, []byte(s), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	src, err := e.fs.Stat(ctx, "/src/a.go")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := e.fs.Stat(ctx, "/docs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Link(ctx, src.Ino, docs.Ino, "a-link"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Symlink(ctx, docs.Ino, "l", "../src/a.go"); err != nil {
		t.Fatal(err)
	}
	fk, err := e.v.Fork(ctx, e.sid, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m, err := Mount(ctx, dir, e.v.Session(fk.ID), Options{Fanout: e.fanout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	sh := func(script string) string {
		t.Helper()
		cmd := exec.Command("sh", "-ec", script)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return string(out)
	}
	// the origin changes after the fork, before the fork's first use
	if _, _, err := e.fs.WriteFile(ctx, "/src/a.go", []byte("parent\n"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Delete(ctx, "/deep/1", true); err != nil {
		t.Fatal(err)
	}
	want := ". ./deep ./deep/1 ./deep/1/2 ./deep/1/2/3 ./deep/1/2/3/f ./docs ./docs/a-link ./docs/l ./docs/x.md ./src ./src/a.go ./src/pkg ./src/pkg/b.go"
	if got := strings.Join(strings.Fields(sh("find . | sort")), " "); got != want {
		t.Fatalf("the fork lists\n%s\nwant\n%s", got, want)
	}
	if got := sh("cat docs/l; stat -c %h docs/a-link"); got != "package a\n2\n" {
		t.Fatalf("symlink and hard link in the fork: %q", got)
	}
	// a write through the name in /docs reaches /src/a.go (one inode)
	sh("echo child >> docs/a-link; rm -r deep; mv src/pkg lib")
	if got := sh("cat src/a.go; ls; ls lib; test ! -e deep"); got != "package a\nchild\ndocs\nlib\nsrc\nb.go\n" {
		t.Fatalf("after the fork's changes: %q", got)
	}
	// the origin has none of it
	for p, want := range map[string]string{"/src/a.go": "parent\n", "/src/pkg/b.go": "package pkg\n", "/docs/a-link": "parent\n"} {
		_, b, err := e.fs.ReadAll(ctx, p)
		if err != nil || string(b) != want {
			t.Fatalf("origin %s: %q, %v; want %q", p, b, err, want)
		}
	}
	if _, err := e.fs.Stat(ctx, "/deep"); err != nil {
		t.Fatalf("the fork's rm -r reached the origin: %v", err)
	}
	for _, id := range []string{e.sid, fk.ID, fk.Base} {
		if err := e.v.Check(context.Background(), id); err != nil {
			t.Fatalf("check %s: %v", filepath.Base(id), err)
		}
	}
}
