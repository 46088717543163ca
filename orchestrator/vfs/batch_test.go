package vfs

import (
	"syscall"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
)

// TestGroupCommit: changes made through a mount (an origin) share one open
// batch; one that fails rolls back alone; the read pool does not see the
// batch, but every VFS read does (it commits the batch first), and Fsync
// commits it.
func TestGroupCommit(t *testing.T) {
	f := newFixture(t, Config{BatchDelay: time.Hour})
	ctx := ctxT(t)
	if _, err := f.fs.GetAttr(ctx, RootIno); err != nil { // the root, committed
		t.Fatal(err)
	}
	mctx := events.WithOrigin(ctx, "mount")
	committed := func() int {
		t.Helper()
		var n int
		if err := f.v.rq.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM fs_dentry WHERE session_id=?`, f.sid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a, err := f.fs.Create(mctx, RootIno, "a", 0o644, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.fs.WriteAt(mctx, a.Ino, []byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.fs.Create(mctx, RootIno, "a", 0o644, true); !IsErrno(err, syscall.EEXIST) {
		t.Fatalf("second exclusive create = %v, want EEXIST", err)
	}
	if _, err := f.fs.Mkdir(mctx, RootIno, "d", 0o755); err != nil {
		t.Fatal(err)
	}
	if n := committed(); n != 0 {
		t.Fatalf("%d names committed while the batch is open, want 0", n)
	}
	// A lookup of a name the batch did not touch does not commit it.
	if _, err := f.fs.Lookup(mctx, RootIno, "zzz"); !IsErrno(err, syscall.ENOENT) {
		t.Fatalf("lookup of a new name = %v, want ENOENT", err)
	}
	if n := committed(); n != 0 {
		t.Fatalf("a lookup of an untouched name committed the batch (%d names)", n)
	}
	// A read of what the batch changed sees it (and commits it).
	buf := make([]byte, 16)
	if n, err := f.fs.ReadAt(ctx, a.Ino, buf, 0); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read = %q, %v", buf[:n], err)
	}
	if n := committed(); n != 2 {
		t.Fatalf("%d names committed after the read, want 2 (a and d; the failed create left nothing)", n)
	}
	f.check(t)
	// The path API reads what a mount wrote, too.
	if err := f.fs.Unlink(mctx, RootIno, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.fs.Stat(ctx, "/a"); !IsErrno(err, syscall.ENOENT) {
		t.Fatalf("stat through the path API after a batched unlink = %v, want ENOENT", err)
	}
	// Fsync commits what is open.
	if _, err := f.fs.Mkdir(mctx, RootIno, "e", 0o755); err != nil {
		t.Fatal(err)
	}
	if n := committed(); n != 1 {
		t.Fatalf("%d names committed, want 1 (d)", n)
	}
	if err := f.fs.Fsync(mctx, RootIno); err != nil {
		t.Fatal(err)
	}
	if n := committed(); n != 2 {
		t.Fatalf("%d names committed after fsync, want 2", n)
	}
	// A change without an origin (the REST API) commits before it returns.
	if _, err := f.fs.Mkdir(ctx, RootIno, "api", 0o755); err != nil {
		t.Fatal(err)
	}
	if n := committed(); n != 3 {
		t.Fatalf("%d names committed after an API mkdir, want 3", n)
	}
	f.check(t)
}

// TestBatchCommitsOnTimer: an open batch commits by itself after BatchDelay.
func TestBatchCommitsOnTimer(t *testing.T) {
	f := newFixture(t, Config{BatchDelay: 5 * time.Millisecond})
	ctx := ctxT(t)
	if _, err := f.fs.Mkdir(events.WithOrigin(ctx, "mount"), RootIno, "d", 0o755); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		f.v.rq.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM fs_dentry WHERE session_id=?`, f.sid).Scan(&n)
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch did not commit within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
