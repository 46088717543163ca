package vfs

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"syscall"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/vfs/treediff"
)

// linkName adds name new (in the root) for the inode at path old of fs.
func linkName(tb testing.TB, fs *FS, old, new string) {
	tb.Helper()
	if _, err := fs.Link(context.Background(), mustStat(tb, fs, old).Ino, RootIno, new); err != nil {
		tb.Fatal(err)
	}
}

// nlinkOf is the link count of the inode at path p of fs.
func nlinkOf(tb testing.TB, fs *FS, p string) uint32 {
	tb.Helper()
	a, err := fs.GetAttr(context.Background(), mustStat(tb, fs, p).Ino)
	if err != nil {
		tb.Fatal(err)
	}
	return a.Nlink
}

func usedBytes(tb testing.TB, f *fixture, ws string) int64 {
	tb.Helper()
	var n int64
	if err := f.db.QueryRow(`SELECT used_bytes FROM fs_meta WHERE session_id=?`, ws).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// wantLinked asserts that paths of fs name one inode with that many links,
// and that a write through the first is read through every other.
func wantLinked(tb testing.TB, fs *FS, nlink uint32, paths ...string) {
	tb.Helper()
	ino := mustStat(tb, fs, paths[0]).Ino
	for _, p := range paths {
		if got := mustStat(tb, fs, p).Ino; got != ino {
			tb.Fatalf("%s is inode %d, %s is inode %d: not one file", paths[0], ino, p, got)
		}
		if n := nlinkOf(tb, fs, p); n != nlink {
			tb.Fatalf("nlink of %s = %d, want %d", p, n, nlink)
		}
	}
	data := []byte("written through " + paths[0] + "\n")
	if _, err := fs.WriteAt(context.Background(), ino, data, 0); err != nil {
		tb.Fatal(err)
	}
	for _, p := range paths[1:] {
		if got := mustRead(tb, fs, p); !strings.HasPrefix(string(got), string(data)) {
			tb.Fatalf("%s after a write through %s: %q", p, paths[0], got)
		}
	}
}

// mergeAgain asserts that a second merge applies nothing and conflicts on
// nothing.
func mergeAgain(tb testing.TB, f *fixture, ws string) {
	tb.Helper()
	m, err := f.v.Merge(context.Background(), ws, MergeOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	if len(m.Applied) != 0 || len(m.Conflicts) != 0 {
		tb.Fatalf("second merge: applied %+v, conflicts %+v", m.Applied, m.Conflicts)
	}
}

// mergeWant merges the fork ws into its parent and checks that it applied
// exactly want (appliedOps) without a conflict.
func mergeWant(tb testing.TB, f *fixture, ws, want string) MergeResult {
	tb.Helper()
	m, err := f.v.Merge(context.Background(), ws, MergeOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	if got := appliedOps(m); got != want || len(m.Conflicts) != 0 {
		tb.Fatalf("merge of %s: applied %s, conflicts %+v; want %s and none", ws, got, m.Conflicts, want)
	}
	return m
}

// diffOps is the fork ws's diff as the op of each changed path.
func diffOps(tb testing.TB, f *fixture, ws string) map[string]string {
	tb.Helper()
	d, err := f.v.Diff(context.Background(), ws, DiffOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	ops := map[string]string{}
	for _, c := range d.Changes {
		ops[c.Path] = c.Op
	}
	return ops
}

// forkOf forks the fixture's session and returns the fork and its
// filesystem.
func forkOf(tb testing.TB, f *fixture) (ForkInfo, *FS) {
	tb.Helper()
	fk := mustFork(tb, f.v, f.sid)
	return fk, f.v.Session(fk.ID)
}

func appliedOps(m MergeResult) string {
	var out []string
	for _, c := range m.Applied {
		out = append(out, c.Op+" "+c.Path)
	}
	return strings.Join(out, ",")
}

// A file made in the fork with a second name (in another directory too)
// merges as one inode with three names, its bytes counted once.
func TestMergeNewHardLinks(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	ctx := ctxT(t)
	mustWrite(t, f.fs, "/keep", []byte("kept"))
	fk, c := forkOf(t, f)
	data := pattern(5, 10000)
	mustWrite(t, c, "/a", data)
	linkName(t, c, "/a", "b")
	mustWrite(t, c, "/d/x", []byte("x"))
	d := mustStat(t, c, "/d")
	if _, err := c.Link(ctx, mustStat(t, c, "/a").Ino, d.Ino, "c"); err != nil {
		t.Fatal(err)
	}
	before := usedBytes(t, f, f.sid)

	mergeWant(t, f, fk.ID, "added /a,added /b,added /d,added /d/c,added /d/x")
	wantContent(t, f.fs, "/b", data)
	if got := usedBytes(t, f, f.sid) - before; got != int64(len(data))+1 {
		t.Fatalf("merge added %d bytes of usage, want %d (the linked file once)", got, len(data)+1)
	}
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)
	mergeAgain(t, f, fk.ID)
	wantLinked(t, f.fs, 3, "/a", "/b", "/d/c")
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)
	// the fork keeps its own file
	wantContent(t, c, "/d/c", data)
}

// A name the fork adds for a file the parent had before the fork becomes
// a name of the parent's inode (usage unchanged), also when it replaces a
// file with the same bytes; the parent's own later edit of that file is
// what both names show.
func TestMergeLinkToInheritedFile(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	ctx := ctxT(t)
	p := f.fs
	mustWrite(t, p, "/old", []byte("before the fork\n"))
	mustWrite(t, p, "/twin", []byte("before the fork\n")) // same bytes, its own inode
	mustWrite(t, p, "/edited", []byte("v1\n"))
	fk, c := forkOf(t, f)
	linkName(t, c, "/old", "new")
	if err := c.Delete(ctx, "/twin", false); err != nil {
		t.Fatal(err)
	}
	linkName(t, c, "/old", "twin")
	linkName(t, c, "/edited", "edited2")
	mustWrite(t, p, "/edited", []byte("v2 by the parent\n")) // in place: the same inode
	oldIno := mustStat(t, p, "/old").Ino
	before := usedBytes(t, f, f.sid)

	d, err := f.v.Diff(ctx, fk.ID, DiffOptions{Text: true})
	if err != nil {
		t.Fatal(err)
	}
	// per path: what a reader of the path sees, and the file's other names
	var got []string
	for _, ch := range d.Changes {
		got = append(got, fmt.Sprintf("%s %s %v %q", ch.Op, ch.Path, ch.Links, ch.Diff))
	}
	want := []string{
		`added /edited2 [/edited] "--- a/edited2\n+++ b/edited2\n@@ -0,0 +1,1 @@\n+v1\n"`,
		`added /new [/old /twin] "--- a/new\n+++ b/new\n@@ -0,0 +1,1 @@\n+before the fork\n"`,
		`changed /twin [/new /old] ""`, // the same bytes, another file
	}
	if s := strings.Join(got, "\n"); s != strings.Join(want, "\n") {
		t.Fatalf("diff:\n%s\nwant:\n%s", s, strings.Join(want, "\n"))
	}

	mergeWant(t, f, fk.ID, "added /edited2,added /new,changed /twin")
	if ino := mustStat(t, p, "/new").Ino; ino != oldIno {
		t.Fatalf("/new is inode %d, /old %d", ino, oldIno)
	}
	// the twin's own inode went: its bytes leave the usage
	if got := usedBytes(t, f, f.sid); got != before-int64(len("before the fork\n")) {
		t.Fatalf("usage %d after the merge, want %d", got, before-int64(len("before the fork\n")))
	}
	wantContent(t, p, "/edited2", []byte("v2 by the parent\n"))
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)
	mergeAgain(t, f, fk.ID)
	wantLinked(t, p, 3, "/old", "/new", "/twin")
	wantLinked(t, p, 2, "/edited2", "/edited")
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)
}

