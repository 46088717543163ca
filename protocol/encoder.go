package protocol

import (
	"encoding/json"
	"io"
)

// Encoder writes values as NDJSON: one JSON object per line, without HTML
// escaping. It is not safe for concurrent use.
type Encoder struct {
	enc *json.Encoder
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &Encoder{enc: enc}
}

// Encode writes v and a newline in one Write call. For an event or input
// struct of this package (a value, not a pointer) it always writes the
// struct's own type name as "type", so TextEvent{Content: "hi"} is enough.
func (e *Encoder) Encode(v any) error { return e.enc.Encode(withType(v)) }

func withType(v any) any {
	switch x := v.(type) {
	case TextEvent:
		x.Type = x.EventType()
		return x
	case ToolEvent:
		x.Type = x.EventType()
		return x
	case CommandEvent:
		x.Type = x.EventType()
		return x
	case CommitEvent:
		x.Type = x.EventType()
		return x
	case SpawnEvent:
		x.Type = x.EventType()
		return x
	case WorkersEvent:
		x.Type = x.EventType()
		return x
	case StatusEvent:
		x.Type = x.EventType()
		return x
	case HandoffEvent:
		x.Type = x.EventType()
		return x
	case DoneEvent:
		x.Type = x.EventType()
		return x
	case MessageInput:
		x.Type = x.InputType()
		return x
	case SignalInput:
		x.Type = x.InputType()
		return x
	}
	return v
}
