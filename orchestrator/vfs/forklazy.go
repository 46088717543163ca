package vfs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Lazy forks (migration 0013; doc.go, "Forks"). A fork copies no rows when
// it is made: its frozen base is a view over the origin (baseView), and the
// fork copies a directory from that view the first time it uses it
// (ensureDir). Every other query of the package reads the fork's own rows.

// baseView is a frozen fork point kept as a view: its own rows are what the
// origin changed or removed since the fork (saved by the triggers of
// migration 0013); every other row is the origin's, for inodes below next
// and names with an id up to maxDentry.
type baseView struct {
	ws        string
	origin    string
	next      int64
	maxDentry int64
}

// lazyState is what a lazy fork knows about itself (sessionState.lazy).
type lazyState struct {
	base baseView
	// dirs it has copied from its base and committed; guarded by VFS.mu
	dirs map[int64]bool
}

// lazyView returns the view of workspace ws when it is a lazy base.
func (v *VFS) lazyView(ctx context.Context, q querier, ws string) (baseView, bool, error) {
	if b, ok := v.views.Load(ws); ok {
		bv := b.(baseView)
		return bv, bv.ws != "", nil
	}
	bv := baseView{ws: ws}
	var lazy int
	err := q.QueryRowContext(ctx, `SELECT parent_ws, base_next_ino, max_dentry, lazy FROM fs_fork WHERE ws=? AND kind='base'`, ws).
		Scan(&bv.origin, &bv.next, &bv.maxDentry, &lazy)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		lazy = 0
	case err != nil:
		return baseView{}, false, fmt.Errorf("read fork point %s: %w", ws, err)
	}
	if lazy == 0 {
		bv = baseView{}
	}
	// a base never changes kind while it exists (rows are written once)
	v.views.Store(ws, bv)
	return bv, bv.ws != "", nil
}

// lazy returns fs's lazy-fork state, nil when fs is not a lazy fork (or no
// longer is: materializeAll).
func (fs *FS) lazy(ctx context.Context) (*lazyState, error) {
	st := fs.v.state(fs.sid)
	fs.v.mu.Lock()
	known, ls := st.lazyKnown, st.lazy
	fs.v.mu.Unlock()
	if known {
		return ls, nil
	}
	var base string
	var lazy int
	err := fs.v.rq.QueryRowContext(ctx, `SELECT parent_ws, lazy FROM fs_fork WHERE ws=? AND kind='fork'`, fs.sid).Scan(&base, &lazy)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		lazy = 0
	case err != nil:
		return nil, fmt.Errorf("read fork %s: %w", fs.sid, err)
	}
	if lazy != 0 {
		bv, ok, err := fs.v.lazyView(ctx, fs.v.rq, base)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("fork %s: its base %s is not a view", fs.sid, base)
		}
		ls = &lazyState{base: bv, dirs: map[int64]bool{}}
		rows, err := fs.v.rq.QueryContext(ctx, `SELECT ino FROM fs_fork_dir WHERE ws=?`, fs.sid)
		if err != nil {
			return nil, fmt.Errorf("read fork %s: %w", fs.sid, err)
		}
		for rows.Next() {
			var ino int64
			if err := rows.Scan(&ino); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read fork %s: %w", fs.sid, err)
			}
			ls.dirs[ino] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read fork %s: %w", fs.sid, err)
		}
	}
	fs.v.mu.Lock()
	defer fs.v.mu.Unlock()
	if !st.lazyKnown {
		st.lazyKnown, st.lazy = true, ls
	}
	return st.lazy, nil
}

// hasDir reports whether lazy fork ls has copied directory ino (committed).
func (v *VFS) hasDir(ls *lazyState, ino int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return ls.dirs[ino]
}

// ensureDir makes sure a lazy fork has its own rows for directory ino (its
// names and their inodes), committed, so that reads on the read pool see
// them. A no-op for any other workspace, for a directory it has, and for
// one it made itself (numbered from its base's next inode on: the view has
// no names in it), which costs no change and no commit.
func (fs *FS) ensureDir(ctx context.Context, ino int64) error {
	ls, err := fs.lazy(ctx)
	if err != nil || ls == nil || ino >= ls.base.next || fs.v.hasDir(ls, ino) {
		return err
	}
	if err := fs.v.tx(ctx, func(tx *txn) error { return fs.ensureDirTx(ctx, tx, ino) }); err != nil {
		return err
	}
	// only a committed copy counts: a reader on the read pool must see it
	if err := fs.v.Sync(ctx, false); err != nil {
		return err
	}
	fs.v.mu.Lock()
	ls.dirs[ino] = true
	fs.v.mu.Unlock()
	return nil
}

