package vfs

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
)

// Migration 0035 makes the lazy forks of migration 0013 layered: a fork
// that had copied some directories whole (its root and /a), removed names
// there (/a/y, /top), changed a file (/a/x) and made one (/a/new), while
// its origin renamed a file in a directory the fork had not copied
// (/b/z), reads after the upgrade what it read before, and so do its
// fork point and its origin; it passes the check, its diff is what it
// changed, it keeps working and merges.
func TestMigrationLayersLazyForks(t *testing.T) {
	dir := t.TempDir()
	exec := func(w *sql.DB, q string, args ...any) {
		t.Helper()
		if _, err := w.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	w, r := openTestDBFrom(t, dir, 35, func(w *sql.DB) {
		exec(w, `INSERT INTO users(id, name, is_admin, created_at) VALUES('u1', 'alice', 0, 1)`)
		for _, id := range []string{"s-1", "ws-b", "ws-f"} {
			exec(w, `INSERT INTO agent_session(id, user_id, name, created_at, updated_at) VALUES(?, 'u1', ?, 1, 1)`, id, id)
		}
		exec(w, `INSERT INTO fs_meta(session_id, next_ino, used_bytes, chunk_size) VALUES('s-1', 8, 7, 65536), ('ws-b', 8, 7, 65536), ('ws-f', 9, 5, 65536)`)
		// the session: /a/x, /a/y, /b/z, /top
		inode := func(ws string, ino int64, mode uint32, data string) {
			exec(w, `INSERT INTO fs_inode(session_id, ino, mode, size, atime, mtime, ctime) VALUES(?, ?, ?, ?, 1, 1, 1)`, ws, ino, mode, len(data))
			if data != "" {
				exec(w, `INSERT INTO fs_data(session_id, ino, "offset", size, data) VALUES(?, ?, 0, ?, ?)`, ws, ino, len(data), []byte(data))
			}
		}
		name := func(ws string, parent int64, n string, ino int64) {
			exec(w, `INSERT INTO fs_dentry(session_id, parent_ino, name, ino) VALUES(?, ?, ?, ?)`, ws, parent, n, ino)
		}
		const dirMode, fileMode = ModeDir | 0o755, ModeRegular | 0o644
		inode("s-1", 1, dirMode, "")
		inode("s-1", 2, dirMode, "")
		inode("s-1", 3, fileMode, "x1")
		inode("s-1", 4, fileMode, "y1")
		inode("s-1", 5, dirMode, "")
		inode("s-1", 6, fileMode, "z1")
		inode("s-1", 7, fileMode, "t")
		name("s-1", 1, "a", 2)
		name("s-1", 2, "x", 3)
		name("s-1", 2, "y", 4)
		name("s-1", 1, "b", 5)
		name("s-1", 5, "z", 6)
		name("s-1", 1, "top", 7)
		// a lazy fork of it (0013): its base a view of the session
		exec(w, `INSERT INTO fs_fork(ws, session_id, kind, parent_ws, base_next_ino, origin_ws, base_ws, created_at, lazy, max_dentry)
			SELECT 'ws-b', 's-1', 'base', 's-1', 8, NULL, NULL, 1, 1, MAX(id) FROM fs_dentry`)
		exec(w, `INSERT INTO fs_fork(ws, session_id, kind, parent_ws, base_next_ino, origin_ws, base_ws, created_at, lazy, max_dentry)
			SELECT 'ws-f', 's-1', 'fork', 'ws-b', 8, 's-1', 'ws-b', 1, 1, MAX(id) FROM fs_dentry`)
		// the fork copied its root and /a, then removed /top and /a/y,
		// rewrote /a/x and made /a/new
		inode("ws-f", 1, dirMode, "")
		inode("ws-f", 2, dirMode, "")
		inode("ws-f", 5, dirMode, "")
		inode("ws-f", 3, fileMode, "x2")
		inode("ws-f", 8, fileMode, "n")
		exec(w, `UPDATE fs_inode SET data_gen=1 WHERE session_id='ws-f' AND ino=3`)
		name("ws-f", 1, "a", 2)
		name("ws-f", 1, "b", 5)
		name("ws-f", 2, "x", 3)
		name("ws-f", 2, "new", 8)
		exec(w, `INSERT INTO fs_fork_dir(ws, ino) VALUES('ws-f', 1), ('ws-f', 2)`)
		// then the session renamed /b/z (its base saved the name first)
		exec(w, `UPDATE fs_dentry SET name='z2' WHERE session_id='s-1' AND parent_ino=5 AND name='z'`)
		exec(w, `UPDATE fs_inode SET mtime=2 WHERE session_id='s-1' AND ino=5`)
	})
	v := New(w, Config{ReadDB: r, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(v.Close)
	ctx := context.Background()

	file := func(data string) *mnode { return &mnode{kind: 'f', file: &mfile{data: []byte(data)}, mode: 0o644} }
	dirN := func() *mnode { return &mnode{kind: 'd', mode: 0o755} }
	fork := mtree{"/a": dirN(), "/a/x": file("x2"), "/a/new": file("n"), "/b": dirN(), "/b/z": file("z1")}
	base := mtree{"/a": dirN(), "/a/x": file("x1"), "/a/y": file("y1"), "/b": dirN(), "/b/z": file("z1"), "/top": file("t")}
	sess := mtree{"/a": dirN(), "/a/x": file("x1"), "/a/y": file("y1"), "/b": dirN(), "/b/z2": file("z1"), "/top": file("t")}
	var layered int
	if err := w.QueryRow(`SELECT layered FROM fs_fork WHERE ws='ws-f'`).Scan(&layered); err != nil || layered != 1 {
		t.Fatalf("the fork after 0035: layered %d, %v", layered, err)
	}
	compareTree(t, v.Session("ws-f"), fork)
	compareTree(t, v.Session("ws-b"), base)
	compareTree(t, v.Session("s-1"), sess)
	checkAll(t, v, "s-1", "ws-b", "ws-f")
	f := &fixture{v: v, fs: v.Session("s-1"), sid: "s-1", db: w}
	if got, want := diffOps(t, f, "ws-f"), map[string]string{"/a/new": "added", "/a/x": "changed", "/a/y": "deleted", "/top": "deleted"}; !sameOps(got, want) {
		t.Fatalf("diff after 0035: %v, want %v", got, want)
	}

	// it keeps working: a change in a directory it had not copied, a merge
	c := v.Session("ws-f")
	mustWrite(t, c, "/b/w", []byte("w"))
	fork["/b/w"] = file("w")
	compareTree(t, c, fork)
	m, err := v.Merge(ctx, "ws-f", MergeOptions{})
	if err != nil || len(m.Conflicts) != 0 {
		t.Fatalf("merge: %+v, %v", m, err)
	}
	sess = mtree{"/a": dirN(), "/a/x": file("x2"), "/a/new": file("n"), "/b": dirN(), "/b/z2": file("z1"), "/b/w": file("w")}
	compareTree(t, v.Session("s-1"), sess)
	checkAll(t, v, "s-1", "ws-b", "ws-f")
}

func sameOps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
