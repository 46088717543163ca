package vfs

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
)

func mustWrite(tb testing.TB, fs *FS, p string, data []byte) {
	tb.Helper()
	if _, _, err := fs.WriteFile(context.Background(), p, data, WriteOptions{}); err != nil {
		tb.Fatalf("write %s in %s: %v", p, fs.sid, err)
	}
}

func mustRead(tb testing.TB, fs *FS, p string) []byte {
	tb.Helper()
	_, b, err := fs.ReadAll(context.Background(), p)
	if err != nil {
		tb.Fatalf("read %s in %s: %v", p, fs.sid, err)
	}
	return b
}

func wantContent(tb testing.TB, fs *FS, p string, want []byte) {
	tb.Helper()
	if got := mustRead(tb, fs, p); !bytes.Equal(got, want) {
		tb.Fatalf("%s in %s: got %d bytes %.40q, want %d bytes %.40q", p, fs.sid, len(got), got, len(want), want)
	}
}

func wantMissing(tb testing.TB, fs *FS, p string) {
	tb.Helper()
	if _, err := fs.Stat(context.Background(), p); err == nil {
		tb.Fatalf("%s exists in %s, want it missing", p, fs.sid)
	}
}

// pattern returns n bytes that differ per seed and per position.
func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7+i/251)
	}
	return b
}

// writeAt writes through the inode API (what the FUSE mount does).
func writeAt(tb testing.TB, fs *FS, p string, data []byte, off int64) {
	tb.Helper()
	ctx := context.Background()
	info, err := fs.Stat(ctx, p)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := fs.WriteAt(ctx, info.Ino, data, off); err != nil {
		tb.Fatalf("write at %d of %s: %v", off, p, err)
	}
}

func readAt(tb testing.TB, fs *FS, p string, n int, off int64) []byte {
	tb.Helper()
	ctx := context.Background()
	info, err := fs.Stat(ctx, p)
	if err != nil {
		tb.Fatal(err)
	}
	b := make([]byte, n)
	k, err := fs.ReadAt(ctx, info.Ino, b, off)
	if err != nil {
		tb.Fatal(err)
	}
	return b[:k]
}

// mustFork forks workspace origin (for no node) or fails the test.
func mustFork(tb testing.TB, v *VFS, origin string) ForkInfo {
	tb.Helper()
	fk, err := v.Fork(context.Background(), origin, "")
	if err != nil {
		tb.Fatalf("fork %s: %v", origin, err)
	}
	return fk
}

func checkAll(tb testing.TB, v *VFS, ids ...string) {
	tb.Helper()
	for _, id := range ids {
		if err := v.Check(context.Background(), id); err != nil {
			tb.Fatalf("consistency check of %s: %v", id, err)
		}
	}
}