// The fork edits a linked file the parent also edited, to another result,
// and adds a name for it: the edit and the new name are conflicts, and the
// parent's file keeps its names and bytes.
func TestMergeLinkToFileBothEdited(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	ctx := ctxT(t)
	p := f.fs
	mustWrite(t, p, "/f", []byte("v1\n"))
	fk, c := forkOf(t, f)
	mustWrite(t, c, "/f", []byte("fork v2 text\n"))
	linkName(t, c, "/f", "g")
	mustWrite(t, p, "/f", []byte("parent v2\n"))
	m, err := f.v.Merge(ctx, fk.ID, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []treediff.Conflict{{Path: "/f", Fork: treediff.Changed, Parent: treediff.Changed}, {Path: "/g", Fork: treediff.Added, Parent: treediff.Changed}}
	if len(m.Applied) != 0 || len(m.Conflicts) != 2 || m.Conflicts[0] != want[0] || m.Conflicts[1] != want[1] {
		t.Fatalf("applied %+v, conflicts %+v", m.Applied, m.Conflicts)
	}
	wantContent(t, p, "/f", []byte("parent v2\n"))
	wantMissing(t, p, "/g")
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)
}

// The fork edits a linked file the parent did not touch, through one name,
// and adds a third name: the parent's inode takes the fork's bytes once.
func TestMergeEditOfInheritedLink(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	p := f.fs
	mustWrite(t, p, "/x", []byte("v1\n"))
	linkName(t, p, "/x", "y")
	fk, c := forkOf(t, f)
	mustWrite(t, c, "/y", []byte("fork v2\n"))
	linkName(t, c, "/x", "z")
	mergeWant(t, f, fk.ID, "changed /x,changed /y,added /z")
	wantContent(t, p, "/z", []byte("fork v2\n"))
	if got := usedBytes(t, f, f.sid); got != int64(len("fork v2\n")) {
		t.Fatalf("usage %d", got)
	}
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)
	mergeAgain(t, f, fk.ID)
	wantLinked(t, p, 3, "/x", "/y", "/z")
}

