package vfs

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxTextDiffSize is the largest file (either side) given a text diff.
const MaxTextDiffSize = 1 << 20

// isText reports whether b is shown as text: valid UTF-8 without NUL bytes.
func isText(b []byte) bool {
	return len(b) <= MaxTextDiffSize && utf8.Valid(b) && bytes.IndexByte(b, 0) < 0
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

// lineEdits returns an edit script turning a into b with the fewest
// insertions and deletions (the greedy forward algorithm on the edit graph,
// keeping the frontier of every step to trace the path back).
func lineEdits(a, b []string) []editOp {
	n, m := len(a), len(b)
	max := n + m
	off := max + 1
	v := make([]int, 2*max+3)
	var trace [][]int
	found := false
	for d := 0; d <= max && !found; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = true
				break
			}
		}
		trace = append(trace, append([]int(nil), v...))
	}
	// walk back from (n, m)
	var ops []editOp
	x, y := n, m
	for d := len(trace) - 1; d > 0; d-- {
		pv := trace[d-1]
		k := x - y
		var pk int
		if k == -d || (k != d && pv[off+k-1] < pv[off+k+1]) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := pv[off+pk]
		py := px - pk
		for x > px && y > py {
			x, y = x-1, y-1
			ops = append(ops, editOp{' ', a[x]})
		}
		if x == px {
			y--
			ops = append(ops, editOp{'+', b[y]})
		} else {
			x--
			ops = append(ops, editOp{'-', a[x]})
		}
	}
	for x > 0 && y > 0 {
		x, y = x-1, y-1
		ops = append(ops, editOp{' ', a[x]})
	}
	for i, j := 0, len(ops)-1; i < j; i, j = i+1, j-1 {
		ops[i], ops[j] = ops[j], ops[i]
	}
	return ops
}

// UnifiedDiff returns a unified diff of old and new (labelled a/path and
// b/path) with three lines of context; "" when they are equal.
func UnifiedDiff(path string, old, new []byte) string {
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
