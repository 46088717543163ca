package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math"
	"strings"
)

// TableCopy is what Copy did to one table: its rows and the checksum of
// their values, equal on both sides.
type TableCopy struct {
	Table    string
	Rows     int64
	Checksum string // sha256 of every value of every row, in primary-key order
}

// Copy copies every row of every table of the SQLite store from into the
// PostgreSQL store to, whose tables must be empty, in one transaction of
// to, and then verifies the copy: each table's row count and checksum read
// back from to equal from's. Triggers do not fire while rows are copied
// (they are copied with the values the triggers made), so the connection
// of to must be allowed to set session_replication_role (a superuser, as
// a restore is). Nothing else may use either store meanwhile.
func Copy(ctx context.Context, from, to *Store) ([]TableCopy, error) {
	if from.dialect != SQLite || to.dialect != Postgres {
		return nil, errors.New("copy: from must be SQLite and to PostgreSQL")
	}
	rows, err := from.wsql.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'schema_migrations' ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("copy: list tables: %w", err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		tables = append(tables, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var srcVer, dstVer int
	if err := from.wsql.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&srcVer); err != nil {
		return nil, err
	}
	if err := to.wsql.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&dstVer); err != nil {
		return nil, err
	}
	if srcVer != dstVer {
		return nil, fmt.Errorf("copy: the schemas differ: version %d and %d", srcVer, dstVer)
	}
	tx, err := to.wsql.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if _, err := tx.ExecContext(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		return nil, fmt.Errorf("copy: turn off triggers (needs a superuser): %w", err)
	}
	out := make([]TableCopy, 0, len(tables))
	for _, tb := range tables {
		var n int64
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM "`+tb+`"`).Scan(&n); err != nil {
			return nil, fmt.Errorf("copy %s: %w", tb, err)
		}
		if n > 0 {
			return nil, fmt.Errorf("copy: table %s of the destination has %d rows: copy into an empty database", tb, n)
		}
		cols, order, err := tableShape(ctx, from.wsql, tb)
		if err != nil {
			return nil, err
		}
		tc, err := copyTable(ctx, from.wsql, tx, tb, cols, order)
		if err != nil {
			return nil, err
		}
		out = append(out, tc)
	}
	// identity columns continue after the copied ids
	ids, err := tx.QueryContext(ctx, `SELECT table_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND column_name = 'id' AND is_identity = 'YES'`)
	if err != nil {
		return nil, fmt.Errorf("copy: list identity columns: %w", err)
	}
	var idTables []string
	for ids.Next() {
		var tb string
		if err := ids.Scan(&tb); err != nil {
			ids.Close()
			return nil, err
		}
		idTables = append(idTables, tb)
	}
	ids.Close()
	for _, tb := range idTables {
		if _, err := tx.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence($1, 'id'), COALESCE((SELECT MAX(id) FROM "`+tb+`"), 0) + 1, false)`, tb); err != nil {
			return nil, fmt.Errorf("copy %s: set its id sequence: %w", tb, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("copy: commit: %w", err)
	}
	for _, tc := range out {
		cols, order, err := tableShape(ctx, from.wsql, tc.Table)
		if err != nil {
			return nil, err
		}
		n, sum, err := checksum(ctx, to.rsql, tc.Table, cols, order)
		if err != nil {
			return nil, fmt.Errorf("verify %s: %w", tc.Table, err)
		}
		if n != tc.Rows || sum != tc.Checksum {
			return out, fmt.Errorf("verify %s: %d rows with checksum %s copied, %d rows with checksum %s read back", tc.Table, tc.Rows, tc.Checksum, n, sum)
		}
	}
	return out, nil
}

// tableShape returns a table's quoted columns and its primary key's (the
// order rows are read and compared in).
func tableShape(ctx context.Context, db *sql.DB, tb string) (cols, order []string, err error) {
	rows, err := db.QueryContext(ctx, `SELECT name, pk FROM pragma_table_info(?) ORDER BY cid`, tb)
	if err != nil {
		return nil, nil, fmt.Errorf("copy %s: %w", tb, err)
	}
	defer rows.Close()
	pk := map[int]string{}
	for rows.Next() {
		var name string
		var k int
		if err := rows.Scan(&name, &k); err != nil {
			return nil, nil, err
		}
		cols = append(cols, `"`+name+`"`)
		if k > 0 {
			pk[k] = `"` + name + `"`
		}
	}
	for k := 1; k <= len(pk); k++ {
		order = append(order, pk[k])
	}
	if len(order) == 0 {
		return nil, nil, fmt.Errorf("copy %s: the table has no primary key", tb)
	}
	return cols, order, rows.Err()
}

func copyTable(ctx context.Context, src *sql.DB, dst *sql.Tx, tb string, cols, order []string) (TableCopy, error) {
	rows, err := src.QueryContext(ctx, `SELECT `+strings.Join(cols, ", ")+` FROM "`+tb+`" ORDER BY `+strings.Join(order, ", "))
	if err != nil {
		return TableCopy{}, fmt.Errorf("copy %s: %w", tb, err)
	}
	defer rows.Close()
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ")
	ins, err := dst.PrepareContext(ctx, `INSERT INTO "`+tb+`" (`+strings.Join(cols, ", ")+`) VALUES (`+marks+`)`)
	if err != nil {
		return TableCopy{}, fmt.Errorf("copy %s: %w", tb, err)
	}
	defer ins.Close()
	h := sha256.New()
	tc := TableCopy{Table: tb}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return TableCopy{}, fmt.Errorf("copy %s: %w", tb, err)
		}
		hashRow(h, vals)
		if _, err := ins.ExecContext(ctx, vals...); err != nil {
			return TableCopy{}, fmt.Errorf("copy %s row %d: %w", tb, tc.Rows+1, err)
		}
		tc.Rows++
	}
	if err := rows.Err(); err != nil {
		return TableCopy{}, fmt.Errorf("copy %s: %w", tb, err)
	}
	tc.Checksum = hex.EncodeToString(h.Sum(nil))
	return tc, nil
}

