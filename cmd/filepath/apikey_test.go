package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
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
		c := &client{t: t, key: key, base: func() string { return srv.base }}
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
		// ID, prefix, user, name, created, last used (both keys were used).
		if len(f) != 6 || f[2] != "admin" || f[5] == "never" {
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
