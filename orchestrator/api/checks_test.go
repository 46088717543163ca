package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/protocol"
)

// TestSessionChecksAPI: a session's health checks are set when it is
// created and replaced with PATCH; bad checks are refused naming the field
// (400 malformed, 422 invalid) and change nothing; another user's session
// is a 404.
func TestSessionChecksAPI(t *testing.T) {
	e := newEnv(t, envOpts{})
	a, b := e.account("alice"), e.account("bob")
	r := e.do("POST", "/api/v1/sessions", a.key, `{"name":"s","checks":[{"command":"go vet ./..."},{"command":"make test","timeout":120}]}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var s protocol.Session
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Checks) != 2 || s.Checks[1].Command != "make test" || s.Checks[1].Timeout != 120 {
		t.Fatalf("created with checks %+v", s.Checks)
	}
	path := "/api/v1/sessions/" + s.ID
	if r := e.do("PATCH", path, a.key, `{"checks":[{"command":"npm test"}]}`); r.status != 200 || !strings.Contains(string(r.body), `"checks":[{"command":"npm test"}]`) {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	for _, bad := range []string{`{"checks":[{"command":""}]}`, `{"checks":"go vet"}`, `{"checks":[{"command":"x","timeout":999999}]}`} {
		r := e.do("PATCH", path, a.key, bad)
		if code, _, field := r.errorOf(t); (r.status != 400 && r.status != 422) || code != "invalid" || field != "checks" {
			t.Fatalf("patch %s: %d %s", bad, r.status, r.body)
		}
	}
	if r := e.do("PATCH", path, b.key, `{"checks":[]}`); r.status != 404 {
		t.Fatalf("another user's patch: %d %s", r.status, r.body)
	}
	if r := e.do("GET", path, a.key, ""); !strings.Contains(string(r.body), `"checks":[{"command":"npm test"}]`) {
		t.Fatalf("after refused patches: %s", r.body)
	}
	if r := e.do("PATCH", path, a.key, `{"checks":null}`); r.status != 200 || !strings.Contains(string(r.body), `"checks":[]`) {
		t.Fatalf("clear: %d %s", r.status, r.body)
	}
}

// TestCommitRefInAPI: a commit record's link to its tool or command record
// is in the node's messages.
func TestCommitRefInAPI(t *testing.T) {
	e, a := newAlice(t)
	s, root := e.session(a)
	cmd := `{"type":"command","cmd":"git commit -am x","status":"done"}`
	recs, err := e.st.Append(t.Context(), s.ID,
		protocol.Record{NodeID: root.ID, Kind: protocol.KindEvent, Data: json.RawMessage(cmd)},
		protocol.Record{NodeID: root.ID, Kind: protocol.KindEvent, Ref: -1, Data: json.RawMessage(`{"type":"commit","hash":"abc","message":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/api/v1/sessions/"+s.ID+"/nodes/"+root.ID+"/messages", a.key, "")
	var page struct{ Data []protocol.Record }
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatal(err)
	}
	last := page.Data[len(page.Data)-1]
	if r.status != 200 || last.Seq != recs[1].Seq || last.Ref != recs[0].Seq {
		t.Fatalf("messages: %d %s", r.status, r.body)
	}
}
