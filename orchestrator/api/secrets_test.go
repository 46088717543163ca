package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/store/collab"
)

// TestSessionSecrets: a vendor key is set with PUT and then only named:
// neither the PUT's answer, the list, the tree nor the session's records
// carry it; a node's own key can neither list nor set one; another user
// cannot reach them; and an agent that needs a key the session lacks is
// refused before any node is made, the error naming the key.
func TestSessionSecrets(t *testing.T) {
	e := newEnv(t, envOpts{secrets: bytes.Repeat([]byte{1}, collab.SecretsKeySize)})
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
	if v, err := e.collab.OpenSessionSecret(ctx, s.ID, "AMP_API_KEY"); err != nil || v != plain {
		t.Fatalf("stored %q, %v", v, err)
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
	if v, _ := e.collab.OpenSessionSecret(ctx, s.ID, "AMP_API_KEY"); v != plain {
		t.Fatalf("the key changed to %q", v)
	}
	if r = e.do("DELETE", base+"/secrets/AMP_API_KEY", alice.key, ""); r.status != 204 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if r = e.do("GET", base+"/secrets", alice.key, ""); !bytes.Contains(r.body, []byte(`"data":[]`)) {
		t.Fatalf("after DELETE: %s", r.body)
	}
}
