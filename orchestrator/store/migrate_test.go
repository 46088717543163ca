package store_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/store"
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

	// An older binary: only 0001, with data in it.
	old, err := store.Open(ctx, store.Config{Path: path, Migrations: all[:1]})
	if err != nil {
		t.Fatal(err)
	}
	// Its rows are written with SQL: this binary's code expects the newer
	// schema.
	u := struct{ ID string }{"u1"}
	s := struct{ ID string }{"s1"}
	root := struct{ ID string }{"n1"}
	for _, q := range []string{
		`INSERT INTO users (id, name, is_admin, created_at) VALUES ('u1', 'alice', 1, 1)`,
		`INSERT INTO agent_session (id, user_id, name, status, root_node_id, created_at, updated_at) VALUES ('s1', 'u1', 'kept', 'draft', 'n1', 1, 1)`,
		`INSERT INTO agent_node (id, session_id, name, agent_type, model, created_at, updated_at) VALUES ('n1', 's1', 'root', 'shelley', 'm', 1, 1)`,
		`INSERT INTO session_log (session_id, seq, node_id, kind, payload, created_at) VALUES ('s1', 1, 'n1', 'node', '{"op":"created"}', 1), ('s1', 2, 'n1', 'input', '{"type":"message","from":"user","content":"hello"}', 1)`,
	} {
		if _, err := old.SQL().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

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
	got, err := st.GetSession(ctx, u.ID, s.ID)
	if err != nil || got.Name != "kept" || got.RootNodeID == nil || *got.RootNodeID != root.ID {
		t.Fatalf("session after upgrade %+v, %v", got, err)
	}
	recs, err := st.Records(ctx, s.ID, 0, 0, "")
	if err != nil || len(recs) != 2 {
		t.Fatalf("records after upgrade %+v, %v", recs, err)
	}
	// The seq continues after the upgrade.
	next, err := st.Append(ctx, s.ID, store.NewRecord{Kind: store.KindEvent, Data: json.RawMessage(`{"type":"text","content":"x"}`)})
	if err != nil || next[0].Seq != 3 {
		t.Fatalf("append after upgrade %+v, %v", next, err)
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