// Removing one name of a file the parent has under two: the parent keeps
// the other name, its link count one less.
func TestMergeRemovesOneNameOfLink(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	ctx := ctxT(t)
	p := f.fs
	mustWrite(t, p, "/x", []byte("linked\n"))
	linkName(t, p, "/x", "y")
	linkName(t, p, "/x", "z")
	fk, c := forkOf(t, f)
	if err := c.Delete(ctx, "/y", false); err != nil {
		t.Fatal(err)
	}
	mergeWant(t, f, fk.ID, "deleted /y")
	wantMissing(t, p, "/y")
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)
	mergeAgain(t, f, fk.ID)
	wantLinked(t, p, 2, "/x", "/z")
	if got := usedBytes(t, f, f.sid); got != int64(len("written through /x\n")) {
		t.Fatalf("usage %d", got)
	}
}

// The fork replaces one name of a linked file with a file of its own: after
// the merge the parent's other name keeps the old bytes, as in the fork.
func TestMergeBreaksLink(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	ctx := ctxT(t)
	p := f.fs
	mustWrite(t, p, "/x", []byte("shared\n"))
	linkName(t, p, "/x", "y")
	fk, c := forkOf(t, f)
	if err := c.Delete(ctx, "/y", false); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, c, "/y", []byte("own\n"))
	mergeWant(t, f, fk.ID, "changed /y")
	wantContent(t, p, "/x", []byte("shared\n"))
	wantContent(t, p, "/y", []byte("own\n"))
	if n := nlinkOf(t, p, "/x"); n != 1 {
		t.Fatalf("nlink of /x = %d", n)
	}
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)
	mergeAgain(t, f, fk.ID)
}

// The fork and the parent both rewrite a file to different bytes of the
// same length, once each: a conflict, not "the same change".
func TestMergeSameSizeEditsConflict(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	ctx := ctxT(t)
	mustWrite(t, f.fs, "/f", []byte("base\n"))
	fk, c := forkOf(t, f)
	mustWrite(t, c, "/f", []byte("fork\n"))
	mustWrite(t, f.fs, "/f", []byte("prnt\n"))
	m, err := f.v.Merge(ctx, fk.ID, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Conflicts) != 1 || m.Conflicts[0] != (treediff.Conflict{Path: "/f", Fork: treediff.Changed, Parent: treediff.Changed}) {
		t.Fatalf("applied %+v, conflicts %+v", m.Applied, m.Conflicts)
	}
	wantContent(t, f.fs, "/f", []byte("prnt\n"))
}

// wantSameFiles asserts that the paths of fs name one inode exactly where
// the model's paths share one file.
func wantSameFiles(tb testing.TB, fs *FS, m mtree) {
	tb.Helper()
	inoOfFile := map[*mfile]int64{}
	fileOfIno := map[int64]*mfile{}
	for p, n := range m {
		if n.kind != 'f' {
			continue
		}
		ino := mustStat(tb, fs, p).Ino
		if i, ok := inoOfFile[n.file]; ok && i != ino {
			tb.Fatalf("%s: %s is inode %d, another name of its file is %d", fs.sid, p, ino, i)
		}
		if f, ok := fileOfIno[ino]; ok && f != n.file {
			tb.Fatalf("%s: %s is inode %d, which a name of another file has too", fs.sid, p, ino)
		}
		inoOfFile[n.file], fileOfIno[ino] = ino, n.file
	}
}

