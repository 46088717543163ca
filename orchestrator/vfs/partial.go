package vfs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/filepath-dev/filepath/orchestrator/vfs/treediff"
)

// The diff of a layered fork in O(changes). A layered fork's own rows are
// exactly what it changed since its fork point: the names it added or
// removed (whiteouts) and the inodes it changed (copied up) or made. So
// the trees the diff compares need only the paths those rows touch, in the
// fork and in its fork point: the names at the changed keys, every name of
// each inode found there (hard links, moves), the directories above them,
// and the whole subtree of a directory that is another inode at its path
// on the two sides (moved, made or removed). Every other path is the same
// inode with the same row on both sides and leaves the diff unchanged.

// partialSide is one side's part of the trees (the fork or its fork point).
type partialSide struct {
	fs     *FS
	lv     []mlevel
	inodes map[int64]treediff.Entry
	names  map[dkey]int64
	dirs   map[int64]bool // directories whose path (ancestors) is in names
	walked map[int64]bool // directories whose subtree is in names
}

// partialTrees returns the trees of fork fk and its fork point restricted
// to what the fork's own rows touch, read in q.
func (v *VFS) partialTrees(ctx context.Context, q querier, fk ForkInfo, lv []mlevel) (treediff.Tree, treediff.Tree, error) {
	sides := []*partialSide{{fs: v.Session(fk.Base), lv: lv[1:]}, {fs: v.Session(fk.ID), lv: lv}}
	keys, inos, err := seeds(ctx, q, nil, `SELECT parent_ino, name FROM fs_dentry WHERE session_id=?`, fk.ID, `SELECT ino FROM fs_inode WHERE session_id=? AND ino != 1`, fk.ID)
	if err != nil {
		return treediff.Tree{}, treediff.Tree{}, err
	}
	trees, err := partial(ctx, q, sides, keys, inos)
	if err != nil {
		return treediff.Tree{}, treediff.Tree{}, err
	}
	return trees[0], trees[1], nil
}

// partialMergeTrees returns the three trees of fork fk's merge (its fork
// point, the fork, the workspace it came from) restricted to what changed
// on either side since the fork: the fork's own rows, and the origin's
// changes, which its fork point's view records (migration 0013): the names
// and inodes it saved (each changed or removed in the origin since), the
// names those saved names are now (a rename keeps a name's id) and the
// origin's names made since (an id above max_dentry). ok is false when the
// fork point does not record them (a fork point compacted to its whole
// view, or a whole copy of migration 0012): the caller reads the trees
// whole.
func (v *VFS) partialMergeTrees(ctx context.Context, q querier, fk ForkInfo) (sb, sc, sp treediff.Tree, ok bool, err error) {
	lv, layered, err := v.Session(fk.ID).levels(ctx, q)
	if err != nil || !layered {
		return sb, sc, sp, false, err
	}
	var lazy int
	var maxD int64
	if err = q.QueryRowContext(ctx, `SELECT lazy, max_dentry FROM fs_fork WHERE ws=? AND kind='base'`, fk.Base).Scan(&lazy, &maxD); err != nil {
		return sb, sc, sp, false, fmt.Errorf("merge: read fork point: %w", err)
	}
	if lazy != 1 {
		return sb, sc, sp, false, nil
	}
	plv, _, err := v.Session(fk.Origin).levels(ctx, q)
	if err != nil {
		return sb, sc, sp, false, err
	}
	keys, inos, err := seeds(ctx, q, nil, `SELECT parent_ino, name FROM fs_dentry WHERE session_id=?`, fk.ID, `SELECT ino FROM fs_inode WHERE session_id=? AND ino != 1`, fk.ID)
	if err != nil {
		return sb, sc, sp, false, err
	}
	keys, pinos, err := seeds(ctx, q, keys, `SELECT parent_ino, name FROM fs_fork_dentry WHERE ws=?1
		UNION ALL SELECT d.parent_ino, d.name FROM fs_fork_dentry s JOIN fs_dentry d ON d.session_id=?2 AND d.id=s.orig_id WHERE s.ws=?1
		UNION ALL SELECT parent_ino, name FROM fs_dentry WHERE id>?3 AND session_id||''=?2`, []any{fk.Base, fk.Origin, maxD},
		`SELECT ino FROM fs_inode WHERE session_id=?1 AND ino != 1 UNION SELECT ino FROM fs_symlink WHERE session_id=?1`, fk.Base)
	if err != nil {
		return sb, sc, sp, false, err
	}
	sides := []*partialSide{{fs: v.Session(fk.Base), lv: lv[1:]}, {fs: v.Session(fk.ID), lv: lv}, {fs: v.Session(fk.Origin), lv: plv}}
	trees, err := partial(ctx, q, sides, keys, append(inos, pinos...))
	if err != nil {
		return sb, sc, sp, false, err
	}
	return trees[0], trees[1], trees[2], true, nil
}

