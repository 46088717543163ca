package vfs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Layered forks (migration 0035; doc.go, "Forks"). A fork's own rows are
// what it changed; every other row is read through its frozen base's view,
// which reads its origin's rows as they were at the fork, and so on down a
// chain of levels. A read takes, for a name (parent, name) or an inode, the
// row of the first level that has one: a whiteout (a name with ino 0) or a
// tombstone (an inode with mode 0) there means "gone".

// Level kinds.
const (
	lvOwn    = iota // fs_dentry, fs_inode, fs_symlink rows of ws: all of them
	lvSaved         // a base's saved rows: fs_fork_dentry of ws; fs_inode, fs_symlink of ws
	lvOrigin        // an origin's rows as its base saw them: names with an id up to max not saved in the base
)

const noBound int64 = 1 << 62

// mlevel is one level of a workspace's metadata.
type mlevel struct {
	kind  int
	ws    string
	below int64  // its inodes and symlinks count only below this
	max   int64  // lvOrigin: its names with an id up to this
	saved string // lvOrigin: the base whose saved names replace its names
}

// metaLevels returns the levels workspace ws reads its metadata through,
// its own first: one level for a workspace that is not a layered fork or a
// base view. Cached: the levels of a workspace change only when a base
// below it is compacted, and its old levels still read the same then.
func (v *VFS) metaLevels(ctx context.Context, q querier, ws string) ([]mlevel, error) {
	if c, ok := v.layers.Load(ws); ok {
		return c.([]mlevel), nil
	}
	out := []mlevel{{kind: lvOwn, ws: ws, below: noBound}}
	var kind, parent string
	var layered int
	err := q.QueryRowContext(ctx, `SELECT kind, parent_ws, layered FROM fs_fork WHERE ws=?`, ws).Scan(&kind, &parent, &layered)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("read fork %s: %w", ws, err)
	case kind == "fork" && layered == 1:
		lv, err := v.baseLevels(ctx, q, parent, noBound)
		if err != nil {
			return nil, err
		}
		out = append(out, lv...)
	case kind == "base":
		if out, err = v.baseLevels(ctx, q, ws, noBound); err != nil {
			return nil, err
		}
	}
	v.layers.Store(ws, out)
	return out, nil
}

// baseLevels returns the levels of base b's view, its inodes below bound.
func (v *VFS) baseLevels(ctx context.Context, q querier, b string, bound int64) ([]mlevel, error) {
	var origin string
	var next, maxD int64
	var lazy, full int
	if err := q.QueryRowContext(ctx, `SELECT parent_ws, base_next_ino, max_dentry, lazy, "full" FROM fs_fork WHERE ws=? AND kind='base'`, b).
		Scan(&origin, &next, &maxD, &lazy, &full); err != nil {
		return nil, fmt.Errorf("read fork point %s: %w", b, err)
	}
	bound = min(bound, next)
	switch {
	case full == 1:
		return []mlevel{{kind: lvSaved, ws: b, below: bound}}, nil
	case lazy == 0: // a whole copy (migration 0012)
		return []mlevel{{kind: lvOwn, ws: b, below: bound}}, nil
	}
	out := []mlevel{{kind: lvSaved, ws: b, below: bound}, {kind: lvOrigin, ws: origin, below: bound, max: maxD, saved: b}}
	var kind, obase string
	var layered int
	err := q.QueryRowContext(ctx, `SELECT kind, parent_ws, layered FROM fs_fork WHERE ws=?`, origin).Scan(&kind, &obase, &layered)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("read fork %s: %w", origin, err)
	case kind == "fork" && layered == 1:
		lv, err := v.baseLevels(ctx, q, obase, bound)
		if err != nil {
			return nil, err
		}
		out = append(out, lv...)
	}
	return out, nil
}

// levels returns fs's metadata levels and whether it has more than its own.
func (fs *FS) levels(ctx context.Context, q querier) ([]mlevel, bool, error) {
	lv, err := fs.v.metaLevels(ctx, q, fs.sid)
	return lv, len(lv) > 1 || (len(lv) == 1 && lv[0].kind != lvOwn), err
}

// sqlb builds a statement whose text depends only on the shape of the
// levels (so the statement cache keeps one per shape) and its arguments.
type sqlb struct {
	args []any
	pg   bool // the database is PostgreSQL (VFS.pg)
}

func (b *sqlb) p(v any) string {
	b.args = append(b.args, v)
	return "?" + strconv.Itoa(len(b.args))
}

