package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// TestFilesNodeKeyAllowedPaths: a node key reaches through /fs only what
// its node's config.allowed_paths allows, for every verb, like the node's
// FUSE mount; refusals are audited; the user's own key reaches everything.
func TestFilesNodeKeyAllowedPaths(t *testing.T) {
	tr := newNodeTree(t) // me: allowed_paths ["/src"], with a key
	e, a, root, n, key := tr.e, tr.a, tr.root, tr.me, tr.key
	ctx := context.Background()
	fs := e.files.Session(tr.sid)
	for p, content := range map[string]string{"/src/a.rs": "fn a() {}\n", "/src/b.txt": "needle in src\n", "/docs/moved.rs": "secret\n", "/docs/notes.txt": "needle in docs\n", "/top.txt": "needle at top\n"} {
		if _, _, err := fs.WriteFile(ctx, p, []byte(content), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	base := "/api/v1/sessions/" + tr.sid + "/fs"
	tests := []struct {
		name, method, path, body string
		status                   int
		denied                   bool // an audit record is expected
	}{
		{name: "read outside", method: "GET", path: "/docs/moved.rs", status: 403, denied: true},
		{name: "head outside", method: "HEAD", path: "/docs/moved.rs", status: 403, denied: true},
		{name: "list outside", method: "GET", path: "/docs", status: 403, denied: true},
		{name: "create outside", method: "POST", path: "/docs/by-node.txt", body: `{"content":"x"}`, status: 403, denied: true},
		{name: "mkdir outside", method: "POST", path: "/etc", body: `{"is_directory":true}`, status: 403, denied: true},
		{name: "update outside", method: "PUT", path: "/docs/moved.rs", body: `{"content":"x"}`, status: 403, denied: true},
		{name: "readonly flag outside", method: "PUT", path: "/docs/moved.rs", body: `{"is_readonly":true}`, status: 403, denied: true},
		{name: "delete outside", method: "DELETE", path: "/docs/moved.rs", status: 403, denied: true},
		{name: "delete a parent of the allowed path", method: "DELETE", path: "/?recursive=true", status: 403, denied: true},
		{name: "stat outside", method: "POST", path: "/_/stat", body: `{"path":"/docs/moved.rs"}`, status: 403, denied: true},
		{name: "move out", method: "POST", path: "/_/move", body: `{"src_path":"/src/a.rs","dst_path":"/docs/a.rs"}`, status: 403, denied: true},
		{name: "move in", method: "POST", path: "/_/move", body: `{"src_path":"/docs/moved.rs","dst_path":"/src/moved.rs"}`, status: 403, denied: true},
		{name: "copy in", method: "POST", path: "/_/copy", body: `{"src_path":"/docs/moved.rs","dst_path":"/src/copy.rs"}`, status: 403, denied: true},
		{name: "copy out", method: "POST", path: "/_/copy", body: `{"src_path":"/src/a.rs","dst_path":"/docs/copy.rs"}`, status: 403, denied: true},
		{name: "audit log is the user's", method: "GET", path: "/_/audit", status: 403},
		{name: "read inside", method: "GET", path: "/src/a.rs", status: 200},
		{name: "create inside", method: "POST", path: "/src/new.txt", body: `{"content":"x"}`, status: 201},
		{name: "update inside", method: "PUT", path: "/src/new.txt", body: `{"content":"y"}`, status: 200},
		{name: "stat inside", method: "POST", path: "/_/stat", body: `{"path":"/src/a.rs"}`, status: 200},
		{name: "stat the root", method: "POST", path: "/_/stat", body: `{"path":"/"}`, status: 200},
		{name: "copy inside", method: "POST", path: "/_/copy", body: `{"src_path":"/src/new.txt","dst_path":"/src/new2.txt"}`, status: 201},
		{name: "move inside", method: "POST", path: "/_/move", body: `{"src_path":"/src/new2.txt","dst_path":"/src/sub/new3.txt"}`, status: 200},
		{name: "delete inside", method: "DELETE", path: "/src/sub?recursive=true", status: 204},
	}
	denied := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, base+tt.path, key, tt.body)
			if r.status != tt.status {
				t.Fatalf("%s %s: %d %s, want %d", tt.method, tt.path, r.status, r.body, tt.status)
			}
			if tt.denied {
				denied++
				if tt.method != "HEAD" {
					if code, msg, _ := r.errorOf(t); code != "forbidden" || !strings.Contains(msg, "outside the allowed paths of node "+n.ID) {
						t.Fatalf("refusal %s %q", code, msg)
					}
				}
			}
		})
	}
	// Nothing outside changed.
	for p, want := range map[string]string{"/docs/moved.rs": "secret\n", "/src/a.rs": "fn a() {}\n"} {
		if _, b, err := fs.ReadAll(ctx, p); err != nil || string(b) != want {
			t.Fatalf("%s: %q, %v", p, b, err)
		}
	}
	for _, p := range []string{"/docs/by-node.txt", "/etc", "/docs/a.rs", "/src/moved.rs", "/src/copy.rs", "/docs/copy.rs"} {
		if _, err := fs.Stat(ctx, p); err == nil {
			t.Fatalf("%s was created", p)
		}
	}

	// A listing of / shows only what leads to the allowed paths.
	r := e.do("GET", base+"/", key, "")
	var listing struct{ Data []vfs.FileInfo }
	if err := json.Unmarshal(r.body, &listing); r.status != 200 || err != nil || len(listing.Data) != 1 || listing.Data[0].Name != "src" {
		t.Fatalf("listing of /: %d %s", r.status, r.body)
	}
	// grep finds only what is inside, and names nothing outside.
	r = e.do("POST", base+"/_/grep", key, `{"pattern":"needle"}`)
	if r.status != 200 || !strings.Contains(string(r.body), "/src/b.txt") || strings.Contains(string(r.body), "docs") || strings.Contains(string(r.body), "top") {
		t.Fatalf("grep: %d %s", r.status, r.body)
	}

	// Each refusal is in the session's audit log with the node's id, which
	// the user reads.
	r = e.do("GET", base+"/_/audit?limit=1000", a.key, "")
	var audit struct{ Data []vfs.AuditEntry }
	if err := json.Unmarshal(r.body, &audit); r.status != 200 || err != nil {
		t.Fatalf("audit: %d %s", r.status, r.body)
	}
	if len(audit.Data) != denied {
		t.Fatalf("%d audit records, want %d: %s", len(audit.Data), denied, r.body)
	}
	for _, en := range audit.Data {
		if !strings.Contains(string(en.Parameters), `"node_id":"`+n.ID+`"`) {
			t.Fatalf("audit record without the node: %+v", en)
		}
	}

	// The user's key reaches everything.
	if r := e.do("GET", base+"/docs/moved.rs", a.key, ""); r.status != 200 {
		t.Fatalf("user key: %d %s", r.status, r.body)
	}
	// A node key of a node without allowed_paths reaches everything too.
	if r := e.do("GET", base+"/docs/moved.rs", e.nodeKey(a, tr.sid, root.ID), ""); r.status != 200 {
		t.Fatalf("unrestricted node key: %d %s", r.status, r.body)
	}
}

