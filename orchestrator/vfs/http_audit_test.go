package vfs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestHTTPAudit: a refused symlink escape through the REST API is in the
// session's audit log, which GET /fs/_/audit serves newest first.
func TestHTTPAudit(t *testing.T) {
	srv, f := newServer(t, Config{})
	ctx := context.Background()
	fs := f.v.Session(f.sid)
	if _, err := fs.Symlink(ctx, RootIno, "escape", "../etc/passwd"); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := do(t, srv, f.sid, call{method: "GET", path: "/_/audit"}); code != 200 {
		t.Fatalf("empty audit log: %d", code)
	}
	if code, _, b := do(t, srv, f.sid, call{method: "GET", path: "/escape"}); code != 403 || !strings.Contains(string(b), "symlink escapes the workspace") {
		t.Fatalf("GET /escape: %d %s", code, b)
	}
	code, _, b := do(t, srv, f.sid, call{method: "GET", path: "/_/audit?limit=5"})
	var got struct {
		Data []AuditEntry `json:"data"`
	}
	if code != 200 || json.Unmarshal(b, &got) != nil || len(got.Data) != 1 ||
		!strings.Contains(got.Data[0].Error, "symlink escapes the workspace") || !strings.Contains(string(got.Data[0].Parameters), "/escape") {
		t.Fatalf("audit: %d %s", code, b)
	}
	for _, bad := range []string{"0", "x", "100000"} {
		if code, _, b := do(t, srv, f.sid, call{method: "GET", path: "/_/audit?limit=" + bad}); code != 422 || !strings.Contains(string(b), `"field":"limit"`) {
			t.Fatalf("limit=%s: %d %s", bad, code, b)
		}
	}
}