// dentrySel selects cols (over alias a: parent_ino, name, ino, and id) of
// level l's names that match cond. id is the name's id in the workspace
// it was made in.
func dentrySel(b *sqlb, l mlevel, a, cols, cond string) string {
	cols = strings.ReplaceAll(cols, "$id", a+"."+map[bool]string{true: "orig_id", false: "id"}[l.kind == lvSaved])
	switch l.kind {
	case lvSaved:
		return "SELECT " + cols + " FROM fs_fork_dentry " + a + " WHERE " + a + ".ws=" + b.p(l.ws) + " AND " + cond
	case lvOrigin:
		return "SELECT " + cols + " FROM fs_dentry " + a + " WHERE " + a + ".session_id=" + b.p(l.ws) + " AND " + cond +
			" AND " + a + ".id<=" + b.p(l.max) + " AND NOT EXISTS (SELECT 1 FROM fs_fork_dentry x" + a + " WHERE x" + a + ".ws=" + b.p(l.saved) + " AND x" + a + ".orig_id=" + a + ".id)"
	}
	return "SELECT " + cols + " FROM fs_dentry " + a + " WHERE " + a + ".session_id=" + b.p(l.ws) + " AND " + cond
}

// rowSel selects cols of level l's rows of table (fs_inode or fs_symlink,
// alias a) that match cond.
func rowSel(b *sqlb, l mlevel, table, a, cols, cond string) string {
	s := "SELECT " + cols + " FROM " + table + " " + a + " WHERE " + a + ".session_id=" + b.p(l.ws) + " AND " + cond
	if l.below < noBound {
		s += " AND " + a + ".ino<" + b.p(l.below)
	}
	return s
}

// dentryUnion is the names of every level matching cond, with their level.
func dentryUnion(b *sqlb, lv []mlevel, cols, cond string) string {
	parts := make([]string, len(lv))
	for k, l := range lv {
		parts[k] = dentrySel(b, l, "t", cols+", "+strconv.Itoa(k)+" AS lvl", strings.ReplaceAll(cond, "$", "t"))
	}
	return strings.Join(parts, " UNION ALL ")
}

// rowUnion is the rows of table of every level matching cond, with their level.
func rowUnion(b *sqlb, lv []mlevel, table, cols, cond string) string {
	parts := make([]string, len(lv))
	for k, l := range lv {
		parts[k] = rowSel(b, l, table, "i", cols+", "+strconv.Itoa(k)+" AS lvl", strings.ReplaceAll(cond, "$", "i"))
	}
	return strings.Join(parts, " UNION ALL ")
}

// inodeColsBare are the columns scanAttr reads, unqualified.
const inodeColsBare = `ino, mode, uid, gid, size, atime, atime_ns, mtime, mtime_ns, ctime, ctime_ns, created_ns, is_readonly, nlink, rdev`

// The reads of one name or one inode (a lookup, a stat: a mount's most
// frequent calls) take the first level's row with a short-circuit
// COALESCE or CASE of one index probe per level, nearest first: a UNION
// of the levels sorted by level built and sorted a temporary table per
// call (a forked child's first git status was 1.7 times the session's).

