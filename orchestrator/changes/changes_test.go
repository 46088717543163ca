package changes

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// source is a Go-like file of n functions, for edits git has to place.
func source(n int, body func(i int) string) string {
	var b strings.Builder
	b.WriteString("package demo\n\nimport \"fmt\"\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "\n// F%d does step %d.\nfunc F%d(x int) int {\n%s\treturn x + %d\n}\n", i, i, i, body(i), i)
	}
	return b.String()
}

// repoWithHistory makes, in the mounted workspace, a base commit (the
// clone commit) and two commits on top of it with every kind of change,
// then leaves uncommitted changes of every kind in the working tree.
func repoWithHistory(e *env) (base string) {
	e.git("init", "-q")
	for i := 0; i < 12; i++ {
		e.write(fmt.Sprintf("pkg/f%02d.go", i), source(6, func(int) string { return "\tx++\n" }))
	}
	e.write("README.md", "# demo\n\nA demo repository.\n")
	e.write("docs/guide.md", strings.Repeat("A line of the guide that says something.\n", 40))
	e.write("old/name.txt", "moved as it is\n")
	e.write("gone.txt", "deleted later\n")
	e.write("run.sh", "#!/bin/sh\necho run\n")
	e.write(".gitignore", "build/\n*.log\n")
	e.git("add", "-A")
	e.git("commit", "-q", "-m", "base")
	base = strings.TrimSpace(e.git("rev-parse", "HEAD"))

	// commit 1: edits in the middle, at the top and the bottom, a new
	// function between two others, an exact rename, a deletion, an addition
	e.write("pkg/f00.go", source(6, func(i int) string {
		if i == 3 {
			return "\tx *= 2\n\tx++\n"
		}
		return "\tx++\n"
	}))
	e.write("pkg/f01.go", strings.Replace(source(6, func(int) string { return "\tx++\n" }), "package demo\n", "// Package demo is a demo.\npackage demo\n", 1)+"\n// Extra is new.\nfunc Extra() {}\n")
	e.write("pkg/f02.go", strings.Replace(source(6, func(int) string { return "\tx++\n" }), "\n// F3 does step 3.", "\n// G does more.\nfunc G(x int) int {\n\tx++\n\treturn x\n}\n\n// F3 does step 3.", 1))
	if err := os.MkdirAll(filepath.Join(e.dir, "new"), 0o755); err != nil {
		e.t.Fatal(err)
	}
	e.git("mv", "old/name.txt", "new/name.txt")
	e.git("rm", "-q", "gone.txt")
	e.write("added.txt", "a new file\n")
	e.git("add", "-A")
	e.git("commit", "-q", "-m", "edit and move\n\nThe body of the message.")

	// commit 2: a rename with changes, a mode change, a binary file
	guide := strings.Repeat("A line of the guide that says something.\n", 40)
	e.git("mv", "docs/guide.md", "docs/manual.md")
	e.write("docs/manual.md", strings.Replace(guide, "something.\n", "something else.\n", 3))
	if err := os.Chmod(filepath.Join(e.dir, "run.sh"), 0o755); err != nil {
		e.t.Fatal(err)
	}
	e.write("logo.bin", "\x89PNG\x00\x01\x02binary")
	e.git("add", "-A")
	e.git("commit", "-q", "-m", "rename the guide")

	// uncommitted: a tracked file changed, one deleted, one moved without
	// git, an untracked file, ignored files, a no-newline ending
	e.write("pkg/f03.go", strings.Replace(source(6, func(int) string { return "\tx++\n" }), "return x + 5\n", "return x + 500\n", 1))
	if err := os.Remove(filepath.Join(e.dir, "pkg/f04.go")); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(e.dir, "pkg/f05.go"), filepath.Join(e.dir, "pkg/moved.go")); err != nil {
		e.t.Fatal(err)
	}
	e.write("notes/todo.txt", "untracked\n")
	e.write("build/out.txt", "ignored\n")
	e.write("debug.log", "ignored\n")
	e.write("README.md", "# demo\n\nA demo repository.\nNo newline")
	return base
}

