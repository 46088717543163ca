package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit/gitssh"

	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
)

// TestSessionSecrets: a vendor key is set with PUT and then only named:
// neither the PUT's answer, the list, the tree nor the session's records
// carry it; a node's own key can neither list nor set one; another user
// cannot reach them; and an agent that needs a key the session lacks is
// refused before any node is made, the error naming the key.
func TestSessionSecrets(t *testing.T) {
	e := newEnv(t, envOpts{secrets: bytes.Repeat([]byte{1}, secrets.KeySize)})
	ctx := context.Background()
	alice, bob := e.account("alice"), e.account("bob")
	s, root := e.session(alice)
	base := "/api/v1/sessions/" + s.ID
	const plain = "sgamp_VERY-SECRET-amp-key-42"

	// Spawning amp without the key: refused, naming it, no node made.
	spawn := `{"agent_type":"amp","task":"hi","parent_id":"` + root.ID + `"}`
	r := e.do("POST", base+"/nodes", alice.key, spawn)
	code, msg, field := r.errorOf(t)
	if r.status != 422 || code != "invalid" || field != "agent_type" || !strings.Contains(msg, "AMP_API_KEY") {
		t.Fatalf("amp without its key: %d %s %s %q", r.status, code, field, msg)
	}
	if tree, _ := e.sessions.Tree(ctx, alice.user.ID, s.ID); len(tree) != 1 {
		t.Fatalf("a refused spawn made a node: %d nodes", len(tree))
	}

	r = e.do("PUT", base+"/secrets/AMP_API_KEY", alice.key, `{"value":"`+plain+`"}`)
	if r.status != 200 || bytes.Contains(r.body, []byte(plain)) || !bytes.Contains(r.body, []byte(`"name":"AMP_API_KEY"`)) {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	if v, err := e.secrets.OpenForSession(ctx, s.ID, "AMP_API_KEY"); err != nil || v.Value != plain {
		t.Fatalf("stored %q, %v", v.Value, err)
	}
	r = e.do("GET", base+"/secrets", alice.key, "")
	var list struct{ Data []map[string]any }
	if r.status != 200 || json.Unmarshal(r.body, &list) != nil || len(list.Data) != 1 || list.Data[0]["name"] != "AMP_API_KEY" || bytes.Contains(r.body, []byte(plain)) {
		t.Fatalf("GET: %d %s", r.status, r.body)
	}
	if r = e.do("POST", base+"/nodes", alice.key, spawn); r.status != 201 || bytes.Contains(r.body, []byte(plain)) {
		t.Fatalf("amp with its key: %d %s", r.status, r.body)
	}
	for _, path := range []string{base + "/tree", base + "/nodes/" + root.ID + "/messages", "/api/v1/agents", base} {
		if r = e.do("GET", path, alice.key, ""); r.status != 200 || bytes.Contains(r.body, []byte(plain)) {
			t.Errorf("GET %s: %d, holds the key: %v", path, r.status, bytes.Contains(r.body, []byte(plain)))
		}
	}
	recs, _ := e.st.Records(ctx, s.ID, 0, 1000, "")
	for _, rec := range recs {
		if bytes.Contains(rec.Data, []byte(plain)) {
			t.Errorf("record %d holds the key", rec.Seq)
		}
	}

	// Bad names and values; other principals.
	if r = e.do("PUT", base+"/secrets/OPENAI_API_KEY", alice.key, `{"value":"x"}`); r.status != 422 {
		t.Errorf("an unknown secret name: %d %s", r.status, r.body)
	}
	if r = e.do("PUT", base+"/secrets/CURSOR_API_KEY", alice.key, `{}`); r.status != 422 {
		t.Errorf("no value: %d %s", r.status, r.body)
	}
	nodeKey := e.nodeKey(alice, s.ID, root.ID)
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		path := base + "/secrets"
		if m != "GET" {
			path += "/AMP_API_KEY"
		}
		if r = e.do(m, path, nodeKey, `{"value":"stolen"}`); r.status != 403 {
			t.Errorf("%s %s with a node key: %d", m, path, r.status)
		}
		if r = e.do(m, path, bob.key, `{"value":"stolen"}`); r.status != 404 {
			t.Errorf("%s %s by another user: %d", m, path, r.status)
		}
	}
	if v, _ := e.secrets.OpenForSession(ctx, s.ID, "AMP_API_KEY"); v.Value != plain {
		t.Fatalf("the key changed to %q", v.Value)
	}
	if r = e.do("DELETE", base+"/secrets/AMP_API_KEY", alice.key, ""); r.status != 204 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if r = e.do("GET", base+"/secrets", alice.key, ""); !bytes.Contains(r.body, []byte(`"data":[]`)) {
		t.Fatalf("after DELETE: %s", r.body)
	}
}