// checksum reads a table as copyTable hashed it.
func checksum(ctx context.Context, db *sql.DB, tb string, cols, order []string) (int64, string, error) {
	rows, err := db.QueryContext(ctx, `SELECT `+strings.Join(cols, ", ")+` FROM "`+tb+`" ORDER BY `+strings.Join(order, ", "))
	if err != nil {
		return 0, "", err
	}
	defer rows.Close()
	h := sha256.New()
	var n int64
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return 0, "", err
		}
		hashRow(h, vals)
		n++
	}
	return n, hex.EncodeToString(h.Sum(nil)), rows.Err()
}

// hashRow adds one row to h: each value with a tag of its kind, so that
// NULL, numbers and bytes never collide (text and bytes hash alike: SQLite
// hands out TEXT as either).
func hashRow(h hash.Hash, vals []any) {
	var b [9]byte
	for _, v := range vals {
		switch x := v.(type) {
		case nil:
			h.Write([]byte{0})
		case int64:
			b[0] = 1
			binary.BigEndian.PutUint64(b[1:], uint64(x))
			h.Write(b[:])
		case float64:
			b[0] = 2
			binary.BigEndian.PutUint64(b[1:], math.Float64bits(x))
			h.Write(b[:])
		case bool: // not stored by filepath; kept apart anyway
			b[0] = 3
			b[1] = 0
			if x {
				b[1] = 1
			}
			h.Write(b[:2])
		case []byte:
			writeBytes(h, x)
		case string:
			writeBytes(h, []byte(x))
		default:
			writeBytes(h, fmt.Append(nil, x))
		}
	}
}

func writeBytes(h hash.Hash, p []byte) {
	var b [9]byte
	b[0] = 4
	binary.BigEndian.PutUint64(b[1:], uint64(len(p)))
	h.Write(b[:])
	h.Write(p)
}
