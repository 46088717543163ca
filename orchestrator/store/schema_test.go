package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/store"
)

// TestDialectMigrationsMatch: PostgreSQL has a migration of the same
// version and name for every SQLite migration, and no other.
func TestDialectMigrationsMatch(t *testing.T) {
	lite, err := store.EmbeddedMigrationsFor(store.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := store.EmbeddedMigrationsFor(store.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	names := func(ms []store.Migration) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Name)
		}
		return out
	}
	if a, b := names(lite), names(pg); !slices.Equal(a, b) {
		t.Fatalf("migrations differ:\nsqlite   %v\npostgres %v", a, b)
	}
}

// TestDialectSchemasMatch: the two schemas, each made by its dialect's
// migrations, have the same tables; in each the same columns in the same
// order, of the same type (SQLite's INTEGER is PostgreSQL's bigint, REAL
// double precision, BLOB bytea, TEXT text), nullability and primary key;
// the same indexes (name, columns, unique, partial), unique constraints,
// foreign keys (with their ON DELETE) and triggers.
func TestDialectSchemasMatch(t *testing.T) {
	ctx := context.Background()
	lite, err := store.Open(ctx, store.Config{Path: filepath.Join(t.TempDir(), "f.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	pg, err := store.Open(ctx, store.Config{URL: testkit.PostgresURL(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	a, b := sqliteSchema(t, lite.SQL()), postgresSchema(t, pg.SQL())
	t.Logf("%d facts of SQLite, %d of PostgreSQL", len(a), len(b))
	if len(a) < 20 {
		t.Fatalf("the SQLite schema has %d facts: too few to be read right", len(a))
	}
	for _, f := range a {
		if !slices.Contains(b, f) {
			t.Errorf("only in SQLite:     %s", f)
		}
	}
	for _, f := range b {
		if !slices.Contains(a, f) {
			t.Errorf("only in PostgreSQL: %s", f)
		}
	}
}

// facts runs q and returns each row's columns joined by " ".
func facts(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, v := range vals {
			parts = append(parts, v.String)
		}
		out = append(out, strings.Join(parts, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var sqliteTypes = map[string]string{"INTEGER": "bigint", "TEXT": "text", "REAL": "double", "BLOB": "bytea"}

func sqliteSchema(t *testing.T, db *sql.DB) []string {
	var out []string
	tables := facts(t, db, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	for _, tb := range tables {
		out = append(out, "table "+tb)
		for _, c := range facts(t, db, `SELECT cid, name, type, "notnull", pk FROM pragma_table_info(?) ORDER BY cid`, tb) {
			f := strings.Fields(c)
			typ, ok := sqliteTypes[f[2]]
			if !ok {
				t.Fatalf("table %s column %s: type %q has no PostgreSQL counterpart here", tb, f[1], f[2])
			}
			// a primary key column is NOT NULL in PostgreSQL, and an
			// INTEGER PRIMARY KEY is in SQLite (the rowid)
			null := f[3] == "1" || f[4] != "0"
			out = append(out, fmt.Sprintf("column %s.%s #%s %s notnull=%v pk=%v", tb, f[1], f[0], typ, null || f[4] != "0", f[4] != "0"))
		}
		for _, ix := range facts(t, db, `SELECT name, "unique", origin, partial FROM pragma_index_list(?)`, tb) {
			f := strings.Fields(ix)
			if f[2] == "pk" {
				continue // the primary key, compared by its columns above
			}
			// an expression (COALESCE(session_id, '')) is a column without a name on both sides
			cols := strings.Join(facts(t, db, `SELECT COALESCE(name, '') FROM pragma_index_info(?) ORDER BY seqno`, f[0]), ",")
			if f[2] == "u" { // a UNIQUE constraint: its index is nameless here
				out = append(out, fmt.Sprintf("unique %s(%s)", tb, cols))
				continue
			}
			out = append(out, fmt.Sprintf("index %s on %s(%s) unique=%v partial=%v", f[0], tb, cols, f[1] == "1", f[3] == "1"))
		}
		for _, fk := range facts(t, db, `SELECT "from", "table", "to", on_delete FROM pragma_foreign_key_list(?)`, tb) {
			f := strings.Fields(fk)
			out = append(out, fmt.Sprintf("fk %s.%s -> %s.%s on delete %s", tb, f[0], f[1], f[2], strings.ToLower(strings.Join(f[3:], " "))))
		}
	}
	for _, tr := range facts(t, db, `SELECT tbl_name, name FROM sqlite_master WHERE type = 'trigger'`) {
		out = append(out, "trigger "+tr)
	}
	return out
}

func postgresSchema(t *testing.T, db *sql.DB) []string {
	var out []string
	for _, tb := range facts(t, db, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`) {
		out = append(out, "table "+tb)
	}
	types := map[string]string{"bigint": "bigint", "text": "text", "double": "double", "bytea": "bytea"}
	for _, c := range facts(t, db, `SELECT c.table_name, c.column_name, c.ordinal_position - 1 - (
			SELECT COUNT(*) FROM pg_attribute a JOIN pg_class k ON k.oid = a.attrelid
			WHERE k.relname = c.table_name AND a.attisdropped AND a.attnum < c.ordinal_position),
			split_part(c.data_type, ' ', 1), c.is_nullable = 'NO',
			EXISTS (SELECT 1 FROM information_schema.key_column_usage u JOIN information_schema.table_constraints tc
			        ON tc.constraint_name = u.constraint_name AND tc.table_name = u.table_name
			        WHERE tc.constraint_type = 'PRIMARY KEY' AND u.table_name = c.table_name AND u.column_name = c.column_name)
		FROM information_schema.columns c WHERE c.table_schema = current_schema()`) {
		f := strings.Fields(c)
		out = append(out, fmt.Sprintf("column %s.%s #%s %s notnull=%v pk=%v", f[0], f[1], f[2], types[f[3]], f[4] == "true", f[5] == "true"))
	}
	for _, ix := range facts(t, db, `SELECT k.relname, i.relname, x.indisunique, x.indpred IS NOT NULL,
			EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = x.indexrelid AND con.contype = 'u'),
			array_to_string(ARRAY(SELECT COALESCE(a.attname, '') FROM unnest(x.indkey) WITH ORDINALITY AS o(attnum, n)
			        LEFT JOIN pg_attribute a ON a.attrelid = k.oid AND a.attnum = o.attnum ORDER BY o.n), ',')
		FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class k ON k.oid = x.indrelid
		JOIN pg_namespace n ON n.oid = k.relnamespace
		WHERE n.nspname = current_schema() AND NOT x.indisprimary`) {
		f := strings.Fields(ix)
		if f[4] == "true" {
			out = append(out, fmt.Sprintf("unique %s(%s)", f[0], f[5]))
			continue
		}
		out = append(out, fmt.Sprintf("index %s on %s(%s) unique=%v partial=%v", f[1], f[0], f[5], f[2] == "true", f[3] == "true"))
	}
	ondelete := map[string]string{"a": "no action", "c": "cascade", "r": "restrict", "n": "set null", "d": "set default"}
	for _, fk := range facts(t, db, `SELECT k.relname, a.attname, r.relname, ra.attname, con.confdeltype
		FROM pg_constraint con JOIN pg_class k ON k.oid = con.conrelid JOIN pg_class r ON r.oid = con.confrelid
		JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = con.conkey[1]
		JOIN pg_attribute ra ON ra.attrelid = con.confrelid AND ra.attnum = con.confkey[1]
		JOIN pg_namespace n ON n.oid = k.relnamespace
		WHERE con.contype = 'f' AND n.nspname = current_schema()`) {
		f := strings.Fields(fk)
		out = append(out, fmt.Sprintf("fk %s.%s -> %s.%s on delete %s", f[0], f[1], f[2], f[3], ondelete[f[4]]))
	}
	for _, tr := range facts(t, db, `SELECT DISTINCT event_object_table, trigger_name FROM information_schema.triggers
		WHERE trigger_schema = current_schema()`) {
		out = append(out, "trigger "+tr)
	}
	return out
}
