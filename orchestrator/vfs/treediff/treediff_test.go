package treediff

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
)

// tree builds a tree from "path=ino:content" for files and "path/" for
// directories (numbered from 100 in order); one ino may have several paths.
func tree(specs ...string) Tree {
	inodes := map[int64]Entry{1: {Ino: 1, Mode: syscall.S_IFDIR | 0o755}}
	dirs := map[string]int64{"": 1}
	var names []Name
	next := int64(100)
	for _, s := range specs {
		var p string
		var ino int64
		var content string
		if s[len(s)-1] == '/' {
			p, ino = s[:len(s)-1], next
			next++
			inodes[ino] = Entry{Ino: ino, Mode: syscall.S_IFDIR | 0o755}
			dirs[p] = ino
		} else {
			var rest string
			for i := range s {
				if s[i] == '=' {
					p, rest = s[:i], s[i+1:]
					break
				}
			}
			if _, err := fmt.Sscanf(rest, "%d:%s", &ino, &content); err != nil {
				panic(s)
			}
			inodes[ino] = Entry{Ino: ino, Mode: syscall.S_IFREG | 0o644, Size: int64(len(content)), Sha: content}
		}
		i := len(p) - 1
		for p[i] != '/' {
			i--
		}
		names = append(names, Name{Parent: dirs[p[:i]], Name: p[i+1:], Ino: ino})
	}
	return NewTree(1, inodes, names)
}

// sameBytes compares content (Sha holds it here) and mode.
func sameBytes(a, b Entry) bool { return a.Mode == b.Mode && a.Sha == b.Sha }

func TestChanges(t *testing.T) {
	base := tree("/d/", "/d/a=1:x", "/d/b=2:y", "/c=3:z")
	fork := tree("/d/", "/d/a=1:X", "/d/n=9:new", "/c=4:z")
	got, err := Changes(base, fork, func(a, b Entry) (bool, error) { return sameBytes(a, b), nil })
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, c := range got {
		s = append(s, c.Op+" "+c.Path+" "+c.Kind)
	}
	// /c is another inode with the same bytes and no other name: unchanged
	want := []string{"changed /d/a file", "deleted /d/b file", "added /d/n file"}
	if !slices.Equal(s, want) {
		t.Fatalf("changes %q, want %q", s, want)
	}
}

func TestMergeConflictsAndOrder(t *testing.T) {
	base := tree("/d/", "/d/a=1:x", "/d/b=2:y", "/e/", "/e/f=3:z", "/g=5:g")
	fork := tree("/d/", "/d/a=1:fork", "/e/", "/e/f=3:fork", "/g=5:g2", "/new=9:n")
	parent := tree("/d/", "/d/a=1:parent", "/d/b=2:y", "/e=7:file now", "/g=5:g2")
	same := func(x Side, a Entry, y Side, b Entry) (bool, error) { return sameBytes(a, b), nil }
	cmp := func(a, b Entry) (bool, error) { return sameBytes(a, b), nil }
	dc, err := Changes(base, fork, cmp)
	if err != nil {
		t.Fatal(err)
	}
	dp, err := Changes(base, parent, cmp)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Merge(base, fork, parent, dc, dp, same)
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	for _, c := range plan.Apply {
		applied = append(applied, c.Op+" "+c.Path)
	}
	// /g: the parent made the same change (not applied, no conflict)
	if want := []string{"deleted /d/b", "added /new"}; !slices.Equal(applied, want) {
		t.Fatalf("applied %q, want %q", applied, want)
	}
	want := []Conflict{
		{Path: "/d/a", Fork: Changed, Parent: Changed}, // both rewrote it
		{Path: "/e/f", Fork: Changed, Parent: Deleted}, // its directory became a file
	}
	if !slices.Equal(plan.Conflicts, want) {
		t.Fatalf("conflicts %+v, want %+v", plan.Conflicts, want)
	}
}
