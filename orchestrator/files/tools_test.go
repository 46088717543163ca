package files

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// Every tool has a schema that is an object, and files.md's names.
func TestToolSchemas(t *testing.T) {
	f := newFixture(t, Config{}, vfs.Config{})
	want := []string{"file_list", "file_info", "file_read_text", "file_write_text", "file_replace_lines", "file_create", "file_delete", "file_download",
		"file_insert_lines", "file_delete_lines", "file_search_text", "file_line_count", "file_copy", "file_rename",
		"file_read_bytes", "file_write_bytes", "file_append_bytes", "kv_get", "kv_set", "kv_list", "kv_delete"}
	for _, name := range want {
		tl, ok := f.s.Tool(name)
		if !ok {
			t.Fatalf("no tool %s", name)
		}
		var s struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
			Defs       any                        `json:"$defs"`
			Ref        string                     `json:"$ref"`
		}
		if err := json.Unmarshal(tl.Schema(), &s); err != nil || s.Type != "object" || s.Defs != nil || s.Ref != "" {
			t.Fatalf("%s: schema %s (%v)", name, tl.Schema(), err)
		}
		if strings.HasPrefix(name, "file_") && name != "file_list" && name != "file_create" && name != "file_download" {
			if _, ok := s.Properties["id"]; !ok || !contains(s.Required, "id") {
				t.Fatalf("%s: id is not a required argument: %s", name, tl.Schema())
			}
		}
	}
	rt, _ := f.s.Tool("file_read_text")
	var s struct{ Required []string }
	json.Unmarshal(rt.Schema(), &s)
	if strings.Join(s.Required, ",") != "id" || !rt.ReadOnly || rt.Route != "read_text" || rt.IfMatch {
		t.Fatalf("file_read_text: required %v, %+v", s.Required, rt)
	}
	if wt, _ := f.s.Tool("file_replace_lines"); wt.ReadOnly || !wt.IfMatch {
		t.Fatalf("file_replace_lines: %+v", wt)
	}
	if err := f.s.Register(Define("file_list", "again", true, func(ctx context.Context, c Caller, in FileID) (Named, error) { return Named{}, nil })); err == nil {
		t.Fatal("a tool registered twice")
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// The tools as an agent uses them, each audited with who, what and the
// result.
func TestToolsRoundTrip(t *testing.T) {
	f := newFixture(t, Config{}, vfs.Config{})
	agent, _ := f.fs.ForNode("n1", nil)
	c := Caller{SessionID: f.sid, NodeID: "n1", FS: agent}
	out, err := f.call(t, c, "file_create", map[string]any{"name": "/workspace/data/a.csv", "content": "x,y\n1,2\n", "mime_type": "application/x-declared"})
	if err != nil || out["id"] != "/data/a.csv" || out["name"] != "a.csv" {
		t.Fatalf("create: %v %v", out, err)
	}
	if a := f.audit.last(); a.Name != "file_create" || a.NodeID != "n1" || a.Actor != "" || a.Err != "" || !strings.Contains(string(a.Params), `"/workspace/data/a.csv"`) {
		t.Fatalf("audit of create: %+v", a)
	}
	info, err := f.call(t, c, "file_info", map[string]any{"id": "data/a.csv"})
	if err != nil || info["mime_type"] != "application/x-declared" || info["source"] != "created" || info["node_id"] != "n1" || info["size_bytes"] != 8.0 {
		t.Fatalf("info: %v %v", info, err)
	}
	rd, err := f.call(t, c, "file_read_text", map[string]any{"id": "/data/a.csv", "start_line": 2})
	if err != nil || rd["content"] != "1,2\n" || rd["total_lines"] != 2.0 {
		t.Fatalf("read: %v %v", rd, err)
	}
	ed, err := f.call(t, c, "file_insert_lines", map[string]any{"id": "/data/a.csv", "after_line": 2, "content": "3,4", "if_match": rd["hash"]})
	if err != nil || ed["total_lines"] != 3.0 {
		t.Fatalf("insert: %v %v", ed, err)
	}
	// the type declared at creation lasts until the content changes
	if info, _ := f.call(t, c, "file_info", map[string]any{"id": "/data/a.csv"}); info["mime_type"] != "text/csv" {
		t.Fatalf("type after an edit: %v", info["mime_type"])
	}
	if _, err := f.call(t, c, "file_replace_lines", map[string]any{"id": "/data/a.csv", "start_line": 1, "end_line": 1, "content": "a,b", "if_match": rd["hash"]}); orchestrator.ErrorCode(err) != orchestrator.EPreconditionFailed {
		t.Fatalf("stale if_match: %v", err)
	}
	if a := f.audit.last(); a.Name != "file_replace_lines" || !strings.Contains(a.Err, "has changed") {
		t.Fatalf("audit of a refused edit: %+v", a)
	}
	sr, err := f.call(t, c, "file_search_text", map[string]any{"id": "/data/a.csv", "pattern": `^\d`})
	if err != nil || len(sr["matches"].([]any)) != 2 {
		t.Fatalf("search: %v %v", sr, err)
	}
	if _, err := f.call(t, c, "file_copy", map[string]any{"id": "/data/a.csv", "new_name": "b.csv"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.call(t, c, "file_rename", map[string]any{"id": "/data/b.csv", "new_name": "/archive/b.csv"}); err != nil {
		t.Fatal(err)
	}
	ls, err := f.call(t, c, "file_list", map[string]any{"pattern": "**/*.csv"})
	if err != nil || len(ls["files"].([]any)) != 2 {
		t.Fatalf("list: %v %v", ls, err)
	}
	if ls, _ := f.call(t, c, "file_list", map[string]any{"pattern": "archive/*"}); len(ls["files"].([]any)) != 1 {
		t.Fatalf("list archive/*: %v", ls)
	}
	// raw bytes
	if _, err := f.call(t, c, "file_write_bytes", map[string]any{"id": "/bin/x", "offset": 2, "data": base64.StdEncoding.EncodeToString([]byte{1, 2})}); err != nil {
		t.Fatal(err)
	}
	ap, err := f.call(t, c, "file_append_bytes", map[string]any{"id": "/bin/x", "data": base64.StdEncoding.EncodeToString([]byte{3})})
	if err != nil || ap["size"] != 5.0 {
		t.Fatalf("append: %v %v", ap, err)
	}
	rb, err := f.call(t, c, "file_read_bytes", map[string]any{"id": "/bin/x", "offset": 1, "length": 10})
	if err != nil || rb["data"] != base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 3}) || rb["length"] != 4.0 || rb["size"] != 5.0 {
		t.Fatalf("read bytes: %v %v", rb, err)
	}
	if _, err := f.call(t, c, "file_write_bytes", map[string]any{"id": "/bin/x", "offset": 0, "data": "not base64!"}); orchestrator.ErrorField(err) != "data" {
		t.Fatalf("bad base64: %v", err)
	}
	if _, err := f.call(t, c, "file_read_bytes", map[string]any{"id": "/bin/x", "offset": 0, "length": MaxBytesRead + 1}); orchestrator.ErrorField(err) != "length" {
		t.Fatalf("too long a read: %v", err)
	}
	del, err := f.call(t, c, "file_delete", map[string]any{"id": "/bin/x"})
	if err != nil || del["deleted"] != true {
		t.Fatalf("delete: %v %v", del, err)
	}
	if del, _ := f.call(t, c, "file_delete", map[string]any{"id": "/bin/x"}); del["deleted"] != false {
		t.Fatalf("delete again: %v", del)
	}
	// arguments are checked
	if _, err := f.call(t, c, "file_read_text", map[string]any{"id": "/data/a.csv", "lines": 3}); orchestrator.ErrorField(err) != "lines" {
		t.Fatalf("unknown argument: %v", err)
	}
	if _, err := f.call(t, c, "file_read_text", map[string]any{"id": "/data/a.csv", "start_line": "two"}); orchestrator.ErrorField(err) != "start_line" {
		t.Fatalf("wrong type: %v", err)
	}
	if _, err := f.call(t, c, "file_read_text", map[string]any{}); orchestrator.ErrorField(err) != "id" {
		t.Fatalf("no id: %v", err)
	}
	if _, err := f.call(t, c, "nope", map[string]any{}); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("unknown tool: %v", err)
	}
}