// firstIno is a scalar expression: the inode the name matching cond
// (over $: parent_ino, name) names at its first level with a row, 0 for a
// whiteout, NULL when no level has one.
func firstIno(b *sqlb, lv []mlevel, cond string) string {
	parts := make([]string, len(lv))
	for k, l := range lv {
		a := "n" + strconv.Itoa(k)
		parts[k] = "(" + dentrySel(b, l, a, a+".ino", strings.ReplaceAll(cond, "$", a)) + " LIMIT 1)"
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "COALESCE(" + strings.Join(parts, ", ") + ")"
}

// inodeRowSQL selects cols (over alias i) of inode x's row at its first
// level with one; x is an expression (a parameter, or a column of a
// one-row CTE).
func inodeRowSQL(b *sqlb, lv []mlevel, cols, x string) string {
	ws := "CASE"
	for k, l := range lv {
		a := "e" + strconv.Itoa(k)
		ws += " WHEN EXISTS (" + rowSel(b, l, "fs_inode", a, "1", a+".ino="+x) + ") THEN " + b.p(l.ws)
	}
	ws += " END"
	return "SELECT " + cols + " FROM fs_inode i WHERE i.session_id=(" + ws + ") AND i.ino=" + x
}

// getAttrLayered is getAttr through the levels.
func (fs *FS) getAttrLayered(ctx context.Context, q querier, lv []mlevel, ino int64) (Attr, error) {
	b := &sqlb{args: []any{ino}}
	a, err := scanAttr(q.QueryRowContext(ctx, inodeRowSQL(b, lv, inodeColsQ, "?1"), b.args...))
	if err == nil && a.Mode == 0 {
		err = sql.ErrNoRows // a tombstone
	}
	return a, err
}

// lookupLayered is lookup through the levels.
func (fs *FS) lookupLayered(ctx context.Context, q querier, lv []mlevel, parent int64, name string) (Attr, error) {
	b := &sqlb{args: []any{parent, name}}
	s := `WITH d(ino) AS MATERIALIZED (SELECT ` + firstIno(b, lv, "$.parent_ino=?1 AND $.name=?2") + `) ` +
		inodeRowSQL(b, lv, inodeColsQ, "(SELECT ino FROM d)")
	a, err := scanAttr(q.QueryRowContext(ctx, s, b.args...))
	if err == nil && a.Mode == 0 {
		err = sql.ErrNoRows
	}
	return a, err
}

// inodeColsQ is inodeColsBare over alias i.
const inodeColsQ = `i.ino, i.mode, i.uid, i.gid, i.size, i.atime, i.atime_ns, i.mtime, i.mtime_ns, i.ctime, i.ctime_ns, i.created_ns, i.is_readonly, i.nlink, i.rdev`

// entryIno returns the inode that (parent, name) names through levels lv
// (0 when none does).
func entryIno(ctx context.Context, q querier, lv []mlevel, parent int64, name string) (int64, error) {
	if len(lv) == 0 {
		return 0, nil
	}
	b := &sqlb{args: []any{parent, name}}
	var ino sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT `+firstIno(b, lv, "$.parent_ino=?1 AND $.name=?2"), b.args...).Scan(&ino)
	return ino.Int64, err
}

// childrenSQL selects (name, ino) of the entries of directory ?1 through lv.
func childrenSQL(b *sqlb, lv []mlevel) string {
	return `SELECT name, ino FROM (` + firstBy(b.pg, "name", "name, ino", dentryUnion(b, lv, "t.name, t.ino", "$.parent_ino=?1")) + `) AS c WHERE ino != 0`
}

// firstBy selects cols of the row of each key of rows (a query with a lvl
// column) with the least lvl. SQLite takes the other columns of a
// MIN(lvl) aggregate from that row; PostgreSQL says DISTINCT ON.
func firstBy(pg bool, key, cols, rows string) string {
	if pg {
		return `SELECT DISTINCT ON (` + key + `) ` + cols + ` FROM (` + rows + `) AS r ORDER BY ` + key + `, lvl`
	}
	return `SELECT ` + cols + `, MIN(lvl) FROM (` + rows + `) AS r GROUP BY ` + key
}

// childrenLayered is children through the levels, with each entry's
// symlink target when withTarget.
func (fs *FS) childrenLayered(ctx context.Context, q querier, lv []mlevel, dir int64, withTarget bool) ([]child, []string, error) {
	b := &sqlb{args: []any{dir}, pg: fs.v.pg}
	c := childrenSQL(b, lv)
	n := firstBy(b.pg, "ino", inodeColsBare, rowUnion(b, lv, "fs_inode", inodeColsBare, "$.ino IN (SELECT ino FROM c)"))
	s := `WITH c(name, ino) AS (` + c + `), n AS (` + n + `)`
	cols := `c.name, n.ino, n.mode, n.uid, n.gid, n.size, n.atime, n.atime_ns, n.mtime, n.mtime_ns, n.ctime, n.ctime_ns, n.created_ns, n.is_readonly, n.nlink, n.rdev`
	if withTarget {
		s += `, l AS (` + firstBy(b.pg, "ino", "ino, target", rowUnion(b, lv, "fs_symlink", "i.ino, i.target", "$.ino IN (SELECT ino FROM c)")) + `)`
		s += ` SELECT ` + cols + `, COALESCE(l.target, '') FROM c JOIN n ON n.ino=c.ino LEFT JOIN l ON l.ino=c.ino WHERE n.mode != 0 ORDER BY c.name`
	} else {
		s += ` SELECT ` + cols + ` FROM c JOIN n ON n.ino=c.ino WHERE n.mode != 0 ORDER BY c.name`
	}
	rows, err := q.QueryContext(ctx, s, b.args...)
	if err != nil {
		return nil, nil, fmt.Errorf("list directory %d: %w", dir, err)
	}
	defer rows.Close()
	var out []child
	var targets []string
	for rows.Next() {
		var ch child
		var target string
		a, err := scanAttr(scanFunc(func(dest ...any) error {
			d := append([]any{&ch.name}, dest...)
			if withTarget {
				d = append(d, &target)
			}
			return rows.Scan(d...)
		}))
		if err != nil {
			return nil, nil, fmt.Errorf("list directory %d: %w", dir, err)
		}
		ch.attr = a
		out = append(out, ch)
		targets = append(targets, target)
	}
	return out, targets, rows.Err()
}

// hasEntriesLayered reports whether directory dir has an entry through lv.
func (fs *FS) hasEntriesLayered(ctx context.Context, q querier, lv []mlevel, dir int64) (bool, error) {
	b := &sqlb{args: []any{dir}, pg: fs.v.pg}
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM (`+childrenSQL(b, lv)+` LIMIT 1) AS one`, b.args...).Scan(&n)
	return n > 0, err
}

