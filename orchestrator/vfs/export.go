package vfs

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
)

// agentfsSchema is the exact schema of agentfs-spec.md (version 0.0).
const agentfsSchema = `
CREATE TABLE tool_calls (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  parameters TEXT,
  result TEXT,
  error TEXT,
  started_at INTEGER NOT NULL,
  completed_at INTEGER NOT NULL,
  duration_ms INTEGER NOT NULL
);
CREATE INDEX idx_tool_calls_name ON tool_calls(name);
CREATE INDEX idx_tool_calls_started_at ON tool_calls(started_at);
CREATE TABLE fs_inode (
  ino INTEGER PRIMARY KEY AUTOINCREMENT,
  mode INTEGER NOT NULL,
  uid INTEGER NOT NULL DEFAULT 0,
  gid INTEGER NOT NULL DEFAULT 0,
  size INTEGER NOT NULL DEFAULT 0,
  atime INTEGER NOT NULL,
  mtime INTEGER NOT NULL,
  ctime INTEGER NOT NULL
);
CREATE TABLE fs_dentry (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  parent_ino INTEGER NOT NULL,
  ino INTEGER NOT NULL,
  UNIQUE(parent_ino, name)
);
CREATE INDEX idx_fs_dentry_parent ON fs_dentry(parent_ino, name);
CREATE TABLE fs_data (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  ino INTEGER NOT NULL,
  "offset" INTEGER NOT NULL,
  size INTEGER NOT NULL,
  data BLOB NOT NULL
);
CREATE INDEX idx_fs_data_ino_offset ON fs_data(ino, "offset");
CREATE TABLE fs_symlink (
  ino INTEGER PRIMARY KEY,
  target TEXT NOT NULL
);
CREATE TABLE kv_store (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  created_at INTEGER DEFAULT (unixepoch()),
  updated_at INTEGER DEFAULT (unixepoch())
);
CREATE INDEX idx_kv_store_created_at ON kv_store(created_at);
`

// readonlySchema is this package's extensions of an exported file, in
// tables of their own as agentfs-spec.md asks of extensions: the inodes
// whose content may not change (session-vfs.md is_readonly), and the
// device numbers of devices (st_rdev; agentfs has the types of special
// files in fs_inode.mode, which it takes from st_mode, but no device
// numbers). Readers that know only agentfs ignore them.
const readonlySchema = `
CREATE TABLE fs_readonly (
  ino INTEGER PRIMARY KEY
);
CREATE TABLE fs_rdev (
  ino INTEGER PRIMARY KEY,
  rdev INTEGER NOT NULL
);
`

