package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

func TestMigrationUpgradeInPlace(t *testing.T) {
	ctx := context.Background()
	all, err := store.EmbeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 || all[0].Name != "0001_core" {
		t.Fatalf("embedded migrations %v", all)
	}
	path := filepath.Join(t.TempDir(), "old.db")

	// An older binary: only 0001, with data in it, written as that binary
	// wrote it (today's code reads columns 0001 does not have). The root
	// ran an agent (it has a log cursor); the child never did.
	old, err := store.Open(ctx, store.Config{Path: path, Migrations: all[:1]})
	if err != nil {
		t.Fatal(err)
	}
	type ids struct{ user, session, root, child string }
	d := ids{"u-1", "s-1", "n-root", "n-child"}
	for _, q := range []string{
		`INSERT INTO users (id, name, is_admin, created_at) VALUES ('u-1', 'alice', 1, 1)`,
		`INSERT INTO agent_session (id, user_id, name, status, root_node_id, created_at, updated_at) VALUES ('s-1', 'u-1', 'kept', 'stopped', 'n-root', 1, 2)`,
		`INSERT INTO agent_node (id, session_id, name, agent_type, model, log_cursor, created_at, updated_at) VALUES ('n-root', 's-1', 'root', 'shelley', 'm', 'o=0:0,e=0:0,i=2', 1, 1234)`,
		`INSERT INTO agent_node (id, session_id, parent_id, name, agent_type, model, created_at, updated_at) VALUES ('n-child', 's-1', 'n-root', 'child', 'shelley', 'm', 1, 5)`,
		`INSERT INTO session_log (session_id, seq, node_id, kind, payload, created_at) VALUES ('s-1', 1, 'n-root', 'node', '{"op":"created"}', 1)`,
		`INSERT INTO session_log (session_id, seq, node_id, kind, payload, created_at) VALUES ('s-1', 2, 'n-root', 'input', '{"type":"message","from":"user","content":"hello"}', 1)`,
	} {
		if _, err := old.SQL().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	u := identity.User{ID: d.user}
	s := protocol.Session{ID: d.session}
	root := sessions.Node{Node: protocol.Node{ID: d.root}}

	// The new binary: every embedded migration plus one more that changes a
	// table holding data.
	extra := store.Migration{Version: all[len(all)-1].Version + 1, Name: "9999_test_extra",
		SQL: `ALTER TABLE agent_session ADD COLUMN note TEXT NOT NULL DEFAULT 'x';
		      CREATE TABLE extra (id INTEGER PRIMARY KEY);`}
	full := append(append([]store.Migration(nil), all...), extra)
	st, err := store.Open(ctx, store.Config{Path: path, Migrations: full})
	if err != nil {
		t.Fatal(err)
	}
	ss := sessions.New(st, sessions.Config{})
	var versions []int
	rows, err := st.SQL().Query(`SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v int
		_ = rows.Scan(&v)
		versions = append(versions, v)
	}
	rows.Close()
	if len(versions) != len(full) || versions[0] != 1 || versions[len(versions)-1] != extra.Version {
		t.Fatalf("applied versions %v", versions)
	}
	var note string
	if err := st.SQL().QueryRow(`SELECT note FROM agent_session WHERE id = ?`, s.ID).Scan(&note); err != nil || note != "x" {
		t.Fatalf("upgraded column: %q, %v", note, err)
	}
	got, err := ss.GetSession(ctx, u.ID, s.ID)
	if err != nil || got.Name != "kept" || got.RootNodeID == nil || *got.RootNodeID != root.ID {
		t.Fatalf("session after upgrade %+v, %v", got, err)
	}
	recs, err := st.Records(ctx, s.ID, 0, 0, "")
	if err != nil || len(recs) != 2 {
		t.Fatalf("records after upgrade %+v, %v", recs, err)
	}
	// 0005: a node that ran before (it has a log cursor) counts as started.
	if n, err := ss.NodeByID(ctx, d.root); err != nil || n.StartedAt == nil || n.StartedAt.UnixMilli() != 1234 {
		t.Fatalf("root after upgrade: started %v, %v", n.StartedAt, err)
	}
	if n, err := ss.NodeByID(ctx, d.child); err != nil || n.StartedAt != nil {
		t.Fatalf("child after upgrade: started %v, %v", n.StartedAt, err)
	}
	// The seq continues after the upgrade.
	next, err := st.Append(ctx, s.ID, protocol.Record{Kind: protocol.KindEvent, Data: json.RawMessage(`{"type":"text","content":"x"}`)})
	if err != nil || next[0].Seq != 3 {
		t.Fatalf("append after upgrade %+v, %v", next, err)
	}
	// 0007: the rebuilt log takes system records and keeps its node index.
	if _, err := st.Append(ctx, s.ID, protocol.Record{NodeID: d.root, Kind: protocol.KindSystem, Data: json.RawMessage(`{"type":"check","text":"ok"}`)}); err != nil {
		t.Fatalf("system record after upgrade: %v", err)
	}
	// 0009: sessions have no checks, nodes are generation 1, records
	// keep their refs.
	if got, err := ss.GetSession(ctx, u.ID, s.ID); err != nil || got.Checks == nil || len(got.Checks) != 0 {
		t.Fatalf("checks after upgrade: %v, %v", got.Checks, err)
	}
	if n, err := ss.NodeByID(ctx, d.child); err != nil || n.Generation != 1 {
		t.Fatalf("child after upgrade: generation %d, %v", n.Generation, err)
	}
	if recs, err := st.Append(ctx, s.ID, protocol.Record{NodeID: d.root, Kind: protocol.KindEvent, Ref: 3,
		Data: json.RawMessage(`{"type":"commit","hash":"abc","message":"m"}`)}); err != nil || recs[0].Ref != 3 {
		t.Fatalf("record with a ref after upgrade: %+v, %v", recs, err)
	}
	var idx int
	if err := st.SQL().QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'session_log_node_idx'`).Scan(&idx); err != nil || idx != 1 {
		t.Fatalf("session_log_node_idx after upgrade: %d, %v", idx, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// The older binary refuses the newer database, untouched.
	_, err = store.Open(ctx, store.Config{Path: path, Migrations: all})
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("older binary on newer database: %v", err)
	}
	// Reopening with the same list is a no-op.
	st, err = store.Open(ctx, store.Config{Path: path, Migrations: full})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
}

func TestMigrationFailureRollsBack(t *testing.T) {
	ctx := context.Background()
	all, _ := store.EmbeddedMigrations()
	path := filepath.Join(t.TempDir(), "f.db")
	bad := store.Migration{Version: 9000, Name: "9000_bad", SQL: `CREATE TABLE half (id INTEGER); SELECT * FROM no_such_table;`}
	_, err := store.Open(ctx, store.Config{Path: path, Migrations: append(append([]store.Migration(nil), all...), bad)})
	if err == nil || !strings.Contains(err.Error(), "9000_bad") {
		t.Fatalf("bad migration: %v", err)
	}
	st, err := store.Open(ctx, store.Config{Path: path, Migrations: all})
	if err != nil {
		t.Fatalf("reopen without the bad migration: %v", err)
	}
	defer st.Close()
	var n int
	if err := st.SQL().QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = 'half'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("failed migration left table half: %d, %v", n, err)
	}
	if err := st.SQL().QueryRow(`SELECT COUNT(*) FROM schema_migrations WHERE version = 9000`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("failed migration recorded: %d, %v", n, err)
	}
}

func TestOpenPragmas(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(t.TempDir(), "p.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, tt := range []struct{ pragma, want string }{
		{"journal_mode", "wal"}, {"foreign_keys", "1"}, {"synchronous", "1"}, {"busy_timeout", "5000"},
	} {
		var got string
		if err := st.SQL().QueryRow("PRAGMA " + tt.pragma).Scan(&got); err != nil || got != tt.want {
			t.Errorf("PRAGMA %s = %q, %v; want %q", tt.pragma, got, err, tt.want)
		}
	}
	for _, tt := range []struct {
		name string
		cfg  store.Config
	}{
		{"empty path", store.Config{}},
		{"query in path", store.Config{Path: filepath.Join(t.TempDir(), "a?b")}},
		{"bad synchronous", store.Config{Path: filepath.Join(t.TempDir(), "x.db"), Synchronous: "OFF"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if s, err := store.Open(ctx, tt.cfg); err == nil {
				s.Close()
				t.Fatal("opened")
			}
		})
	}
}

// 0010 backfills fs_inode.nlink from the names an older binary wrote, and
// its triggers keep it as names are added, renamed over and removed.
func TestMigrationNlinkBackfill(t *testing.T) {
	ctx := context.Background()
	st := upgradeFrom(t, 10, []string{
		`INSERT INTO users (id, name, is_admin, created_at) VALUES ('u-1', 'alice', 1, 1)`,
		`INSERT INTO agent_session (id, user_id, name, status, created_at, updated_at) VALUES ('s-1', 'u-1', 'kept', 'stopped', 1, 2)`,
		`INSERT INTO fs_meta (session_id, next_ino, used_bytes, chunk_size) VALUES ('s-1', 5, 0, 65536)`,
		`INSERT INTO fs_inode (session_id, ino, mode, atime, mtime, ctime) VALUES ('s-1', 1, 16877, 1, 1, 1), ('s-1', 2, 33188, 1, 1, 1), ('s-1', 3, 16877, 1, 1, 1), ('s-1', 4, 33188, 1, 1, 1)`,
		`INSERT INTO fs_dentry (session_id, name, parent_ino, ino) VALUES ('s-1', 'a', 1, 2), ('s-1', 'd', 1, 3), ('s-1', 'b', 3, 2)`,
		`INSERT INTO fs_orphan (session_id, ino) VALUES ('s-1', 4)`,
	})
	defer st.Close()
	nlinks := func() map[int64]int {
		rows, err := st.SQL().QueryContext(ctx, `SELECT ino, nlink FROM fs_inode WHERE session_id='s-1' ORDER BY ino`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[int64]int{}
		for rows.Next() {
			var ino int64
			var n int
			rows.Scan(&ino, &n)
			out[ino] = n
		}
		return out
	}
	// (0030 adds the root's subdirectory d to its count)
	if got := nlinks(); got[1] != 1 || got[2] != 2 || got[3] != 1 || got[4] != 0 {
		t.Fatalf("backfilled nlink %v, want root 1, file 2, dir 1, orphan 0", got)
	}
	for _, q := range []string{
		`INSERT INTO fs_dentry (session_id, name, parent_ino, ino) VALUES ('s-1', 'c', 3, 4)`, // 4 linked again
		`UPDATE fs_dentry SET ino=4 WHERE session_id='s-1' AND name='a'`,                      // a now names 4
		`DELETE FROM fs_dentry WHERE session_id='s-1' AND name='b'`,                           // 2 loses its last name
	} {
		if _, err := st.SQL().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if got := nlinks(); got[2] != 0 || got[4] != 2 || got[3] != 1 {
		t.Fatalf("nlink after changes %v, want 2:0 3:1 4:2", got)
	}
}

// 0030 counts a directory's subdirectories in its fs_inode.nlink, in
// every workspace as it reads its names: a session's own, a lazy fork
// point's view (names saved at the fork, the origin's up to max_dentry) and
// a lazy fork's directories not copied yet (the view's); its triggers keep
// the counts as directories are made, moved and removed, and it adds rdev.
func TestMigrationDirLinks(t *testing.T) {
	ctx := context.Background()
	st := upgradeFrom(t, 30, []string{
		`INSERT INTO users (id, name, is_admin, created_at) VALUES ('u-1', 'alice', 1, 1)`,
		`INSERT INTO agent_session (id, user_id, name, status, created_at, updated_at) VALUES ('s-1', 'u-1', 'kept', 'stopped', 1, 2), ('ws-b', 'u-1', 'base', 'draft', 1, 2), ('ws-f', 'u-1', 'fork', 'draft', 1, 2)`,
		`INSERT INTO fs_meta (session_id, next_ino, used_bytes, chunk_size) VALUES ('s-1', 6, 0, 65536), ('ws-b', 5, 0, 65536), ('ws-f', 5, 0, 65536)`,
		// the session at the fork: /a, /a/b, /a/f
		`INSERT INTO fs_inode (session_id, ino, mode, atime, mtime, ctime) VALUES ('s-1', 1, 16877, 1, 1, 1), ('s-1', 2, 16877, 1, 1, 1), ('s-1', 3, 16877, 1, 1, 1), ('s-1', 4, 33188, 1, 1, 1)`,
		`INSERT INTO fs_dentry (id, session_id, name, parent_ino, ino) VALUES (1, 's-1', 'a', 1, 2), (2, 's-1', 'b', 2, 3), (3, 's-1', 'f', 2, 4)`,
		// a lazy fork of it (0013): its base a view, the fork has its root and /a
		`INSERT INTO fs_fork (ws, session_id, kind, parent_ws, base_next_ino, created_at, lazy, max_dentry) VALUES ('ws-b', 's-1', 'base', 's-1', 5, 1, 1, 3)`,
		`INSERT INTO fs_fork (ws, session_id, kind, parent_ws, base_next_ino, origin_ws, base_ws, created_at, lazy, max_dentry) VALUES ('ws-f', 's-1', 'fork', 'ws-b', 5, 's-1', 'ws-b', 1, 1, 3)`,
		`INSERT INTO fs_inode (session_id, ino, mode, atime, mtime, ctime) VALUES ('ws-f', 1, 16877, 1, 1, 1), ('ws-f', 2, 16877, 1, 1, 1)`,
		`INSERT INTO fs_dentry (id, session_id, name, parent_ino, ino) VALUES (4, 'ws-f', 'a', 1, 2)`,
		`INSERT INTO fs_fork_dir (ws, ino) VALUES ('ws-f', 1)`,
		// after the fork the session made /a/c (its base saved /a first)
		`INSERT INTO fs_inode (session_id, ino, mode, atime, mtime, ctime) VALUES ('s-1', 5, 16877, 2, 2, 2)`,
		`INSERT INTO fs_dentry (id, session_id, name, parent_ino, ino) VALUES (5, 's-1', 'c', 2, 5)`,
		`UPDATE fs_inode SET mtime=2 WHERE session_id='s-1' AND ino=2`,
	})
	defer st.Close()
	nlink := func(ws string, ino int64) int {
		var n int
		if err := st.SQL().QueryRowContext(ctx, `SELECT nlink FROM fs_inode WHERE session_id=? AND ino=?`, ws, ino).Scan(&n); err != nil {
			t.Fatalf("nlink of %s:%d: %v", ws, ino, err)
		}
		return n
	}
	for _, tt := range []struct {
		ws   string
		ino  int64
		want int
	}{
		{"s-1", 1, 1}, {"s-1", 2, 3}, {"s-1", 3, 1}, {"s-1", 4, 1}, {"s-1", 5, 1}, // /a has b and c
		{"ws-b", 2, 2},                 // the view's /a (saved): b only
		{"ws-f", 1, 1}, {"ws-f", 2, 2}, // the fork's /a, not copied: the view's
	} {
		if got := nlink(tt.ws, tt.ino); got != tt.want {
			t.Errorf("nlink of %s:%d = %d, want %d", tt.ws, tt.ino, got, tt.want)
		}
	}
	for _, q := range []string{
		`INSERT INTO fs_inode (session_id, ino, mode, atime, mtime, ctime, rdev) VALUES ('s-1', 6, 16877, 3, 3, 3, 0), ('s-1', 7, 8576, 3, 3, 3, 259)`,
		`INSERT INTO fs_dentry (session_id, name, parent_ino, ino) VALUES ('s-1', 'e', 1, 6), ('s-1', 'null', 6, 7)`, // mkdir /e, mknod /e/null
		`UPDATE fs_dentry SET parent_ino=6 WHERE session_id='s-1' AND name='b'`,                                      // mv /a/b /e/b
		`DELETE FROM fs_dentry WHERE session_id='s-1' AND name='c'`,                                                  // rmdir /a/c
	} {
		if _, err := st.SQL().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if r, a, e := nlink("s-1", 1), nlink("s-1", 2), nlink("s-1", 6); r != 2 || a != 1 || e != 2 {
		t.Fatalf("after mkdir, mv and rmdir: root %d, /a %d, /e %d; want 2, 1, 2", r, a, e)
	}
	// the base saved /a as it was before these changes
	if got := nlink("ws-b", 2); got != 2 {
		t.Fatalf("the view's /a = %d after the session's changes, want 2", got)
	}
}

// 0014 adds API key expiry: the keys an older binary made (user and node
// keys) keep working after the upgrade and never expire.
func TestMigrationAPIKeyExpiry(t *testing.T) {
	ctx := context.Background()
	hash := func(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }
	userKey, nodeKey := "fp_olduserkey0123456789", "fp_oldnodekey0123456789"
	st := upgradeFrom(t, 14, []string{
		`INSERT INTO users (id, name, is_admin, created_at) VALUES ('u-1', 'alice', 1, 1)`,
		`INSERT INTO agent_session (id, user_id, name, status, created_at, updated_at) VALUES ('s-1', 'u-1', 'kept', 'stopped', 1, 2)`,
		`INSERT INTO agent_node (id, session_id, name, agent_type, model, created_at, updated_at) VALUES ('n-1', 's-1', 'root', 'shelley', 'm', 1, 1)`,
		`INSERT INTO api_keys (id, user_id, name, hash, prefix, created_at, last_used_at) VALUES ('k-1', 'u-1', 'laptop', '` + hash(userKey) + `', 'fp_old', 1, 2)`,
		`INSERT INTO api_keys (id, user_id, session_id, node_id, name, hash, prefix, created_at) VALUES ('k-2', 'u-1', 's-1', 'n-1', 'node n-1', '` + hash(nodeKey) + `', 'fp_old', 1)`,
	})
	ident := identity.New(st)
	defer st.Close()
	if u, err := ident.UserByAPIKey(ctx, userKey); err != nil || u.ID != "u-1" {
		t.Fatalf("old user key after upgrade: %+v, %v", u, err)
	}
	if p, err := ident.AuthAPIKey(ctx, nodeKey); err != nil || p.NodeID != "n-1" {
		t.Fatalf("old node key after upgrade: %+v, %v", p, err)
	}
	keys, err := ident.ListAPIKeys(ctx, "u-1")
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys after upgrade: %+v, %v", keys, err)
	}
	for _, k := range keys {
		if k.ExpiresAt != nil {
			t.Fatalf("old key %s expires at %v after upgrade, want never", k.ID, k.ExpiresAt)
		}
	}
}

// upgradeFrom opens a database made by the migrations before version,
// seeds it with the statements an older binary would have run, then opens
// it again with every migration (the upgrade) and returns that store.
func upgradeFrom(t *testing.T, version int, seed []string) *store.Store {
	t.Helper()
	ctx := context.Background()
	all, err := store.EmbeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	cut := -1
	for i, m := range all {
		if m.Version == version {
			cut = i
		}
	}
	if cut < 0 {
		t.Fatalf("migration %04d not embedded", version)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	old, err := store.Open(ctx, store.Config{Path: path, Migrations: all[:cut]})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range seed {
		if _, err := old.SQL().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	old.Close()
	st, err := store.Open(ctx, store.Config{Path: path, Migrations: all})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
