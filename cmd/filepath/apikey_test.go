package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
)

// An administrator lists the API keys and revokes one: the running server
// refuses it at the very next request, and the other key keeps working.
func TestAPIKeyListAndRevoke(t *testing.T) {
	data := t.TempDir()
	srv := startServer(t, data, "--runtime", "process", "--agent-cmd", "/bin/true", "--workspace", "dir")
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append(args, "--data", data), nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, keep, _ := cli("apikey", "create", "--name", "laptop")
	code2, gone, _ := cli("apikey", "create", "--name", "ci")
	if code != 0 || code2 != 0 {
		t.Fatal("apikey create failed")
	}
	keep, gone = strings.TrimSpace(keep), strings.TrimSpace(gone)
	get := func(key string) int {
		c := &client{t: t, key: key, srv: srv}
		return c.do("GET", "/api/v1/sessions", nil, nil)
	}
	if get(keep) != 200 || get(gone) != 200 {
		t.Fatal("new keys do not work")
	}

	code, list, errOut := cli("apikey", "list")
	if code != 0 {
		t.Fatalf("apikey list: %d %s", code, errOut)
	}
	var goneID string
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("apikey list:\n%s", list)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		// ID, prefix, user, name, created, last used (both keys were
		// used), expires (never).
		if len(f) != 7 || f[2] != "admin" || f[5] == "never" || f[6] != "never" {
			t.Fatalf("apikey list row %q", l)
		}
		if f[3] == "ci" {
			goneID = f[0]
			if !strings.HasPrefix(gone, strings.TrimSuffix(f[1], "…")) {
				t.Fatalf("prefix %s is not the key's", f[1])
			}
		}
		if strings.Contains(l, keep) || strings.Contains(l, gone) {
			t.Fatal("apikey list shows a whole key")
		}
	}
	if goneID == "" {
		t.Fatalf("no key named ci:\n%s", list)
	}

	if code, _, errOut := cli("apikey", "revoke", "fp_notanid"); code != 1 || !strings.Contains(errOut, `no key with ID "fp_notanid"`) {
		t.Fatalf("revoke of an unknown ID: %d %s", code, errOut)
	}
	if code, out, errOut := cli("apikey", "revoke", goneID); code != 0 || !strings.Contains(out, "revoked key "+goneID) {
		t.Fatalf("apikey revoke: %d %s %s", code, out, errOut)
	}
	if got := get(gone); got != 401 {
		t.Fatalf("a revoked key: %d, want 401 at once", got)
	}
	if get(keep) != 200 {
		t.Fatal("revoking one key broke another")
	}
	if _, list, _ := cli("apikey", "list"); strings.Contains(list, goneID) || len(strings.Split(strings.TrimSpace(list), "\n")) != 2 {
		t.Fatalf("list after revoke:\n%s", list)
	}
	if code := Main(context.Background(), []string{"apikey", "frobnicate"}, nil, io.Discard, io.Discard); code != 2 {
		t.Fatalf("unknown subcommand: exit %d", code)
	}
}

// `apikey create --expires` makes a key that lists with its expiry, bad
// values are refused naming the flag and the value (and store nothing),
// and `apikey list` tells a key that never expires and one that expired.
func TestAPIKeyExpires(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	// An administrator, and a key made two days ago that expired a day later.
	twoDaysAgo := time.Now().Add(-48 * time.Hour)
	old, err := store.Open(ctx, store.Config{Path: filepath.Join(data, "filepath.db"), Now: func() time.Time { return twoDaysAgo }})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := identity.New(old).CreateUser(ctx, "admin", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := identity.New(old).CreateAPIKeyExpiring(ctx, admin.ID, "stale", twoDaysAgo.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	old.Close()
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Main(ctx, append(args, "--data", data), nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}

	for _, bad := range []string{"0", "0s", "0d", "-1h", "-3d", "soon", "1.5d", "+3d", "", "d", "30days"} {
		code, out, errOut := cli("apikey", "create", "--name", "bad", "--expires", bad)
		if code != 2 || out != "" || !strings.Contains(errOut, fmt.Sprintf("--expires %q", bad)) {
			t.Errorf("--expires %q: exit %d, stdout %q, stderr %q; want 2 and an error naming the flag and the value", bad, code, out, errOut)
		}
	}

	before := time.Now()
	code, hours, errOut := cli("apikey", "create", "--name", "hours", "--expires", "720h")
	code2, days, errOut2 := cli("apikey", "create", "--name", "days", "--expires", "30d")
	code3, never, errOut3 := cli("apikey", "create", "--name", "forever")
	after := time.Now()
	if code != 0 || code2 != 0 || code3 != 0 {
		t.Fatalf("apikey create: %d %s / %d %s / %d %s", code, errOut, code2, errOut2, code3, errOut3)
	}
	for _, k := range []string{hours, days, never} {
		if !strings.HasPrefix(k, "fp_") || strings.Count(k, "\n") != 1 {
			t.Fatalf("create printed %q, want the key alone", k)
		}
	}

	code, list, errOut := cli("apikey", "list")
	if code != 0 {
		t.Fatalf("apikey list: %d %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 5 || !strings.HasSuffix(strings.TrimSpace(lines[0]), "EXPIRES") {
		t.Fatalf("apikey list (the bad values must have stored nothing):\n%s", list)
	}
	expires := map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l) // ID, prefix, user, name, created, last used, expires
		if len(f) != 7 {
			t.Fatalf("apikey list row %q", l)
		}
		expires[f[3]] = f[6]
	}
	if expires["forever"] != "never" || expires["stale"] != "expired" {
		t.Fatalf("expires column %v, want forever: never, stale: expired", expires)
	}
	for _, name := range []string{"hours", "days"} {
		at, err := time.Parse(time.RFC3339, expires[name])
		// RFC 3339 in the list has whole seconds.
		if err != nil || at.Before(before.Add(720*time.Hour).Truncate(time.Second)) || at.After(after.Add(720*time.Hour)) {
			t.Fatalf("%s expires %q, want 720h from creation (%v)", name, expires[name], err)
		}
	}
}
