package vfs

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
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
	if len(m.Conflicts) != 1 || m.Conflicts[0] != (Conflict{Path: "/d005/f00500.txt", Fork: DiffChanged, Parent: DiffChanged}) {
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

func TestUnifiedDiff(t *testing.T) {
	a := []byte("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n")
	b := []byte("a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn")
	want := "--- a/x\n+++ b/x\n@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n@@ -11,3 +11,4 @@\n k\n l\n m\n+n\n\\ No newline at end of file\n"
	if got := UnifiedDiff("/x", a, b); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := UnifiedDiff("/x", a, a); got != "" {
		t.Fatalf("equal files: %q", got)
	}
	// the edit script rebuilds both sides
	// a file rewritten line by line: the bounded search gives up quickly
	var big, big2 strings.Builder
	for i := range 100000 {
		fmt.Fprintf(&big, "old %d\n", i)
		fmt.Fprintf(&big2, "new %d\n", i)
	}
	start := time.Now()
	d := UnifiedDiff("/big", []byte(big.String()), []byte(big2.String()))
	if time.Since(start) > 10*time.Second || !strings.HasPrefix(d, "--- a/big\n+++ b/big\n@@ -1,100000 +1,100000 @@\n-old 0\n") {
		t.Fatalf("diff of a rewritten file: %v, %.80q", time.Since(start), d)
	}
	for _, tc := range [][2]string{{"", "x\n"}, {"x\ny\n", ""}, {"1\n2\n3\n", "3\n2\n1\n"}, {"a\na\nb\n", "b\na\na\n"},
		{"a\nb\nc\nd\n", "a\nx\nc\ny\nd\n"}, {"k\nq\nk\n", "q\nk\nq\n"}} {
		ops := lineEdits(splitLines([]byte(tc[0])), splitLines([]byte(tc[1])))
		var l, r strings.Builder
		for _, op := range ops {
			if op.kind != '+' {
				l.WriteString(op.line)
			}
			if op.kind != '-' {
				r.WriteString(op.line)
			}
		}
		if l.String() != tc[0] || r.String() != tc[1] {
			t.Fatalf("%q -> %q: script rebuilds %q -> %q", tc[0], tc[1], l.String(), r.String())
		}
	}
}

// lineEdits on random small files: the script rebuilds both sides and has
// the fewest edits (n+m-2·LCS, by dynamic programming).
func TestLineEditsMinimal(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	gen := func() []string {
		out := make([]string, rng.Intn(12))
		for i := range out {
			out[i] = string(rune('a'+rng.Intn(4))) + "\n"
		}
		return out
	}
	for range 2000 {
		a, b := gen(), gen()
		ops := lineEdits(a, b)
		var l, r []string
		edits := 0
		for _, op := range ops {
			if op.kind != '+' {
				l = append(l, op.line)
			}
			if op.kind != '-' {
				r = append(r, op.line)
			}
			if op.kind != ' ' {
				edits++
			}
		}
		if strings.Join(l, "") != strings.Join(a, "") || strings.Join(r, "") != strings.Join(b, "") {
			t.Fatalf("%q -> %q: script rebuilds %q -> %q", a, b, l, r)
		}
		lcs := make([][]int, len(a)+1)
		for i := range lcs {
			lcs[i] = make([]int, len(b)+1)
		}
		for i := len(a) - 1; i >= 0; i-- {
			for j := len(b) - 1; j >= 0; j-- {
				if a[i] == b[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		if want := len(a) + len(b) - 2*lcs[0][0]; edits != want {
			t.Fatalf("%q -> %q: %d edits, want %d", a, b, edits, want)
		}
	}
}