// ensureDirTx is ensureDir inside a change: the copy is part of tx (and
// rolls back with it). It does not mark the directory copied in memory;
// the next ensureDir finds its fs_fork_dir row and does.
func (fs *FS) ensureDirTx(ctx context.Context, tx *txn, ino int64) error {
	ls, err := fs.lazy(ctx)
	if err != nil || ls == nil || ino >= ls.base.next || fs.v.hasDir(ls, ino) {
		return err
	}
	// ls may be older than what tx sees: a materializeAll that committed
	// before tx began (it clears fs_fork_dir) has copied everything
	var done bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM fs_fork_dir WHERE ws=?1 AND ino=?2)
		OR NOT EXISTS (SELECT 1 FROM fs_fork WHERE ws=?1 AND lazy=1)`, fs.sid, ino).Scan(&done); err != nil {
		return fmt.Errorf("copy directory %d into fork: %w", ino, err)
	}
	if done {
		return nil
	}
	var mode uint32
	err = tx.QueryRowContext(ctx, `SELECT mode FROM fs_inode WHERE session_id=? AND ino=?`, fs.sid, ino).Scan(&mode)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && mode&ModeType != ModeDir) {
		return nil // gone or not a directory: the caller's own query says so
	}
	if err != nil {
		return fmt.Errorf("copy directory %d into fork: %w", ino, err)
	}
	if err := copyDir(ctx, tx, fs.sid, ls.base, ino); err != nil {
		return fmt.Errorf("copy directory %d into fork: %w", ino, err)
	}
	return nil
}

// viewEntries selects the names (name, ino) of directory ?3 in base view
// (?1 the base, ?2 its origin, ?4 its max_dentry).
const viewEntries = `SELECT name, ino FROM fs_fork_dentry WHERE ws=?1 AND parent_ino=?3
	UNION ALL
	SELECT name, ino FROM fs_dentry d WHERE d.session_id=?2 AND d.parent_ino=?3 AND d.id<=?4
	  AND NOT EXISTS (SELECT 1 FROM fs_fork_dentry s WHERE s.ws=?1 AND s.orig_id=d.id)`

// inodeCols are the columns of fs_inode a copy carries (all but session_id);
// the save-before-change triggers (migrations 0013, 0030) list the same.
const inodeCols = `ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns, created_ns, is_readonly, sha256, data_gen, nlink, rdev`

// copyDir copies directory dir's names, and the inodes and symlink targets
// they name that fork ws does not have yet, from base view bv into ws, and
// records the directory as copied.
func copyDir(ctx context.Context, tx *txn, ws string, bv baseView, dir int64) error {
	// Inodes ws already has (another name of a hard link, copied with
	// another directory) carry the full link count from the view: the
	// nlink trigger must not count these names again.
	have := map[int64]int64{}
	rows, err := tx.QueryContext(ctx, `SELECT v.ino, COUNT(*) FROM (`+viewEntries+`) v
		WHERE EXISTS (SELECT 1 FROM fs_inode i WHERE i.session_id=?5 AND i.ino=v.ino) GROUP BY v.ino`, bv.ws, bv.origin, dir, bv.maxDentry, ws)
	if err != nil {
		return err
	}
	for rows.Next() {
		var ino, n int64
		if err := rows.Scan(&ino, &n); err != nil {
			rows.Close()
			return err
		}
		have[ino] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO fs_dentry(session_id, name, parent_ino, ino) SELECT ?5, name, ?3, ino FROM (`+viewEntries+`)`,
		bv.ws, bv.origin, dir, bv.maxDentry, ws); err != nil {
		return err
	}
	// the base's saved rows first, then the origin's (unchanged since the fork)
	for _, src := range []struct {
		ws    string
		below int64
	}{{bv.ws, 1 << 62}, {bv.origin, bv.next}} {
		if _, err := tx.ExecContext(ctx, `INSERT INTO fs_inode(session_id, `+inodeCols+`) SELECT ?1, `+inodeCols+` FROM fs_inode s
			WHERE s.session_id=?2 AND s.ino<?3 AND s.ino IN (SELECT ino FROM fs_dentry WHERE session_id=?1 AND parent_ino=?4)
			  AND NOT EXISTS (SELECT 1 FROM fs_inode i WHERE i.session_id=?1 AND i.ino=s.ino)`, ws, src.ws, src.below, dir); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO fs_symlink(session_id, ino, target) SELECT ?1, ino, target FROM fs_symlink s
			WHERE s.session_id=?2 AND s.ino<?3 AND s.ino IN (SELECT ino FROM fs_dentry WHERE session_id=?1 AND parent_ino=?4)
			  AND NOT EXISTS (SELECT 1 FROM fs_symlink i WHERE i.session_id=?1 AND i.ino=s.ino)`, ws, src.ws, src.below, dir); err != nil {
			return err
		}
	}
	for ino, n := range have {
		if _, err := tx.ExecContext(ctx, `UPDATE fs_inode SET nlink=nlink-? WHERE session_id=? AND ino=?`, n, ws, ino); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO fs_fork_dir(ws, ino) VALUES(?,?)`, ws, dir)
	return err
}

