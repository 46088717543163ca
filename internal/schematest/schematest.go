// Package schematest checks JSON against the protocol's JSON Schemas in
// tests: the event, input and record schemas are loaded together, so the
// record schema's references to the other two resolve.
package schematest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/filepath-dev/filepath/protocol"
)

// Base is the $id base of the protocol's schemas.
const Base = "https://github.com/filepath-dev/filepath/protocol/schema/"

// Compile returns the schema at ref, a schema file name with an optional
// fragment ("record.schema.json", "record.schema.json#/$defs/Node").
func Compile(t testing.TB, ref string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	for name, doc := range map[string][]byte{
		"event.schema.json":  protocol.EventSchema(),
		"input.schema.json":  protocol.InputSchema(),
		"record.schema.json": protocol.RecordSchema(),
	} {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.AddResource(Base+name, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	s, err := c.Compile(Base + ref)
	if err != nil {
		t.Fatalf("compile %s: %v", ref, err)
	}
	return s
}

// Validate encodes v as JSON (a []byte or json.RawMessage is taken as JSON
// already) and validates it against s.
func Validate(s *jsonschema.Schema, v any) error {
	var b []byte
	switch v := v.(type) {
	case []byte:
		b = v
	case json.RawMessage:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return err
		}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return s.Validate(doc)
}