// copyRows runs query on src and inserts each row into dst with insert,
// whose first parameters are prefix, then the n columns of the row.
func copyRows(ctx context.Context, src querier, dst *sql.Tx, query string, args []any, insert string, prefix []any, n int) error {
	rows, err := src.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	stmt, err := dst.PrepareContext(ctx, insert)
	if err != nil {
		return err
	}
	defer stmt.Close()
	vals := make([]any, len(prefix)+n)
	copy(vals, prefix)
	ptrs := make([]any, n)
	for i := range ptrs {
		ptrs[i] = &vals[len(prefix)+i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if _, err := stmt.ExecContext(ctx, vals...); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Export writes the session's filesystem, key-value store and tool calls to a
// new agentfs-format SQLite file at dst (which must not exist). Orphan inodes
// (open but unlinked) are left out.
func (v *VFS) Export(ctx context.Context, sessionID, dst string) error {
	fs := v.Session(sessionID)
	if _, err := fs.init(ctx); err != nil {
		return err
	}
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("export: %s already exists", dst)
	}
	out, err := sql.Open("sqlite3", dst+"?_journal_mode=DELETE")
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer out.Close()
	out.SetMaxOpenConns(1)
	if _, err := out.ExecContext(ctx, agentfsSchema+readonlySchema); err != nil {
		return fmt.Errorf("export: create schema: %w", err)
	}
	tx, err := out.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	// the source reads run in one read transaction for a consistent snapshot
	src, err := v.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer src.Rollback() //nolint:errcheck // read-only
	sid := []any{sessionID}
	steps := []struct {
		what, query, insert string
		n                   int
	}{
		{"inodes", `SELECT ino, mode, uid, gid, size, atime, mtime, ctime FROM fs_inode WHERE session_id=? AND ino NOT IN (SELECT ino FROM fs_orphan WHERE session_id=fs_inode.session_id) ORDER BY ino`,
			`INSERT INTO fs_inode(ino, mode, uid, gid, size, atime, mtime, ctime) VALUES(?,?,?,?,?,?,?,?)`, 8},
		{"dentries", `SELECT name, parent_ino, ino FROM fs_dentry WHERE session_id=? ORDER BY id`,
			`INSERT INTO fs_dentry(name, parent_ino, ino) VALUES(?,?,?)`, 3},
		{"data", `SELECT ino, "offset", size, data FROM fs_data WHERE session_id=? AND ino NOT IN (SELECT ino FROM fs_orphan WHERE session_id=fs_data.session_id) ORDER BY ino, "offset"`,
			`INSERT INTO fs_data(ino, "offset", size, data) VALUES(?,?,?,?)`, 4},
		{"symlinks", `SELECT ino, target FROM fs_symlink WHERE session_id=? AND ino NOT IN (SELECT ino FROM fs_orphan WHERE session_id=fs_symlink.session_id)`,
			`INSERT INTO fs_symlink(ino, target) VALUES(?,?)`, 2},
		{"readonly flags", `SELECT ino FROM fs_inode WHERE session_id=? AND is_readonly != 0 AND ino NOT IN (SELECT ino FROM fs_orphan WHERE session_id=fs_inode.session_id) ORDER BY ino`,
			`INSERT INTO fs_readonly(ino) VALUES(?)`, 1},
		{"device numbers", `SELECT ino, rdev FROM fs_inode WHERE session_id=? AND rdev != 0 AND ino NOT IN (SELECT ino FROM fs_orphan WHERE session_id=fs_inode.session_id) ORDER BY ino`,
			`INSERT INTO fs_rdev(ino, rdev) VALUES(?,?)`, 2},
		{"kv", `SELECT key, value, created_at, updated_at FROM kv_store WHERE session_id=? ORDER BY key`,
			`INSERT INTO kv_store(key, value, created_at, updated_at) VALUES(?,?,?,?)`, 4},
		{"tool calls", `SELECT name, parameters, result, error, started_at, completed_at, duration_ms FROM tool_calls WHERE session_id=? ORDER BY id`,
			`INSERT INTO tool_calls(name, parameters, result, error, started_at, completed_at, duration_ms) VALUES(?,?,?,?,?,?,?)`, 7},
	}
	fork, err := fs.isFork(ctx, src)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	lv, layered, err := fs.levels(ctx, src)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	var files []regularFile
	if layered {
		// a layered fork's files are read through its levels
		if files, err = exportLayered(ctx, src, tx, lv); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	for _, s := range steps {
		if layered && s.what != "data" && s.what != "kv" && s.what != "tool calls" {
			continue
		}
		if fork && s.what == "data" {
			// a fork's chunks are read through its chain (forkdata.go)
			if err := fs.exportForkData(ctx, src, tx, files); err != nil {
				return fmt.Errorf("export %s: %w", s.what, err)
			}
			continue
		}
		if err := copyRows(ctx, src, tx, s.query, sid, s.insert, nil, s.n); err != nil {
			return fmt.Errorf("export %s: %w", s.what, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("export: commit: %w", err)
	}
	return nil
}

// Import loads an agentfs-format SQLite file into sessionID, whose filesystem
// must be empty. File data is re-chunked to the session's chunk size; the
// limits apply. On any error nothing is imported.
func (v *VFS) Import(ctx context.Context, sessionID, src string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	in, err := sql.Open("sqlite3", "file:"+src+"?mode=ro")
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer in.Close()
	fs := v.Session(sessionID)
	cs, err := fs.init(ctx)
	if err != nil {
		return err
	}
	var nroot int
	if err := in.QueryRowContext(ctx, `SELECT COUNT(*) FROM fs_inode WHERE ino=1 AND mode & 61440 = 16384`).Scan(&nroot); err != nil {
		return fmt.Errorf("import: %s is not an agentfs database: %w", src, err)
	}
	if nroot != 1 {
		return fmt.Errorf("import: %s has no root directory (inode 1)", src)
	}
	err = v.tx(ctx, func(tx *txn) error {
		fs.forgetDirPaths(tx) // imported inode numbers may be ones used before
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM fs_inode WHERE session_id=? AND ino != 1`, sessionID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return errorf(syscall.EEXIST, "", "session %s already has files", sessionID)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM fs_inode WHERE session_id=?`, sessionID); err != nil {
			return err
		}
		rows, err := in.QueryContext(ctx, `SELECT ino, mode, uid, gid, size, atime, mtime, ctime FROM fs_inode ORDER BY ino`)
		if err != nil {
			return fmt.Errorf("read inodes: %w", err)
		}
		type file struct {
			ino, size int64
		}
		var files []file
		var maxIno, used int64
		for rows.Next() {
			var ino, uid, gid, size, at, mt, ct int64
			var mode uint32
			if err := rows.Scan(&ino, &mode, &uid, &gid, &size, &at, &mt, &ct); err != nil {
				rows.Close()
				return fmt.Errorf("read inodes: %w", err)
			}
			switch mode & ModeType {
			case ModeRegular:
				if err := fs.checkFileSize(size, ""); err != nil {
					rows.Close()
					return fmt.Errorf("inode %d: %w", ino, err)
				}
				files = append(files, file{ino, size})
				used += size
			case ModeDir, ModeSymlink:
			case ModeFIFO, ModeSocket, ModeCharDev, ModeBlkDev:
				size = 0 // a special file has no content
			default:
				rows.Close()
				return fmt.Errorf("import: inode %d has unsupported mode %o", ino, mode)
			}
			maxIno = max(maxIno, ino)
			if _, err := tx.ExecContext(ctx, `INSERT INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, created_ns) VALUES(?,?,?,?,?,?,?,?,?,?)`,
				sessionID, ino, mode, uid, gid, size, at, mt, ct, ct*1e9); err != nil {
				rows.Close()
				return fmt.Errorf("insert inode %d: %w", ino, err)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if used > v.cfg.SessionQuota {
			return errorf(syscall.ENOSPC, "", "session quota of %s exceeded", humanBytes(v.cfg.SessionQuota))
		}
		if err := copyRows(ctx, in, tx.tx, `SELECT name, parent_ino, ino FROM fs_dentry ORDER BY id`, nil,
			`INSERT INTO fs_dentry(session_id, name, parent_ino, ino) VALUES(?,?,?,?)`, []any{sessionID}, 3); err != nil {
			return fmt.Errorf("import dentries: %w", err)
		}
		if err := copyRows(ctx, in, tx.tx, `SELECT ino, target FROM fs_symlink`, nil,
			`INSERT INTO fs_symlink(session_id, ino, target) VALUES(?,?,?)`, []any{sessionID}, 2); err != nil {
			return fmt.Errorf("import symlinks: %w", err)
		}
		if err := importReadonly(ctx, in, tx, sessionID); err != nil {
			return err
		}
		if err := importRdev(ctx, in, tx, sessionID); err != nil {
			return err
		}
		if err := copyRows(ctx, in, tx.tx, `SELECT key, value, COALESCE(created_at, unixepoch()), COALESCE(updated_at, unixepoch()) FROM kv_store`, nil,
			`INSERT INTO kv_store(session_id, key, value, created_at, updated_at) VALUES(?,?,?,?,?)`, []any{sessionID}, 4); err != nil {
			return fmt.Errorf("import kv: %w", err)
		}
		if err := copyRows(ctx, in, tx.tx, `SELECT name, parameters, result, error, started_at, completed_at, duration_ms FROM tool_calls ORDER BY id`, nil,
			`INSERT INTO tool_calls(session_id, name, parameters, result, error, started_at, completed_at, duration_ms) VALUES(?,?,?,?,?,?,?,?)`, []any{sessionID}, 7); err != nil {
			return fmt.Errorf("import tool calls: %w", err)
		}
		// re-chunk every file's data in order
		for _, f := range files {
			if err := fs.importData(ctx, in, tx, f.ino, f.size, cs); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE fs_meta SET next_ino=CASE WHEN next_ino > ?1 THEN next_ino ELSE ?1 END, used_bytes=?2 WHERE session_id=?3`, maxIno+1, used, sessionID); err != nil {
			return err
		}
		return nil
	})
	v.dropReserved(sessionID)
	if err != nil {
		return fmt.Errorf("import %s: %w", src, err)
	}
	if err := v.Check(ctx, sessionID); err != nil {
		return fmt.Errorf("import %s: the result is inconsistent: %w", src, err)
	}
	return nil
}

// importReadonly sets the readonly flag of the inodes an exported file
// lists in fs_readonly (a plain agentfs file has no such table).
func importReadonly(ctx context.Context, in *sql.DB, tx *txn, sessionID string) error {
	var n int
	if err := in.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='fs_readonly'`).Scan(&n); err != nil {
		return fmt.Errorf("import readonly flags: %w", err)
	}
	if n == 0 {
		return nil
	}
	rows, err := in.QueryContext(ctx, `SELECT ino FROM fs_readonly ORDER BY ino`)
	if err != nil {
		return fmt.Errorf("import readonly flags: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ino int64
		if err := rows.Scan(&ino); err != nil {
			return fmt.Errorf("import readonly flags: %w", err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE fs_inode SET is_readonly=1 WHERE session_id=? AND ino=?`, sessionID, ino)
		if err != nil {
			return fmt.Errorf("import readonly flags: %w", err)
		}
		if k, _ := res.RowsAffected(); k != 1 {
			return fmt.Errorf("import readonly flags: inode %d is not in the file", ino)
		}
	}
	return rows.Err()
}

// importRdev sets the device numbers an exported file lists in fs_rdev
// (a plain agentfs file has no such table) of the devices in it.
func importRdev(ctx context.Context, in *sql.DB, tx *txn, sessionID string) error {
	var n int
	if err := in.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='fs_rdev'`).Scan(&n); err != nil {
		return fmt.Errorf("import device numbers: %w", err)
	}
	if n == 0 {
		return nil
	}
	rows, err := in.QueryContext(ctx, `SELECT ino, rdev FROM fs_rdev ORDER BY ino`)
	if err != nil {
		return fmt.Errorf("import device numbers: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ino, rdev int64
		if err := rows.Scan(&ino, &rdev); err != nil {
			return fmt.Errorf("import device numbers: %w", err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE fs_inode SET rdev=? WHERE session_id=? AND ino=? AND mode & 61440 IN (8192, 24576)`, uint32(rdev), sessionID, ino)
		if err != nil {
			return fmt.Errorf("import device numbers: %w", err)
		}
		if k, _ := res.RowsAffected(); k != 1 {
			return fmt.Errorf("import device numbers: inode %d is not a device in the file", ino)
		}
	}
	return rows.Err()
}

func (fs *FS) importData(ctx context.Context, in *sql.DB, tx *txn, ino, size int64, cs int) error {
	rows, err := in.QueryContext(ctx, `SELECT "offset", data FROM fs_data WHERE ino=? ORDER BY "offset"`, ino)
	if err != nil {
		return fmt.Errorf("read data of inode %d: %w", ino, err)
	}
	defer rows.Close()
	var written int64
	buf := make([]byte, 0, cs)
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO fs_data(session_id, ino, "offset", size, data) VALUES(?,?,?,?,?)`, fs.sid, ino, written, len(buf), buf); err != nil {
			return fmt.Errorf("write data of inode %d: %w", ino, err)
		}
		written += int64(len(buf))
		buf = buf[:0]
		return nil
	}
	var pos int64
	for rows.Next() {
		var off int64
		var data []byte
		if err := rows.Scan(&off, &data); err != nil {
			return err
		}
		if off != pos {
			return fmt.Errorf("data of inode %d: chunk at %d, expected %d (gaps and overlaps are not supported)", ino, off, pos)
		}
		pos += int64(len(data))
		for len(data) > 0 {
			n := min(cs-len(buf), len(data))
			buf = append(buf, data[:n]...)
			data = data[n:]
			if len(buf) == cs {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	if written != size {
		return fmt.Errorf("data of inode %d: %d bytes, but its size is %d", ino, written, size)
	}
	return nil
}

// exportLayered writes the inodes, names, symlinks and readonly flags of a
// layered workspace, read through its levels lv, into an exported agentfs
// file, and returns its regular files (for their data).
func exportLayered(ctx context.Context, src, dst *sql.Tx, lv []mlevel) ([]regularFile, error) {
	t, err := loadLayered(ctx, src, lv)
	if err != nil {
		return nil, err
	}
	inos := make([]int64, 0, len(t.inodes))
	for ino := range t.inodes {
		inos = append(inos, ino)
	}
	slices.Sort(inos)
	files := []regularFile{}
	for _, ino := range inos {
		a := t.inodes[ino]
		if _, err := dst.ExecContext(ctx, `INSERT INTO fs_inode(ino, mode, uid, gid, size, atime, mtime, ctime) VALUES(?,?,?,?,?,?,?,?)`,
			ino, a.Mode, a.UID, a.GID, a.Size, a.Atime.Unix(), a.Mtime.Unix(), a.Ctime.Unix()); err != nil {
			return nil, fmt.Errorf("inodes: %w", err)
		}
		if a.Readonly {
			if _, err := dst.ExecContext(ctx, `INSERT INTO fs_readonly(ino) VALUES(?)`, ino); err != nil {
				return nil, fmt.Errorf("readonly flags: %w", err)
			}
		}
		if t, ok := t.symlinks[ino]; ok {
			if _, err := dst.ExecContext(ctx, `INSERT INTO fs_symlink(ino, target) VALUES(?,?)`, ino, t); err != nil {
				return nil, fmt.Errorf("symlinks: %w", err)
			}
		}
		if a.IsRegular() {
			files = append(files, regularFile{ino: ino, size: a.Size})
		}
	}
	keys := make([]dkey, 0, len(t.names))
	for k := range t.names {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b dkey) int { return cmp.Or(cmp.Compare(a.parent, b.parent), strings.Compare(a.name, b.name)) })
	for _, k := range keys {
		if _, err := dst.ExecContext(ctx, `INSERT INTO fs_dentry(name, parent_ino, ino) VALUES(?,?,?)`, k.name, k.parent, t.names[k]); err != nil {
			return nil, fmt.Errorf("dentries: %w", err)
		}
	}
	return files, nil
}
