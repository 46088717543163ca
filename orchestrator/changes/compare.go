package changes

import (
	"sort"

	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// pair is one change between two trees: from (nil: added) to (nil:
// deleted), a rename when both are set with different paths.
type pair struct {
	from, to       *side
	score          int // a rename's similarity, 0..maxScore
	contentChanged bool
}

type side struct {
	path string
	e    entry
}

func (p pair) path() string {
	if p.to != nil {
		return p.to.path
	}
	return p.from.path
}

// Rename detection as git's diffcore-rename does it (defaults of git
// diff): exact renames first (the same blob), then, when sources times
// destinations stay within renameLimit², renames by content similarity of
// at least minScore (50%).
const (
	maxScore    = 60000 // git's MAX_SCORE
	minScore    = 30000 // 50%, git's default -M
	renameLimit = 1000  // git's diff.renameLimit default
)

// compare lists what differs from tree a to tree b, sorted by path, with
// renames detected. content reads a file for the similarity of inexact
// renames.
func compare(a, b flatTree, content func(entry) ([]byte, error)) ([]pair, error) {
	var out []pair
	var deleted, added []*side
	for p, ea := range a {
		eb, ok := b[p]
		if !ok {
			deleted = append(deleted, &side{p, ea})
			continue
		}
		if ea.hash == eb.hash && ea.mode == eb.mode {
			continue
		}
		if isRegularish(ea.mode) != isRegularish(eb.mode) {
			// a type change (file <-> symlink or submodule): git shows a
			// deletion and an addition
			deleted = append(deleted, &side{p, ea})
			added = append(added, &side{p, eb})
			continue
		}
		out = append(out, pair{from: &side{p, ea}, to: &side{p, eb}, contentChanged: ea.hash != eb.hash})
	}
	for p, eb := range b {
		if _, ok := a[p]; !ok {
			added = append(added, &side{p, eb})
		}
	}
	sortSides(deleted)
	sortSides(added)
	renames, err := detectRenames(deleted, added, content)
	if err != nil {
		return nil, err
	}
	usedSrc := map[*side]bool{}
	usedDst := map[*side]bool{}
	for _, r := range renames {
		usedSrc[r.from], usedDst[r.to] = true, true
		out = append(out, r)
	}
	for _, d := range deleted {
		if !usedSrc[d] {
			out = append(out, pair{from: d})
		}
	}
	for _, d := range added {
		if !usedDst[d] {
			out = append(out, pair{to: d})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		pi, pj := out[i].path(), out[j].path()
		if pi != pj {
			return pi < pj
		}
		return out[i].from != nil && out[j].from == nil // a deletion before an addition of one path
	})
	return out, nil
}

func isRegularish(m filemode.FileMode) bool {
	return m == filemode.Regular || m == filemode.Executable || m == filemode.Deprecated
}

func sortSides(s []*side) { sort.Slice(s, func(i, j int) bool { return s[i].path < s[j].path }) }

// detectRenames pairs deleted sources with added destinations.
func detectRenames(srcs, dsts []*side, content func(entry) ([]byte, error)) ([]pair, error) {
	var out []pair
	if len(srcs) == 0 || len(dsts) == 0 {
		return nil, nil
	}
	usedSrc := map[*side]bool{}
	usedDst := map[*side]bool{}
	// exact: the same blob (and the same kind of file); among several
	// sources of one blob, the one with the same base name first
	bySha := map[[20]byte][]*side{}
	for _, s := range srcs {
		bySha[s.e.hash] = append(bySha[s.e.hash], s)
	}
	for _, d := range dsts {
		cands := bySha[d.e.hash]
		var best *side
		for _, s := range cands {
			if usedSrc[s] || isRegularish(s.e.mode) != isRegularish(d.e.mode) || (s.e.mode == filemode.Symlink) != (d.e.mode == filemode.Symlink) {
				continue
			}
			if best == nil || (baseName(s.path) == baseName(d.path) && baseName(best.path) != baseName(d.path)) {
				best = s
			}
		}
		if best != nil {
			usedSrc[best], usedDst[d] = true, true
			out = append(out, pair{from: best, to: d, score: maxScore})
		}
	}
	// inexact: regular files only
	var rs, rd []*side
	for _, s := range srcs {
		if !usedSrc[s] && isRegularish(s.e.mode) {
			rs = append(rs, s)
		}
	}
	for _, d := range dsts {
		if !usedDst[d] && isRegularish(d.e.mode) {
			rd = append(rd, d)
		}
	}
	if len(rs) == 0 || len(rd) == 0 || len(rs)*len(rd) > renameLimit*renameLimit {
		return out, nil
	}
	type cand struct {
		s, d  *side
		score int
		// name: same base name (git prefers it among equal scores)
		name bool
	}
	var cands []cand
	srcHash := map[*side]spanCounts{}
	sizeOf := func(s *side, b []byte) int64 { return int64(len(b)) }
	srcData := map[*side][]byte{}
	for _, s := range rs {
		b, err := content(s.e)
		if err != nil {
			return nil, err
		}
		srcData[s] = b
	}
	for _, d := range rd {
		db, err := content(d.e)
		if err != nil {
			return nil, err
		}
		var dh spanCounts
		for _, s := range rs {
			sb := srcData[s]
			ss, ds := sizeOf(s, sb), int64(len(db))
			big, small := max(ss, ds), min(ss, ds)
			// too different in size to reach minScore (git's quick check)
			if big == 0 || small*maxScore < big*minScore {
				continue
			}
			sh, ok := srcHash[s]
			if !ok {
				sh = spanHash(sb)
				srcHash[s] = sh
			}
			if dh == nil {
				dh = spanHash(db)
			}
			copied := commonBytes(sh, dh)
			score := int(copied * maxScore / big)
			if score >= minScore {
				cands = append(cands, cand{s, d, score, baseName(s.path) == baseName(d.path)})
			}
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].score != cands[j].score {
			return cands[i].score > cands[j].score
		}
		return cands[i].name && !cands[j].name
	})
	for _, c := range cands {
		if usedSrc[c.s] || usedDst[c.d] {
			continue
		}
		usedSrc[c.s], usedDst[c.d] = true, true
		out = append(out, pair{from: c.s, to: c.d, score: c.score, contentChanged: true})
	}
	return out, nil
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

// spanCounts counts bytes per span hash (git's diffcore-delta): a file is
// cut after every newline or 64 bytes, each span hashed; two files share
// what their spans share.
type spanCounts map[uint32]int64

const hashBase = 107927 // git's HASHBASE

func spanHash(b []byte) spanCounts {
	out := spanCounts{}
	text := !isBinary(b)
	var acc1, acc2 uint32
	n := 0
	for i := 0; i < len(b); i++ {
		c := uint32(b[i])
		// a CR of a CRLF in text does not count
		if text && c == '\r' && i+1 < len(b) && b[i+1] == '\n' {
			continue
		}
		old := acc1
		acc1 = (acc1 << 7) ^ (acc2 >> 25)
		acc2 = (acc2 << 7) ^ (old >> 25)
		acc1 += c
		n++
		if n < 64 && c != '\n' {
			continue
		}
		out[(acc1+acc2*0x61)%hashBase] += int64(n)
		n, acc1, acc2 = 0, 0, 0
	}
	if n > 0 {
		out[(acc1+acc2*0x61)%hashBase] += int64(n)
	}
	return out
}

// commonBytes is how many bytes of src are found in dst, span by span.
func commonBytes(src, dst spanCounts) int64 {
	var copied int64
	for h, sc := range src {
		copied += min(sc, dst[h])
	}
	return copied
}

// isBinary is git's rule: a NUL byte in the first 8000.
func isBinary(b []byte) bool {
	n := min(len(b), 8000)
	for i := 0; i < n; i++ {
		if b[i] == 0 {
			return true
		}
	}
	return false
}