// namesSQL selects (parent_ino, name) of the names of inode ?1 visible
// through lv (no level above has a row at their key), oldest first.
func namesSQL(b *sqlb, lv []mlevel) string {
	parts := make([]string, len(lv))
	for k, l := range lv {
		cond := "t.ino=?1"
		for j := 0; j < k; j++ {
			cond += " AND NOT EXISTS (" + dentrySel(b, lv[j], "u"+strconv.Itoa(j), "1", "u"+strconv.Itoa(j)+".parent_ino=t.parent_ino AND u"+strconv.Itoa(j)+".name=t.name") + ")"
		}
		parts[k] = dentrySel(b, l, "t", "t.parent_ino, t.name, $id AS id, "+strconv.Itoa(k)+" AS lvl", cond)
	}
	return `SELECT parent_ino, name FROM (` + strings.Join(parts, " UNION ALL ") + `) AS u ORDER BY lvl DESC, id`
}

// firstNameLayered returns the parent and name of ino's first name through lv.
func firstNameLayered(ctx context.Context, q querier, lv []mlevel, ino int64) (int64, string, error) {
	b := &sqlb{args: []any{ino}}
	var parent int64
	var name string
	err := q.QueryRowContext(ctx, namesSQL(b, lv)+` LIMIT 1`, b.args...).Scan(&parent, &name)
	return parent, name, err
}

// readlinkLayered returns symlink ino's target through lv.
func readlinkLayered(ctx context.Context, q querier, lv []mlevel, ino int64) (string, error) {
	b := &sqlb{args: []any{ino}}
	var t string
	err := q.QueryRowContext(ctx, `SELECT target FROM (`+rowUnion(b, lv, "fs_symlink", "i.target", "$.ino=?1")+`) AS u ORDER BY lvl LIMIT 1`, b.args...).Scan(&t)
	return t, err
}

// The writes of a layered fork. Inode rows are copied up (unchanged) before
// they change; names are never copied: a name of the base that goes gets a
// whiteout, one that comes is an own row. The link-count triggers count
// own names only, so a whiteout over a base's name takes the link off by
// hand, and the directory's count of subdirectories (migration 0030) too;
// the directory's row is copied up before a name in it changes, so that
// the triggers find it.

// ownIno copies inode ino up into fs's own rows if fs is a layered fork
// without a row of its own for it: every change of an inode row starts
// here. A copy-up is the row as the fork reads it, so a base viewing the
// fork (a fork of the fork) reads the same before and after.
func (fs *FS) ownIno(ctx context.Context, tx *txn, ino int64) error {
	lv, layered, err := fs.levels(ctx, tx)
	if err != nil || !layered || ino == 0 {
		return err
	}
	b := &sqlb{args: []any{ino, fs.sid}}
	_, err = tx.ExecContext(ctx, `INSERT INTO fs_inode(session_id, `+inodeCols+`) SELECT ?2, `+inodeCols+` FROM (`+
		rowUnion(b, lv[1:], "fs_inode", "i.*", "$.ino=?1")+`) AS u WHERE NOT EXISTS (SELECT 1 FROM fs_inode o WHERE o.session_id=?2 AND o.ino=?1) ORDER BY lvl LIMIT 1`, b.args...)
	if err != nil {
		return fmt.Errorf("copy up inode %d: %w", ino, err)
	}
	return nil
}