// A fork starts as the parent's copy; afterwards writes on either side,
// whole-file, in part of a chunk, truncates and deletes, are not seen by
// the other.
func TestForkIsIndependentBothWays(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	ctx := ctxT(t)
	p := f.fs
	big := pattern(1, 3*4096+100) // four chunks
	mustWrite(t, p, "/big", big)
	mustWrite(t, p, "/a.txt", []byte("parent a\n"))
	mustWrite(t, p, "/dir/b.txt", []byte("parent b\n"))
	mustWrite(t, p, "/gone", []byte("deleted by the parent later"))
	if _, err := p.Symlink(ctx, RootIno, "link", "/workspace/a.txt"); err != nil {
		t.Fatal(err)
	}

	fk := mustFork(t, f.v, f.sid)
	c := f.v.Session(fk.ID)
	wantContent(t, c, "/big", big)
	wantContent(t, c, "/a.txt", []byte("parent a\n"))
	wantContent(t, c, "/dir/b.txt", []byte("parent b\n"))
	la, err := c.Lookup(ctx, RootIno, "link")
	if err != nil {
		t.Fatal(err)
	}
	if tg, err := c.Readlink(ctx, la.Ino); err != nil || tg != "/workspace/a.txt" {
		t.Fatalf("symlink in fork: %q %v", tg, err)
	}

	// parent → fork: none of these are seen by the fork
	writeAt(t, p, "/big", []byte("PARENT"), 4096+10) // inside chunk 1
	mustWrite(t, p, "/a.txt", []byte("parent a v2\n"))
	if err := p.Delete(ctx, "/gone", false); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, p, "/new-in-parent", []byte("p"))
	wantContent(t, c, "/big", big)
	wantContent(t, c, "/a.txt", []byte("parent a\n"))
	wantContent(t, c, "/gone", []byte("deleted by the parent later"))
	wantMissing(t, c, "/new-in-parent")

	// fork → parent: partial write into an inherited chunk (copy-up), truncate, delete
	writeAt(t, c, "/big", []byte("CHILD"), 2*4096+1)
	wantBig := bytes.Clone(big)
	copy(wantBig[2*4096+1:], "CHILD")
	wantContent(t, c, "/big", wantBig)
	if got := readAt(t, c, "/big", 20, 2*4096-5); !bytes.Equal(got, wantBig[2*4096-5:2*4096+15]) {
		t.Fatalf("ReadAt across chunks in the fork: %q", got)
	}
	if _, err := c.SetAttr(ctx, mustStat(t, c, "/dir/b.txt").Ino, AttrChange{Size: ptr(int64(3))}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "/dir", true); err != nil {
		t.Fatal(err)
	}
	wantMissing(t, c, "/dir/b.txt")
	mustWrite(t, c, "/new-in-fork", []byte("c"))

	wantP := bytes.Clone(big)
	copy(wantP[4096+10:], "PARENT")
	wantContent(t, p, "/big", wantP)
	wantContent(t, p, "/dir/b.txt", []byte("parent b\n"))
	wantMissing(t, p, "/new-in-fork")
	wantContent(t, p, "/a.txt", []byte("parent a v2\n"))

	// the parent truncates and regrows a file the fork has truncated; each keeps its own
	if _, err := p.SetAttr(ctx, mustStat(t, p, "/big").Ino, AttrChange{Size: ptr(int64(10))}); err != nil {
		t.Fatal(err)
	}
	wantContent(t, c, "/big", wantBig)
	if _, err := c.SetAttr(ctx, mustStat(t, c, "/big").Ino, AttrChange{Size: ptr(int64(4096 + 7))}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetAttr(ctx, mustStat(t, c, "/big").Ino, AttrChange{Size: ptr(int64(4096 + 20))}); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Clone(big[:4096+7]), make([]byte, 13)...)
	wantContent(t, c, "/big", want)
	wantContent(t, p, "/big", wantP[:10])
	// a copy inside the fork of an inherited file
	if _, err := c.Copy(ctx, "/a.txt", "/a-copy.txt"); err != nil {
		t.Fatal(err)
	}
	wantContent(t, c, "/a-copy.txt", []byte("parent a\n"))
	// hashes are of the fork's content
	info, err := c.Stat(ctx, "/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if pi, _ := p.Stat(ctx, "/a.txt"); pi.Hash == info.Hash {
		t.Fatal("fork and parent report the same hash for different content")
	}
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)
}

func mustStat(tb testing.TB, fs *FS, p string) FileInfo {
	tb.Helper()
	info, err := fs.Stat(context.Background(), p)
	if err != nil {
		tb.Fatal(err)
	}
	return info
}

func ptr[T any](v T) *T { return &v }

