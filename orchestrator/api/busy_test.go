package api_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
)

// TestLockedDatabase: while another program holds the database in an
// exclusive transaction (a backup, an sqlite3 shell), a write waits its
// busy timeout, then answers 503 with Retry-After and a message that says
// so, and writes nothing; once the lock is gone the same request works.
func TestLockedDatabase(t *testing.T) {
	e := newEnv(t, envOpts{busy: 300 * time.Millisecond})
	a := e.account("alice")
	ctx := context.Background()
	other, err := sql.Open("sqlite3", e.dbPath+"?_busy_timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	const body = `{"name":"locked-out","git_repo_url":""}`
	r := e.do("POST", "/api/v1/sessions", a.key, body)
	if r.status != 503 || r.header.Get("Retry-After") != "5" || !strings.Contains(string(r.body), "locked by another program") {
		t.Fatalf("a write while locked: %d Retry-After %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if r := e.do("POST", "/api/v1/sessions", a.key, body); r.status != 201 {
		t.Fatalf("the same write after the lock: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/api/v1/sessions", a.key, "")
	if n := strings.Count(string(r.body), `"locked-out"`); n != 1 {
		t.Fatalf("%d sessions named locked-out, want 1 (the refused write left nothing): %s", n, r.body)
	}
}
