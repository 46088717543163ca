package api_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// dbState is the row count of every table plus the log position of one
// session: equal before and after means nothing changed.
func (e *testEnv) dbState(t *testing.T, sid string) map[string]int64 {
	t.Helper()
	db := e.st.SQL()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	out := map[string]int64{}
	for _, n := range names {
		var c int64
		if err := db.QueryRow(`SELECT COUNT(*) FROM "` + n + `"`).Scan(&c); err != nil {
			t.Fatal(err)
		}
		out[n] = c
	}
	last, err := e.st.LastSeq(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	out["last_seq"] = last
	// Updated-at of the session and node rows catch in-place changes.
	var upd int64
	if err := db.QueryRow(`SELECT COALESCE(SUM(updated_at), 0) FROM agent_node`).Scan(&upd); err != nil {
		t.Fatal(err)
	}
	out["node_updates"] = upd
	return out
}

func TestBadInputChangesNothing(t *testing.T) {
	e := newEnv(t, envOpts{cfg: nil})
	a := e.account("alice")
	s, root := e.session(a)
	child, err := e.sessions.CreateNode(context.Background(), a.user.ID, s.ID, storeNewNode(root.ID))
	if err != nil {
		t.Fatal(err)
	}
	sp := "/api/v1/sessions/" + s.ID
	np := sp + "/nodes/" + child.ID
	huge := `{"name":"` + strings.Repeat("a", 2<<20) + `"}`
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		field  string
	}{
		{name: "malformed json", method: "POST", path: "/api/v1/sessions", body: `{"name":`, status: 400},
		{name: "syntax error", method: "POST", path: "/api/v1/sessions", body: `{"name" "x"}`, status: 400},
		{name: "empty body", method: "POST", path: "/api/v1/sessions", body: ``, status: 400},
		{name: "array body", method: "POST", path: "/api/v1/sessions", body: `[]`, status: 400},
		{name: "two objects", method: "POST", path: "/api/v1/sessions", body: `{"name":"a"}{"name":"b"}`, status: 400},
		{name: "wrong type", method: "POST", path: "/api/v1/sessions", body: `{"name":1}`, status: 400, field: "name"},
		{name: "unknown field", method: "POST", path: "/api/v1/sessions", body: `{"name":"x","color":"red"}`, status: 400, field: "color"},
		{name: "missing name", method: "POST", path: "/api/v1/sessions", body: `{}`, status: 422, field: "name"},
		{name: "null body", method: "POST", path: "/api/v1/sessions", body: `null`, status: 422, field: "name"},
		{name: "empty name", method: "POST", path: "/api/v1/sessions", body: `{"name":""}`, status: 422, field: "name"},
		{name: "huge body", method: "POST", path: "/api/v1/sessions", body: huge, status: 413},
		{name: "node unknown agent", method: "POST", path: sp + "/nodes", body: `{"agent_type":"nope","parent_id":"` + root.ID + `"}`, status: 422, field: "agent_type"},
		{name: "node agent wrong type", method: "POST", path: sp + "/nodes", body: `{"agent_type":7}`, status: 400, field: "agent_type"},
		{name: "node config not object", method: "POST", path: sp + "/nodes", body: `{"agent_type":"pi","parent_id":"` + root.ID + `","config":[1]}`, status: 400, field: "config"},
		{name: "node missing agent", method: "POST", path: sp + "/nodes", body: `{}`, status: 422, field: "agent_type"},
		{name: "node in unknown session", method: "POST", path: "/api/v1/sessions/nope/nodes", body: `{"agent_type":"pi"}`, status: 404},
		{name: "patch bad status", method: "PATCH", path: np, body: `{"status":"sleepy"}`, status: 422, field: "status"},
		{name: "patch config string", method: "PATCH", path: np, body: `{"config":"x"}`, status: 400, field: "config"},
		{name: "patch unknown node", method: "PATCH", path: sp + "/nodes/nope", body: `{"name":"x"}`, status: 404},
		{name: "move missing sort_order", method: "POST", path: np + "/move", body: `{}`, status: 422, field: "sort_order"},
		{name: "move sort_order string", method: "POST", path: np + "/move", body: `{"sort_order":"1"}`, status: 400, field: "sort_order"},
		{name: "move under itself", method: "POST", path: np + "/move", body: `{"parent_id":"` + child.ID + `","sort_order":0}`, status: 422, field: "parent_id"},
		{name: "message empty", method: "POST", path: np + "/messages", body: `{"content":""}`, status: 422, field: "content"},
		{name: "message number", method: "POST", path: np + "/messages", body: `{"content":5}`, status: 400, field: "content"},
		{name: "message unknown field", method: "POST", path: np + "/messages", body: `{"text":"hi"}`, status: 400, field: "text"},
		{name: "message unknown node", method: "POST", path: sp + "/nodes/nope/messages", body: `{"content":"hi"}`, status: 404},
		{name: "signal bad action", method: "POST", path: np + "/signal", body: `{"action":"explode"}`, status: 422, field: "action"},
		{name: "signal missing action", method: "POST", path: np + "/signal", body: `{}`, status: 422, field: "action"},
		{name: "messages bad limit", method: "GET", path: np + "/messages?limit=0", status: 400, field: "limit"},
		{name: "messages bad after", method: "GET", path: np + "/messages?after=abc", status: 400, field: "after"},
		{name: "logs bad tail", method: "GET", path: np + "/logs?tail=-3", status: 400, field: "tail"},
		{name: "delete unknown session", method: "DELETE", path: "/api/v1/sessions/nope", status: 404},
		{name: "delete unknown node", method: "DELETE", path: sp + "/nodes/nope", status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.dbState(t, s.ID)
			r := e.do(tt.method, tt.path, a.key, tt.body)
			if r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
			_, msg, field := r.errorOf(t)
			if field != tt.field {
				t.Fatalf("field %q (%s), want %q", field, msg, tt.field)
			}
			if msg == "" {
				t.Fatal("empty message")
			}
			after := e.dbState(t, s.ID)
			for k, v := range before {
				if after[k] != v {
					t.Fatalf("%s changed from %d to %d", k, v, after[k])
				}
			}
		})
	}
}

// TestHugeChunkedBody: a body without Content-Length is cut at the limit while
// streaming, never read whole.
func TestHugeChunkedBody(t *testing.T) {
	e, a := newAlice(t)
	body := io.MultiReader(strings.NewReader(`{"name":"`), io.LimitReader(neverEnding('a'), 64<<20), strings.NewReader(`"}`))
	req, _ := http.NewRequest("POST", e.base+"/api/v1/sessions", body)
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+a.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(b), "too_large") {
		t.Fatalf("got %d %s, want 413 too_large", resp.StatusCode, b)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}