// A fork of a fork sees its parent fork's state at its fork point, and
// changes anywhere up the chain do not reach it.
func TestForkOfFork(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	ctx := ctxT(t)
	p := f.fs
	big := pattern(3, 2*4096+5)
	mustWrite(t, p, "/big", big)
	mustWrite(t, p, "/x", []byte("x0"))
	f1 := mustFork(t, f.v, f.sid)
	c1 := f.v.Session(f1.ID)
	mustWrite(t, c1, "/x", []byte("x1"))
	mustWrite(t, c1, "/only1", []byte("one"))
	f2 := mustFork(t, f.v, f1.ID)
	if f2.SessionID != f.sid || f2.Origin != f1.ID {
		t.Fatalf("fork of fork: %+v", f2)
	}
	c2 := f.v.Session(f2.ID)
	wantContent(t, c2, "/x", []byte("x1"))
	wantContent(t, c2, "/only1", []byte("one"))
	wantContent(t, c2, "/big", big)
	// changes in the root and in the middle fork
	writeAt(t, p, "/big", []byte("ROOT"), 1)
	writeAt(t, c1, "/big", []byte("MID"), 4096+1)
	if err := c1.Delete(ctx, "/only1", false); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, "/x", false); err != nil {
		t.Fatal(err)
	}
	wantContent(t, c2, "/big", big)
	wantContent(t, c2, "/only1", []byte("one"))
	wantContent(t, c2, "/x", []byte("x1"))
	// and its own changes reach neither
	mustWrite(t, c2, "/x", []byte("x2"))
	wantContent(t, c1, "/x", []byte("x1"))
	wantMissing(t, p, "/x")
	if _, err := f.v.Fork(ctx, f2.Base, ""); err == nil {
		t.Fatal("forking a frozen fork point succeeded")
	}
	checkAll(t, f.v, f.sid, f1.ID, f1.Base, f2.ID, f2.Base)
}

type usage struct{ rows, bytes, inodes int64 }

func wsUsage(tb testing.TB, db *sql.DB, ids ...string) usage {
	tb.Helper()
	var u usage
	for _, id := range ids {
		var r, b, i int64
		if err := db.QueryRow(`SELECT COUNT(*), COALESCE(SUM(length(data)),0) FROM fs_data WHERE session_id=?`, id).Scan(&r, &b); err != nil {
			tb.Fatal(err)
		}
		if err := db.QueryRow(`SELECT COUNT(*) FROM fs_inode WHERE session_id=?`, id).Scan(&i); err != nil {
			tb.Fatal(err)
		}
		u.rows, u.bytes, u.inodes = u.rows+r, u.bytes+b, u.inodes+i
	}
	return u
}

// Deleting a fork frees its own rows and the chunks copied up for it, and
// the forks made from it; the parent's data stays.
func TestDeleteForkFreesOnlyWhatItUsed(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	ctx := ctxT(t)
	p := f.fs
	for i := range 20 {
		mustWrite(t, p, fmt.Sprintf("/f%02d", i), pattern(byte(i), 5000))
	}
	before := wsUsage(t, f.db, f.sid)
	fk := mustFork(t, f.v, f.sid)
	if u := wsUsage(t, f.db, fk.ID, fk.Base); u.rows != 0 {
		t.Fatalf("a new fork stores %d data rows; want none (shared)", u.rows)
	}
	c := f.v.Session(fk.ID)
	mustWrite(t, c, "/own", pattern(9, 10000))           // 3 chunks of its own
	writeAt(t, p, "/f00", []byte("changed"), 4096)       // copies chunk 1 of f00 (904 bytes) up into the base
	if err := p.Delete(ctx, "/f01", false); err != nil { // copies both chunks of f01 up
		t.Fatal(err)
	}
	g, err := f.v.Fork(ctx, fk.ID, "") // a fork of the fork goes with it
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f.v.Session(g.ID), "/own2", pattern(8, 100))
	if u := wsUsage(t, f.db, fk.ID, fk.Base, g.ID, g.Base); u.rows != 3+1+2+1 || u.bytes != 10000+904+5000+100 {
		t.Fatalf("fork rows/bytes %+v, want 7 rows, %d bytes", u, 10000+904+5000+100)
	}
	parent := wsUsage(t, f.db, f.sid)
	if parent.rows != before.rows-2 {
		t.Fatalf("parent rows %d, want %d", parent.rows, before.rows-2)
	}
	if err := f.v.DeleteFork(ctx, fk.ID); err != nil {
		t.Fatal(err)
	}
	if u := wsUsage(t, f.db, fk.ID, fk.Base, g.ID, g.Base); u != (usage{}) {
		t.Fatalf("after delete the forks still hold %+v", u)
	}
	if u := wsUsage(t, f.db, f.sid); u != parent {
		t.Fatalf("parent usage changed by the delete: %+v, was %+v", u, parent)
	}
	var n int
	if err := f.db.QueryRow(`SELECT COUNT(*) FROM agent_session WHERE id IN (?,?,?,?)`, fk.ID, fk.Base, g.ID, g.Base).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d workspace rows left (%v)", n, err)
	}
	wantContent(t, p, "/f02", pattern(2, 5000))
	if _, err := f.v.ForkByID(ctx, fk.ID); err == nil {
		t.Fatal("deleted fork still found")
	}
	f.check(t)
}

