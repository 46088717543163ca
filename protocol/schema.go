package protocol

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
)

//go:generate go run ./internal/cmd/genschema

//go:embed schema/event.schema.json
var eventSchema []byte

//go:embed schema/input.schema.json
var inputSchema []byte

//go:embed schema/record.schema.json
var recordSchema []byte

// EventSchema returns the JSON Schema (draft 2020-12) of one stdout line.
func EventSchema() []byte { return append([]byte(nil), eventSchema...) }

// InputSchema returns the JSON Schema (draft 2020-12) of one stdin line.
func InputSchema() []byte { return append([]byte(nil), inputSchema...) }

// RecordSchema returns the JSON Schema (draft 2020-12) of one session log
// record. Its $defs also hold Node and Session; it refers to the event and
// input schemas by their file names (relative to the same $id base).
func RecordSchema() []byte { return append([]byte(nil), recordSchema...) }

// SchemaComponents returns every named schema of the event, input and record
// schemas (AgentEvent, TextEvent, ..., AgentInput, ..., Record, EventRecord,
// ..., Node, Session) keyed by name, each with its references rewritten to
// refPrefix+name, for embedding them in another document: with
// "#/components/schemas/" they are OpenAPI 3.1 component schemas.
func SchemaComponents(refPrefix string) (map[string]any, error) {
	out := map[string]any{}
	files := map[string]string{"event.schema.json": "AgentEvent", "input.schema.json": "AgentInput", "record.schema.json": "Record"}
	for file, doc := range map[string][]byte{"event.schema.json": eventSchema, "input.schema.json": inputSchema, "record.schema.json": recordSchema} {
		var root map[string]any
		if err := json.Unmarshal(doc, &root); err != nil {
			return nil, fmt.Errorf("schema %s: %w", file, err)
		}
		defs, _ := root["$defs"].(map[string]any)
		delete(root, "$defs")
		delete(root, "$schema")
		delete(root, "$id")
		defs[files[file]] = root
		for name, d := range defs {
			if _, dup := out[name]; dup {
				return nil, fmt.Errorf("schema %s: %s is defined twice", file, name)
			}
			if err := rewriteRefs(d, refPrefix, files); err != nil {
				return nil, fmt.Errorf("schema %s: %s: %w", file, name, err)
			}
			out[name] = d
		}
	}
	return out, nil
}

// rewriteRefs points every "$ref" under v (a local "#/$defs/X" or another
// schema's file name) at prefix+name.
func rewriteRefs(v any, prefix string, files map[string]string) error {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" {
				name, local := strings.CutPrefix(s, "#/$defs/")
				if !local {
					if name, local = files[s]; !local {
						return fmt.Errorf("unknown reference %q", s)
					}
				}
				v[k] = prefix + name
				continue
			}
			if err := rewriteRefs(x, prefix, files); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range v {
			if err := rewriteRefs(x, prefix, files); err != nil {
				return err
			}
		}
	}
	return nil
}
