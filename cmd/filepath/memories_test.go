package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
)

// TestMemoriesForTheRunner: the runner's memories at an agent's start come
// from the agent tools' store, for the session's repository in any URL
// form, and never from another user's.
func TestMemoriesForTheRunner(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	ident, cs := identity.New(st), collab.New(st, sessions.New(st, sessions.Config{}), collab.Config{})
	defer st.Close()
	alice, _ := ident.CreateUser(ctx, "alice", false)
	bob, _ := ident.CreateUser(ctx, "bob", false)
	if _, err := cs.SetMemory(ctx, alice.ID, "github.com/o/r", "tests", "run go test -race", "", ""); err != nil {
		t.Fatal(err)
	}
	m := memories{cs}
	got, err := m.Relevant(ctx, alice.ID, "git@github.com:o/r.git", "fix the failing tests", 5)
	if err != nil || len(got) != 1 || got[0].Key != "tests" || got[0].Text != "run go test -race" {
		t.Fatalf("alice: %+v %v", got, err)
	}
	if got, _ := m.Relevant(ctx, bob.ID, "git@github.com:o/r.git", "tests", 5); len(got) != 0 {
		t.Fatalf("bob: %+v", got)
	}
}
