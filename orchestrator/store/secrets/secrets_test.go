package secrets_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"os"
	"path/filepath"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
)

func open(t *testing.T, path string, key []byte) (*storetest.Env, *secrets.Store) {
	t.Helper()
	e := storetest.NewWith(t, storetest.Options{Store: func(c *store.Config) { c.Path = path }})
	return e, secrets.New(e.St, secrets.Config{Key: key})
}

// TestSecretRoundTripEncrypted: a user's secret and a session's opens
// again (also after a reopen with the same key), the session's over the
// user's; neither is in the database files in plain text; they do not open
// with another key, for another user or under another session; a session's
// goes with its session.
func TestSecretRoundTripEncrypted(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "filepath.db")
	key := bytes.Repeat([]byte{7}, secrets.KeySize)
	e, s := open(t, path, key)
	u, _ := e.Users.CreateUser(ctx, "alice", false)
	bob, _ := e.Users.CreateUser(ctx, "bob", false)
	sess, _ := e.Sessions.CreateSession(ctx, u.ID, sessions.NewSession{Name: "a"})
	other, _ := e.Sessions.CreateSession(ctx, u.ID, sessions.NewSession{Name: "b"})
	const userPlain, sessPlain = "ghp_user_SECRET-0123456789", "ghp_session_SECRET-abcdef"
	if _, err := s.Set(ctx, u.ID, "", "gh", secrets.NewSecret{Kind: secrets.KindGitHubToken, Value: userPlain, Host: "github.com"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set(ctx, u.ID, sess.ID, "gh", secrets.NewSecret{Kind: secrets.KindGitHubToken, Value: sessPlain}); err != nil {
		t.Fatal(err)
	}
	check := func(s *secrets.Store) {
		t.Helper()
		if v, err := s.Open(ctx, u.ID, sess.ID, "gh"); err != nil || v.Value != sessPlain {
			t.Fatalf("the session's: %q, %v", v.Value, err)
		}
		if v, err := s.Open(ctx, u.ID, other.ID, "gh"); err != nil || v.Value != userPlain {
			t.Fatalf("another session's (the user's): %q, %v", v.Value, err)
		}
	}
	check(s)
	if _, err := s.Open(ctx, bob.ID, "", "gh"); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("bob opens alice's: %v", err)
	}
	if _, err := s.Set(ctx, bob.ID, sess.ID, "gh", secrets.NewSecret{Kind: secrets.KindGitHubToken, Value: "x"}); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("bob sets alice's session's secret: %v", err)
	}
	e.St.Close()
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("SECRET-")) {
			t.Fatalf("%s holds a secret in plain text", f)
		}
	}
	e, s = open(t, path, key)
	check(s)
	e.St.Close()
	e, s = open(t, path, bytes.Repeat([]byte{8}, secrets.KeySize))
	if _, err := s.Open(ctx, u.ID, "", "gh"); err == nil {
		t.Fatal("the secret opens with another key")
	}
	if err := e.Sessions.DeleteSession(ctx, u.ID, sess.ID); err != nil {
		t.Fatal(err)
	}
	if list, err := s.List(ctx, u.ID, ""); err != nil || len(list) != 1 || list[0].Scope != secrets.ScopeUser {
		t.Fatalf("after the session is deleted: %+v, %v", list, err)
	}
}

func TestSecretNeedsAKey(t *testing.T) {
	ctx := context.Background()
	e, s := open(t, filepath.Join(t.TempDir(), "filepath.db"), nil)
	u, _ := e.Users.CreateUser(ctx, "alice", false)
	if _, err := s.Set(ctx, u.ID, "", "AMP_API_KEY", secrets.NewSecret{Value: "k"}); orchestrator.ErrorCode(err) != orchestrator.EUnavailable {
		t.Fatalf("set without a key: %v", err)
	}
	if err := s.Delete(ctx, u.ID, "", "AMP_API_KEY"); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("delete a missing secret: %v", err)
	}
}

// TestMigrationKeepsSessionSecrets: a vendor key an older binary sealed
// into session_secrets (0011) opens after the upgrade as the session's own,
// of kind vendor.
func TestMigrationKeepsSessionSecrets(t *testing.T) {
	ctx := context.Background()
	key := bytes.Repeat([]byte{9}, secrets.KeySize)
	all, err := store.EmbeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	cut := -1
	for i, m := range all {
		if m.Version == 25 {
			cut = i
		}
	}
	path := filepath.Join(t.TempDir(), "old.db")
	old, err := store.Open(ctx, store.Config{Path: path, Migrations: all[:cut]})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(b)
	nonce := bytes.Repeat([]byte{1}, aead.NonceSize())
	sealed := aead.Seal(nonce, nonce, []byte("sgamp_OLD-key"), []byte("s-1\x00AMP_API_KEY"))
	for _, q := range []string{
		`INSERT INTO users (id, name, is_admin, created_at) VALUES ('u-1', 'alice', 1, 1)`,
		`INSERT INTO agent_session (id, user_id, name, status, created_at, updated_at) VALUES ('s-1', 'u-1', 'kept', 'stopped', 1, 2)`,
	} {
		if _, err := old.SQL().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.SQL().ExecContext(ctx, `INSERT INTO session_secrets (session_id, name, value, created_at, updated_at) VALUES ('s-1', 'AMP_API_KEY', ?, 1, 2)`, sealed); err != nil {
		t.Fatal(err)
	}
	old.Close()
	st, err := store.Open(ctx, store.Config{Path: path, Migrations: all})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := secrets.New(st, secrets.Config{Key: key}).OpenForSession(ctx, "s-1", "AMP_API_KEY")
	if err != nil || v.Value != "sgamp_OLD-key" || v.Kind != secrets.KindVendor || v.Scope != secrets.ScopeSession {
		t.Fatalf("after the upgrade: %v %q, %v", v, v.Value, err)
	}
}
