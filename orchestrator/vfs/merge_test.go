package vfs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/vfs/treediff"
)

func lines(prefix string, n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s line %d\n", prefix, i)
	}
	return []byte(b.String())
}

// A fork of a 10,000-file workspace, edited in both the parent and the
// child: the diff lists the child's changes with a text diff, and the merge
// applies every non-conflicting one and reports the one conflict.
func TestForkDiffMerge10k(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	p := f.fs
	fill10k(t, p, false)
	orig := lines("orig", 20)
	for _, q := range []string{"/d000/f00000.txt", "/d005/f00500.txt", "/d007/f00700.txt"} {
		mustWrite(t, p, q, orig)
	}
	fk := mustFork(t, f.v, f.sid)
	c := f.v.Session(fk.ID)

	edited := strings.Replace(string(orig), "orig line 10\n", "child line 10\n", 1)
	mustWrite(t, c, "/d000/f00000.txt", []byte(edited))              // child only
	mustWrite(t, c, "/d001/new.txt", []byte("new in child\n"))       // child only
	mustWrite(t, c, "/newdir/deep/x.txt", []byte("x\n"))             // child only, new directories
	if err := c.Delete(ctx, "/d002/f00200.txt", false); err != nil { // child only
		t.Fatal(err)
	}
	mustWrite(t, c, "/d005/f00500.txt", []byte("child version\n")) // both: the conflict
	mustWrite(t, c, "/d007/f00700.txt", []byte("same in both\n"))  // both, same result
	mustWrite(t, p, "/d005/f00500.txt", []byte("parent version\n"))
	mustWrite(t, p, "/d007/f00700.txt", []byte("same in both\n"))
	mustWrite(t, p, "/d009/f00900.txt", []byte("parent only\n"))
	mustWrite(t, p, "/parent-only.txt", []byte("p\n"))

	d, err := f.v.Diff(ctx, fk.ID, DiffOptions{Text: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ch := range d.Changes {
		got = append(got, ch.Op+" "+ch.Kind+" "+ch.Path)
	}
	want := []string{
		"changed file /d000/f00000.txt", "added file /d001/new.txt", "deleted file /d002/f00200.txt",
		"changed file /d005/f00500.txt", "changed file /d007/f00700.txt",
		"added dir /newdir", "added dir /newdir/deep", "added file /newdir/deep/x.txt",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantDiff := "--- a/d000/f00000.txt\n+++ b/d000/f00000.txt\n@@ -8,7 +8,7 @@\n orig line 7\n orig line 8\n orig line 9\n-orig line 10\n+child line 10\n orig line 11\n orig line 12\n orig line 13\n"
	if d.Changes[0].Diff != wantDiff {
		t.Fatalf("text diff:\n%s\nwant:\n%s", d.Changes[0].Diff, wantDiff)
	}
	if d.Changes[1].Diff != "--- a/d001/new.txt\n+++ b/d001/new.txt\n@@ -0,0 +1,1 @@\n+new in child\n" {
		t.Fatalf("text diff of an added file:\n%s", d.Changes[1].Diff)
	}

	m, err := f.v.Merge(ctx, fk.ID, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Conflicts) != 1 || m.Conflicts[0] != (treediff.Conflict{Path: "/d005/f00500.txt", Fork: treediff.Changed, Parent: treediff.Changed}) {
		t.Fatalf("conflicts: %+v", m.Conflicts)
	}
	var applied []string
	for _, ch := range m.Applied {
		applied = append(applied, ch.Op+" "+ch.Path)
	}
	if strings.Join(applied, ",") != "deleted /d002/f00200.txt,changed /d000/f00000.txt,added /d001/new.txt,added /newdir,added /newdir/deep,added /newdir/deep/x.txt" {
		t.Fatalf("applied: %v", applied)
	}
	wantContent(t, p, "/d000/f00000.txt", []byte(edited))
	wantContent(t, p, "/d001/new.txt", []byte("new in child\n"))
	wantContent(t, p, "/newdir/deep/x.txt", []byte("x\n"))
	wantMissing(t, p, "/d002/f00200.txt")
	wantContent(t, p, "/d005/f00500.txt", []byte("parent version\n"))
	wantContent(t, p, "/d009/f00900.txt", []byte("parent only\n"))
	wantContent(t, p, "/parent-only.txt", []byte("p\n"))
	wantContent(t, p, "/d003/f00300.txt", content(1<<10))
	// the child is untouched by the merge
	wantContent(t, c, "/d005/f00500.txt", []byte("child version\n"))
	wantMissing(t, c, "/parent-only.txt")
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)

	// merging again applies nothing and reports the same conflict
	m, err = f.v.Merge(ctx, fk.ID, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Applied) != 0 || len(m.Conflicts) != 1 {
		t.Fatalf("second merge: %+v", m)
	}
}

// A merge that fails part-way (here the parent's quota) changes nothing.
func TestMergeIsAllOrNothing(t *testing.T) {
	f := newFixture(t, Config{SessionQuota: 100 << 10, ChunkSize: 4096})
	ctx := ctxT(t)
	mustWrite(t, f.fs, "/keep", pattern(1, 40<<10))
	fk := mustFork(t, f.v, f.sid)
	c := f.v.Session(fk.ID)
	if err := c.Delete(ctx, "/keep", false); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, c, "/a", []byte("applied first"))
	mustWrite(t, c, "/z", pattern(2, 90<<10)) // fits the fork, not the parent with /keep
	mustWrite(t, f.fs, "/keep2", pattern(3, 40<<10))
	if _, err := f.v.Merge(ctx, fk.ID, MergeOptions{}); err == nil {
		t.Fatal("merge over quota succeeded")
	}
	wantMissing(t, f.fs, "/a")
	wantContent(t, f.fs, "/keep", pattern(1, 40<<10))
	f.check(t)
	// a node allowed only /a may not merge /z
	if _, err := f.v.Merge(ctx, fk.ID, MergeOptions{NodeID: "n", Allowed: []string{"/a"}}); err == nil {
		t.Fatal("merge outside the node's allowed paths succeeded")
	}
	wantMissing(t, f.fs, "/a")
}
