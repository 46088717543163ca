package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

// TestRestartKeepsAgentsAndWorkspaces runs the real orchestrator process
// with a real agent container whose /workspace is the FUSE-served session
// filesystem, kills the orchestrator with SIGKILL three times and then stops
// it gracefully, starting it again each time, and checks that the same
// container (not restarted) still takes messages, that its /workspace works
// again and holds what was written before, that no record was lost or
// duplicated, and that its workspace is one mount (not one more per start)
// while a finished agent's is none.
func TestRestartKeepsAgentsAndWorkspaces(t *testing.T) {
	testkit.RequireFUSE(t)
	testkit.RequireImage(t, "filepath/byo-echo:latest")
	testkit.RequireImage(t, "filepath/testagent:latest")
	data := testkit.DataDir(t)
	srv := startServer(t, data)
	c := newClient(t, srv)
	sid := c.session(map[string]any{"name": "restart"})
	node := c.spawn(sid, map[string]any{"agent_type": "custom", "image": "filepath/byo-echo:latest"})
	if node.Status != "running" || node.ContainerID == "" {
		t.Fatalf("spawned node is %s with container %q, want running", node.Status, node.ContainerID)
	}
	if out := c.run(sid, node.ID, "echo before > kept.txt && sync kept.txt && cat kept.txt"); out != "before" {
		t.Fatalf("first command printed %q", out)
	}
	// A second agent that finishes at once: its container exits, and its
	// workspace is unmounted then and stays so over every restart.
	finished := c.spawn(sid, map[string]any{"agent_type": "custom", "image": "filepath/testagent:latest", "task": "done", "parent_id": node.ID})
	mounts := func(nid string) (n int) { // stacked at the node's workspace
		dir := filepath.Join(data, "mnt", nid)
		for _, m := range testkit.Mounts(t, dir) {
			if m == dir {
				n++
			}
		}
		return n
	}
	wantMounts := func(when string) {
		t.Helper()
		if n := mounts(node.ID); n != 1 {
			t.Fatalf("%s: %d mounts at the running agent's workspace, want 1", when, n)
		}
		if n := mounts(finished.ID); n != 0 {
			t.Fatalf("%s: %d mounts at the finished agent's workspace, want 0", when, n)
		}
	}
	testkit.EventuallyNil(t, 60*time.Second, "the finishing agent to be done and unmounted", func() error {
		if s, n := c.node(sid, finished.ID).Status, mounts(finished.ID); s != "done" || n != 0 {
			return fmt.Errorf("it is %s with %d mounts", s, n)
		}
		return nil
	})
	wantMounts("before any restart")

	// Three kills, then a graceful stop: each time the running agent's
	// container keeps working in the same /workspace, which stays one mount.
	for round := 1; round <= 4; round++ {
		before := c.records(sid, node.ID)
		if round == 4 {
			srv.stop(t)
		}
		srv.restart()
		wantMounts(fmt.Sprintf("round %d", round))

		if got := c.node(sid, node.ID); got.Status == "error" || got.Status == "done" || got.ContainerID != node.ContainerID {
			t.Fatalf("round %d: after the restart the node is %s in container %q, want it alive in the same container %q", round, got.Status, got.ContainerID, node.ContainerID)
		}
		out := c.run(sid, node.ID, fmt.Sprintf("cat kept.txt && echo after%d >> kept.txt", round))
		want := "before"
		for i := 1; i < round; i++ {
			want += fmt.Sprintf("\nafter%d", i)
		}
		if out != want {
			t.Fatalf("round %d: /workspace/kept.txt read %q in the container, want %q", round, out, want)
		}
		after := c.records(sid, node.ID)
		seen := map[int64]bool{}
		for i, r := range after {
			if seen[r.Seq] || (i > 0 && r.Seq <= after[i-1].Seq) {
				t.Fatalf("round %d: record %d duplicated or out of order", round, r.Seq)
			}
			seen[r.Seq] = true
		}
		for _, r := range before {
			if !seen[r.Seq] {
				t.Fatalf("round %d: record %d lost over the restart", round, r.Seq)
			}
		}
	}
	var file struct{ Content string }
	if c.do("GET", "/api/v1/sessions/"+sid+"/fs/kept.txt", nil, &file) != 200 || file.Content != "before\nafter1\nafter2\nafter3\nafter4\n" {
		t.Fatalf("kept.txt through the API: %q", file.Content)
	}
	// An edit through the API (the Files tab) shows in the container at
	// once, though its kernel has kept.txt's pages and attributes cached.
	if out := c.run(sid, node.ID, "cat kept.txt"); out != "before\nafter1\nafter2\nafter3\nafter4" {
		t.Fatalf("the container read %q", out)
	}
	if code := c.do("PUT", "/api/v1/sessions/"+sid+"/fs/kept.txt", map[string]any{"content": "edited in the browser\n", "encoding": "text"}, nil); code != 200 {
		t.Fatalf("PUT kept.txt: %d", code)
	}
	if out := c.run(sid, node.ID, "cat ./kept.txt"); out != "edited in the browser" {
		t.Fatalf("after an edit through the API the container read %q", out)
	}
	c.do("DELETE", "/api/v1/sessions/"+sid, nil, nil)
	srv.stop(t)
}
