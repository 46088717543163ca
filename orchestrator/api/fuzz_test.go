package api_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
)

// bodyRoutes are the routes that read a JSON body (ROOT and NODE are filled
// in).
var bodyRoutes = []struct{ method, path string }{
	{"POST", "/api/v1/sessions"},
	{"POST", "/api/v1/sessions/SID/nodes"},
	{"PATCH", "/api/v1/sessions/SID/nodes/NODE"},
	{"POST", "/api/v1/sessions/SID/nodes/NODE/move"},
	{"POST", "/api/v1/sessions/SID/nodes/NODE/messages"},
	{"POST", "/api/v1/sessions/SID/nodes/NODE/signal"},
}

var bodySeeds = []string{
	`{"name":"x"}`, `{"name":"x","git_repo_url":"https://example.com/r.git"}`,
	`{"agent_type":"pi","parent_id":"ROOT"}`, `{"agent_type":"custom","image":"x","parent_id":"ROOT"}`,
	`{"name":"y","status":"done","config":{"a":[1,{"b":null}]}}`, `{"parent_id":"ROOT","sort_order":3}`,
	`{"parent_id":null,"sort_order":-1}`, `{"content":"hi"}`, `{"action":"resume"}`,
	`{"sort_order":1e400}`, `{"sort_order":9223372036854775808}`, `{"content":"\ud800"}`,
	`{"name":"\u0000"}`, `{"config":{}}`, `{"config":null}`, `{"status":null}`, `"str"`, `1`, `true`,
	`{"name":{"nested":[[[[[[]]]]]]}}`, `{"":""}`, `{"name":"x",}`, "\xff\xfe", `{"git_repo_url":"file:///etc/passwd","name":"a"}`,
	`{"git_repo_url":"ext::sh -c touch% /tmp/pwned","name":"a"}`, `{"agent_type":"pi","parent_id":"../../etc"}`,
}

type fuzzTarget struct {
	e        *testEnv
	a        account
	sid      string
	root, nd string
}

func newFuzzTarget(t testing.TB) *fuzzTarget {
	e := newEnv(t, envOpts{})
	a := e.account("fuzz")
	s, root := e.session(a)
	n, err := e.sessions.CreateNode(context.Background(), a.user.ID, s.ID, storeNewNode(root.ID))
	if err != nil {
		t.Fatal(err)
	}
	return &fuzzTarget{e: e, a: a, sid: s.ID, root: root.ID, nd: n.ID}
}

func (f *fuzzTarget) check(t testing.TB, route int, body string) {
	r := bodyRoutes[route%len(bodyRoutes)]
	path := strings.NewReplacer("SID", f.sid, "NODE", f.nd).Replace(r.path)
	body = strings.ReplaceAll(body, "ROOT", f.root)
	rep := f.e.doT(t, r.method, path, f.a.key, body)
	if rep.status >= 500 {
		t.Fatalf("%s %s %q: %d %s", r.method, path, body, rep.status, rep.body)
	}
	if rep.status >= 400 {
		rep.errorOf(t)
	}
}

// FuzzBodies: no request body makes the API answer 5xx or a non-JSON error.
func FuzzBodies(f *testing.F) {
	for i, s := range bodySeeds {
		f.Add(i, s)
	}
	ft := newFuzzTarget(f)
	f.Fuzz(func(t *testing.T, route int, body string) {
		if route < 0 {
			route = -route
		}
		ft.check(t, route, body)
	})
}

// TestRandomBodies mutates the seeds deterministically (a fuzz pass that runs
// in every `go test`).
func TestRandomBodies(t *testing.T) {
	ft := newFuzzTarget(t)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte(`{}[]":,0123456789.-eE truefalsnul\` + "\x00\xff")
	for i := range 600 {
		b := []byte(bodySeeds[rng.IntN(len(bodySeeds))])
		for range 1 + rng.IntN(4) {
			switch op := rng.IntN(3); {
			case op == 0 && len(b) > 0:
				b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))]
			case op == 1:
				p := rng.IntN(len(b) + 1)
				b = append(b[:p], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[p:]...)...)
			case len(b) > 0:
				p := rng.IntN(len(b))
				b = append(b[:p], b[p+1:]...)
			}
		}
		ft.check(t, i, string(b))
	}
}
