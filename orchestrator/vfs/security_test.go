package vfs

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
)

func TestSymlinks(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	fs := f.fs
	if _, _, err := fs.WriteFile(ctx, "/data/real.txt", []byte("real"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	dataDir, _ := fs.Lookup(ctx, RootIno, "data")
	mk := func(parent int64, name, target string) {
		t.Helper()
		if _, err := fs.Symlink(ctx, parent, name, target); err != nil {
			t.Fatal(err)
		}
	}
	// Absolute targets are container paths: the session is at /workspace.
	mk(RootIno, "abs", "/workspace/data/real.txt")
	mk(dataDir.Ino, "absdir", "/workspace/data") // a directory, in the middle of a path
	mk(RootIno, "absroot", "/workspace")
	mk(RootIno, "absdots", "/../workspace/./data/../data/real.txt")
	mk(RootIno, "rel", "data/real.txt")    // relative
	mk(dataDir.Ino, "up", "../data")       // .. inside the workspace
	mk(RootIno, "escape", "../etc/passwd") // above the root
	mk(RootIno, "escape2", "/../../x")     // outside /workspace, absolute
	mk(RootIno, "escape3", "/data/real.txt")
	mk(RootIno, "escape4", "/workspace/../etc/passwd")
	mk(RootIno, "escape5", "/workspacex/data/real.txt")
	mk(RootIno, "loop1", "loop2")
	mk(RootIno, "loop2", "loop1")
	mk(RootIno, "self", "self/x")
	mk(RootIno, "dangling", "/workspace/nope")
	tests := []struct {
		name  string
		path  string
		want  string
		errno syscall.Errno
		msg   string
	}{
		{name: "absolute target", path: "/abs", want: "real"},
		{name: "absolute directory target", path: "/data/absdir/absdir/real.txt", want: "real"},
		{name: "absolute target /workspace", path: "/absroot/data/real.txt", want: "real"},
		{name: "absolute target with dots", path: "/absdots", want: "real"},
		{name: "relative target", path: "/rel", want: "real"},
		{name: "dir symlink in the middle", path: "/data/up/real.txt", want: "real"},
		{name: "escape", path: "/escape", errno: syscall.EACCES, msg: "symlink escapes the workspace"},
		{name: "escape absolute", path: "/escape2", errno: syscall.EACCES, msg: "symlink escapes the workspace"},
		{name: "absolute outside /workspace", path: "/escape3", errno: syscall.EACCES, msg: "/data/real.txt is outside /workspace"},
		{name: "absolute .. above /workspace", path: "/escape4", errno: syscall.EACCES, msg: "symlink escapes the workspace"},
		{name: "absolute under a longer name", path: "/escape5", errno: syscall.EACCES, msg: "symlink escapes the workspace"},
		{name: "loop", path: "/loop1", errno: syscall.ELOOP, msg: "/loop1"},
		{name: "self loop", path: "/self", errno: syscall.ELOOP},
		{name: "dangling", path: "/dangling", errno: syscall.ENOENT},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, b, err := fs.ReadAll(ctx, tc.path)
			if tc.errno != 0 {
				if !errors.Is(err, tc.errno) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("got %v, want %v containing %q", err, tc.errno, tc.msg)
				}
				return
			}
			if err != nil || string(b) != tc.want {
				t.Fatalf("got %q, %v", b, err)
			}
		})
	}
	if log, err := f.v.AuditLog(ctx, f.sid, 10); err != nil || len(log) != 5 || log[0].Name != "resolve" || !strings.Contains(log[0].Error, "symlink escapes the workspace") {
		t.Fatalf("escapes not audited: %+v %v", log, err)
	}
	// the target is kept as written: the container sees what it wrote
	if info, err := fs.lstat(ctx, "/abs"); err != nil || !info.IsSymlink || info.Target != "/workspace/data/real.txt" {
		t.Fatalf("lstat /abs = %+v, %v", info, err)
	}
	if info, err := fs.Stat(ctx, "/abs"); err != nil || info.Path != "/abs" || info.Size != 4 || info.IsSymlink {
		t.Fatalf("stat /abs = %+v, %v", info, err)
	}
	// writing through a symlink writes the target; deleting the link keeps it
	if _, _, err := fs.WriteFile(ctx, "/abs", []byte("via link"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, b, _ := fs.ReadAll(ctx, "/data/real.txt"); string(b) != "via link" {
		t.Fatalf("target %q", b)
	}
	if err := fs.Delete(ctx, "/abs", false); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(ctx, "/data/real.txt"); err != nil {
		t.Fatal(err)
	}
	// an escaping link cannot be written through either
	if _, _, err := fs.WriteFile(ctx, "/escape", []byte("x"), WriteOptions{}); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("write through escaping link: %v", err)
	}
	f.check(t)
}