// Deleting the session, or the node working on a fork, deletes the fork.
func TestForkGoesWithSessionAndNode(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	mustWrite(t, f.fs, "/a", []byte("a"))
	now := 1
	if _, err := f.db.Exec(`INSERT INTO agent_node(id, session_id, name, agent_type, model, created_at, updated_at) VALUES('n1', ?, 'n', 't', 'm', ?, ?)`, f.sid, now, now); err != nil {
		t.Fatal(err)
	}
	byNode, err := f.v.Fork(ctx, f.sid, "n1")
	if err != nil {
		t.Fatal(err)
	}
	other := mustFork(t, f.v, f.sid)
	if got, err := f.v.ForkOfNode(ctx, "n1"); err != nil || got.ID != byNode.ID {
		t.Fatalf("ForkOfNode: %+v %v", got, err)
	}
	if _, err := f.db.Exec(`DELETE FROM agent_node WHERE id='n1'`); err != nil {
		t.Fatal(err)
	}
	if u := wsUsage(t, f.db, byNode.ID, byNode.Base); u.inodes != 0 {
		t.Fatalf("node's fork left %+v", u)
	}
	if _, err := f.v.ForkByID(ctx, other.ID); err != nil {
		t.Fatalf("the other fork went with the node: %v", err)
	}
	if got := readAt(t, f.v.Session(other.ID), "/a", 10, 0); string(got) != "a" {
		t.Fatalf("the other fork reads %q, want %q", got, "a")
	}
	if _, err := f.db.Exec(`DELETE FROM agent_session WHERE id=?`, f.sid); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := f.db.QueryRow(`SELECT COUNT(*) FROM agent_session`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d sessions left after deleting the only one (%v)", n, err)
	}
}

// The export of a fork is a whole agentfs file: imported into a fresh
// session it has the fork's files, inherited and its own.
func TestExportFork(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	ctx := ctxT(t)
	big := pattern(5, 3*4096+1)
	mustWrite(t, f.fs, "/big", big)
	mustWrite(t, f.fs, "/d/keep", []byte("keep"))
	fk := mustFork(t, f.v, f.sid)
	c := f.v.Session(fk.ID)
	writeAt(t, c, "/big", []byte("fork"), 4096)
	mustWrite(t, c, "/mine", []byte("mine"))
	mustWrite(t, f.fs, "/big", []byte("parent rewrote it")) // copies up into the base
	dst := filepath.Join(t.TempDir(), "fork.db")
	if err := f.v.Export(ctx, fk.ID, dst); err != nil {
		t.Fatal(err)
	}
	sid := newSession(t, f.db)
	if err := f.v.Import(ctx, sid, dst); err != nil {
		t.Fatal(err)
	}
	in := f.v.Session(sid)
	want := bytes.Clone(big)
	copy(want[4096:], "fork")
	wantContent(t, in, "/big", want)
	wantContent(t, in, "/d/keep", []byte("keep"))
	wantContent(t, in, "/mine", []byte("mine"))
	checkAll(t, f.v, sid)
}

