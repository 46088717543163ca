package textdiff

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

func TestUnified(t *testing.T) {
	a := []byte("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n")
	b := []byte("a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn")
	want := "--- a/x\n+++ b/x\n@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n@@ -11,3 +11,4 @@\n k\n l\n m\n+n\n\\ No newline at end of file\n"
	if got := Unified("/x", a, b); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := Unified("/x", a, a); got != "" {
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
	d := Unified("/big", []byte(big.String()), []byte(big2.String()))
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