// TestNodeKeyCannotWidenItsPolicy: a node key cannot change its own
// config, where its allowed_paths live; its name it can.
func TestNodeKeyCannotWidenItsPolicy(t *testing.T) {
	tr := newNodeTree(t) // me: allowed_paths ["/src"], with a key
	e, a, n, key := tr.e, tr.a, tr.me, tr.key
	ctx := context.Background()
	p := "/api/v1/sessions/" + tr.sid + "/nodes/" + n.ID
	if r := e.do("PATCH", p, key, `{"config":{"allowed_paths":["/"]}}`); r.status != 403 {
		t.Fatalf("node key widening its allowed_paths: %d %s", r.status, r.body)
	}
	if r := e.do("PATCH", p, key, `{"name":"renamed"}`); r.status != 200 {
		t.Fatalf("node key renaming itself: %d %s", r.status, r.body)
	}
	got, err := e.sessions.GetNode(ctx, a.user.ID, tr.sid, n.ID)
	if err != nil || !strings.Contains(string(got.Config), `"/src"`) {
		t.Fatalf("config now %s, %v", got.Config, err)
	}
	if r := e.do("PATCH", p, a.key, `{"config":{"allowed_paths":["/"]}}`); r.status != 200 {
		t.Fatalf("the user changes the config: %d %s", r.status, r.body)
	}
}

// TestAllowedPathsValidated: config.allowed_paths must be a list of
// absolute clean paths; anything else is a 422 naming the field, and the
// node's config is unchanged.
func TestAllowedPathsValidated(t *testing.T) {
	e, a := newAlice(t)
	s, root := e.session(a)
	p := "/api/v1/sessions/" + s.ID + "/nodes/" + root.ID
	if r := e.do("PATCH", p, a.key, `{"config":{"allowed_paths":["/src","/docs/api"]}}`); r.status != 200 {
		t.Fatalf("valid allowed_paths: %d %s", r.status, r.body)
	}
	long := "/" + strings.Repeat("a", 5000)
	many := `["/a"` + strings.Repeat(`,"/a"`, 64) + `]`
	for _, bad := range []string{`"/src"`, `["../x"]`, `[123]`, `["src"]`, `["/src/../etc"]`, `["/src/"]`, `["/a//b"]`, `["/a/./b"]`, `[""]`, `["/a\u0000b"]`, `["` + long + `"]`, many, `{"/src":true}`} {
		r := e.do("PATCH", p, a.key, `{"config":{"allowed_paths":`+bad+`}}`)
		if r.status != 422 {
			t.Errorf("allowed_paths %.40s: %d %s, want 422", bad, r.status, r.body)
			continue
		}
		if _, msg, field := r.errorOf(t); field != "config.allowed_paths" || !strings.Contains(msg, "allowed_paths") {
			t.Errorf("allowed_paths %.40s: field %q message %q", bad, field, msg)
		}
		// Creating a node with it is refused the same way.
		if r := e.do("POST", "/api/v1/sessions/"+s.ID+"/nodes", a.key, `{"agent_type":"pi","parent_id":"`+root.ID+`","config":{"allowed_paths":`+bad+`}}`); r.status != 422 {
			t.Errorf("create with allowed_paths %.40s: %d %s, want 422", bad, r.status, r.body)
		}
	}
	n, err := e.sessions.NodeByID(context.Background(), root.ID)
	if err != nil || string(n.Config) != `{"allowed_paths":["/src","/docs/api"]}` {
		t.Fatalf("config after the refused patches: %s %v", n.Config, err)
	}
}
