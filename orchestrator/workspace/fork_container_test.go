package workspace

import (
	"context"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/treediff"
)

// TestContainerForkGit: a node spawned with workspace "fork" mounts its
// fork (the Manager's Open resolves the node's workspace as cmd/filepath's
// does). git in its container sees the parent's repository as it was at
// the fork; commits, branches and status there do not reach the parent's
// container, nor the parent's commits the child's; the diff lists the
// child's changes.
func TestContainerForkGit(t *testing.T) {
	testkit.RequireFUSE(t)
	testkit.RequireImage(t, gitImage)
	e := newEnv(t, vfs.Config{})
	mgr, err := NewManager(ManagerConfig{
		Dir: sharedDir(t),
		Open: func(ctx context.Context, nodeID string) (FS, error) {
			ws, err := e.v.WorkspaceOfNode(ctx, e.sid, nodeID)
			if err != nil {
				return nil, err
			}
			return e.v.Session(ws), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.v.SetInvalidator(mgr.Fanout())
	t.Cleanup(func() { mgr.Close() })
	ctx := ctxT(t)
	if _, err := mgr.Mount(ctx, "parent"); err != nil {
		t.Fatal(err)
	}
	p := startContainer(t, mgr, "parent")
	const gitEnv = `export HOME=/tmp GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@x GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@x; `
	dockerExec(t, p, gitEnv+`
		git init -q -b main
		mkdir -p src && echo 'package main' > src/main.go && echo hello > README
		git add -A && git commit -q -m first`)

	fk, err := e.v.Fork(ctx, e.sid, "child")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.Mount(ctx, "child"); err != nil {
		t.Fatal(err)
	}
	c := startContainer(t, mgr, "child")
	if out := dockerExec(t, c, gitEnv+`git status --porcelain; git log --oneline | wc -l; cat README`); out != "1\nhello\n" {
		t.Fatalf("git in the fork at the fork point printed %q", out)
	}
	dockerExec(t, c, gitEnv+`
		echo 'from the child' > README && echo new > child.txt
		git add -A && git commit -q -m 'child work'
		git checkout -q -b child-branch`)
	dockerExec(t, p, gitEnv+`echo 'parent edit' >> src/main.go && git commit -qam 'parent work'`)

	// the parent's repository: its own two commits, clean, on main, no child branch
	if out := dockerExec(t, p, gitEnv+`git status --porcelain; git log --format=%s; git branch --list; cat README; test -e child.txt || echo no-child-file`); out != "parent work\nfirst\n* main\nhello\nno-child-file\n" {
		t.Fatalf("parent's git printed %q", out)
	}
	// the child's: its own commit on top of the fork point, its branch
	if out := dockerExec(t, c, gitEnv+`git status --porcelain; git log --format=%s; git branch --show-current; cat README; cat src/main.go`); out != "child work\nfirst\nchild-branch\nfrom the child\npackage main\n" {
		t.Fatalf("child's git printed %q", out)
	}
	d, err := e.v.Diff(ctx, fk.ID, vfs.DiffOptions{Text: true})
	if err != nil {
		t.Fatal(err)
	}
	var readme, child bool
	for _, ch := range d.Changes {
		switch ch.Path {
		case "/README":
			readme = ch.Op == treediff.Changed && strings.Contains(ch.Diff, "-hello\n+from the child\n")
		case "/child.txt":
			child = ch.Op == treediff.Added
		}
	}
	if !readme || !child {
		t.Fatalf("diff of the child misses its work: %+v", d.Changes)
	}
	for _, id := range []string{e.sid, fk.ID, fk.Base} {
		if err := e.v.Check(ctx, id); err != nil {
			t.Fatalf("check %s: %v", id, err)
		}
	}
}
