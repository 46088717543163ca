package main

import (
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit"
)

// TestForkedChildThroughServe runs the real orchestrator with FUSE
// workspaces and real agent containers: a child spawned with workspace
// "fork" mounts its own copy at /workspace, so git there (commit, status,
// log) leaves the parent's repository as it was; the diff route shows the
// child's work and merge brings its commit into the parent's repository.
func TestForkedChildThroughServe(t *testing.T) {
	testkit.RequireFUSE(t)
	testkit.RequireImage(t, "filepath/byo-echo:latest")
	srv := startServer(t, testkit.DataDir(t), "--network", "none")
	c := newClient(t, srv)
	sid := c.session(map[string]any{"name": "fork"})
	root := c.spawn(sid, map[string]any{"agent_type": "custom", "image": "filepath/byo-echo:latest"})
	if root.Status != "running" {
		t.Fatalf("spawn root: %+v", root)
	}
	run := func(node, cmd string) string { t.Helper(); return c.run(sid, node, cmd) }
	const git = `export HOME=/tmp GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@x GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@x; `
	run(root.ID, git+`git init -q -b main && echo hello > README && git add -A && git commit -q -m first && git log --format=%s`)

	child := c.spawn(sid, map[string]any{"agent_type": "custom", "image": "filepath/byo-echo:latest", "parent_id": root.ID, "workspace": "fork"})
	if child.Status != "running" {
		t.Fatalf("spawn forked child: %+v", child)
	}
	if out := run(child.ID, git+`echo child > README && echo new > new.txt && git add -A && git commit -q -m 'child work' && git log --format=%s | tr '\n' ' ' && git status --porcelain | wc -l`); out != "child work first 0" {
		t.Fatalf("git in the forked child printed %q", out)
	}
	if out := run(root.ID, git+`git log --format=%s | tr '\n' ' ' && cat README && test ! -e new.txt && echo no-new`); out != "first hello\nno-new" {
		t.Fatalf("the parent's repository after the child's commit: %q", out)
	}
	var diff struct {
		Changes []struct{ Path, Op, Diff string }
	}
	if c.do("GET", "/api/v1/sessions/"+sid+"/nodes/"+child.ID+"/diff", nil, &diff) != 200 {
		t.Fatal("diff")
	}
	var readme bool
	for _, ch := range diff.Changes {
		readme = readme || ch.Path == "/README" && strings.Contains(ch.Diff, "-hello\n+child\n")
	}
	if !readme {
		t.Fatalf("the diff has no README change: %+v", diff.Changes)
	}
	var merged struct {
		Applied   []struct{ Path string }
		Conflicts []struct{ Path string }
	}
	if c.do("POST", "/api/v1/sessions/"+sid+"/nodes/"+child.ID+"/merge", nil, &merged) != 200 || len(merged.Conflicts) != 0 || len(merged.Applied) == 0 {
		t.Fatalf("merge: %+v", merged)
	}
	// the parent's container sees the merged repository at once
	if out := run(root.ID, git+`git log --format=%s | tr '\n' ' ' && git status --porcelain | wc -l && cat new.txt`); out != "child work first 0\nnew" {
		t.Fatalf("the parent's repository after the merge: %q", out)
	}
	c.do("DELETE", "/api/v1/sessions/"+sid, nil, nil)
	srv.stop(t)
}
