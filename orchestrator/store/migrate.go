package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql migrations/postgres/*.sql
var migrationFS embed.FS

// Migration is one schema change: a file migrations/NNNN_name.sql.
type Migration struct {
	Version int    // NNNN, > 0, unique
	Name    string // e.g. "0001_core"
	SQL     string
}

// EmbeddedMigrations returns the migrations compiled into the binary, in
// version order.
func EmbeddedMigrations() ([]Migration, error) {
	return loadMigrations(migrationFS, "migrations")
}

// EmbeddedMigrationsFor returns the migrations of dialect d: SQLite's in
// migrations/, PostgreSQL's in migrations/postgres/, with the same versions
// and names (TestDialectMigrationsMatch).
func EmbeddedMigrationsFor(d Dialect) ([]Migration, error) {
	if d == Postgres {
		return loadMigrations(migrationFS, "migrations/postgres")
	}
	return EmbeddedMigrations()
}

func loadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		name := strings.TrimSuffix(e.Name(), ".sql")
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %q: want NNNN_name.sql", e.Name())
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %q and %q have the same version %d", other, name, v)
		}
		seen[v] = name
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// migrate applies every migration not yet recorded in schema_migrations, in
// version order, each in its own transaction together with its record. A
// database that has a version this binary does not know (made by a newer
// binary) is refused untouched.
func migrate(ctx context.Context, db *sql.DB, d Dialect, ms []Migration, now func() time.Time) error {
	known := map[int]bool{}
	latest := 0
	for _, m := range ms {
		if m.Version <= 0 || known[m.Version] {
			return fmt.Errorf("migrate: bad or duplicate migration version %d (%s)", m.Version, m.Name)
		}
		known[m.Version] = true
		latest = max(latest, m.Version)
	}
	integer := "INTEGER"
	if d == Postgres {
		integer = "BIGINT"
		// Two processes opening one database migrate one after the other
		// (the lock is the write connection's, released below).
		if _, err := db.ExecContext(ctx, `SELECT pg_advisory_lock(7171)`); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		defer db.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(7171)`) //nolint:errcheck // ends with the connection anyway
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    `+integer+` PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at `+integer+` NOT NULL
	)`); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	rows, err := db.QueryContext(ctx, `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		return fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			rows.Close()
			return fmt.Errorf("migrate: read schema_migrations: %w", err)
		}
		if !known[v] {
			rows.Close()
			return fmt.Errorf("migrate: the database has schema version %d (%s) but this binary knows versions up to %d: it was written by a newer filepath; upgrade the binary", v, name, latest)
		}
		applied[v] = true
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		if err := applyMigration(ctx, db, m, now); err != nil {
			return err
		}
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, m Migration, now func() time.Time) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate %s: begin: %w", m.Name, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("migrate %s: %w", m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, Millis(now())); err != nil {
		return fmt.Errorf("migrate %s: record version: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s: commit: %w", m.Name, err)
	}
	return nil
}
