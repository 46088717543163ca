package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
)

// request is what the gateway reads of a request body.
type request struct {
	Model         string          `json:"model"`
	Stream        bool            `json:"stream"`
	StreamOptions json.RawMessage `json:"stream_options"`
}

// inspect reads the model and the stream flag of a JSON request body. A body
// that is not a JSON object gives zero values: the upstream answers it.
func inspect(body []byte) request {
	var r request
	if json.Unmarshal(body, &r) != nil {
		return request{}
	}
	return r
}

// wantsUsage reports whether a streamed chat completions request already
// asks for the final usage chunk (stream_options.include_usage: true).
func (r request) wantsUsage() bool {
	var o struct {
		IncludeUsage bool `json:"include_usage"`
	}
	return len(r.StreamOptions) > 0 && json.Unmarshal(r.StreamOptions, &o) == nil && o.IncludeUsage
}

var includeUsage = []byte(`{"include_usage":true}`)

// withIncludeUsage returns body with stream_options.include_usage set to
// true, changing nothing else: an existing stream_options object keeps its
// other members; without one, the member is added first in the object. The
// gateway needs the final usage chunk to meter a stream; the agent receives
// it too (a chunk with empty choices, which OpenAI-compatible clients expect).
func withIncludeUsage(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("request body is not a JSON object")
	}
	start, end := -1, -1 // the last stream_options value
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if key == "stream_options" {
			end = int(dec.InputOffset())
			start = end - len(v) // the value's own bytes, without the spaces before it
		}
	}
	if start < 0 {
		i := bytes.IndexByte(body, '{') + 1
		out := make([]byte, 0, len(body)+len(`"stream_options":,`)+len(includeUsage))
		out = append(out, body[:i]...)
		out = append(out, `"stream_options":`...)
		out = append(out, includeUsage...)
		if j := bytes.IndexFunc(body[i:], notSpace); j >= 0 && body[i+j] != '}' {
			out = append(out, ',')
		}
		return append(out, body[i:]...), nil
	}
	merged := includeUsage
	var opts map[string]json.RawMessage
	if json.Unmarshal(body[start:end], &opts) == nil && opts != nil {
		opts["include_usage"] = json.RawMessage("true")
		b, err := json.Marshal(opts)
		if err != nil {
			return nil, err
		}
		merged = b
	}
	out := make([]byte, 0, len(body)+len(merged))
	out = append(out, body[:start]...)
	out = append(out, merged...)
	return append(out, body[end:]...), nil
}

func notSpace(r rune) bool { return r != ' ' && r != '\t' && r != '\r' && r != '\n' }
