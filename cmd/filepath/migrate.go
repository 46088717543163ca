package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/filepath-dev/filepath/orchestrator/store"
)

// runMigrate is `filepath migrate --from sqlite:PATH --to postgres://…`:
// the whole database of a data directory copied into an empty PostgreSQL
// database, verified table by table by row count and checksum.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the SQLite database to copy: sqlite:DATA/filepath.db")
	to := fs.String("to", "", "the empty PostgreSQL database to copy into: postgres://user@host/db (a superuser: triggers are off while rows are copied)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	path, ok := strings.CutPrefix(*from, "sqlite:")
	if !ok || path == "" || !store.IsPostgresURL(*to) || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: filepath migrate --from sqlite:DATA/filepath.db --to postgres://user@host/db")
		return 2
	}
	if _, err := os.Stat(path); err != nil {
		fmt.Fprintf(stderr, "filepath migrate: %v\n", err)
		return 1
	}
	src, err := store.Open(ctx, store.Config{Path: path})
	if err != nil {
		fmt.Fprintf(stderr, "filepath migrate: %v\n", err)
		return 1
	}
	defer src.Close()
	dst, err := store.Open(ctx, store.Config{URL: *to})
	if err != nil {
		fmt.Fprintf(stderr, "filepath migrate: %v\n", err)
		return 1
	}
	defer dst.Close()
	tables, err := store.Copy(ctx, src, dst)
	if err != nil {
		fmt.Fprintf(stderr, "filepath migrate: %v\n", err)
		return 1
	}
	var rows int64
	for _, t := range tables {
		fmt.Fprintf(stdout, "%-16s %8d rows  sha256 %s\n", t.Table, t.Rows, t.Checksum[:16])
		rows += t.Rows
	}
	fmt.Fprintf(stdout, "copied and verified %d tables, %d rows\n", len(tables), rows)
	return 0
}