// seeds appends the keys and inodes two queries select to keys; an arg is
// one argument or a []any of them.
func seeds(ctx context.Context, q querier, keys []dkey, kq string, karg any, iq string, iarg any) ([]dkey, []int64, error) {
	args := func(a any) []any {
		if l, ok := a.([]any); ok {
			return l
		}
		return []any{a}
	}
	rows, err := q.QueryContext(ctx, kq, args(karg)...)
	if err != nil {
		return nil, nil, fmt.Errorf("changed names: %w", err)
	}
	for rows.Next() {
		var k dkey
		if err := rows.Scan(&k.parent, &k.name); err != nil {
			rows.Close()
			return nil, nil, err
		}
		keys = append(keys, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	var inos []int64
	if rows, err = q.QueryContext(ctx, iq, args(iarg)...); err != nil {
		return nil, nil, fmt.Errorf("changed inodes: %w", err)
	}
	for rows.Next() {
		var ino int64
		if err := rows.Scan(&ino); err != nil {
			rows.Close()
			return nil, nil, err
		}
		inos = append(inos, ino)
	}
	rows.Close()
	return keys, inos, rows.Err()
}

// partial builds the trees of sides restricted to the changed keys and
// inodes, and what they lead to, until nothing new comes: every name of
// each inode found (hard links, moves), the directories above each name,
// and the subtree of a directory that is another inode at its key on
// another side.
func partial(ctx context.Context, q querier, sides []*partialSide, keys []dkey, inos []int64) ([]treediff.Tree, error) {
	for _, s := range sides {
		s.inodes, s.names, s.dirs, s.walked = map[int64]treediff.Entry{}, map[dkey]int64{}, map[int64]bool{RootIno: true}, map[int64]bool{}
		if _, err := s.inode(ctx, q, RootIno); err != nil {
			return nil, err
		}
	}
	seenK := map[dkey]bool{}
	seenI := map[int64]bool{}
	got := make([]treediff.Entry, len(sides))
	has := make([]bool, len(sides))
	for len(keys) > 0 || len(inos) > 0 {
		for len(inos) > 0 {
			ino := inos[len(inos)-1]
			inos = inos[:len(inos)-1]
			if seenI[ino] {
				continue
			}
			seenI[ino] = true
			for _, s := range sides {
				ks, err := s.namesOf(ctx, q, ino)
				if err != nil {
					return nil, err
				}
				keys = append(keys, ks...)
			}
		}
		for len(keys) > 0 {
			k := keys[len(keys)-1]
			keys = keys[:len(keys)-1]
			if seenK[k] {
				continue
			}
			seenK[k] = true
			for i, s := range sides {
				has[i] = false
				// the directory's path on every side that has it, so that
				// no side lacks a path above a name another side has
				if err := s.ancestors(ctx, q, k.parent); err != nil && !errors.Is(err, sql.ErrNoRows) {
					return nil, err
				}
				e, err := s.entry(ctx, q, k)
				if errors.Is(err, sql.ErrNoRows) {
					continue
				}
				if err != nil {
					return nil, err
				}
				ino := e.Ino
				if err := s.ancestors(ctx, q, k.parent); err != nil {
					return nil, err
				}
				s.names[k] = ino
				got[i], has[i] = e, true
				if !e.IsDir() {
					inos = append(inos, ino) // its other names
				}
			}
			for i, s := range sides {
				if !has[i] || !got[i].IsDir() {
					continue
				}
				// a directory that is another inode on another side:
				// everything below it differs by path
				for j := range sides {
					if j != i && (!has[j] || got[j].Ino != got[i].Ino) {
						more, err := s.subtree(ctx, q, got[i].Ino)
						if err != nil {
							return nil, err
						}
						keys = append(keys, more...)
						break
					}
				}
			}
		}
	}
	trees := make([]treediff.Tree, len(sides))
	for i, s := range sides {
		names := make([]treediff.Name, 0, len(s.names))
		for k, ino := range s.names {
			names = append(names, treediff.Name{Parent: k.parent, Name: k.name, Ino: ino})
		}
		trees[i] = treediff.NewTree(RootIno, s.inodes, names)
	}
	return trees, nil
}

// entryCols are the columns of fs_inode a tree's entry holds.
const entryCols = "i.ino, i.mode, i.size, i.data_gen, i.sha256, i.rdev"

// inode reads inode ino (with its symlink target) into s.inodes.
func (s *partialSide) inode(ctx context.Context, q querier, ino int64) (treediff.Entry, error) {
	if e, ok := s.inodes[ino]; ok {
		return e, nil
	}
	b := &sqlb{args: []any{ino}}
	return s.scanEntry(ctx, q, q.QueryRowContext(ctx, `SELECT ino, mode, size, data_gen, COALESCE(sha256, ''), rdev FROM (`+
		rowUnion(b, s.lv, "fs_inode", entryCols, "$.ino=?1")+`) AS u ORDER BY lvl LIMIT 1`, b.args...))
}

// entry reads the inode name k names into s.inodes, in one statement
// (sql.ErrNoRows when k names none).
func (s *partialSide) entry(ctx context.Context, q querier, k dkey) (treediff.Entry, error) {
	ino, err := entryIno(ctx, q, s.lv, k.parent, k.name)
	if err != nil {
		return treediff.Entry{}, err
	}
	if ino == 0 {
		return treediff.Entry{}, sql.ErrNoRows
	}
	return s.inode(ctx, q, ino)
}

// scanEntry scans an entry (sql.ErrNoRows for a tombstone), reads its
// symlink target, and keeps it in s.inodes.
func (s *partialSide) scanEntry(ctx context.Context, q querier, row *sql.Row) (treediff.Entry, error) {
	var e treediff.Entry
	err := row.Scan(&e.Ino, &e.Mode, &e.Size, &e.Gen, &e.Sha, &e.Rdev)
	if err == nil && e.Mode == 0 {
		err = sql.ErrNoRows
	}
	if err != nil {
		return e, err
	}
	if c, ok := s.inodes[e.Ino]; ok {
		return c, nil
	}
	ino := e.Ino
	if e.Mode&ModeType == ModeSymlink {
		if e.Target, err = readlinkLayered(ctx, q, s.lv, ino); err != nil {
			return e, fmt.Errorf("diff: symlink %d: %w", ino, err)
		}
	}
	s.inodes[ino] = e
	return e, nil
}

// ancestors adds the names of directory dir and the directories above it.
func (s *partialSide) ancestors(ctx context.Context, q querier, dir int64) error {
	for !s.dirs[dir] {
		parent, name, err := firstNameLayered(ctx, q, s.lv, dir)
		if err != nil {
			return err // sql.ErrNoRows: dir is not on this side
		}
		if _, err := s.inode(ctx, q, dir); err != nil {
			return err
		}
		s.names[dkey{parent, name}] = dir
		s.dirs[dir] = true
		dir = parent
	}
	return nil
}

// namesOf returns the keys of inode ino's names on this side.
func (s *partialSide) namesOf(ctx context.Context, q querier, ino int64) ([]dkey, error) {
	b := &sqlb{args: []any{ino}}
	rows, err := q.QueryContext(ctx, namesSQL(b, s.lv), b.args...)
	if err != nil {
		return nil, fmt.Errorf("diff: names of %d: %w", ino, err)
	}
	defer rows.Close()
	var out []dkey
	for rows.Next() {
		var k dkey
		if err := rows.Scan(&k.parent, &k.name); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// subtree returns the keys of every name below directory dir on this side.
func (s *partialSide) subtree(ctx context.Context, q querier, dir int64) ([]dkey, error) {
	var out []dkey
	for queue := []int64{dir}; len(queue) > 0; queue = queue[1:] {
		d := queue[0]
		if s.walked[d] {
			continue
		}
		s.walked[d] = true
		kids, _, err := s.fs.childrenLayered(ctx, q, s.lv, d, false)
		if err != nil {
			return nil, err
		}
		for _, c := range kids {
			out = append(out, dkey{d, c.name})
			if c.attr.IsDir() {
				queue = append(queue, c.attr.Ino)
			}
		}
	}
	return out, nil
}
