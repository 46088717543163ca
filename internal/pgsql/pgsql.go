// Package pgsql connects to PostgreSQL for the store and the session
// filesystem, whose SQL is written for SQLite's placeholders: a connection
// of Open takes ? and ?NNN parameters (rebind) and sends a bool as the 0 or
// 1 both schemas keep. The SQL that differs otherwise is chosen by its
// callers (store.Dialect).
package pgsql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// Is reports whether db was opened by Open.
func Is(db *sql.DB) bool {
	_, ok := db.Driver().(pgDriver)
	return ok
}

// Open opens a pool of at most conns connections to the database
// at url. Every statement's ? placeholders become $1, $2, … (the store's
// SQL is written with ?, as SQLite takes it), and a bool argument is sent
// as 0 or 1: flags are integers in both schemas. readOnly connections run
// their transactions at REPEATABLE READ, so that a read transaction sees one
// snapshot, as a SQLite WAL reader does.
func Open(ctx context.Context, url string, conns int, readOnly bool) (*sql.DB, error) {
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	cc.RuntimeParams["application_name"] = "filepath"
	if readOnly {
		cc.RuntimeParams["default_transaction_isolation"] = "repeatable read"
		cc.RuntimeParams["default_transaction_read_only"] = "on"
	}
	db := sql.OpenDB(pgConnector{inner: stdlib.GetConnector(*cc)})
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// CheckCollation refuses a database whose text order is not byte order:
// names sort and compare as in SQLite only under the C collation.
func CheckCollation(ctx context.Context, db *sql.DB) error {
	var coll string
	if err := db.QueryRowContext(ctx, `SELECT datcollate FROM pg_database WHERE datname = current_database()`).Scan(&coll); err != nil {
		return fmt.Errorf("read collation: %w", err)
	}
	if coll != "C" && coll != "POSIX" {
		return fmt.Errorf("the database's collation is %q: filepath needs byte order; create it with CREATE DATABASE name TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'", coll)
	}
	return nil
}

type pgConnector struct{ inner driver.Connector }

func (c pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	cn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &pgConn{Conn: cn.(*stdlib.Conn)}, nil
}

func (pgConnector) Driver() driver.Driver { return pgDriver{} }

// pgDriver is only the Driver of pgConnector (Is recognises it).
type pgDriver struct{}

func (pgDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("postgres: open through the store's connector")
}

// pgConn is a pgx connection that takes the store's ? placeholders.
type pgConn struct{ *stdlib.Conn }

func (c *pgConn) Prepare(q string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(context.Background(), rebind(q))
}

func (c *pgConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, rebind(q))
}

func (c *pgConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, rebind(q), args)
}

func (c *pgConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, rebind(q), args)
}

// CheckNamedValue sends a bool as the integer SQLite stores for it.
func (c *pgConn) CheckNamedValue(nv *driver.NamedValue) error {
	if b, ok := nv.Value.(bool); ok {
		nv.Value = int64(0)
		if b {
			nv.Value = int64(1)
		}
	}
	return nil
}

// rebind returns q with each ? placeholder outside quotes and comments
// replaced by $1, $2, …; ?NNN (SQLite's numbered parameter) becomes $NNN.
func rebind(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0 // the last parameter number given: a plain ? is the next one
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(q) && q[j] != c {
				j++
			}
			b.WriteString(q[i:min(j+1, len(q))])
			i = j
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				j = len(q) - i
			}
			b.WriteString(q[i : i+j])
			i += j - 1
		case c == '?':
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			if j > i+1 {
				k, _ := strconv.Atoi(q[i+1 : j])
				n = max(n, k)
				b.WriteString("$" + q[i+1:j])
				i = j - 1
			} else {
				n++
				fmt.Fprintf(&b, "$%d", n)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Code is the SQLSTATE of a PostgreSQL error ("" for another error).
func Code(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
