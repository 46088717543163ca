package vfs

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"

	"github.com/filepath-dev/filepath/orchestrator/vfs/textdiff"
)

// Change operations of a fork's diff.
const (
	DiffAdded   = "added"
	DiffChanged = "changed"
	DiffDeleted = "deleted"
)

// FileChange is one path that differs between a fork and its fork point.
type FileChange struct {
	Path    string `json:"path"`
	Op      string `json:"op"`   // added | changed | deleted
	Kind    string `json:"kind"` // file | dir | symlink (the new one; the old one for deleted)
	OldSize int64  `json:"old_size"`
	NewSize int64  `json:"new_size"`
	Binary  bool   `json:"binary,omitempty"` // a file not shown as text (or too large)
	Diff    string `json:"diff,omitempty"`   // unified text diff of a file (DiffOptions.Text)
	// TextOmitted: a text file whose diff was left out because the diffs
	// before it in the answer reached MaxDiffText.
	TextOmitted bool `json:"text_omitted,omitempty"`
	// Links: the other paths of the same file (hard links), sorted, when
	// the added or changed path is one of several names of its inode. Its
	// text diff is still that of the path (what a reader of it sees).
	Links []string `json:"links,omitempty"`
}

// MaxDiffText bounds the text diffs of one Diff (the files after the limit
// are listed without theirs).
const MaxDiffText = 4 << 20

// ForkDiff is a fork's changes since its fork point, sorted by path.
type ForkDiff struct {
	Fork    ForkInfo     `json:"fork"`
	Changes []FileChange `json:"changes"`
}

// DiffOptions select what Diff computes.
type DiffOptions struct {
	Text bool // a unified diff for every changed or added text file
}

// entry is one path of a workspace snapshot.
type entry struct {
	ino    int64
	mode   uint32
	size   int64
	gen    int64
	sha    string // cached content hash, "" when not cached
	target string // symlink target
}

func kindOf(mode uint32) string {
	switch mode & ModeType {
	case ModeDir:
		return "dir"
	case ModeSymlink:
		return "symlink"
	}
	return "file"
}

// wsSnap is every path of a workspace (all names of hard links).
type wsSnap struct {
	paths  map[string]entry
	inodes map[int64]entry    // every inode, named or not (an open orphan)
	names  map[int64][]string // the paths of each non-directory inode, sorted
}

// linked reports whether e, a path's entry, is one of several names.
func (s wsSnap) linked(e entry) bool {
	return e.mode&ModeType != ModeDir && len(s.names[e.ino]) > 1
}

// others returns the other paths of p's inode (nil when it has one name).
func (s wsSnap) others(p string, e entry) []string {
	if !s.linked(e) {
		return nil
	}
	out := make([]string, 0, len(s.names[e.ino])-1)
	for _, q := range s.names[e.ino] {
		if q != p {
			out = append(out, q)
		}
	}
	return out
}

// wsSnapshot reads every path of workspace ws (all names of hard links).
func (v *VFS) wsSnapshot(ctx context.Context, q querier, ws string) (wsSnap, error) {
	type dent struct {
		parent int64
		name   string
		ino    int64
	}
	vq, err := v.wholeQueries(ctx, q, ws) // a lazy base reads through its view
	if err != nil {
		return wsSnap{}, err
	}
	inodes := map[int64]entry{}
	rows, err := q.QueryContext(ctx, vq.inodes, vq.nodeArgs()...)
	if err != nil {
		return wsSnap{}, fmt.Errorf("read inodes of %s: %w", ws, err)
	}
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.ino, &e.mode, &e.size, &e.gen, &e.sha); err != nil {
			rows.Close()
			return wsSnap{}, err
		}
		inodes[e.ino] = e
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return wsSnap{}, err
	}
	rows, err = q.QueryContext(ctx, vq.symlinks, vq.nodeArgs()...)
	if err != nil {
		return wsSnap{}, fmt.Errorf("read symlinks of %s: %w", ws, err)
	}
	for rows.Next() {
		var ino int64
		var t string
		if err := rows.Scan(&ino, &t); err != nil {
			rows.Close()
			return wsSnap{}, err
		}
		e := inodes[ino]
		e.target = t
		inodes[ino] = e
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return wsSnap{}, err
	}
	kids := map[int64][]dent{}
	rows, err = q.QueryContext(ctx, vq.dentries, vq.args...)
	if err != nil {
		return wsSnap{}, fmt.Errorf("read names of %s: %w", ws, err)
	}
	for rows.Next() {
		var d dent
		if err := rows.Scan(&d.parent, &d.name, &d.ino); err != nil {
			rows.Close()
			return wsSnap{}, err
		}
		kids[d.parent] = append(kids[d.parent], d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return wsSnap{}, err
	}
	out := wsSnap{paths: make(map[string]entry, len(inodes)), inodes: inodes, names: map[int64][]string{}}
	var walk func(dir int64, prefix string)
	walk = func(dir int64, prefix string) {
		for _, d := range kids[dir] {
			e, ok := inodes[d.ino]
			if !ok {
				continue
			}
			p := prefix + "/" + d.name
			out.paths[p] = e
			if e.mode&ModeType == ModeDir {
				walk(d.ino, p)
			} else {
				out.names[d.ino] = append(out.names[d.ino], p)
			}
		}
	}
	walk(RootIno, "")
	for _, ps := range out.names {
		if len(ps) > 1 {
			sort.Strings(ps)
		}
	}
	return out, nil
}