// materializeAll copies every directory a lazy fork has not copied yet, in
// one change, and makes it an ordinary fork: what the path API, diff,
// merge, export, grep, check and a fork of the fork need, since they read
// whole trees. A no-op for any other workspace.
func (fs *FS) materializeAll(ctx context.Context) error {
	ls, err := fs.lazy(ctx)
	if err != nil || ls == nil {
		return err
	}
	err = fs.v.tx(ctx, func(tx *txn) error {
		var lazy int
		if err := tx.QueryRowContext(ctx, `SELECT lazy FROM fs_fork WHERE ws=?`, fs.sid).Scan(&lazy); err != nil {
			return fmt.Errorf("copy fork %s: %w", fs.sid, err)
		}
		if lazy == 0 {
			return nil // another caller did it
		}
		// every directory reachable from the root, breadth first
		queue := []int64{RootIno}
		for len(queue) > 0 {
			dir := queue[0]
			queue = queue[1:]
			if err := fs.ensureDirTx(ctx, tx, dir); err != nil {
				return err
			}
			rows, err := tx.QueryContext(ctx, `SELECT d.ino FROM fs_dentry d JOIN fs_inode i ON i.session_id=d.session_id AND i.ino=d.ino
				WHERE d.session_id=? AND d.parent_ino=? AND i.mode & 61440 = 16384`, fs.sid, dir)
			if err != nil {
				return fmt.Errorf("copy fork %s: %w", fs.sid, err)
			}
			for rows.Next() {
				var ino int64
				if err := rows.Scan(&ino); err != nil {
					rows.Close()
					return err
				}
				queue = append(queue, ino)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		for _, q := range []string{`UPDATE fs_fork SET lazy=0 WHERE ws=?`, `DELETE FROM fs_fork_dir WHERE ws=?`} {
			if _, err := tx.ExecContext(ctx, q, fs.sid); err != nil {
				return fmt.Errorf("copy fork %s: %w", fs.sid, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := fs.v.Sync(ctx, false); err != nil {
		return err
	}
	st := fs.v.state(fs.sid)
	fs.v.mu.Lock()
	st.lazyKnown, st.lazy = true, nil
	fs.v.mu.Unlock()
	return nil
}

// viewQueries are the queries that read a whole workspace's metadata (diff's
// snapshot): for a lazy base they read through its view.
type viewQueries struct {
	inodes, symlinks, dentries string
	args                       []any // of dentries; the others take args[:3]
}

// nodeArgs are the arguments of the inode and symlink queries.
func (q viewQueries) nodeArgs() []any { return q.args[:min(3, len(q.args))] }

// inodeViewCols are the inode columns a snapshot reads (diff.go).
const inodeViewCols = `ino, mode, size, data_gen, COALESCE(sha256, ''), rdev`

// viewRows selects cols of a lazy base's rows of table (keyed by session_id
// and ino): its saved rows (?1), then its origin's (?2) below its next
// inode (?3) that it has not saved.
func viewRows(table, cols string) string {
	return `SELECT ` + cols + ` FROM ` + table + ` WHERE session_id=?1
		UNION ALL SELECT ` + cols + ` FROM ` + table + ` o WHERE o.session_id=?2 AND o.ino<?3
		  AND NOT EXISTS (SELECT 1 FROM ` + table + ` s WHERE s.session_id=?1 AND s.ino=o.ino)`
}

func (v *VFS) wholeQueries(ctx context.Context, q querier, ws string) (viewQueries, error) {
	bv, ok, err := v.lazyView(ctx, q, ws)
	if err != nil {
		return viewQueries{}, err
	}
	if !ok {
		return viewQueries{
			inodes:   `SELECT ` + inodeViewCols + ` FROM fs_inode WHERE session_id=?1`,
			symlinks: `SELECT ino, target FROM fs_symlink WHERE session_id=?1`,
			dentries: `SELECT parent_ino, name, ino FROM fs_dentry WHERE session_id=?1`,
			args:     []any{ws},
		}, nil
	}
	return viewQueries{
		inodes:   viewRows("fs_inode", inodeViewCols),
		symlinks: viewRows("fs_symlink", "ino, target"),
		dentries: `SELECT parent_ino, name, ino FROM fs_fork_dentry WHERE ws=?1
			UNION ALL SELECT parent_ino, name, ino FROM fs_dentry d WHERE d.session_id=?2 AND d.id<=?4
			  AND NOT EXISTS (SELECT 1 FROM fs_fork_dentry s WHERE s.ws=?1 AND s.orig_id=d.id)`,
		args: []any{bv.ws, bv.origin, bv.next, bv.maxDentry},
	}, nil
}

// inodeSize returns the size of inode ino of workspace fs, read through its
// view when fs is a lazy base.
func (fs *FS) inodeSize(ctx context.Context, q querier, ino int64) (int64, error) {
	var size int64
	err := q.QueryRowContext(ctx, `SELECT size FROM fs_inode WHERE session_id=? AND ino=?`, fs.sid, ino).Scan(&size)
	if !errors.Is(err, sql.ErrNoRows) {
		return size, err
	}
	bv, ok, verr := fs.v.lazyView(ctx, q, fs.sid)
	if verr != nil || !ok || ino >= bv.next {
		return 0, err
	}
	err = q.QueryRowContext(ctx, `SELECT size FROM fs_inode WHERE session_id=? AND ino=?`, bv.origin, ino).Scan(&size)
	return size, err
}

// checkView is Check for a lazy base: the rules on names and link counts,
// applied to the view.
func (v *VFS) checkView(ctx context.Context, bv baseView) error {
	vq, err := v.wholeQueries(ctx, v.r, bv.ws)
	if err != nil {
		return err
	}
	var errs []error
	type inode struct {
		mode    uint32
		n       int64 // names in the view
		subdirs int64 // of a directory
	}
	inodes := map[int64]*inode{}
	nlink := map[int64]int64{}
	rows, err := v.r.QueryContext(ctx, viewRows("fs_inode", "ino, mode, nlink"), vq.nodeArgs()...)
	if err != nil {
		return fmt.Errorf("check view %s: %w", bv.ws, err)
	}
	for rows.Next() {
		var ino, n int64
		var mode uint32
		if err := rows.Scan(&ino, &mode, &n); err != nil {
			rows.Close()
			return err
		}
		if inodes[ino] != nil {
			errs = append(errs, fmt.Errorf("view: inode %d twice", ino))
		}
		inodes[ino], nlink[ino] = &inode{mode: mode}, n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if r := inodes[RootIno]; r == nil || r.mode&ModeType != ModeDir {
		errs = append(errs, fmt.Errorf("view rule 1: root inode missing or not a directory"))
	}
	type key struct {
		parent int64
		name   string
	}
	names := map[key]bool{}
	rows, err = v.r.QueryContext(ctx, vq.dentries, vq.args...)
	if err != nil {
		return fmt.Errorf("check view %s: %w", bv.ws, err)
	}
	for rows.Next() {
		var k key
		var ino int64
		if err := rows.Scan(&k.parent, &k.name, &ino); err != nil {
			rows.Close()
			return err
		}
		if names[k] {
			errs = append(errs, fmt.Errorf("view rule 4: duplicate name %q in %d", k.name, k.parent))
		}
		names[k] = true
		if p := inodes[k.parent]; p == nil || p.mode&ModeType != ModeDir {
			errs = append(errs, fmt.Errorf("view rule 3: %q in missing or non-directory %d", k.name, k.parent))
		}
		if i := inodes[ino]; i == nil {
			errs = append(errs, fmt.Errorf("view rule 2: %q names missing inode %d", k.name, ino))
		} else {
			i.n++
			if p := inodes[k.parent]; p != nil && i.mode&ModeType == ModeDir {
				p.subdirs++
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for ino, i := range inodes {
		// an origin's orphan at the fork has no name and is not in use
		if (i.n > 0 || ino == RootIno) && i.n+i.subdirs != nlink[ino] {
			errs = append(errs, fmt.Errorf("view nlink: inode %d has %d names and %d subdirectories, link count %d", ino, i.n, i.subdirs, nlink[ino]))
		}
	}
	return errors.Join(errs...)
}
