// Package textdiff renders the unified text diff of two versions of a file
// (a fork's changes, orchestrator/vfs Diff).
package textdiff

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxSize is the largest file (either side) given a text diff.
const MaxSize = 1 << 20

// IsText reports whether b is shown as text: valid UTF-8 without NUL bytes.
func IsText(b []byte) bool {
	return len(b) <= MaxSize && utf8.Valid(b) && bytes.IndexByte(b, 0) < 0
}

// splitLines splits b after each newline; a last line without one is kept.
func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// editOp is one line of an edit script: ' ' kept, '-' removed, '+' added.
type editOp struct {
	kind byte
	line string
}

// maxEditSteps bounds the search for a shortest edit script (its memory is
// quadratic in the steps); beyond it the differing middle of the two files
// is shown as removed, then added.
const maxEditSteps = 1000

// lineEdits returns an edit script turning a into b: the common head and
// tail kept, and for the middle the fewest insertions and deletions (the
// greedy forward search on the edit graph, keeping the frontier of every
// step to trace the path back) when that takes at most maxEditSteps.
func lineEdits(a, b []string) []editOp {
	var ops []editOp
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		ops = append(ops, editOp{' ', a[pre]})
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops = append(ops, middleEdits(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, editOp{' ', l})
	}
	return ops
}

func middleEdits(a, b []string) []editOp {
	n, m := len(a), len(b)
	replace := func() []editOp {
		ops := make([]editOp, 0, n+m)
		for _, l := range a {
			ops = append(ops, editOp{'-', l})
		}
		for _, l := range b {
			ops = append(ops, editOp{'+', l})
		}
		return ops
	}
	if n == 0 || m == 0 {
		return replace()
	}
	// trace[d][k+d] is the furthest x on diagonal k after d steps
	var trace [][]int
	get := func(d, k int) int {
		if k < -d || k > d {
			return -1
		}
		return trace[d][k+d]
	}
	found := false
	for d := 0; !found; d++ {
		if d > maxEditSteps {
			return replace()
		}
		v := make([]int, 2*d+1)
		for k := -d; k <= d; k += 2 {
			var x int
			switch {
			case d == 0:
				x = 0
			case k == -d || (k != d && get(d-1, k-1) < get(d-1, k+1)):
				x = get(d-1, k+1) // down: an insertion
			default:
				x = get(d-1, k-1) + 1 // right: a deletion
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[k+d] = x
			if x >= n && y >= m {
				found = true
			}
		}
		trace = append(trace, v)
	}
	// walk back from (n, m)
	var rev []editOp
	x, y := n, m
	for d := len(trace) - 1; d > 0; d-- {
		k := x - y
		var pk int
		if k == -d || (k != d && get(d-1, k-1) < get(d-1, k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := get(d-1, pk)
		py := px - pk
		for x > px && y > py {
			x, y = x-1, y-1
			rev = append(rev, editOp{' ', a[x]})
		}
		if x == px {
			y--
			rev = append(rev, editOp{'+', b[y]})
		} else {
			x--
			rev = append(rev, editOp{'-', a[x]})
		}
	}
	for x > 0 && y > 0 {
		x, y = x-1, y-1
		rev = append(rev, editOp{' ', a[x]})
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// Unified returns a unified diff of old and new (labelled a/path and
// b/path) with three lines of context; "" when they are equal.
func Unified(path string, old, new []byte) string {
	a, b := splitLines(old), splitLines(new)
	ops := lineEdits(a, b)
	const ctxLines = 3
	var out strings.Builder
	// hunks: runs of changes with up to 2*ctxLines kept lines between them
	i := 0
	header := false
	for i < len(ops) {
		for i < len(ops) && ops[i].kind == ' ' {
			i++
		}
		if i == len(ops) {
			break
		}
		start := max(0, i-ctxLines)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			j := end
			for j < len(ops) && ops[j].kind == ' ' {
				j++
			}
			if j == len(ops) || j-end > 2*ctxLines {
				end = min(len(ops), end+ctxLines)
				break
			}
			end = j
		}
		// line numbers of the hunk's first line on each side
		aLine, bLine := 1, 1
		for _, op := range ops[:start] {
			if op.kind != '+' {
				aLine++
			}
			if op.kind != '-' {
				bLine++
			}
		}
		aN, bN := 0, 0
		for _, op := range ops[start:end] {
			if op.kind != '+' {
				aN++
			}
			if op.kind != '-' {
				bN++
			}
		}
		if !header {
			fmt.Fprintf(&out, "--- a%s\n+++ b%s\n", path, path)
			header = true
		}
		if aN == 0 {
			aLine--
		}
		if bN == 0 {
			bLine--
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", aLine, aN, bLine, bN)
		for _, op := range ops[start:end] {
			out.WriteByte(op.kind)
			out.WriteString(op.line)
			if !strings.HasSuffix(op.line, "\n") {
				out.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
	return out.String()
}