// ownRowAt reports whether fs has a name row of its own at (parent, name).
func (fs *FS) ownRowAt(ctx context.Context, tx *txn, parent int64, name string) (bool, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM fs_dentry WHERE session_id=? AND parent_ino=? AND name=?`, fs.sid, parent, name).Scan(&n)
	return n > 0, err
}

// putDentry makes (parent, name) name ino, where nothing is named now.
func (fs *FS) putDentry(ctx context.Context, tx *txn, lv []mlevel, parent int64, name string, ino int64) error {
	for _, i := range []int64{parent, ino} {
		if err := fs.ownIno(ctx, tx, i); err != nil {
			return err
		}
	}
	own, err := fs.ownRowAt(ctx, tx, parent, name)
	if err != nil {
		return err
	}
	if own { // a whiteout
		_, err = tx.ExecContext(ctx, `UPDATE fs_dentry SET ino=? WHERE session_id=? AND parent_ino=? AND name=?`, ino, fs.sid, parent, name)
	} else {
		_, err = tx.ExecContext(ctx, `INSERT INTO fs_dentry(session_id, name, parent_ino, ino) VALUES(?,?,?,?)`, fs.sid, name, parent, ino)
	}
	if err != nil {
		return fmt.Errorf("insert dentry %q: %w", name, err)
	}
	return nil
}

// dropDentry removes name (parent, name) of inode ino: an own row goes, or
// becomes a whiteout when a level below names something there; a name of
// the base gets a whiteout.
func (fs *FS) dropDentry(ctx context.Context, tx *txn, lv []mlevel, parent int64, name string, ino int64) error {
	for _, i := range []int64{parent, ino} {
		if err := fs.ownIno(ctx, tx, i); err != nil {
			return err
		}
	}
	own, err := fs.ownRowAt(ctx, tx, parent, name)
	if err != nil {
		return err
	}
	below, err := entryIno(ctx, tx, lv[1:], parent, name)
	if err != nil {
		return err
	}
	switch {
	case own && below == 0:
		_, err = tx.ExecContext(ctx, `DELETE FROM fs_dentry WHERE session_id=? AND parent_ino=? AND name=?`, fs.sid, parent, name)
	case own:
		_, err = tx.ExecContext(ctx, `UPDATE fs_dentry SET ino=0 WHERE session_id=? AND parent_ino=? AND name=?`, fs.sid, parent, name)
	default:
		if _, err = tx.ExecContext(ctx, `INSERT INTO fs_dentry(session_id, name, parent_ino, ino) VALUES(?,?,?,0)`, fs.sid, name, parent); err == nil {
			_, err = tx.ExecContext(ctx, `UPDATE fs_inode SET nlink=nlink-1 WHERE session_id=? AND ino=?`, fs.sid, ino)
		}
		if err == nil {
			err = fs.unlinkSubdir(ctx, tx, parent, ino)
		}
	}
	if err != nil {
		return fmt.Errorf("delete dentry %q: %w", name, err)
	}
	return nil
}

// setDentryIno makes (parent, name), which names old, name ino instead.
func (fs *FS) setDentryIno(ctx context.Context, tx *txn, parent int64, name string, old, ino int64) error {
	for _, i := range []int64{parent, old, ino} {
		if err := fs.ownIno(ctx, tx, i); err != nil {
			return err
		}
	}
	own, err := fs.ownRowAt(ctx, tx, parent, name)
	if err != nil {
		return err
	}
	if own {
		_, err = tx.ExecContext(ctx, `UPDATE fs_dentry SET ino=? WHERE session_id=? AND parent_ino=? AND name=?`, ino, fs.sid, parent, name)
	} else if _, err = tx.ExecContext(ctx, `INSERT INTO fs_dentry(session_id, name, parent_ino, ino) VALUES(?,?,?,?)`, fs.sid, name, parent, ino); err == nil {
		if _, err = tx.ExecContext(ctx, `UPDATE fs_inode SET nlink=nlink-1 WHERE session_id=? AND ino=?`, fs.sid, old); err == nil {
			err = fs.unlinkSubdir(ctx, tx, parent, old)
		}
	}
	if err != nil {
		return fmt.Errorf("exchange: %w", err)
	}
	return nil
}

// unlinkSubdir takes the ".." of ino off directory parent's link count
// when ino is a directory whose name there the fork covered with one of
// its own (which the triggers do not see go).
func (fs *FS) unlinkSubdir(ctx context.Context, tx *txn, parent, ino int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE fs_inode SET nlink=nlink-1 WHERE session_id=?1 AND ino=?2
		AND EXISTS (SELECT 1 FROM fs_inode c WHERE c.session_id=?1 AND c.ino=?3 AND c.mode & 61440 = 16384)`, fs.sid, parent, ino)
	return err
}

