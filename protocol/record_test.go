package protocol_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/filepath-dev/filepath/protocol"
)

const schemaBase = "https://github.com/filepath-dev/filepath/protocol/schema/"

// recordSchema compiles the record schema with the two it refers to.
func recordSchema(t *testing.T, ref string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	for name, doc := range map[string][]byte{
		"event.schema.json": protocol.EventSchema(), "input.schema.json": protocol.InputSchema(), "record.schema.json": protocol.RecordSchema(),
	} {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.AddResource(schemaBase+name, v); err != nil {
			t.Fatal(err)
		}
	}
	s, err := c.Compile(schemaBase + ref)
	if err != nil {
		t.Fatalf("compile %s: %v", ref, err)
	}
	return s
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRecordSchema: the data of a record must have the shape its kind says,
// and the node in a node record must be a whole node.
func TestRecordSchema(t *testing.T) {
	s := recordSchema(t, "record.schema.json")
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	parent := "n1"
	node := protocol.Node{ID: "n2", SessionID: "s1", ParentID: &parent, Name: "child", AgentType: "custom", Status: protocol.StateIdle, Workspace: protocol.WorkspaceShared,
		Config: json.RawMessage(`{}`), CreatedAt: at, UpdatedAt: at, Total: 1, Generation: 1}
	rec := func(kind string, data any) string {
		return mustJSON(t, protocol.Record{Seq: 7, Kind: kind, NodeID: "n2", At: at, Data: json.RawMessage(mustJSON(t, data))})
	}
	code := 3
	tests := []struct {
		name  string
		json  string
		valid bool
	}{
		{"event", rec(protocol.KindEvent, protocol.TextEvent{Type: "text", Content: "hi"}), true},
		{"input", rec(protocol.KindInput, protocol.SignalInput{Type: "signal", Action: "pause"}), true},
		{"node", rec(protocol.KindNode, protocol.NodeChange{Op: protocol.OpMoved, Node: node}), true},
		{"node deleted", rec(protocol.KindNode, protocol.NodeChange{Op: protocol.OpDeleted, Node: node, IDs: []string{"n2"}}), true},
		{"file", rec(protocol.KindFile, protocol.FileChange{Op: protocol.FileModified, Path: "/a.txt", Size: 3}), true},
		{"error", rec(protocol.KindError, protocol.ErrorData{Message: "agent exited with code 3", Source: protocol.SourceExit, ExitCode: &code}), true},
		{"session-level record", strings.Replace(rec(protocol.KindFile, protocol.FileChange{Op: "created", Path: "/x", Size: 0}), `"node_id":"n2"`, `"node_id":""`, 1), true},
		{"event data under kind node", rec(protocol.KindNode, protocol.TextEvent{Type: "text", Content: "hi"}), false},
		{"invalid event", rec(protocol.KindEvent, map[string]string{"type": "text"}), false},
		{"unknown kind", rec("note", map[string]string{}), false},
		{"node without exit_code", rec(protocol.KindNode, map[string]any{"op": "created", "node": map[string]any{"id": "n2"}}), false},
		{"unknown error source", rec(protocol.KindError, protocol.ErrorData{Message: "x", Source: "disk"}), false},
		{"unknown file op", rec(protocol.KindFile, protocol.FileChange{Op: "renamed", Path: "/x"}), false},
		{"extra envelope field", strings.Replace(rec(protocol.KindEvent, protocol.TextEvent{Type: "text", Content: "hi"}), `{"seq"`, `{"session_id":"s1","seq"`, 1), false},
		{"seq 0", strings.Replace(rec(protocol.KindEvent, protocol.TextEvent{Type: "text", Content: "hi"}), `"seq":7`, `"seq":0`, 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(v); (err == nil) != tt.valid {
				t.Fatalf("valid=%v (%v), want %v: %s", err == nil, err, tt.valid, tt.json)
			}
		})
	}
}

// TestSchemaComponents: the named schemas come out with every reference
// pointing at another returned name, so they can be a document's components.
func TestSchemaComponents(t *testing.T) {
	const prefix = "#/components/schemas/"
	comps, err := protocol.SchemaComponents(prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"AgentEvent", "TextEvent", "AgentInput", "SignalInput", "Record", "EventRecord", "NodeChange", "FileChange", "ErrorData", "Node", "Session"} {
		if comps[want] == nil {
			t.Errorf("component %s is missing", want)
		}
	}
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "$ref" {
					name, ok := strings.CutPrefix(s, prefix)
					if !ok || comps[name] == nil {
						t.Errorf("%s: $ref %q does not name a component", where, s)
					}
				}
				walk(where, x)
			}
		case []any:
			for _, x := range v {
				walk(where, x)
			}
		}
	}
	for name, c := range comps {
		walk(name, c)
		if m, _ := c.(map[string]any); m["$id"] != nil || m["$schema"] != nil {
			t.Errorf("%s keeps $id/$schema", name)
		}
	}
}
