package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
)

func TestUsers(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	a, err := e.s.CreateUser(ctx, "alice", true)
	if err != nil || !a.IsAdmin || a.Name != "alice" {
		t.Fatalf("create %+v, %v", a, err)
	}
	_, err = e.s.CreateUser(ctx, "alice", false)
	wantCode(t, err, orchestrator.EConflict, "name")
	for _, bad := range []string{"", "-x", "a b", strings.Repeat("a", 65), "é"} {
		_, err = e.s.CreateUser(ctx, bad, false)
		wantCode(t, err, orchestrator.EInvalid, "name")
	}
	got, err := e.s.UserByName(ctx, "alice")
	if err != nil || got.ID != a.ID {
		t.Fatalf("by name %+v, %v", got, err)
	}
	_, err = e.s.UserByName(ctx, "bob")
	wantCode(t, err, orchestrator.ENotFound, "")
	if n, err := e.s.CountUsers(ctx); err != nil || n != 1 {
		t.Fatalf("count %d, %v", n, err)
	}
}

func TestLoginToken(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	u := e.user(t, "alice")
	tok, err := e.s.CreateLoginToken(ctx, u.ID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var stored int
	_ = e.s.SQL().QueryRow(`SELECT COUNT(*) FROM login_tokens WHERE hash = ?`, tok).Scan(&stored)
	if stored != 0 {
		t.Fatal("token stored in clear")
	}
	got, err := e.s.ConsumeLoginToken(ctx, tok)
	if err != nil || got.ID != u.ID {
		t.Fatalf("consume %+v, %v", got, err)
	}
	_, err = e.s.ConsumeLoginToken(ctx, tok)
	wantCode(t, err, orchestrator.EUnauthorized, "")

	tok2, _ := e.s.CreateLoginToken(ctx, u.ID, time.Minute)
	e.clock.Add(time.Minute)
	_, err = e.s.ConsumeLoginToken(ctx, tok2)
	wantCode(t, err, orchestrator.EUnauthorized, "")
	_, err = e.s.ConsumeLoginToken(ctx, "nonsense")
	wantCode(t, err, orchestrator.EUnauthorized, "")
	_, err = e.s.CreateLoginToken(ctx, u.ID, 0)
	wantCode(t, err, orchestrator.EInvalid, "ttl")
	_, err = e.s.CreateLoginToken(ctx, "nobody", time.Minute)
	wantCode(t, err, orchestrator.ENotFound, "")
	if n, err := e.s.DeleteExpired(ctx); err != nil || n != 2 {
		t.Fatalf("delete expired %d, %v", n, err)
	}
}

func TestWebSession(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	u := e.user(t, "alice")
	c, err := e.s.CreateWebSession(ctx, u.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.s.UserByWebSession(ctx, c); err != nil || got.ID != u.ID {
		t.Fatalf("by cookie %+v, %v", got, err)
	}
	e.clock.Add(time.Hour)
	_, err = e.s.UserByWebSession(ctx, c)
	wantCode(t, err, orchestrator.EUnauthorized, "")
	c2, _ := e.s.CreateWebSession(ctx, u.ID, time.Hour)
	if err := e.s.DeleteWebSession(ctx, c2); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.UserByWebSession(ctx, c2)
	wantCode(t, err, orchestrator.EUnauthorized, "")

	// Logout everywhere ends every session of the user, and only theirs.
	bob := e.user(t, "bob")
	var mine []string
	for range 3 {
		c, _ := e.s.CreateWebSession(ctx, u.ID, time.Hour)
		mine = append(mine, c)
	}
	theirs, _ := e.s.CreateWebSession(ctx, bob.ID, time.Hour)
	if n, err := e.s.DeleteWebSessionsOf(ctx, u.ID); err != nil || n != 3+1 { // and the expired one
		t.Fatalf("delete web sessions of alice: %d, %v", n, err)
	}
	for _, c := range mine {
		_, err = e.s.UserByWebSession(ctx, c)
		wantCode(t, err, orchestrator.EUnauthorized, "")
	}
	if got, err := e.s.UserByWebSession(ctx, theirs); err != nil || got.ID != bob.ID {
		t.Fatalf("bob's session: %+v, %v", got, err)
	}
}

func TestAPIKeys(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	u := e.user(t, "alice")
	key, k, err := e.s.CreateAPIKey(ctx, u.ID, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, "fp_") || len(key) < 40 || !strings.HasPrefix(key, k.Prefix) {
		t.Fatalf("key %q prefix %q", key, k.Prefix)
	}
	got, err := e.s.UserByAPIKey(ctx, key)
	if err != nil || got.ID != u.ID {
		t.Fatalf("by key %+v, %v", got, err)
	}
	keys, _ := e.s.ListAPIKeys(ctx, u.ID)
	if len(keys) != 1 || keys[0].LastUsedAt == nil {
		t.Fatalf("keys %+v", keys)
	}
	_, err = e.s.UserByAPIKey(ctx, key+"x")
	wantCode(t, err, orchestrator.EUnauthorized, "")

	s := e.session(t, u.ID, "s")
	root := e.node(t, u.ID, s.ID, nil, "root")
	nkey, _, err := e.s.CreateNodeAPIKey(ctx, u.ID, s.ID, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.s.AuthAPIKey(ctx, nkey)
	if err != nil || p.NodeID != root.ID || p.SessionID != s.ID || p.User.ID != u.ID {
		t.Fatalf("node principal %+v, %v", p, err)
	}
	_, err = e.s.UserByAPIKey(ctx, nkey)
	wantCode(t, err, orchestrator.EUnauthorized, "")
	// Revoked when its container ends: every key of the node goes, the
	// user's own keys stay.
	nkey2, _, err := e.s.CreateNodeAPIKey(ctx, u.ID, s.ID, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.s.DeleteNodeAPIKeys(ctx, root.ID); err != nil || n != 2 {
		t.Fatalf("delete node keys: %d, %v; want 2", n, err)
	}
	for _, k := range []string{nkey, nkey2} {
		_, err = e.s.AuthAPIKey(ctx, k)
		wantCode(t, err, orchestrator.EUnauthorized, "")
	}
	if _, err := e.s.UserByAPIKey(ctx, key); err != nil {
		t.Fatalf("the user's key after revoking the node's: %v", err)
	}
	if n, err := e.s.DeleteNodeAPIKeys(ctx, root.ID); err != nil || n != 0 {
		t.Fatalf("delete again: %d, %v", n, err)
	}
	nkey, _, err = e.s.CreateNodeAPIKey(ctx, u.ID, s.ID, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The node key dies with its node.
	if _, err := e.s.DeleteNode(ctx, u.ID, s.ID, root.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.AuthAPIKey(ctx, nkey)
	wantCode(t, err, orchestrator.EUnauthorized, "")

	if err := e.s.DeleteAPIKey(ctx, u.ID, k.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.UserByAPIKey(ctx, key)
	wantCode(t, err, orchestrator.EUnauthorized, "")
	wantCode(t, e.s.DeleteAPIKey(ctx, u.ID, k.ID), orchestrator.ENotFound, "")
}

// A key made with an expiry authenticates until then and is refused from
// then on (unauthorized, saying it expired); a key without one, made
// alongside, keeps working.
func TestAPIKeyExpiry(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	u := e.user(t, "alice")
	forever, _, err := e.s.CreateAPIKey(ctx, u.ID, "forever")
	if err != nil {
		t.Fatal(err)
	}
	until := e.clock.Now().Add(time.Hour)
	key, k, err := e.s.CreateAPIKeyExpiring(ctx, u.ID, "ci", until)
	if err != nil || k.ExpiresAt == nil || !k.ExpiresAt.Equal(until) {
		t.Fatalf("create expiring key: %+v, %v", k, err)
	}
	for _, bad := range []time.Time{e.clock.Now(), e.clock.Now().Add(-time.Second)} {
		_, _, err := e.s.CreateAPIKeyExpiring(ctx, u.ID, "x", bad)
		wantCode(t, err, orchestrator.EInvalid, "expires_at")
	}
	if keys, _ := e.s.ListAPIKeys(ctx, u.ID); len(keys) != 2 {
		t.Fatalf("a refused expiry stored a key: %+v", keys)
	}

	// Just before its expiry it works.
	e.clock.Add(time.Hour - time.Millisecond)
	if got, err := e.s.UserByAPIKey(ctx, key); err != nil || got.ID != u.ID {
		t.Fatalf("key before its expiry: %+v, %v", got, err)
	}
	usedAt := e.clock.Now()

	// From its expiry on it does not, and says why.
	e.clock.Add(time.Millisecond)
	for _, auth := range []func() error{
		func() error { _, err := e.s.AuthAPIKey(ctx, key); return err },
		func() error { _, err := e.s.UserByAPIKey(ctx, key); return err },
	} {
		err := auth()
		wantCode(t, err, orchestrator.EUnauthorized, "")
		var xe *store.APIKeyExpiredError
		if !errors.As(err, &xe) || !xe.ExpiresAt.Equal(until) || !strings.Contains(orchestrator.ErrorMessage(err), "expired") {
			t.Fatalf("expired key: %v (%T)", err, err)
		}
	}
	e.clock.Add(24 * time.Hour)
	if _, err := e.s.AuthAPIKey(ctx, key); orchestrator.ErrorCode(err) != orchestrator.EUnauthorized {
		t.Fatalf("expired key a day later: %v", err)
	}
	// An unknown key is still just invalid, not expired.
	var xe *store.APIKeyExpiredError
	if _, err := e.s.AuthAPIKey(ctx, key+"x"); errors.As(err, &xe) || orchestrator.ErrorCode(err) != orchestrator.EUnauthorized {
		t.Fatalf("unknown key: %v", err)
	}
	if got, err := e.s.UserByAPIKey(ctx, forever); err != nil || got.ID != u.ID {
		t.Fatalf("the key without an expiry: %+v, %v", got, err)
	}

	keys, err := e.s.ListAPIKeys(ctx, u.ID)
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
	s := e.session(t, u.ID, "s")
	root := e.node(t, u.ID, s.ID, nil, "root")
	nkey, nk, err := e.s.CreateNodeAPIKey(ctx, u.ID, s.ID, root.ID)
	if err != nil || nk.ExpiresAt != nil {
		t.Fatalf("node key %+v, %v", nk, err)
	}
	e.clock.Add(10 * 365 * 24 * time.Hour)
	if p, err := e.s.AuthAPIKey(ctx, nkey); err != nil || p.NodeID != root.ID {
		t.Fatalf("node key ten years on: %+v, %v", p, err)
	}
}