// Random changes in a fork (new files, writes through any name, hard
// links, renames of files and directories, symlinks, chmod, removals) of a
// parent that changes nothing after the fork: the merge makes the parent
// the fork's tree, hard links included, with nothing in conflict; merging
// again changes nothing.
func TestMergeRandomKeepsLinks(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			f := newFixture(t, Config{ChunkSize: 64})
			ctx := context.Background()
			ops := &lazyOps{tb: t, rng: rand.New(rand.NewSource(seed))}
			pm := mtree{}
			for range 80 {
				ops.step(f.fs, pm)
			}
			fk := mustFork(t, f.v, f.sid)
			cm := pm.clone()
			c := f.v.Session(fk.ID)
			for range 150 {
				ops.step(c, cm)
			}
			m, err := f.v.Merge(ctx, fk.ID, MergeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Conflicts) != 0 {
				t.Fatalf("conflicts: %+v", m.Conflicts)
			}
			compareTree(t, f.fs, cm)
			wantSameFiles(t, f.fs, cm)
			checkAll(t, f.v, f.sid, fk.ID, fk.Base)
			mergeAgain(t, f, fk.ID)
			compareTree(t, c, cm)

			// then both change: the merge keeps every workspace
			// consistent, and a second one applies nothing and lists
			// the same conflicts
			pm = cm.clone()
			for range 150 {
				if ops.rng.Intn(2) == 0 {
					ops.step(f.fs, pm)
				} else {
					ops.step(c, cm)
				}
			}
			m, err = f.v.Merge(ctx, fk.ID, MergeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkAll(t, f.v, f.sid, fk.ID, fk.Base)
			m2, err := f.v.Merge(ctx, fk.ID, MergeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(m2.Applied) != 0 || fmt.Sprint(m2.Conflicts) != fmt.Sprint(m.Conflicts) {
				first := map[treediff.Conflict]bool{}
				for _, c := range m.Conflicts {
					first[c] = true
				}
				var extra []treediff.Conflict
				for _, c := range m2.Conflicts {
					if !first[c] {
						extra = append(extra, c)
					}
					delete(first, c)
				}
				t.Fatalf("merging again: applied %+v; new conflicts %+v; gone %v", m2.Applied, extra, first)
			}
			compareTree(t, c, cm)
		})
	}
}

// The fork moves a file and makes a new one, with two names, where it was:
// the parent's file moves (the same inode) and keeps its bytes, and the new
// one is made beside it.
func TestMergeMoveAndReplace(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	ctx := ctxT(t)
	p := f.fs
	mustWrite(t, p, "/a", []byte("old a\n"))
	oldIno := mustStat(t, p, "/a").Ino
	fk, c := forkOf(t, f)
	if _, err := c.Move(ctx, "/a", "/c"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, c, "/a", []byte("new a\n"))
	linkName(t, c, "/a", "b")
	mergeWant(t, f, fk.ID, "changed /a,added /b,added /c")
	wantContent(t, p, "/c", []byte("old a\n"))
	wantContent(t, p, "/a", []byte("new a\n"))
	if ino := mustStat(t, p, "/c").Ino; ino != oldIno {
		t.Fatalf("/c is inode %d, the moved file was %d", ino, oldIno)
	}
	if n := nlinkOf(t, p, "/c"); n != 1 {
		t.Fatalf("nlink of /c = %d", n)
	}
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)
	mergeAgain(t, f, fk.ID)
	wantLinked(t, p, 2, "/a", "/b")
	wantContent(t, p, "/c", []byte("old a\n"))
}

// The fork moves a file away and puts a copy (the same bytes, another
// inode) where it was: the diff shows the path changed, and after the merge
// the two paths are two files in the parent too.
func TestMergeMoveAndCopyBack(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	ctx := ctxT(t)
	p := f.fs
	mustWrite(t, p, "/a", []byte("a\n"))
	oldIno := mustStat(t, p, "/a").Ino
	fk, c := forkOf(t, f)
	if _, err := c.Copy(ctx, "/a", "/a2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Move(ctx, "/a", "/c"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Move(ctx, "/a2", "/a"); err != nil {
		t.Fatal(err)
	}
	d, err := f.v.Diff(ctx, fk.ID, DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Changes) != 2 || d.Changes[0].Op+" "+d.Changes[0].Path != "changed /a" || d.Changes[1].Op+" "+d.Changes[1].Path != "added /c" {
		t.Fatalf("diff: %+v", d.Changes)
	}
	mergeWant(t, f, fk.ID, "changed /a,added /c")
	if ino := mustStat(t, p, "/c").Ino; ino != oldIno {
		t.Fatalf("/c is inode %d, the moved file was %d", ino, oldIno)
	}
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)
	mergeAgain(t, f, fk.ID)
	if nlinkOf(t, p, "/a") != 1 || nlinkOf(t, p, "/c") != 1 || mustStat(t, p, "/a").Ino == oldIno {
		t.Fatalf("/a and /c are not two files")
	}
	mustWrite(t, p, "/c", []byte("c\n"))
	wantContent(t, p, "/a", []byte("a\n"))
}