// A fork's writes give no file events (the session's file records are its
// own workspace's); the parent's still do.
func TestForkGivesNoFileEvents(t *testing.T) {
	f := newFixture(t, Config{})
	fk := mustFork(t, f.v, f.sid)
	f.rec.take()
	mustWrite(t, f.v.Session(fk.ID), "/in-fork", []byte("x"))
	if evs := f.rec.take(); len(evs) != 0 {
		t.Fatalf("fork write gave events %v", evs)
	}
	mustWrite(t, f.fs, "/in-parent", []byte("x"))
	if evs := f.rec.take(); len(evs) != 1 || evs[0] != "created /in-parent" {
		t.Fatalf("parent write gave %v", evs)
	}
}

// Deleting a subtree of forked nodes (children first, as the store does)
// leaves no workspace behind, hidden or not.
func TestNestedForkNodesDeleted(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	mustWrite(t, f.fs, "/a", []byte("a"))
	for i, n := range []string{"root", "kid", "grandkid"} {
		parent := any(nil)
		if i > 0 {
			parent = []string{"root", "kid"}[i-1]
		}
		if _, err := f.db.Exec(`INSERT INTO agent_node(id, session_id, parent_id, name, agent_type, model, created_at, updated_at) VALUES(?, ?, ?, 'n', 't', 'm', 1, 1)`, n, f.sid, parent); err != nil {
			t.Fatal(err)
		}
	}
	kid, err := f.v.ForkForNode(ctx, f.sid, "root", "kid")
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f.v.Session(kid.ID), "/a", []byte("kid"))
	gk, err := f.v.ForkForNode(ctx, f.sid, "kid", "grandkid")
	if err != nil {
		t.Fatal(err)
	}
	if gk.Origin != kid.ID {
		t.Fatalf("the grandchild forked %s, want the child's fork %s", gk.Origin, kid.ID)
	}
	wantContent(t, f.v.Session(gk.ID), "/a", []byte("kid"))
	for _, n := range []string{"grandkid", "kid"} {
		if _, err := f.db.Exec(`DELETE FROM agent_node WHERE id=?`, n); err != nil {
			t.Fatal(err)
		}
	}
	var sessions, forks int
	if err := f.db.QueryRow(`SELECT (SELECT COUNT(*) FROM agent_session), (SELECT COUNT(*) FROM fs_fork)`).Scan(&sessions, &forks); err != nil {
		t.Fatal(err)
	}
	if sessions != 1 || forks != 0 {
		t.Fatalf("%d sessions and %d fork rows left, want 1 and 0", sessions, forks)
	}
	wantContent(t, f.fs, "/a", []byte("a"))
	f.check(t)
}

// A small write into a large file touches only the chunks it covers: the
// chunks after it are not rewritten, so a fork has only the changed chunk
// copied up (before, every chunk from the write to the end of the file was
// read, rewritten and copied up into the fork).
func TestSmallWriteTouchesOnlyItsChunks(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	p := f.fs
	big := pattern(3, 100*4096+100)
	mustWrite(t, p, "/big", big)
	fk := mustFork(t, f.v, f.sid)
	writeAt(t, p, "/big", []byte("head"), 10)
	if u := wsUsage(t, f.db, fk.ID, fk.Base); u.rows != 1 || u.bytes != 4096 {
		t.Fatalf("a 4-byte write at offset 10 copied %d chunks (%d bytes) up into the fork; want 1 (4096)", u.rows, u.bytes)
	}
	want := append([]byte(nil), big...)
	copy(want[10:], "head")
	wantContent(t, p, "/big", want)
	wantContent(t, f.v.Session(fk.ID), "/big", big)
	// A write past the end still fills the hole with zeros.
	writeAt(t, p, "/big", []byte("tail"), int64(len(big))+5000)
	want = append(want, make([]byte, 5000)...)
	want = append(want, "tail"...)
	wantContent(t, p, "/big", want)
	f.check(t)
}
