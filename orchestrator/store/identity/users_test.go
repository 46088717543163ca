package identity_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
)

func TestUsers(t *testing.T) {
	ctx := context.Background()
	e := storetest.New(t)
	a, err := e.Users.CreateUser(ctx, "alice", true)
	if err != nil || !a.IsAdmin || a.Name != "alice" {
		t.Fatalf("create %+v, %v", a, err)
	}
	_, err = e.Users.CreateUser(ctx, "alice", false)
	storetest.WantCode(t, err, orchestrator.EConflict, "name")
	for _, bad := range []string{"", "-x", "a b", strings.Repeat("a", 65), "é"} {
		_, err = e.Users.CreateUser(ctx, bad, false)
		storetest.WantCode(t, err, orchestrator.EInvalid, "name")
	}
	got, err := e.Users.UserByName(ctx, "alice")
	if err != nil || got.ID != a.ID {
		t.Fatalf("by name %+v, %v", got, err)
	}
	_, err = e.Users.UserByName(ctx, "bob")
	storetest.WantCode(t, err, orchestrator.ENotFound, "")
	if n, err := e.Users.CountUsers(ctx); err != nil || n != 1 {
		t.Fatalf("count %d, %v", n, err)
	}
}

func TestLoginToken(t *testing.T) {
	ctx := context.Background()
	e, u := storetest.NewUser(t)
	tok, err := e.Users.CreateLoginToken(ctx, u.ID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var stored int
	_ = e.St.SQL().QueryRow(`SELECT COUNT(*) FROM login_tokens WHERE hash = ?`, tok).Scan(&stored)
	if stored != 0 {
		t.Fatal("token stored in clear")
	}
	got, err := e.Users.ConsumeLoginToken(ctx, tok)
	if err != nil || got.ID != u.ID {
		t.Fatalf("consume %+v, %v", got, err)
	}
	_, err = e.Users.ConsumeLoginToken(ctx, tok)
	storetest.WantCode(t, err, orchestrator.EUnauthorized, "")

	tok2, _ := e.Users.CreateLoginToken(ctx, u.ID, time.Minute)
	e.Clock.Advance(time.Minute)
	_, err = e.Users.ConsumeLoginToken(ctx, tok2)
	storetest.WantCode(t, err, orchestrator.EUnauthorized, "")
	_, err = e.Users.ConsumeLoginToken(ctx, "nonsense")
	storetest.WantCode(t, err, orchestrator.EUnauthorized, "")
	_, err = e.Users.CreateLoginToken(ctx, u.ID, 0)
	storetest.WantCode(t, err, orchestrator.EInvalid, "ttl")
	_, err = e.Users.CreateLoginToken(ctx, "nobody", time.Minute)
	storetest.WantCode(t, err, orchestrator.ENotFound, "")
	if n, err := e.Users.DeleteExpired(ctx); err != nil || n != 2 {
		t.Fatalf("delete expired %d, %v", n, err)
	}
}

func TestWebSession(t *testing.T) {
	ctx := context.Background()
	e, u := storetest.NewUser(t)
	c, err := e.Users.CreateWebSession(ctx, u.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.Users.UserByWebSession(ctx, c); err != nil || got.ID != u.ID {
		t.Fatalf("by cookie %+v, %v", got, err)
	}
	e.Clock.Advance(time.Hour)
	_, err = e.Users.UserByWebSession(ctx, c)
	storetest.WantCode(t, err, orchestrator.EUnauthorized, "")
	c2, _ := e.Users.CreateWebSession(ctx, u.ID, time.Hour)
	if err := e.Users.DeleteWebSession(ctx, c2); err != nil {
		t.Fatal(err)
	}
	_, err = e.Users.UserByWebSession(ctx, c2)
	storetest.WantCode(t, err, orchestrator.EUnauthorized, "")

	// Logout everywhere ends every session of the user, and only theirs.
	bob := e.User(t, "bob")
	var mine []string
	for range 3 {
		c, _ := e.Users.CreateWebSession(ctx, u.ID, time.Hour)
		mine = append(mine, c)
	}
	theirs, _ := e.Users.CreateWebSession(ctx, bob.ID, time.Hour)
	if n, err := e.Users.DeleteWebSessionsOf(ctx, u.ID); err != nil || n != 3+1 { // and the expired one
		t.Fatalf("delete web sessions of alice: %d, %v", n, err)
	}
	for _, c := range mine {
		_, err = e.Users.UserByWebSession(ctx, c)
		storetest.WantCode(t, err, orchestrator.EUnauthorized, "")
	}
	if got, err := e.Users.UserByWebSession(ctx, theirs); err != nil || got.ID != bob.ID {
		t.Fatalf("bob's session: %+v, %v", got, err)
	}
}

func TestAPIKeys(t *testing.T) {
	ctx := context.Background()
	e, u := storetest.NewUser(t)
	key, k, err := e.Users.CreateAPIKey(ctx, u.ID, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, "fp_") || len(key) < 40 || !strings.HasPrefix(key, k.Prefix) {
		t.Fatalf("key %q prefix %q", key, k.Prefix)
	}
	got, err := e.Users.UserByAPIKey(ctx, key)
	if err != nil || got.ID != u.ID {
		t.Fatalf("by key %+v, %v", got, err)
	}
	keys, _ := e.Users.ListAPIKeys(ctx, u.ID)
	if len(keys) != 1 || keys[0].LastUsedAt == nil {
		t.Fatalf("keys %+v", keys)
	}
	_, err = e.Users.UserByAPIKey(ctx, key+"x")
	storetest.WantCode(t, err, orchestrator.EUnauthorized, "")

	s := e.Session(t, u.ID, "s")
	root := e.Node(t, u.ID, s.ID, nil, "root")
	nkey, _, err := e.Users.CreateNodeAPIKey(ctx, u.ID, s.ID, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Users.AuthAPIKey(ctx, nkey)
	if err != nil || p.NodeID != root.ID || p.SessionID != s.ID || p.User.ID != u.ID {
		t.Fatalf("node principal %+v, %v", p, err)
	}
	_, err = e.Users.UserByAPIKey(ctx, nkey)
	storetest.WantCode(t, err, orchestrator.EUnauthorized, "")
	// Revoked when its container ends: every key of the node goes, the
	// user's own keys stay.
	nkey2, _, err := e.Users.CreateNodeAPIKey(ctx, u.ID, s.ID, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.Users.DeleteNodeAPIKeys(ctx, root.ID); err != nil || n != 2 {
		t.Fatalf("delete node keys: %d, %v; want 2", n, err)
	}
	for _, k := range []string{nkey, nkey2} {
		_, err = e.Users.AuthAPIKey(ctx, k)
		storetest.WantCode(t, err, orchestrator.EUnauthorized, "")
	}
	if _, err := e.Users.UserByAPIKey(ctx, key); err != nil {
		t.Fatalf("the user's key after revoking the node's: %v", err)
	}
	if n, err := e.Users.DeleteNodeAPIKeys(ctx, root.ID); err != nil || n != 0 {
		t.Fatalf("delete again: %d, %v", n, err)
	}
	nkey, _, err = e.Users.CreateNodeAPIKey(ctx, u.ID, s.ID, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The node key dies with its node.
	if _, err := e.Sessions.DeleteNode(ctx, u.ID, s.ID, root.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.Users.AuthAPIKey(ctx, nkey)
	storetest.WantCode(t, err, orchestrator.EUnauthorized, "")

	if err := e.Users.DeleteAPIKey(ctx, u.ID, k.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.Users.UserByAPIKey(ctx, key)
	storetest.WantCode(t, err, orchestrator.EUnauthorized, "")
	storetest.WantCode(t, e.Users.DeleteAPIKey(ctx, u.ID, k.ID), orchestrator.ENotFound, "")
}

// A key made with an expiry authenticates until then and is refused from
// then on (unauthorized, saying it expired); a key without one, made
// alongside, keeps working.
func TestAPIKeyExpiry(t *testing.T) {
	ctx := context.Background()
	e, u := storetest.NewUser(t)
	forever, _, err := e.Users.CreateAPIKey(ctx, u.ID, "forever")
	if err != nil {
		t.Fatal(err)
	}
	until := e.Clock.Now().Add(time.Hour)
	key, k, err := e.Users.CreateAPIKeyExpiring(ctx, u.ID, "ci", until)
	if err != nil || k.ExpiresAt == nil || !k.ExpiresAt.Equal(until) {
		t.Fatalf("create expiring key: %+v, %v", k, err)
	}
	for _, bad := range []time.Time{e.Clock.Now(), e.Clock.Now().Add(-time.Second)} {
		_, _, err := e.Users.CreateAPIKeyExpiring(ctx, u.ID, "x", bad)
		storetest.WantCode(t, err, orchestrator.EInvalid, "expires_at")
	}
	if keys, _ := e.Users.ListAPIKeys(ctx, u.ID); len(keys) != 2 {
		t.Fatalf("a refused expiry stored a key: %+v", keys)
	}

	// Just before its expiry it works.
	e.Clock.Advance(time.Hour - time.Millisecond)
	if got, err := e.Users.UserByAPIKey(ctx, key); err != nil || got.ID != u.ID {
		t.Fatalf("key before its expiry: %+v, %v", got, err)
	}
	usedAt := e.Clock.Now()

	// From its expiry on it does not, and says why.
	e.Clock.Advance(time.Millisecond)
	for _, auth := range []func() error{
		func() error { _, err := e.Users.AuthAPIKey(ctx, key); return err },
		func() error { _, err := e.Users.UserByAPIKey(ctx, key); return err },
	} {
		err := auth()
		storetest.WantCode(t, err, orchestrator.EUnauthorized, "")
		var xe *identity.APIKeyExpiredError
		if !errors.As(err, &xe) || !xe.ExpiresAt.Equal(until) || !strings.Contains(orchestrator.ErrorMessage(err), "expired") {
			t.Fatalf("expired key: %v (%T)", err, err)
		}
	}
	e.Clock.Advance(24 * time.Hour)
	if _, err := e.Users.AuthAPIKey(ctx, key); orchestrator.ErrorCode(err) != orchestrator.EUnauthorized {
		t.Fatalf("expired key a day later: %v", err)
	}
	// An unknown key is still just invalid, not expired.
	var xe *identity.APIKeyExpiredError
	if _, err := e.Users.AuthAPIKey(ctx, key+"x"); errors.As(err, &xe) || orchestrator.ErrorCode(err) != orchestrator.EUnauthorized {
		t.Fatalf("unknown key: %v", err)
	}
	if got, err := e.Users.UserByAPIKey(ctx, forever); err != nil || got.ID != u.ID {
		t.Fatalf("the key without an expiry: %+v, %v", got, err)
	}

	keys, err := e.Users.ListAPIKeys(ctx, u.ID)
	if err != nil || len(keys) != 2 {
		t.Fatalf("list: %+v, %v", keys, err)
	}
	for _, k := range keys {
		switch k.Name {
		case "ci":
			// Listed with its expiry; refused uses are not recorded as uses.
			if k.ExpiresAt == nil || !k.ExpiresAt.Equal(until) || k.LastUsedAt == nil || !k.LastUsedAt.Equal(usedAt) {
				t.Fatalf("expired key listed as %+v (expires %v, last used %v)", k, k.ExpiresAt, k.LastUsedAt)
			}
		case "forever":
			if k.ExpiresAt != nil {
				t.Fatalf("key without expiry listed with %v", k.ExpiresAt)
			}
		}
	}
	// Node keys never expire.
	s := e.Session(t, u.ID, "s")
	root := e.Node(t, u.ID, s.ID, nil, "root")
	nkey, nk, err := e.Users.CreateNodeAPIKey(ctx, u.ID, s.ID, root.ID)
	if err != nil || nk.ExpiresAt != nil {
		t.Fatalf("node key %+v, %v", nk, err)
	}
	e.Clock.Advance(10 * 365 * 24 * time.Hour)
	if p, err := e.Users.AuthAPIKey(ctx, nkey); err != nil || p.NodeID != root.ID {
		t.Fatalf("node key ten years on: %+v, %v", p, err)
	}
}
