package vfs

import (
	"context"
	"fmt"

	"github.com/filepath-dev/filepath/orchestrator/vfs/textdiff"
	"github.com/filepath-dev/filepath/orchestrator/vfs/treediff"
)

// MaxDiffText bounds the text diffs of one Diff (the files after the limit
// are listed without theirs).
const MaxDiffText = 4 << 20

// ForkDiff is a fork's changes since its fork point, sorted by path.
type ForkDiff struct {
	Fork    ForkInfo              `json:"fork"`
	Changes []treediff.FileChange `json:"changes"`
}

// DiffOptions select what Diff computes.
type DiffOptions struct {
	Text bool // a unified diff for every changed or added text file
}

// wsSnapshot reads every path of workspace ws (all names of hard links).
func (v *VFS) wsSnapshot(ctx context.Context, q querier, ws string) (treediff.Tree, error) {
	lv, layered, err := v.Session(ws).levels(ctx, q)
	if err != nil {
		return treediff.Tree{}, err
	}
	if layered {
		return layeredSnapshot(ctx, q, lv)
	}
	inodes := map[int64]treediff.Entry{}
	rows, err := q.QueryContext(ctx, `SELECT ino, mode, size, data_gen, COALESCE(sha256, ''), rdev FROM fs_inode WHERE session_id=?`, ws)
	if err != nil {
		return treediff.Tree{}, fmt.Errorf("read inodes of %s: %w", ws, err)
	}
	for rows.Next() {
		var e treediff.Entry
		if err := rows.Scan(&e.Ino, &e.Mode, &e.Size, &e.Gen, &e.Sha, &e.Rdev); err != nil {
			rows.Close()
			return treediff.Tree{}, err
		}
		inodes[e.Ino] = e
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return treediff.Tree{}, err
	}
	rows, err = q.QueryContext(ctx, `SELECT ino, target FROM fs_symlink WHERE session_id=?`, ws)
	if err != nil {
		return treediff.Tree{}, fmt.Errorf("read symlinks of %s: %w", ws, err)
	}
	for rows.Next() {
		var ino int64
		var t string
		if err := rows.Scan(&ino, &t); err != nil {
			rows.Close()
			return treediff.Tree{}, err
		}
		e := inodes[ino]
		e.Target = t
		inodes[ino] = e
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return treediff.Tree{}, err
	}
	var names []treediff.Name
	rows, err = q.QueryContext(ctx, `SELECT parent_ino, name, ino FROM fs_dentry WHERE session_id=?`, ws)
	if err != nil {
		return treediff.Tree{}, fmt.Errorf("read names of %s: %w", ws, err)
	}
	for rows.Next() {
		var d treediff.Name
		if err := rows.Scan(&d.Parent, &d.Name, &d.Ino); err != nil {
			rows.Close()
			return treediff.Tree{}, err
		}
		names = append(names, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return treediff.Tree{}, err
	}
	return treediff.NewTree(RootIno, inodes, names), nil
}

// layeredSnapshot is wsSnapshot through levels lv.
func layeredSnapshot(ctx context.Context, q querier, lv []mlevel) (treediff.Tree, error) {
	t, err := loadLayered(ctx, q, lv)
	if err != nil {
		return treediff.Tree{}, err
	}
	inodes := make(map[int64]treediff.Entry, len(t.inodes))
	for ino, a := range t.inodes {
		g := t.gens[ino]
		inodes[ino] = treediff.Entry{Ino: ino, Mode: a.Mode, Size: a.Size, Gen: g.gen, Sha: g.sha, Target: t.symlinks[ino], Rdev: a.Rdev}
	}
	names := make([]treediff.Name, 0, len(t.names))
	for k, ino := range t.names {
		names = append(names, treediff.Name{Parent: k.parent, Name: k.name, Ino: ino})
	}
	return treediff.NewTree(RootIno, inodes, names), nil
}

// sameContent reports whether regular files a (in workspace wa) and b (in wb)
// hold the same bytes. related: wa is the frozen fork point wb started
// from (or the other way round), so the same inode at the same generation
// is the same bytes without hashing; a fork and its parent may both have
// written an inode (or made different inodes with one number) since.
func (v *VFS) sameContent(ctx context.Context, q querier, wa string, a treediff.Entry, wb string, b treediff.Entry, related bool) (bool, error) {
	if a.Size != b.Size {
		return false, nil
	}
	if related && a.Ino == b.Ino && a.Gen == b.Gen {
		return true, nil
	}
	ha, hb := a.Sha, b.Sha
	var err error
	if ha == "" {
		if ha, err = v.Session(wa).computeHash(ctx, q, a.Ino); err != nil {
			return false, err
		}
	}
	if hb == "" {
		if hb, err = v.Session(wb).computeHash(ctx, q, b.Ino); err != nil {
			return false, err
		}
	}
	return ha == hb, nil
}

// same reports whether two entries are the same thing: type, permissions and
// content (or target). related as for sameContent.
func (v *VFS) same(ctx context.Context, q querier, wa string, a treediff.Entry, wb string, b treediff.Entry, related bool) (bool, error) {
	if a.Mode != b.Mode {
		return false, nil
	}
	switch a.Mode & ModeType {
	case ModeDir:
		return true, nil
	case ModeSymlink:
		return a.Target == b.Target, nil
	case ModeFIFO, ModeSocket, ModeCharDev, ModeBlkDev:
		return a.Rdev == b.Rdev, nil // a special file has no content
	}
	return v.sameContent(ctx, q, wa, a, wb, b, related)
}

// sameIn returns treediff's Same for the trees of fork fk, read in q.
func (v *VFS) sameIn(ctx context.Context, q querier, fk ForkInfo) treediff.Same {
	ws := [...]string{treediff.Base: fk.Base, treediff.Fork: fk.ID, treediff.Parent: fk.Origin}
	return func(x treediff.Side, a treediff.Entry, y treediff.Side, b treediff.Entry) (bool, error) {
		// the fork point and either side: the same inode at the same
		// generation is the same bytes
		return v.same(ctx, q, ws[x], a, ws[y], b, x == treediff.Base || y == treediff.Base)
	}
}

// changes lists what differs in tree b (of side y) from the fork point a
// (treediff.Changes).
func changes(same treediff.Same, a treediff.Tree, y treediff.Side, b treediff.Tree) ([]treediff.FileChange, error) {
	return treediff.Changes(a, b, func(ea, eb treediff.Entry) (bool, error) { return same(treediff.Base, ea, y, eb) })
}

// Diff returns what fork ws changed since its fork point. It reads in one
// snapshot.
func (v *VFS) Diff(ctx context.Context, ws string, opt DiffOptions) (ForkDiff, error) {
	fk, err := v.ForkByID(ctx, ws)
	if err != nil {
		return ForkDiff{}, err
	}
	tx, err := v.r.beginRead(ctx)
	if err != nil {
		return ForkDiff{}, fmt.Errorf("diff: %w", err)
	}
	defer tx.done(ctx)
	var base, cur treediff.Tree
	if lv, layered, err := v.Session(fk.ID).levels(ctx, tx); err != nil {
		return ForkDiff{}, err
	} else if layered {
		// only what the fork's own rows touch (partial.go)
		base, cur, err = v.partialTrees(ctx, tx, fk, lv)
		if err != nil {
			return ForkDiff{}, err
		}
	} else {
		if base, err = v.wsSnapshot(ctx, tx, fk.Base); err != nil {
			return ForkDiff{}, err
		}
		if cur, err = v.wsSnapshot(ctx, tx, fk.ID); err != nil {
			return ForkDiff{}, err
		}
	}
	chs, err := changes(v.sameIn(ctx, tx, fk), base, treediff.Fork, cur)
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
		if c.Op != treediff.Added {
			if e := base.Paths[c.Path]; e.Mode&ModeType == ModeRegular {
				if c.OldSize > textdiff.MaxSize {
					c.Binary = true
					continue
				}
				if old, err = v.Session(fk.Base).readAllIn(ctx, tx, e.Ino, e.Size); err != nil {
					return ForkDiff{}, err
				}
			}
		}
		if c.Op != treediff.Deleted {
			if c.NewSize > textdiff.MaxSize {
				c.Binary = true
				continue
			}
			e := cur.Paths[c.Path]
			if new, err = v.Session(fk.ID).readAllIn(ctx, tx, e.Ino, e.Size); err != nil {
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
		chs = []treediff.FileChange{}
	}
	return ForkDiff{Fork: fk, Changes: chs}, nil
}