func TestAllowedPaths(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	if _, _, err := f.fs.WriteFile(ctx, "/src/a.go", []byte("package a"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.fs.WriteFile(ctx, "/secret/key", []byte("k"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.fs.Symlink(ctx, RootIno, "sneaky", "/workspace/secret/key"); err != nil {
		t.Fatal(err)
	}
	srcDir, _ := f.fs.Lookup(ctx, RootIno, "src")
	if _, err := f.fs.Symlink(ctx, srcDir.Ino, "link", "/workspace/secret/key"); err != nil {
		t.Fatal(err)
	}
	node, err := f.fs.ForNode("n1", []string{"/src", "/docs/"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		op   func() error
		deny bool
	}{
		{name: "read allowed", op: func() error { _, _, err := node.ReadAll(ctx, "/src/a.go"); return err }},
		{name: "write allowed", op: func() error { _, _, err := node.WriteFile(ctx, "/docs/x.md", []byte("x"), WriteOptions{}); return err }},
		{name: "list root (ancestor)", op: func() error { _, err := node.List(ctx, "/"); return err }},
		{name: "read outside", op: func() error { _, _, err := node.ReadAll(ctx, "/secret/key"); return err }, deny: true},
		{name: "read via symlink", op: func() error { _, _, err := node.ReadAll(ctx, "/src/link"); return err }, deny: true},
		{name: "write outside", op: func() error { _, _, err := node.WriteFile(ctx, "/other.txt", nil, WriteOptions{}); return err }, deny: true},
		{name: "delete outside", op: func() error { return node.Delete(ctx, "/secret", true) }, deny: true},
		{name: "move out", op: func() error { _, err := node.Move(ctx, "/src/a.go", "/a.go"); return err }, deny: true},
		{name: "inode lookup outside", op: func() error { _, err := node.Lookup(ctx, RootIno, "secret"); return err }, deny: true},
		{name: "inode create outside", op: func() error { _, err := node.Create(ctx, RootIno, "new", 0o644, true); return err }, deny: true},
		{name: "inode lookup allowed", op: func() error { _, err := node.Lookup(ctx, RootIno, "src"); return err }},
	}
	denied := 0
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op()
			if tc.deny {
				denied++
				if !errors.Is(err, syscall.EACCES) || orchestrator.ErrorCode(err) != orchestrator.EForbidden {
					t.Fatalf("got %v, want a denial", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected %v", err)
			}
		})
	}
	// list of root hides what is outside
	list, err := node.List(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if e.Name == "secret" || e.Name == "sneaky" {
			t.Fatalf("listing shows %s", e.Name)
		}
	}
	ents, _ := node.ReadDir(ctx, RootIno)
	for _, e := range ents {
		if e.Name == "secret" {
			t.Fatal("readdir shows secret")
		}
	}
	log, err := f.v.AuditLog(ctx, f.sid, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != denied {
		t.Fatalf("%d audit records, want %d: %+v", len(log), denied, log)
	}
	for _, e := range log {
		if !strings.Contains(string(e.Parameters), `"node_id":"n1"`) || !strings.Contains(e.Error, "outside the allowed paths") {
			t.Fatalf("audit record %+v", e)
		}
	}
	// the audit log is insert-only
	if _, err := f.db.Exec(`UPDATE fs_audit SET name='x'`); err == nil {
		t.Fatal("fs_audit accepted an update")
	}
	f.check(t)
}

// A refusal in a forked node's workspace (its mount, its key's /fs) is in
// its session's audit log, where the user reads refusals, with the node's
// id; before, it was filed under the fork's hidden workspace id, which no
// one can list.
func TestForkDenialInSessionAuditLog(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	mustWrite(t, f.fs, "/src/a.go", []byte("package a\n"))
	fk := mustFork(t, f.v, f.sid)
	node, err := f.v.Session(fk.ID).ForNode("n1", []string{"/src"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := node.WriteFile(ctx, "/outside.txt", []byte("x"), WriteOptions{}); !IsErrno(err, syscall.EACCES) {
		t.Fatalf("write outside the allowed paths in a fork: %v", err)
	}
	log, err := f.v.AuditLog(ctx, f.sid, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || !strings.Contains(string(log[0].Parameters), `"node_id":"n1"`) || !strings.Contains(string(log[0].Parameters), "/outside.txt") {
		t.Fatalf("session audit log after a refusal in a fork: %+v", log)
	}
}
