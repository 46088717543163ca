package collab_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
)

func openWithKey(t *testing.T, path string, key []byte) *storetest.Env {
	t.Helper()
	return storetest.NewWith(t, storetest.Options{Collab: collab.Config{SecretsKey: key}, Store: func(c *store.Config) { c.Path = path }})
}

// TestSessionSecretRoundTripEncrypted: a vendor key set on a session opens
// again (also after a reopen with the same key), is listed by name only, is
// never in the database files in plain text, does not open with another
// key or under another session, and goes with its session.
func TestSessionSecretRoundTripEncrypted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "filepath.db")
	key := bytes.Repeat([]byte{7}, collab.SecretsKeySize)
	s := openWithKey(t, path, key)
	u, _ := s.Users.CreateUser(ctx, "alice", false)
	bob, _ := s.Users.CreateUser(ctx, "bob", false)
	sess, _ := s.Sessions.CreateSession(ctx, u.ID, sessions.NewSession{Name: "a"})
	other, _ := s.Sessions.CreateSession(ctx, u.ID, sessions.NewSession{Name: "b"})
	const plain = "sgamp_user_SECRET-0123456789abcdef"
	info, err := s.Collab.SetSessionSecret(ctx, u.ID, sess.ID, "AMP_API_KEY", plain)
	if err != nil || info.Name != "AMP_API_KEY" {
		t.Fatalf("set: %+v, %v", info, err)
	}
	if v, err := s.Collab.OpenSessionSecret(ctx, sess.ID, "AMP_API_KEY"); err != nil || v != plain {
		t.Fatalf("open: %q, %v", v, err)
	}
	if _, err := s.Collab.OpenSessionSecret(ctx, other.ID, "AMP_API_KEY"); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("another session's: %v", err)
	}
	if list, err := s.Collab.SessionSecrets(ctx, u.ID, sess.ID); err != nil || len(list) != 1 || list[0].Name != "AMP_API_KEY" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if _, err := s.Collab.SessionSecrets(ctx, bob.ID, sess.ID); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("bob lists alice's secrets: %v", err)
	}
	if _, err := s.Collab.SetSessionSecret(ctx, bob.ID, sess.ID, "AMP_API_KEY", "x"); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("bob sets alice's secret: %v", err)
	}
	for _, tt := range []struct{ name, value, field string }{
		{"FILEPATH_OPENAI_API_KEY", "x", "name"}, {"PATH", "x", "name"},
		{"CURSOR_API_KEY", " ", "value"}, {"CURSOR_API_KEY", "a\nb", "value"},
	} {
		if _, err := s.Collab.SetSessionSecret(ctx, u.ID, sess.ID, tt.name, tt.value); orchestrator.ErrorField(err) != tt.field {
			t.Errorf("set %s=%q: %v, want an error about %s", tt.name, tt.value, err, tt.field)
		}
	}
	s.St.Close()
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(plain)) || bytes.Contains(b, []byte("SECRET-0123")) {
			t.Fatalf("%s holds the secret in plain text", f)
		}
	}
	s = openWithKey(t, path, key)
	if v, err := s.Collab.OpenSessionSecret(ctx, sess.ID, "AMP_API_KEY"); err != nil || v != plain {
		t.Fatalf("open after reopen: %q, %v", v, err)
	}
	s.St.Close()
	s = openWithKey(t, path, bytes.Repeat([]byte{8}, collab.SecretsKeySize))
	if _, err := s.Collab.OpenSessionSecret(ctx, sess.ID, "AMP_API_KEY"); err == nil {
		t.Fatal("the secret opens with another key")
	}
	if err := s.Sessions.DeleteSession(ctx, u.ID, sess.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Collab.OpenSessionSecret(ctx, sess.ID, "AMP_API_KEY"); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("a deleted session's secret: %v", err)
	}
}

func TestSessionSecretNeedsAKey(t *testing.T) {
	ctx := context.Background()
	s := openWithKey(t, filepath.Join(t.TempDir(), "filepath.db"), nil)
	u, _ := s.Users.CreateUser(ctx, "alice", false)
	sess, _ := s.Sessions.CreateSession(ctx, u.ID, sessions.NewSession{Name: "a"})
	if _, err := s.Collab.SetSessionSecret(ctx, u.ID, sess.ID, "AMP_API_KEY", "k"); orchestrator.ErrorCode(err) != orchestrator.EUnavailable {
		t.Fatalf("set without a key: %v", err)
	}
	if err := s.Collab.DeleteSessionSecret(ctx, u.ID, sess.ID, "AMP_API_KEY"); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("delete a missing secret: %v", err)
	}
}
