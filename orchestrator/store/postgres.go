package store

import (
	"database/sql"
	"strings"

	"github.com/filepath-dev/filepath/internal/pgsql"
)

// Dialect names the SQL database a Store runs on.
type Dialect string

// The dialects: SQLite (the default, one file in the data directory) and
// PostgreSQL (Config.URL, FILEPATH_DATABASE_URL).
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// IsPostgresURL reports whether s names a PostgreSQL database
// (postgres://… or postgresql://…).
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// DialectOf returns the dialect of a database handle the store opened (the
// vfs gets a *sql.DB and asks it).
func DialectOf(db *sql.DB) Dialect {
	if pgsql.Is(db) {
		return Postgres
	}
	return SQLite
}

// JSONText is the SQL of the text of key in the JSON object in column col
// (a top-level key), in s's dialect.
func (s *Store) JSONText(col, key string) string {
	if s.dialect == Postgres {
		return "(" + col + "::json ->> '" + key + "')"
	}
	return "json_extract(" + col + ", '$." + key + "')"
}

// Contains is the SQL condition that text hay contains text needle (both
// SQL expressions), in s's dialect.
func (s *Store) Contains(hay, needle string) string {
	if s.dialect == Postgres {
		return "strpos(" + hay + ", " + needle + ") > 0"
	}
	return "instr(" + hay + ", " + needle + ") > 0"
}
