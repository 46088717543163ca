package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
)

// TestAdminCommandsNeedADatabase: admin commands never create an empty
// database beside the real one when --data is wrong.
func TestAdminCommandsNeedADatabase(t *testing.T) {
	for _, args := range [][]string{{"apikey", "create"}, {"user", "login", "admin"}, {"user", "add", "bob"}, {"vfs", "import", "x.agentfs"}} {
		data := t.TempDir()
		var out, errOut strings.Builder
		code := Main(context.Background(), append(args, "--data", data), nil, &out, &errOut)
		if code != 1 || !strings.Contains(errOut.String(), "no filepath database at") || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
		if _, err := os.Stat(filepath.Join(data, "filepath.db")); err == nil {
			t.Errorf("%v created a database", args)
		}
	}
}

func TestBaseURL(t *testing.T) {
	data := t.TempDir()
	if got := baseURL("", data); got != "http://127.0.0.1:8080" && os.Getenv("FILEPATH_ADDR") == "" {
		t.Errorf("no url file: %q", got)
	}
	os.WriteFile(filepath.Join(data, urlFile), []byte("http://127.0.0.1:41234\n"), 0o600)
	if got := baseURL("", data); got != "http://127.0.0.1:41234" {
		t.Errorf("url file: %q", got)
	}
	if got := baseURL("https://fp.example/", data); got != "https://fp.example" {
		t.Errorf("--url wins: %q", got)
	}
}

// TestUserLogout: `filepath user logout NAME` ends every browser session of
// that user and no other's.
func TestUserLogout(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(data, "filepath.db")})
	if err != nil {
		t.Fatal(err)
	}
	ident := identity.New(st)
	cookie := func(name string) string {
		t.Helper()
		u, err := ident.UserByName(ctx, name)
		if err != nil {
			if u, err = ident.CreateUser(ctx, name, false); err != nil {
				t.Fatal(err)
			}
		}
		c, err := ident.CreateWebSession(ctx, u.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	bob1, bob2, carol := cookie("bob"), cookie("bob"), cookie("carol")
	st.Close()

	var out, errOut strings.Builder
	if code := Main(ctx, []string{"user", "logout", "bob", "--data", data}, nil, &out, &errOut); code != 0 || out.String() != "ended 2 browser sessions of bob\n" {
		t.Fatalf("user logout: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	if code := Main(ctx, []string{"user", "logout", "nobody", "--data", data}, nil, io.Discard, io.Discard); code != 1 {
		t.Fatalf("user logout of an unknown user: exit %d", code)
	}
	st, err = store.Open(ctx, store.Config{Path: filepath.Join(data, "filepath.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ident = identity.New(st)
	for _, c := range []string{bob1, bob2} {
		if _, err := ident.UserByWebSession(ctx, c); err == nil {
			t.Fatal("a session of bob survived")
		}
	}
	if _, err := ident.UserByWebSession(ctx, carol); err != nil {
		t.Fatalf("carol's session: %v", err)
	}
}
