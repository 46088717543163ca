package api_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestOpenAPISchemasDescribeAnswers: what the API answers for sessions,
// trees and records validates against the component schemas of its own
// openapi.json (which come from protocol's record schema).
func TestOpenAPISchemasDescribeAnswers(t *testing.T) {
	e, a := newAlice(t)
	r := e.do("GET", "/api/v1/openapi.json", a.key, "")
	if r.status != 200 {
		t.Fatalf("openapi.json: %d", r.status)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	const url = "https://filepath.test/openapi.json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	schema := func(name string) *jsonschema.Schema {
		s, err := c.Compile(url + "#/components/schemas/" + name)
		if err != nil {
			t.Fatalf("compile %s: %v", name, err)
		}
		return s
	}

	s, root := e.session(a)
	var child struct{ ID string }
	if r := e.do("POST", "/api/v1/sessions/"+s.ID+"/nodes", a.key, `{"agent_type":"shelley","name":"kid","parent_id":"`+root.ID+`"}`); r.status != 201 {
		t.Fatalf("create node: %d %s", r.status, r.body)
	} else if err := json.Unmarshal(r.body, &child); err != nil {
		t.Fatal(err)
	}
	if r := e.do("POST", "/api/v1/sessions/"+s.ID+"/nodes/"+root.ID+"/messages", a.key, `{"content":"hi"}`); r.status != 202 {
		t.Fatalf("message: %d %s", r.status, r.body)
	}
	tests := []struct {
		name, path, schema string
	}{
		{"session", "/api/v1/sessions/" + s.ID, "Session"},
		{"sessions", "/api/v1/sessions", "SessionList"},
		{"tree", "/api/v1/sessions/" + s.ID + "/tree", "NodeList"},
		{"records", "/api/v1/sessions/" + s.ID + "/nodes/" + root.ID + "/messages", "RecordPage"},
		{"child records", "/api/v1/sessions/" + s.ID + "/nodes/" + child.ID + "/messages", "RecordPage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("GET", tt.path, a.key, "")
			if r.status != 200 {
				t.Fatalf("%s: %d %s", tt.path, r.status, r.body)
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.body))
			if err != nil {
				t.Fatal(err)
			}
			if err := schema(tt.schema).Validate(v); err != nil {
				t.Fatalf("%s does not match %s: %v\n%s", tt.path, tt.schema, err, r.body)
			}
		})
	}
	// A node without exit_code is not a Node: the schema is the strict one.
	v, _ := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(`{"data":[{"id":"x"}]}`)))
	if schema("NodeList").Validate(v) == nil {
		t.Fatal("NodeList accepts a node with only an id")
	}
}