// inheritedIno reports whether a level below fs's own names a row of inode
// ino (so removing it needs a tombstone).
func inheritedIno(ctx context.Context, q querier, lv []mlevel, ino int64) (bool, error) {
	if len(lv) < 2 {
		return false, nil
	}
	b := &sqlb{args: []any{ino}}
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM (`+rowUnion(b, lv[1:], "fs_inode", "i.ino", "$.ino=?1")+`) AS u`, b.args...).Scan(&n)
	return n > 0, err
}

// layeredTree reads every name and inode a layered workspace has through
// lv: what whole-tree reads (diff, merge, export, Check) need. Inodes are
// those some name reaches, and the root.
type layeredTree struct {
	names    map[dkey]int64 // (parent, name) -> ino, without whiteouts
	inodes   map[int64]Attr // without tombstones
	gens     map[int64]lgen
	symlinks map[int64]string
	dangling int // names of inodes no level has (Check)
}

type dkey struct {
	parent int64
	name   string
}

type lgen struct {
	gen int64
	sha string
}

func loadLayered(ctx context.Context, q querier, lv []mlevel) (layeredTree, error) {
	t := layeredTree{names: map[dkey]int64{}, inodes: map[int64]Attr{}, gens: map[int64]lgen{}, symlinks: map[int64]string{}}
	seen := map[dkey]bool{}
	for _, l := range lv {
		b := &sqlb{}
		rows, err := q.QueryContext(ctx, dentrySel(b, l, "t", "t.parent_ino, t.name, t.ino", "1=1"), b.args...)
		if err != nil {
			return t, fmt.Errorf("read names of %s: %w", l.ws, err)
		}
		for rows.Next() {
			var k dkey
			var ino int64
			if err := rows.Scan(&k.parent, &k.name, &ino); err != nil {
				rows.Close()
				return t, err
			}
			if seen[k] {
				continue
			}
			seen[k] = true
			if ino != 0 {
				t.names[k] = ino
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return t, err
		}
	}
	want := map[int64]bool{RootIno: true}
	for _, ino := range t.names {
		want[ino] = true
	}
	got := map[int64]bool{}
	for _, l := range lv {
		b := &sqlb{}
		rows, err := q.QueryContext(ctx, rowSel(b, l, "fs_inode", "i", inodeColsBare+", data_gen, COALESCE(sha256, '')", "1=1"), b.args...)
		if err != nil {
			return t, fmt.Errorf("read inodes of %s: %w", l.ws, err)
		}
		for rows.Next() {
			var g lgen
			a, err := scanAttr(scanFunc(func(dest ...any) error { return rows.Scan(append(dest, &g.gen, &g.sha)...) }))
			if err != nil {
				rows.Close()
				return t, err
			}
			if got[a.Ino] || !want[a.Ino] {
				continue
			}
			got[a.Ino] = true
			if a.Mode != 0 {
				t.inodes[a.Ino], t.gens[a.Ino] = a, g
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return t, err
		}
	}
	gotL := map[int64]bool{}
	for _, l := range lv {
		b := &sqlb{}
		rows, err := q.QueryContext(ctx, rowSel(b, l, "fs_symlink", "i", "i.ino, i.target", "1=1"), b.args...)
		if err != nil {
			return t, fmt.Errorf("read symlinks of %s: %w", l.ws, err)
		}
		for rows.Next() {
			var ino int64
			var target string
			if err := rows.Scan(&ino, &target); err != nil {
				rows.Close()
				return t, err
			}
			if gotL[ino] {
				continue
			}
			gotL[ino] = true
			if _, ok := t.inodes[ino]; ok {
				t.symlinks[ino] = target
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return t, err
		}
	}
	// names of gone inodes (a level below a tombstone) do not count
	for k, ino := range t.names {
		if _, ok := t.inodes[ino]; !ok {
			if !got[ino] {
				t.dangling++
			}
			delete(t.names, k)
		}
	}
	return t, nil
}

// inodeCols are the columns of fs_inode a copy carries (all but
// session_id); the save-before-change triggers (migrations 0013, 0030)
// list the same.
const inodeCols = `ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns, created_ns, is_readonly, sha256, data_gen, nlink, rdev`