// A node reaches only its allowed paths through the tools, as through its
// mount.
func TestToolsKeepToAllowedPaths(t *testing.T) {
	f := newFixture(t, Config{}, vfs.Config{})
	f.write(t, "/src/a.go", "package a\n")
	f.write(t, "/secret/key.txt", "k\n")
	agent, _ := f.fs.ForNode("n1", []string{"/src"})
	c := Caller{SessionID: f.sid, NodeID: "n1", FS: agent}
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"file_read_text", map[string]any{"id": "/secret/key.txt"}},
		{"file_info", map[string]any{"id": "/secret/key.txt"}},
		{"file_write_text", map[string]any{"id": "/secret/new.txt", "content": "x"}},
		{"file_append_bytes", map[string]any{"id": "/secret/key.txt", "data": "eA=="}},
		{"file_copy", map[string]any{"id": "/src/a.go", "new_name": "/secret/a.go"}},
		{"file_create", map[string]any{"name": "/elsewhere.txt"}},
	} {
		if _, err := f.call(t, c, call.tool, call.args); orchestrator.ErrorCode(err) != orchestrator.EForbidden {
			t.Fatalf("%s %v: %v, want forbidden", call.tool, call.args, err)
		}
	}
	ls, err := f.call(t, c, "file_list", map[string]any{})
	if err != nil || len(ls["files"].([]any)) != 1 {
		t.Fatalf("list shows only the allowed: %v %v", ls, err)
	}
	if _, err := f.call(t, c, "file_read_text", map[string]any{"id": "/src/a.go"}); err != nil {
		t.Fatal(err)
	}
}

