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

// Encode writes v and a newline in one Write call.
func (e *Encoder) Encode(v any) error { return e.enc.Encode(v) }
