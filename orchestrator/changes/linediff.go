package changes

import (
	"bytes"
	"fmt"
	"strings"
)

// The line diff, the way git's xdiff makes it: the common head and tail
// trimmed, a shortest edit script by Myers' linear-space divide and
// conquer, then each group of changed lines slid as git does (to merge
// with neighbours, to line up with the other file's changes, else where
// the indent heuristic scores best), then hunks with three lines of
// context, those at most six lines apart joined.

// lineDiff holds the two files' lines as numbers (equal lines, equal
// numbers) and which lines changed.
type lineDiff struct {
	a, b       [][]byte
	ra, rb     []int  // line ids
	ca, cb     []bool // changed; index i+1 is line i (sentinels at both ends)
	maxCost    int
	costFallen bool
}

// splitLines cuts b after each newline; a last line without one is kept.
func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, b)
			break
		}
		out = append(out, b[:i+1])
		b = b[i+1:]
	}
	return out
}

func newLineDiff(old, new []byte) *lineDiff {
	d := &lineDiff{a: splitLines(old), b: splitLines(new)}
	ids := map[string]int{}
	id := func(l []byte) int {
		if v, ok := ids[string(l)]; ok {
			return v
		}
		v := len(ids)
		ids[string(l)] = v
		return v
	}
	d.ra = make([]int, len(d.a))
	for i, l := range d.a {
		d.ra[i] = id(l)
	}
	d.rb = make([]int, len(d.b))
	for i, l := range d.b {
		d.rb[i] = id(l)
	}
	d.ca = make([]bool, len(d.a)+2)
	d.cb = make([]bool, len(d.b)+2)
	d.compare(0, len(d.a), 0, len(d.b))
	d.compact(d.ra, d.ca, d.a, d.rb, d.cb)
	d.compact(d.rb, d.cb, d.b, d.ra, d.ca)
	return d
}

// compare marks the changed lines of a[aLo:aHi] against b[bLo:bHi].
func (d *lineDiff) compare(aLo, aHi, bLo, bHi int) {
	for aLo < aHi && bLo < bHi && d.ra[aLo] == d.rb[bLo] {
		aLo, bLo = aLo+1, bLo+1
	}
	for aLo < aHi && bLo < bHi && d.ra[aHi-1] == d.rb[bHi-1] {
		aHi, bHi = aHi-1, bHi-1
	}
	if aLo == aHi {
		for i := bLo; i < bHi; i++ {
			d.cb[i+1] = true
		}
		return
	}
	if bLo == bHi {
		for i := aLo; i < aHi; i++ {
			d.ca[i+1] = true
		}
		return
	}
	x, y, ok := d.split(aLo, aHi, bLo, bHi)
	if !ok {
		// past the cost bound: the rest as a replacement (bounded time)
		for i := aLo; i < aHi; i++ {
			d.ca[i+1] = true
		}
		for i := bLo; i < bHi; i++ {
			d.cb[i+1] = true
		}
		return
	}
	d.compare(aLo, x, bLo, y)
	d.compare(x, aHi, y, bHi)
}

// maxSplitCost bounds the edit distance searched for one split: beyond
// it the region is one replacement (git has heuristics of its own here;
// it is only reached by very different large files).
const maxSplitCost = 4096

