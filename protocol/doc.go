// Package protocol is the filepath Agent Protocol (FAP): the events an agent
// writes to stdout and the inputs it reads from stdin, one JSON object per
// line (NDJSON). It holds the Go types, the decoder, the NDJSON reader and
// encoder, and the JSON Schemas generated from the types. It also defines,
// once, the session log record that carries them to the UI (Record, with
// NodeChange, FileChange and ErrorData for the other kinds) and the Node and
// Session shapes of the API; the UI's TypeScript types and the OpenAPI
// component schemas are generated from these.
//
// Events (stdout), each a struct with Type first:
//
//	TextEvent{Type, Content}
//	ToolEvent{Type, Name, Path *string, Status start|done|error, Output *string}
//	CommandEvent{Type, Cmd, Status start|done|error, Exit *float64, Stdout, Stderr *string}
//	CommitEvent{Type, Hash, Message}
//	SpawnEvent{Type, Name, Agent, Model, Task *string, Workspace *string (shared|fork)}
//	WorkersEvent{Type, Workers []Worker{Name, Status idle|thinking|running|done|error}}
//	StatusEvent{Type, State idle|thinking|running|done|error, ContextPct *float64 in [0,1]}
//	HandoffEvent{Type, Summary}
//	DoneEvent{Type, Summary *string}
//
// Inputs (stdin): MessageInput{Type, From user|parent|system, Content} and
// SignalInput{Type, Action stop|pause|resume}. Optional fields are pointers
// with omitempty; the constants Type*, Step*, State*, From* and Action* name
// the enum values.
//
// API:
//
//	type Event interface{ EventType() string }   // the 9 event structs
//	type Input interface{ InputType() string }   // MessageInput, SignalInput
//	func DecodeEvent(line []byte) (Event, error) // error: *DecodeError
//	func DecodeInput(line []byte) (Input, error) // error: *DecodeError
//	type DecodeError struct{ Field, Reason string } // Error() == Reason
//	func EventTypes() []string; func InputTypes() []string
//
//	const DefaultMaxLine = 1 << 20
//	func NewReader(r io.Reader, maxLine int) *Reader // maxLine <= 0: DefaultMaxLine
//	func (*Reader) Next() ([]byte, error) // io.EOF at the end; *LineTooLongError: skipped, call again
//	func (*Reader) Line() int              // 1-based number of the line last returned, blank lines counted
//	func (*Reader) Limit() int
//	type LineTooLongError struct{ Line, Limit int; Size int64; Head []byte }
//
//	func NewEncoder(w io.Writer) *Encoder
//	func (*Encoder) Encode(v any) error    // one line, no HTML escaping; fills "type" of our structs
//
//	func EventSchema() []byte              // protocol/schema/event.schema.json
//	func InputSchema() []byte              // protocol/schema/input.schema.json
//	func RecordSchema() []byte             // protocol/schema/record.schema.json
//	func SchemaComponents(refPrefix string) (map[string]any, error) // all three, for OpenAPI
//
// Decoding rules: a line must be valid UTF-8 and one JSON object; "type" and
// every field name are case-sensitive; unknown fields are ignored (so a
// re-encoded value drops them); null is not a value for any field, optional
// or not; for a duplicate key the last one wins. These are the rules of the
// JSON Schemas too: the tests run one corpus through both, and the fuzz
// targets compare their verdicts.
//
// The schemas are generated from the types by `go generate ./protocol/...`;
// a test fails when the committed files are stale.
package protocol
