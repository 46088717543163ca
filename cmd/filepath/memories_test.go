package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/store"
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
	defer st.Close()
	alice, _ := st.CreateUser(ctx, "alice", false)
	bob, _ := st.CreateUser(ctx, "bob", false)
	if _, err := st.SetMemory(ctx, alice.ID, "github.com/o/r", "tests", "run go test -race", "", ""); err != nil {
		t.Fatal(err)
	}
	m := memories{st}
	got, err := m.Relevant(ctx, alice.ID, "git@github.com:o/r.git", "fix the failing tests", 5)
	if err != nil || len(got) != 1 || got[0].Key != "tests" || got[0].Text != "run go test -race" {
		t.Fatalf("alice: %+v %v", got, err)
	}
	if got, _ := m.Relevant(ctx, bob.ID, "git@github.com:o/r.git", "tests", 5); len(got) != 0 {
		t.Fatalf("bob: %+v", got)
	}
}