// sameContent reports whether regular files a (in workspace wa) and b (in wb)
// hold the same bytes. related: wa is the frozen fork point wb started
// from (or the other way round), so the same inode at the same generation
// is the same bytes without hashing; a fork and its parent may both have
// written an inode (or made different inodes with one number) since.
func (v *VFS) sameContent(ctx context.Context, q querier, wa string, a entry, wb string, b entry, related bool) (bool, error) {
	if a.size != b.size {
		return false, nil
	}
	if related && a.ino == b.ino && a.gen == b.gen {
		return true, nil
	}
	ha, hb := a.sha, b.sha
	var err error
	if ha == "" {
		if ha, err = v.Session(wa).computeHash(ctx, q, a.ino); err != nil {
			return false, err
		}
	}
	if hb == "" {
		if hb, err = v.Session(wb).computeHash(ctx, q, b.ino); err != nil {
			return false, err
		}
	}
	return ha == hb, nil
}

// same reports whether two entries are the same thing: type, permissions and
// content (or target). related as for sameContent.
func (v *VFS) same(ctx context.Context, q querier, wa string, a entry, wb string, b entry, related bool) (bool, error) {
	if a.mode != b.mode {
		return false, nil
	}
	switch a.mode & ModeType {
	case ModeDir:
		return true, nil
	case ModeSymlink:
		return a.target == b.target, nil
	}
	return v.sameContent(ctx, q, wa, a, wb, b, related)
}

// changes lists what differs in workspace wb (snapshot b) from its fork
// point wa (snapshot a): by path, where a path names another inode than
// before only counts when either inode has several names (a hard link made
// or broken) or the old one is still in wb under another name; otherwise
// its type, permissions and bytes decide.
func (v *VFS) changes(ctx context.Context, q querier, wa string, a wsSnap, wb string, b wsSnap) ([]FileChange, error) {
	var out []FileChange
	for p, eb := range b.paths {
		ea, ok := a.paths[p]
		if !ok {
			out = append(out, FileChange{Path: p, Op: DiffAdded, Kind: kindOf(eb.mode), NewSize: eb.size, Links: b.others(p, eb)})
			continue
		}
		// another inode than before: a hard link made or broken, or the
		// old inode lives on under another name (moved, a copy put here)
		same := ea.ino == eb.ino || !(a.linked(ea) || b.linked(eb) || len(b.names[ea.ino]) > 0)
		if same {
			var err error
			if same, err = v.same(ctx, q, wa, ea, wb, eb, true); err != nil {
				return nil, err
			}
		}
		if !same {
			out = append(out, FileChange{Path: p, Op: DiffChanged, Kind: kindOf(eb.mode), OldSize: ea.size, NewSize: eb.size, Links: b.others(p, eb)})
		}
	}
	for p, ea := range a.paths {
		if _, ok := b.paths[p]; !ok {
			out = append(out, FileChange{Path: p, Op: DiffDeleted, Kind: kindOf(ea.mode), OldSize: ea.size})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Diff returns what fork ws changed since its fork point. It reads in one
// snapshot.
func (v *VFS) Diff(ctx context.Context, ws string, opt DiffOptions) (ForkDiff, error) {
	fk, err := v.ForkByID(ctx, ws)
	if err != nil {
		return ForkDiff{}, err
	}
	if err := v.Session(ws).materializeAll(ctx); err != nil {
		return ForkDiff{}, err
	}
	tx, err := v.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return ForkDiff{}, fmt.Errorf("diff: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	base, err := v.wsSnapshot(ctx, tx, fk.Base)
	if err != nil {
		return ForkDiff{}, err
	}
	cur, err := v.wsSnapshot(ctx, tx, fk.ID)
	if err != nil {
		return ForkDiff{}, err
	}
	chs, err := v.changes(ctx, tx, fk.Base, base, fk.ID, cur)
	if err != nil {
		return ForkDiff{}, err
	}
	textLeft := MaxDiffText
	for i := range chs {
		c := &chs[i]
		if c.Kind != "file" {
			continue
		}
		if opt.Text && textLeft <= 0 {
			c.TextOmitted = true
			continue
		}
		var old, new []byte
		if c.Op != DiffAdded {
			if e := base.paths[c.Path]; e.mode&ModeType == ModeRegular {
				if c.OldSize > textdiff.MaxSize {
					c.Binary = true
					continue
				}
				if old, err = v.Session(fk.Base).readAllIn(ctx, tx, e.ino, e.size); err != nil {
					return ForkDiff{}, err
				}
			}
		}
		if c.Op != DiffDeleted {
			if c.NewSize > textdiff.MaxSize {
				c.Binary = true
				continue
			}
			e := cur.paths[c.Path]
			if new, err = v.Session(fk.ID).readAllIn(ctx, tx, e.ino, e.size); err != nil {
				return ForkDiff{}, err
			}
		}
		if !textdiff.IsText(old) || !textdiff.IsText(new) {
			c.Binary = true
			continue
		}
		if opt.Text {
			c.Diff = textdiff.Unified(c.Path, old, new)
			textLeft -= len(c.Diff)
		}
	}
	if chs == nil {
		chs = []FileChange{}
	}
	return ForkDiff{Fork: fk, Changes: chs}, nil
}

// isUnder reports whether p is below dir.
func isUnder(p, dir string) bool { return strings.HasPrefix(p, dir+"/") }