// The Changes view of a real repository equals git's own diff of the same
// ranges: the files with their status (renames included, with git's
// similarity) and every hunk; the commits base..HEAD are listed newest
// first; the uncommitted changes (tracked and untracked, not ignored) are
// apart from the committed ones.
func TestChangesEqualGitDiff(t *testing.T) {
	e := newEnv(t)
	base := repoWithHistory(e)
	if err := e.st.Sessions.SetBaseCommit(e.ctx, e.sid, base); err != nil {
		t.Fatal(err)
	}
	ch, err := e.svc.Changes(e.ctx, e.target(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Repository || ch.Base.Kind != BaseClone || ch.Base.Commit != base || ch.Branch != "main" {
		t.Fatalf("repository %v, base %+v, branch %q", ch.Repository, ch.Base, ch.Branch)
	}
	if ch.Head != strings.TrimSpace(e.git("rev-parse", "HEAD")) {
		t.Fatalf("head %s", ch.Head)
	}
	if len(ch.Commits) != 2 || ch.Commits[0].Subject != "rename the guide" || ch.Commits[1].Subject != "edit and move" ||
		ch.Commits[1].Message != "edit and move\n\nThe body of the message." || ch.Commits[0].Parents[0] != ch.Commits[1].ID {
		t.Fatalf("commits %+v", ch.Commits)
	}

	committed := parseGitDiff(t, e.git("diff", "-M", "--name-status", base, "HEAD"), e.git("diff", "-M", base, "HEAD"))
	sameAsGit(t, "committed", ch.Committed, committed)
	for _, f := range ch.Committed {
		switch f.Path {
		case "logo.bin":
			if !f.Binary || f.Patch != "" || f.NewSize != 13 {
				t.Errorf("binary file: %+v", f)
			}
		case "run.sh":
			if f.OldMode != "100644" || f.NewMode != "100755" {
				t.Errorf("mode change: %+v", f)
			}
		case "new/name.txt":
			if f.Status != Renamed || f.Similarity != 100 || f.OldPath != "old/name.txt" {
				t.Errorf("exact rename: %+v", f)
			}
		}
	}

	// git's view of the working tree against HEAD: everything added
	// (untracked files too, ignored ones not), then diffed against HEAD
	e.git("add", "-A")
	uncommitted := parseGitDiff(t, e.git("diff", "--cached", "-M", "--name-status", "HEAD"), e.git("diff", "--cached", "-M", "HEAD"))
	sameAsGit(t, "uncommitted", ch.Uncommitted, uncommitted)
	for _, f := range ch.Uncommitted {
		if strings.HasPrefix(f.Path, "build/") || strings.HasSuffix(f.Path, ".log") {
			t.Errorf("an ignored file is listed: %s", f.Path)
		}
	}

	// one file alone, in full
	f, err := e.svc.File(e.ctx, e.target(), Options{}, SectionCommitted, "docs/manual.md")
	if err != nil {
		t.Fatal(err)
	}
	if f.Status != Renamed || f.Patch != committed["docs/manual.md"].hunks {
		t.Fatalf("file alone: %+v", f)
	}
}

// The view follows the working tree: a file written after the first look
// shows at the next, and one written back to HEAD's bytes leaves it.
func TestChangesFollowWrites(t *testing.T) {
	e := newEnv(t)
	e.git("init", "-q")
	e.write("a.txt", "one\ntwo\nthree\n")
	e.git("add", "-A")
	e.git("commit", "-q", "-m", "first")
	ch, err := e.svc.Changes(e.ctx, e.target(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Uncommitted) != 0 || ch.Base.Kind != BaseNone || len(ch.Commits) != 1 || len(ch.Committed) != 1 {
		t.Fatalf("a clean repository: %+v", ch)
	}
	e.write("a.txt", "one\nTWO\nthree\n")
	ch, err = e.svc.Changes(e.ctx, e.target(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Uncommitted) != 1 || ch.Uncommitted[0].Patch != "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n" {
		t.Fatalf("after a write: %+v", ch.Uncommitted)
	}
	e.write("a.txt", "one\ntwo\nthree\n")
	ch, err = e.svc.Changes(e.ctx, e.target(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Uncommitted) != 0 {
		t.Fatalf("written back: %+v", ch.Uncommitted)
	}
}

// A forked workspace's changes are measured from its fork point: its
// commits since the fork point's HEAD, and its working tree against its own
// HEAD; without a repository, its working tree against the fork point's.
func TestChangesOfAFork(t *testing.T) {
	e := newEnv(t)
	e.git("init", "-q")
	e.write("a.txt", "one\ntwo\n")
	e.write("b.txt", "bee\n")
	e.git("add", "-A")
	e.git("commit", "-q", "-m", "first")
	head := strings.TrimSpace(e.git("rev-parse", "HEAD"))
	s, err := e.st.Sessions.SessionByID(e.ctx, e.sid)
	if err != nil {
		t.Fatal(err)
	}
	root, err := e.st.Sessions.CreateNode(e.ctx, s.UserID, e.sid, sessions.NewNode{AgentType: "shelley"})
	if err != nil {
		t.Fatal(err)
	}
	fork := func(origin string) Target {
		t.Helper()
		n, err := e.st.Sessions.CreateNode(e.ctx, s.UserID, e.sid, sessions.NewNode{AgentType: "shelley", ParentID: &root.ID})
		if err != nil {
			t.Fatal(err)
		}
		fk, err := e.v.Fork(e.ctx, origin, n.ID)
		if err != nil {
			t.Fatal(err)
		}
		return Target{SessionID: e.sid, NodeID: n.ID, Workspace: fk.ID, Fork: &fk}
	}
	ft := fork(e.sid)
	ffs := e.v.Session(ft.Workspace)
	if _, _, err := ffs.WriteFile(e.ctx, "/a.txt", []byte("one\nTWO\n"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// the parent moves on: not the fork's change
	e.write("b.txt", "parent\n")
	ch, err := e.svc.Changes(e.ctx, ft, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Base.Kind != BaseFork || ch.Base.Commit != head || len(ch.Commits) != 0 || len(ch.Committed) != 0 {
		t.Fatalf("a fork's base: %+v, commits %d, committed %d", ch.Base, len(ch.Commits), len(ch.Committed))
	}
	if len(ch.Uncommitted) != 1 || ch.Uncommitted[0].Path != "a.txt" || ch.Uncommitted[0].Patch != "@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n" {
		t.Fatalf("a fork's uncommitted changes: %+v", ch.Uncommitted)
	}

	// no repository: the working tree against the fork point's
	if err := os.RemoveAll(filepath.Join(e.dir, ".git")); err != nil {
		t.Fatal(err)
	}
	nt := fork(e.sid)
	nfs := e.v.Session(nt.Workspace)
	if _, _, err := nfs.WriteFile(e.ctx, "/c.txt", []byte("new\n"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := nfs.Delete(e.ctx, "/a.txt", false); err != nil {
		t.Fatal(err)
	}
	ch, err = e.svc.Changes(e.ctx, nt, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range ch.Uncommitted {
		got = append(got, f.Status+" "+f.Path)
	}
	if ch.Repository || strings.Join(got, ", ") != "deleted a.txt, added c.txt" {
		t.Fatalf("a fork without a repository: repository %v, %v", ch.Repository, got)
	}
}
