package protocol

import _ "embed"

//go:generate go run ./internal/cmd/genschema

//go:embed schema/event.schema.json
var eventSchema []byte

//go:embed schema/input.schema.json
var inputSchema []byte

// EventSchema returns the JSON Schema (draft 2020-12) of one stdout line.
func EventSchema() []byte { return append([]byte(nil), eventSchema...) }

// InputSchema returns the JSON Schema (draft 2020-12) of one stdin line.
func InputSchema() []byte { return append([]byte(nil), inputSchema...) }