// split finds the middle snake of a[aLo:aHi] and b[bLo:bHi] and returns a
// point on it that divides the edit script in two halves.
func (d *lineDiff) split(aLo, aHi, bLo, bHi int) (int, int, bool) {
	n, m := aHi-aLo, bHi-bLo
	delta := n - m
	odd := delta&1 != 0
	maxD := (n + m + 1) / 2
	if maxD > maxSplitCost {
		maxD = maxSplitCost
	}
	off := maxD + 1
	vf := make([]int, 2*maxD+3)
	vb := make([]int, 2*maxD+3)
	for dd := 0; dd <= maxD; dd++ {
		for k := -dd; k <= dd; k += 2 {
			var x int
			if k == -dd || (k != dd && vf[off+k-1] < vf[off+k+1]) {
				x = vf[off+k+1]
			} else {
				x = vf[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && d.ra[aLo+x] == d.rb[bLo+y] {
				x, y = x+1, y+1
			}
			vf[off+k] = x
			if odd {
				kr := delta - k
				if kr >= -(dd-1) && kr <= dd-1 && x+vb[off+kr] >= n {
					return aLo + x, bLo + y, true
				}
			}
		}
		for k := -dd; k <= dd; k += 2 {
			var x int
			if k == -dd || (k != dd && vb[off+k-1] < vb[off+k+1]) {
				x = vb[off+k+1]
			} else {
				x = vb[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && d.ra[aHi-1-x] == d.rb[bHi-1-y] {
				x, y = x+1, y+1
			}
			vb[off+k] = x
			if !odd {
				kf := delta - k
				if kf >= -dd && kf <= dd && x+vf[off+kf] >= n {
					return aHi - x, bHi - y, true
				}
			}
		}
	}
	return 0, 0, false
}

// compact slides the groups of changed lines of one file (r, c; lines l)
// as git's xdl_change_compact does, keeping them in step with the other
// file's groups (ro, co).
func (d *lineDiff) compact(r []int, c []bool, l [][]byte, ro []int, co []bool) {
	nrec, nreco := len(r), len(ro)
	ch := func(i int) bool { return c[i+1] }
	set := func(i int, v bool) { c[i+1] = v }
	cho := func(i int) bool { return co[i+1] }
	type group struct{ start, end int }
	initG := func(chf func(int) bool) group {
		g := group{}
		for chf(g.end) {
			g.end++
		}
		return g
	}
	next := func(g *group, chf func(int) bool, n int) bool {
		if g.end == n {
			return false
		}
		g.start = g.end + 1
		g.end = g.start
		for chf(g.end) {
			g.end++
		}
		return true
	}
	prev := func(g *group, chf func(int) bool) bool {
		if g.start == 0 {
			return false
		}
		g.end = g.start - 1
		g.start = g.end
		for chf(g.start - 1) {
			g.start--
		}
		return true
	}
	slideUp := func(g *group) bool {
		if g.start > 0 && r[g.start-1] == r[g.end-1] {
			g.start--
			g.end--
			set(g.start, true)
			set(g.end, false)
			for ch(g.start - 1) {
				g.start--
			}
			return true
		}
		return false
	}
	slideDown := func(g *group) bool {
		if g.end < nrec && r[g.start] == r[g.end] {
			set(g.start, false)
			set(g.end, true)
			g.start++
			g.end++
			for ch(g.end) {
				g.end++
			}
			return true
		}
		return false
	}
	g, og := initG(ch), initG(cho)
	for {
		if g.end != g.start {
			var groupsize, earliestEnd int
			endMatchingOther := -1
			for {
				groupsize = g.end - g.start
				endMatchingOther = -1
				for slideUp(&g) {
					prev(&og, cho)
				}
				earliestEnd = g.end
				if og.end > og.start {
					endMatchingOther = g.end
				}
				for slideDown(&g) {
					next(&og, cho, nreco)
					if og.end > og.start {
						endMatchingOther = g.end
					}
				}
				if groupsize == g.end-g.start {
					break
				}
			}
			switch {
			case g.end == earliestEnd:
				// no shifting was possible
			case endMatchingOther != -1:
				for og.end == og.start {
					slideUp(&g)
					prev(&og, cho)
				}
			default:
				// the indent heuristic: the shift that scores best
				shift := earliestEnd
				if g.end-groupsize-1 > shift {
					shift = g.end - groupsize - 1
				}
				if g.end-indentMaxSliding > shift {
					shift = g.end - indentMaxSliding
				}
				bestShift := -1
				var best splitScore
				for ; shift <= g.end; shift++ {
					var sc splitScore
					sc.add(measureSplit(l, shift))
					sc.add(measureSplit(l, shift-groupsize))
					if bestShift == -1 || sc.cmp(best) <= 0 {
						best = sc
						bestShift = shift
					}
				}
				for g.end > bestShift {
					slideUp(&g)
					prev(&og, cho)
				}
			}
		}
		if !next(&g, ch, nrec) {
			break
		}
		next(&og, cho, nreco)
	}
}

// hunk is one hunk of a unified diff.
type hunk struct {
	aStart, aCount, bStart, bCount int // 0-based starts
	lines                          []string
}

// unified renders the hunks with ctx lines of context as git prints them
// (from the first "@@"), and counts the added and deleted lines.
func (d *lineDiff) unified(ctx int) (string, int, int) {
	type change struct{ i1, i2, n1, n2 int }
	var chs []change
	i1, i2 := 0, 0
	na, nb := len(d.a), len(d.b)
	adds, dels := 0, 0
	for i1 < na || i2 < nb {
		if (i1 < na && d.ca[i1+1]) || (i2 < nb && d.cb[i2+1]) {
			c := change{i1: i1, i2: i2}
			for i1 < na && d.ca[i1+1] {
				i1++
			}
			for i2 < nb && d.cb[i2+1] {
				i2++
			}
			c.n1, c.n2 = i1-c.i1, i2-c.i2
			adds += c.n2
			dels += c.n1
			chs = append(chs, c)
			continue
		}
		i1, i2 = i1+1, i2+1
	}
	if len(chs) == 0 {
		return "", 0, 0
	}
	var out strings.Builder
	funcLine := ""
	funcPrev := -1
	for h := 0; h < len(chs); {
		// the changes of this hunk: those at most 2*ctx unchanged lines apart
		e := h
		for e+1 < len(chs) && chs[e+1].i1-(chs[e].i1+chs[e].n1) <= 2*ctx {
			e++
		}
		first, last := chs[h], chs[e]
		s1 := max(first.i1-ctx, 0)
		s2 := max(first.i2-ctx, 0)
		e1 := min(last.i1+last.n1+ctx, na)
		e2 := min(last.i2+last.n2+ctx, nb)
		for l := s1 - 1; l > funcPrev && l >= 0; l-- {
			if f, ok := funcName(d.a[l]); ok {
				funcLine = f
				break
			}
		}
		funcPrev = s1 - 1
		out.WriteString("@@ -")
		out.WriteString(hunkRange(s1, e1-s1))
		out.WriteString(" +")
		out.WriteString(hunkRange(s2, e2-s2))
		out.WriteString(" @@")
		if funcLine != "" {
			out.WriteByte(' ')
			out.WriteString(funcLine)
		}
		out.WriteByte('\n')
		a, b := s1, s2
		for a < e1 || b < e2 {
			switch {
			case a < e1 && d.ca[a+1]:
				writeLine(&out, '-', d.a[a])
				a++
			case b < e2 && d.cb[b+1]:
				writeLine(&out, '+', d.b[b])
				b++
			default:
				writeLine(&out, ' ', d.a[a])
				a, b = a+1, b+1
			}
		}
		h = e + 1
	}
	return out.String(), adds, dels
}

func writeLine(out *strings.Builder, kind byte, l []byte) {
	out.WriteByte(kind)
	out.Write(l)
	if len(l) == 0 || l[len(l)-1] != '\n' {
		out.WriteString("\n\\ No newline at end of file\n")
	}
}

// hunkRange is "start,count" of a hunk header (start 1-based; the line
// before for an empty range; ",1" left out).
func hunkRange(start, count int) string {
	if count == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if count == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}

// funcName is git's default function-name rule for a hunk header: a line
// that starts with a letter, '_' or '$', cut to 80 bytes, trailing space
// trimmed.
func funcName(l []byte) (string, bool) {
	if len(l) == 0 {
		return "", false
	}
	c := l[0]
	if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$') {
		return "", false
	}
	if len(l) > 80 {
		l = l[:80]
	}
	return strings.TrimRight(string(l), " \t\n\r\v\f"), true
}

// git's indent heuristic (xdiffi.c): where a group of changed lines can
// slide, the split between changed and unchanged lines is put where the
// indentation and blank lines make it read best.
const (
	indentMax             = 200
	indentMaxBlanks       = 20
	indentMaxSliding      = 100
	startOfFilePenalty    = 1
	endOfFilePenalty      = 21
	totalBlankWeight      = -30
	postBlankWeight       = 6
	relIndentPenalty      = -4
	relIndentBlankPenalty = 10
	relOutdentPenalty     = 24
	relOutdentBlank       = 17
	relDedentPenalty      = 23
	relDedentBlank        = 17
	indentWeight          = 60
)

// indentOf is a line's indentation (tabs to multiples of 8), -1 for a
// blank line.
func indentOf(l []byte) int {
	ret := 0
	for _, c := range l {
		switch c {
		case ' ':
			ret++
		case '\t':
			ret += 8 - ret%8
		case '\n', '\v', '\f', '\r':
		default:
			return ret
		}
		if ret >= indentMax {
			return indentMax
		}
	}
	return -1
}

type splitMeasure struct {
	endOfFile                                          bool
	indent, preBlank, preIndent, postBlank, postIndent int
}

func measureSplit(l [][]byte, split int) splitMeasure {
	var m splitMeasure
	if split >= len(l) {
		m.endOfFile = true
		m.indent = -1
	} else {
		m.indent = indentOf(l[split])
	}
	m.preIndent = -1
	for i := split - 1; i >= 0; i-- {
		m.preIndent = indentOf(l[i])
		if m.preIndent != -1 {
			break
		}
		m.preBlank++
		if m.preBlank == indentMaxBlanks {
			m.preIndent = 0
			break
		}
	}
	m.postIndent = -1
	for i := split + 1; i < len(l); i++ {
		m.postIndent = indentOf(l[i])
		if m.postIndent != -1 {
			break
		}
		m.postBlank++
		if m.postBlank == indentMaxBlanks {
			m.postIndent = 0
			break
		}
	}
	return m
}

type splitScore struct{ effectiveIndent, penalty int }

func (s *splitScore) add(m splitMeasure) {
	if m.preIndent == -1 && m.preBlank == 0 {
		s.penalty += startOfFilePenalty
	}
	if m.endOfFile {
		s.penalty += endOfFilePenalty
	}
	postBlank := 0
	if m.indent == -1 {
		postBlank = 1 + m.postBlank
	}
	totalBlank := m.preBlank + postBlank
	s.penalty += totalBlankWeight * totalBlank
	s.penalty += postBlankWeight * postBlank
	indent := m.indent
	if indent == -1 {
		indent = m.postIndent
	}
	anyBlanks := totalBlank != 0
	s.effectiveIndent += indent
	pick := func(withBlank, without int) int {
		if anyBlanks {
			return withBlank
		}
		return without
	}
	switch {
	case indent == -1, m.preIndent == -1, indent == m.preIndent:
	case indent > m.preIndent:
		s.penalty += pick(relIndentBlankPenalty, relIndentPenalty)
	case m.postIndent != -1 && m.postIndent > indent:
		s.penalty += pick(relOutdentBlank, relOutdentPenalty)
	default:
		s.penalty += pick(relDedentBlank, relDedentPenalty)
	}
}

func (s splitScore) cmp(o splitScore) int {
	c := 0
	if s.effectiveIndent > o.effectiveIndent {
		c = 1
	} else if s.effectiveIndent < o.effectiveIndent {
		c = -1
	}
	return indentWeight*c + (s.penalty - o.penalty)
}