// Hard links made in a fork of a fork reach the origin as one file through
// both merges, and a name added there for an origin file stays a name of it.
func TestMergeLinksThroughForkOfFork(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 4096})
	ctx := ctxT(t)
	p := f.fs
	mustWrite(t, p, "/orig", []byte("origin file\n"))
	origIno := mustStat(t, p, "/orig").Ino
	f1 := mustFork(t, f.v, f.sid)
	c1 := f.v.Session(f1.ID)
	mustWrite(t, c1, "/mid", []byte("made in the first fork\n"))
	f2 := mustFork(t, f.v, f1.ID)
	c2 := f.v.Session(f2.ID)
	mustWrite(t, c2, "/new", []byte("made in the second fork\n"))
	linkName(t, c2, "/new", "new2")
	linkName(t, c2, "/mid", "mid2")
	linkName(t, c2, "/orig", "orig2")
	if _, err := f.v.Merge(ctx, f2.ID, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	checkAll(t, f.v, f1.ID, f2.ID, f2.Base)
	mergeWant(t, f, f1.ID, "added /mid,added /mid2,added /new,added /new2,added /orig2")
	checkAll(t, f.v, f.sid, f1.ID, f1.Base, f2.ID, f2.Base)
	mergeAgain(t, f, f1.ID)
	if ino := mustStat(t, p, "/orig2").Ino; ino != origIno {
		t.Fatalf("/orig2 is inode %d, /orig %d", ino, origIno)
	}
	wantLinked(t, p, 2, "/orig", "/orig2")
	wantLinked(t, p, 2, "/mid", "/mid2")
	wantLinked(t, p, 2, "/new", "/new2")
	wantLinked(t, c1, 2, "/new", "/new2") // the first fork too
	checkAll(t, f.v, f.sid, f1.ID, f1.Base, f2.ID, f2.Base)
}

// The quota counts a merged hard-linked file once: three names of a file
// that fits once merge; a merge that then goes over the quota leaves the
// parent as it was, links included.
func TestMergeLinksQuota(t *testing.T) {
	f := newFixture(t, Config{SessionQuota: 100 << 10, ChunkSize: 4096})
	ctx := ctxT(t)
	p := f.fs
	mustWrite(t, p, "/keep", pattern(1, 30<<10))
	fk, c := forkOf(t, f)
	mustWrite(t, c, "/a", pattern(2, 60<<10))
	linkName(t, c, "/a", "b")
	linkName(t, c, "/a", "c")
	linkName(t, c, "/keep", "keep2")
	if _, err := f.v.Merge(ctx, fk.ID, MergeOptions{}); err != nil {
		t.Fatalf("merge of one 60 KiB file with three names under a 100 KiB quota: %v", err)
	}
	if got := usedBytes(t, f, f.sid); got != 90<<10 {
		t.Fatalf("usage %d, want %d", got, 90<<10)
	}
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)

	// a second fork: new links and a file over the quota
	fk2 := mustFork(t, f.v, f.sid)
	c2 := f.v.Session(fk2.ID)
	linkName(t, c2, "/a", "d")
	mustWrite(t, c2, "/e", []byte("e"))
	linkName(t, c2, "/e", "f")
	for _, q := range []string{"/b", "/keep", "/keep2"} {
		if err := c2.Delete(ctx, q, false); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, c2, "/z", pattern(3, 35<<10)) // fits the fork
	mustWrite(t, p, "/p", pattern(4, 9<<10))   // not the parent with it
	wantBytes := int64(99 << 10)
	if _, err := f.v.Merge(ctx, fk2.ID, MergeOptions{}); !IsErrno(err, syscall.ENOSPC) {
		t.Fatalf("merge over the quota: %v", err)
	}
	wantMissing(t, p, "/d")
	wantMissing(t, p, "/e")
	wantMissing(t, p, "/z")
	if n := nlinkOf(t, p, "/a"); n != 3 {
		t.Fatalf("nlink of /a = %d after a failed merge", n)
	}
	if got := usedBytes(t, f, f.sid); got != wantBytes {
		t.Fatalf("usage %d after a failed merge, want %d", got, wantBytes)
	}
	checkAll(t, f.v, f.sid, fk2.ID, fk2.Base)
	wantLinked(t, p, 3, "/a", "/b", "/c")
	wantLinked(t, p, 2, "/keep", "/keep2")
}