// TestUserSecrets: a user's secrets (every kind) are set, rotated, listed
// and deleted by name with their kinds and hosts and never their values;
// a session sees them beside its own, its own of the same name overriding
// (and the user's applying again once it is deleted); an amp node spawns
// with the user's key; an SSH key shows its public half; node keys and
// other users reach none of it; and the pinned host keys are listed and
// forgotten per user.
func TestUserSecrets(t *testing.T) {
	e := newEnv(t, envOpts{secrets: bytes.Repeat([]byte{2}, secrets.KeySize)})
	ctx := context.Background()
	alice, bob := e.account("alice"), e.account("bob")
	s, root := e.session(alice)
	const token, rotated, pass = "ghp_USER-token-000111", "ghp_ROTATED-token-222333", "hunter2-PASSWORD-444"
	key := gitssh.NewKey(t)
	puts := []struct{ name, body string }{
		{"github", `{"kind":"github_token","host":"GitHub.com","value":"` + token + `"}`},
		{"corp", `{"kind":"git_https","host":"git.example.com","username":"alice","value":"` + pass + `"}`},
		{"deploy", `{"kind":"git_ssh","host":"git.example.com","value":` + strconv.Quote(key.Private) + `}`},
		{"AMP_API_KEY", `{"value":"sgamp_user-key-555"}`},
	}
	for _, p := range puts {
		if r := e.do("PUT", "/api/v1/secrets/"+p.name, alice.key, p.body); r.status != 200 {
			t.Fatalf("PUT %s: %d %s", p.name, r.status, r.body)
		}
	}
	r := e.do("PUT", "/api/v1/secrets/github", alice.key, `{"kind":"github_token","host":"github.com","value":"`+rotated+`"}`)
	if r.status != 200 {
		t.Fatalf("rotate: %d %s", r.status, r.body)
	}
	if v, err := e.secrets.Open(ctx, alice.user.ID, "", "github"); err != nil || v.Value != rotated || v.Host != "github.com" {
		t.Fatalf("rotated: %v %v", v, err)
	}
	var list struct{ Data []secrets.Info }
	r = e.do("GET", "/api/v1/secrets", alice.key, "")
	if r.status != 200 || json.Unmarshal(r.body, &list) != nil || len(list.Data) != 4 {
		t.Fatalf("GET /secrets: %d %s", r.status, r.body)
	}
	byName := map[string]secrets.Info{}
	for _, in := range list.Data {
		byName[in.Name] = in
	}
	if in := byName["deploy"]; in.Kind != secrets.KindGitSSH || in.PublicKey != key.Public || in.Scope != secrets.ScopeUser {
		t.Errorf("the SSH key is listed as %+v, want its public key %q", in, key.Public)
	}
	if in := byName["corp"]; in.Username != "alice" || in.Host != "git.example.com" {
		t.Errorf("the HTTPS credential is listed as %+v", in)
	}
	for _, secret := range []string{token, rotated, pass, "sgamp_user-key-555", "PRIVATE KEY"} {
		if bytes.Contains(r.body, []byte(secret)) {
			t.Errorf("the list holds %q", secret)
		}
	}

	// The session sees the user's; its own of the same name wins.
	base := "/api/v1/sessions/" + s.ID
	if r = e.do("POST", base+"/nodes", alice.key, `{"agent_type":"amp","task":"hi","parent_id":"`+root.ID+`"}`); r.status != 201 {
		t.Fatalf("amp with the user's key: %d %s", r.status, r.body)
	}
	if r = e.do("PUT", base+"/secrets/github", alice.key, `{"kind":"github_token","value":"ghp_session-only-666"}`); r.status != 200 {
		t.Fatalf("PUT the session's: %d %s", r.status, r.body)
	}
	r = e.do("GET", base+"/secrets", alice.key, "")
	if json.Unmarshal(r.body, &list) != nil || len(list.Data) != 4 {
		t.Fatalf("the session's list: %s", r.body)
	}
	for _, in := range list.Data {
		if want := map[bool]string{true: secrets.ScopeSession, false: secrets.ScopeUser}[in.Name == "github"]; in.Scope != want {
			t.Errorf("%s in the session's list: scope %s, want %s", in.Name, in.Scope, want)
		}
	}
	if v, _ := e.secrets.Open(ctx, alice.user.ID, s.ID, "github"); v.Value != "ghp_session-only-666" {
		t.Errorf("the session opens %q, want its own", v.Value)
	}
	if r = e.do("DELETE", base+"/secrets/github", alice.key, ""); r.status != 204 {
		t.Fatalf("DELETE the session's: %d %s", r.status, r.body)
	}
	if v, _ := e.secrets.Open(ctx, alice.user.ID, s.ID, "github"); v.Value != rotated {
		t.Errorf("after the session's is deleted it opens %q, want the user's", v.Value)
	}

	// Bad input.
	for _, tt := range []struct{ name, body, field string }{
		{"x", `{"value":"v"}`, "kind"},
		{"x", `{"kind":"git_ssh","value":"not a key"}`, "value"},
		{"x", `{"kind":"github_token","value":"a\nb"}`, "value"},
		{"-x", `{"kind":"github_token","value":"v"}`, "name"},
		{"x", `{"kind":"git_https","host":"https://h/p","value":"v"}`, "host"},
		{"x", `{"kind":"git_ssh","username":"u","value":` + strconv.Quote(key.Private) + `}`, "username"},
	} {
		r := e.do("PUT", "/api/v1/secrets/"+tt.name, alice.key, tt.body)
		if _, _, field := r.errorOf(t); r.status != 422 || field != tt.field {
			t.Errorf("PUT %s %s: %d %s, want 422 about %s", tt.name, tt.body, r.status, r.body, tt.field)
		}
	}

	// Nobody else reaches them.
	nodeKey := e.nodeKey(alice, s.ID, root.ID)
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		path := "/api/v1/secrets"
		if m != "GET" {
			path += "/github"
		}
		if r = e.do(m, path, nodeKey, `{"kind":"github_token","value":"stolen"}`); r.status != 403 {
			t.Errorf("%s %s with a node key: %d", m, path, r.status)
		}
	}
	if r = e.do("GET", "/api/v1/secrets", bob.key, ""); r.status != 200 || !bytes.Contains(r.body, []byte(`"data":[]`)) {
		t.Errorf("bob's list: %d %s", r.status, r.body)
	}
	if r = e.do("DELETE", "/api/v1/secrets/github", bob.key, ""); r.status != 404 {
		t.Errorf("bob deletes alice's: %d", r.status)
	}
	if r = e.do("DELETE", "/api/v1/secrets/corp", alice.key, ""); r.status != 204 {
		t.Errorf("alice deletes hers: %d %s", r.status, r.body)
	}
	if _, err := e.secrets.Open(ctx, alice.user.ID, "", "corp"); err == nil {
		t.Error("a deleted secret still opens")
	}
	if _, err := e.secrets.Open(ctx, bob.user.ID, "", "github"); err == nil {
		t.Error("bob opens alice's secret")
	}

	// Known hosts: per user, listed, forgotten.
	pin, err := e.secrets.TrustHostKey(ctx, alice.user.ID, "git.example.com:22", key.Signer.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	var hosts struct{ Data []secrets.KnownHost }
	if r = e.do("GET", "/api/v1/known-hosts", alice.key, ""); json.Unmarshal(r.body, &hosts) != nil || len(hosts.Data) != 1 || hosts.Data[0].Fingerprint != pin.Fingerprint {
		t.Fatalf("known hosts: %s", r.body)
	}
	if r = e.do("GET", "/api/v1/known-hosts", bob.key, ""); !bytes.Contains(r.body, []byte(`"data":[]`)) {
		t.Errorf("bob's known hosts: %s", r.body)
	}
	if r = e.do("DELETE", "/api/v1/known-hosts/git.example.com:22", bob.key, ""); r.status != 404 {
		t.Errorf("bob forgets alice's pin: %d", r.status)
	}
	if r = e.do("DELETE", "/api/v1/known-hosts/git.example.com:22", alice.key, ""); r.status != 204 {
		t.Errorf("forget: %d %s", r.status, r.body)
	}
	if _, ok, _ := e.secrets.HostKey(ctx, alice.user.ID, "git.example.com:22"); ok {
		t.Error("the pin is still there")
	}
}