func TestKVTools(t *testing.T) {
	f := newFixture(t, Config{}, vfs.Config{})
	c := Caller{SessionID: f.sid, NodeID: "n1"} // no files needed
	if _, err := f.s.Call(f.ctx, c, "kv_set", json.RawMessage(`{"key":"plan/step","value":{"n":1,"done":false}}`)); err != nil {
		t.Fatal(err)
	}
	got, err := f.s.Call(f.ctx, c, "kv_get", json.RawMessage(`{"key":"plan/step"}`))
	if err != nil || string(got.(KVValue).Value) != `{"n":1,"done":false}` {
		t.Fatalf("get: %v %v", got, err)
	}
	f.s.Call(f.ctx, c, "kv_set", json.RawMessage(`{"key":"other","value":"x"}`))
	ls, err := f.s.Call(f.ctx, c, "kv_list", json.RawMessage(`{"prefix":"plan/"}`))
	if err != nil || len(ls.(KVKeys).Keys) != 1 || ls.(KVKeys).Keys[0].Key != "plan/step" {
		t.Fatalf("list: %+v %v", ls, err)
	}
	if d, _ := f.s.Call(f.ctx, c, "kv_delete", json.RawMessage(`{"key":"plan/step"}`)); !d.(KVDeleted).Deleted {
		t.Fatal("delete")
	}
	if _, err := f.s.Call(f.ctx, c, "kv_get", json.RawMessage(`{"key":"plan/step"}`)); orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("get after delete: %v", err)
	}
	big := `{"key":"big","value":"` + strings.Repeat("x", MaxValueLen) + `"}`
	if _, err := f.s.Call(f.ctx, c, "kv_set", json.RawMessage(big)); orchestrator.ErrorCode(err) != orchestrator.ETooLarge {
		t.Fatalf("a value over the bound: %v", err)
	}
	if _, err := f.s.Call(f.ctx, c, "kv_set", json.RawMessage(`{"key":"v"}`)); orchestrator.ErrorField(err) != "value" {
		t.Fatalf("no value: %v", err)
	}
	if a := f.audit.last(); a.Name != "kv_set" || a.Err == "" || a.NodeID != "n1" {
		t.Fatalf("audit: %+v", a)
	}
}
