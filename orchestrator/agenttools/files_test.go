package agenttools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/agenttools"
	"github.com/filepath-dev/filepath/orchestrator/files"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// auditToStore writes the file tools' audit to the store, as the server does.
type auditToStore struct{ st *audit.Store }

func (a auditToStore) RecordFileOp(ctx context.Context, op files.Audit) error {
	return a.st.RecordToolCall(ctx, audit.NewToolCall{SessionID: op.SessionID, NodeID: op.NodeID, Actor: op.Actor, Source: audit.SourceAPI,
		Name: op.Name, Parameters: op.Params, Result: op.Result, Error: op.Err, StartedAt: op.Started, CompletedAt: op.Completed})
}

// filesFixture is the fixture with the file tools, and a node "kept"
// whose allowed_paths are /src.
type filesFixture struct {
	*fixture
	fs *vfs.VFS
}

func newFilesFixture(t *testing.T) *filesFixture {
	t.Helper()
	var v *vfs.VFS
	f := newFixture(t, func(c *agenttools.Config) {
		rdb, err := c.Store.ReadDB().DB()
		if err != nil {
			t.Fatal(err)
		}
		v = vfs.New(c.Store.SQL(), vfs.Config{ReadDB: rdb})
		t.Cleanup(v.Close)
		c.Files, err = files.New(files.Config{VFS: v, Recorder: auditToStore{c.Audit}})
		if err != nil {
			t.Fatal(err)
		}
	})
	root := f.nodes["root"].ID
	n := must(f.sessions.CreateNode(f.ctx, f.alice.ID, f.sid, sessions.NewNode{Name: "kept", AgentType: "shelley", ParentID: &root,
		Config: json.RawMessage(`{"allowed_paths":["/src"]}`)}))
	f.nodes["kept"] = n
	f.keys["kept"] = must2(f.users.CreateNodeAPIKey(f.ctx, f.alice.ID, f.sid, n.ID))
	sfs := v.Session(f.sid)
	for p, c := range map[string]string{"/src/main.go": "package main\n\nfunc main() {}\n", "/secret/key.txt": "k\n"} {
		if _, _, err := sfs.WriteFile(f.ctx, p, []byte(c), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return &filesFixture{fixture: f, fs: v}
}

func must2[T any](v T, _ any, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestFileToolsREST(t *testing.T) {
	f := newFilesFixture(t)
	ls := f.call("child", "GET", "/api/v1/tools", nil)
	var tools struct {
		Data []files.ToolInfo
	}
	json.Unmarshal(ls.raw, &tools)
	byName := map[string]files.ToolInfo{}
	for _, ti := range tools.Data {
		byName[ti.Name] = ti
	}
	if ls.status != 200 || !byName["file_read_text"].ReadOnly || byName["file_replace_lines"].ReadOnly || !strings.Contains(string(byName["kv_set"].InputSchema), `"key"`) {
		t.Fatalf("tools: %d %s", ls.status, ls.raw)
	}
	tool := func(who, name string, args any) answer {
		t.Helper()
		return f.call(who, "POST", "/api/v1/tools/"+name, args)
	}
	if a := tool("child", "file_write_text", map[string]any{"id": "/workspace/notes/plan.md", "content": "one\ntwo\n"}); a.status != 200 || a.body["total_lines"] != 2.0 {
		t.Fatalf("write: %d %s", a.status, a.raw)
	}
	rd := tool("child", "file_read_text", map[string]any{"id": "notes/plan.md", "start_line": 2})
	if rd.status != 200 || rd.body["content"] != "two\n" {
		t.Fatalf("read: %d %s", rd.status, rd.raw)
	}
	hash := rd.body["hash"].(string)
	// another agent changes the file: an edit based on the old read fails
	if a := tool("sibling", "file_append_bytes", map[string]any{"id": "/notes/plan.md", "data": "dGhyZWUK"}); a.status != 200 {
		t.Fatalf("append: %d %s", a.status, a.raw)
	}
	r := testkit.Request(t, nil, "POST", f.url+"/api/v1/tools/file_replace_lines", f.keys["child"],
		map[string]any{"id": "/notes/plan.md", "start_line": 1, "end_line": 1, "content": "ONE", "if_match": hash})
	if r.Status != 412 || !strings.Contains(string(r.Body), "has changed") || r.Header.Get("ETag") == "" {
		t.Fatalf("stale if_match: %d %s", r.Status, r.Body)
	}
	// the file's bytes, by range
	raw := testkit.Request(t, nil, "GET", f.url+"/api/v1/files/notes/plan.md", f.keys["child"], nil, "Range", "bytes=4-")
	if raw.Status != 206 || string(raw.Body) != "two\nthree\n" || !strings.HasPrefix(raw.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("range: %d %q %v", raw.Status, raw.Body, raw.Header)
	}
	// the node's audit has its calls, with their results and errors
	calls, err := f.audit.ToolCalls(f.ctx, f.sid, f.nodes["child"].ID, 0, 20)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range calls {
		names = append(names, c.Name+map[bool]string{true: "!", false: ""}[c.Error != ""])
	}
	if strings.Join(names, " ") != "download file_replace_lines! file_read_text file_write_text" {
		t.Fatalf("audit: %v", names)
	}
	if a := tool("child", "file_read_text", map[string]any{"id": "/notes/plan.md", "lines": 1}); a.status != 422 || !strings.Contains(a.errMessage(), "lines") {
		t.Fatalf("an unknown argument: %d %s", a.status, a.raw)
	}
	if a := tool("child", "no_such_tool", map[string]any{}); a.status != 404 {
		t.Fatalf("an unknown tool: %d %s", a.status, a.raw)
	}
}

// A node reaches through the file tools what its mount shows it: its
// allowed paths.
func TestFileToolsKeepToAllowedPaths(t *testing.T) {
	f := newFilesFixture(t)
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"file_read_text", map[string]any{"id": "/secret/key.txt"}},
		{"file_write_text", map[string]any{"id": "/secret/new.txt", "content": "x"}},
		{"file_info", map[string]any{"id": "/secret/key.txt"}},
		{"file_rename", map[string]any{"id": "/src/main.go", "new_name": "/secret/main.go"}},
	} {
		if a := f.call("kept", "POST", "/api/v1/tools/"+c.name, c.args); a.status != 403 {
			t.Fatalf("%s %v: %d %s", c.name, c.args, a.status, a.raw)
		}
	}
	if r := testkit.Request(t, nil, "GET", f.url+"/api/v1/files/secret/key.txt", f.keys["kept"], nil); r.Status != 403 {
		t.Fatalf("raw read outside: %d %s", r.Status, r.Body)
	}
	ls := f.call("kept", "POST", "/api/v1/tools/file_list", map[string]any{})
	if ls.status != 200 || len(ls.body["files"].([]any)) != 1 {
		t.Fatalf("list: %d %s", ls.status, ls.raw)
	}
	cs, err := f.mcpSession("kept")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, msg := f.mcpCall(cs, "file_read_text", map[string]any{"id": "/secret/key.txt"}); !strings.Contains(msg, "allowed") && !strings.Contains(msg, "denied") && !strings.Contains(msg, "outside") {
		t.Fatalf("MCP read outside: %q", msg)
	}
	if out, msg := f.mcpCall(cs, "file_read_text", map[string]any{"id": "/src/main.go", "end_line": 1}); msg != "" || out["content"] != "package main\n" || out["total_lines"] != 3.0 {
		t.Fatalf("MCP read inside: %v %q", out, msg)
	}
}

func TestFileToolsMCP(t *testing.T) {
	f := newFilesFixture(t)
	cs, err := f.mcpSession("parent")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(f.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]*mcp.Tool{}
	for _, tl := range lt.Tools {
		found[tl.Name] = tl
	}
	for _, name := range []string{"list_children", "file_list", "file_info", "file_read_text", "file_write_text", "file_replace_lines",
		"file_create", "file_delete", "file_download", "file_search_text", "file_read_bytes", "kv_get", "kv_set", "kv_list", "kv_delete"} {
		if found[name] == nil {
			t.Fatalf("MCP has no tool %s", name)
		}
	}
	if rt := found["file_read_text"]; rt.Annotations == nil || !rt.Annotations.ReadOnlyHint || !strings.Contains(mustJSON(rt.InputSchema), `"start_line"`) {
		t.Fatalf("file_read_text: %+v %s", rt.Annotations, mustJSON(rt.InputSchema))
	}
	if out, msg := f.mcpCall(cs, "file_create", map[string]any{"name": "/data/q.csv", "content": "a,b\n1,2\n"}); msg != "" || out["id"] != "/data/q.csv" {
		t.Fatalf("create: %v %q", out, msg)
	}
	if out, msg := f.mcpCall(cs, "file_search_text", map[string]any{"id": "/data/q.csv", "pattern": `\d`}); msg != "" || len(out["matches"].([]any)) != 1 {
		t.Fatalf("search: %v %q", out, msg)
	}
	if _, msg := f.mcpCall(cs, "file_create", map[string]any{"name": "/data/q.csv"}); !strings.Contains(msg, "already exists") {
		t.Fatalf("create again: %q", msg)
	}
	if _, msg := f.mcpCall(cs, "file_read_text", map[string]any{"id": "/data/q.csv", "colour": "red"}); !strings.Contains(msg, "colour") {
		t.Fatalf("unknown argument: %q", msg)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The session's key-value store is shared by its agents: over REST, MCP,
// and (orchestrator/api) the user API.
func TestKVAcrossAgents(t *testing.T) {
	f := newFilesFixture(t)
	if a := f.call("child", "PUT", "/api/v1/kv/build/status", map[string]any{"value": map[string]any{"ok": true, "n": 3}}); a.status != 200 {
		t.Fatalf("put: %d %s", a.status, a.raw)
	}
	if a := f.call("root", "GET", "/api/v1/kv/build/status", nil); a.status != 200 || mustJSON(a.body["value"]) != `{"n":3,"ok":true}` {
		t.Fatalf("get from another agent: %d %s", a.status, a.raw)
	}
	cs, err := f.mcpSession("sibling")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if out, msg := f.mcpCall(cs, "kv_list", map[string]any{"prefix": "build/"}); msg != "" || len(out["keys"].([]any)) != 1 {
		t.Fatalf("MCP list: %v %q", out, msg)
	}
	if out, msg := f.mcpCall(cs, "kv_set", map[string]any{"key": "note", "value": "from MCP"}); msg != "" || out["value"] != "from MCP" {
		t.Fatalf("MCP set: %v %q", out, msg)
	}
	if a := f.call("child", "GET", "/api/v1/kv?prefix=no", nil); a.status != 200 || len(a.body["keys"].([]any)) != 1 {
		t.Fatalf("REST list: %d %s", a.status, a.raw)
	}
	if a := f.call("child", "DELETE", "/api/v1/kv/note", nil); a.status != 200 || a.body["deleted"] != true {
		t.Fatalf("delete: %d %s", a.status, a.raw)
	}
	// another session's agent does not see it
	if a := f.call("other", "GET", "/api/v1/kv/build/status", nil); a.status != 404 {
		t.Fatalf("another session: %d %s", a.status, a.raw)
	}
}
