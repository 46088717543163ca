package gateway

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// wire is the format of an endpoint's answer, which says where its usage is.
type wire int

const (
	wireNone      wire = iota // no usage expected (model lists, count_tokens)
	wireChat                  // OpenAI chat completions (OpenRouter's dialect: usage.cost)
	wireAnthropic             // Anthropic Messages
	wireResponses             // OpenAI Responses
)

// Bounds of what the usage reader keeps of an answer. Usage objects are
// small, but they may sit at the end of a large event (Responses repeats the
// whole output in response.completed): past maxEvent bytes only the last
// tailKeep bytes of an event are kept, and the usage is looked up there.
const (
	maxEvent = 4 << 20
	tailKeep = 64 << 10
)

// tally is the usage of one answer, normalized: input excludes cache reads
// and writes.
type tally struct {
	input, output, cacheRead, cacheWrite int64
	cost                                 *float64
	model                                string // as the upstream reports it
	seen                                 bool   // a usage object was read
	malformed                            int    // usage fields or events that could not be read
}

// usageReader reads an answer's usage on the side from the bytes passed to
// the agent: an SSE stream event by event, or a JSON body at its end. It
// never fails: what it cannot read it counts in malformed.
type usageReader struct {
	wire      wire
	sse       bool
	t         tally
	line      []byte // the current partial line (SSE) or the body (JSON)
	lineTrunc bool   // line went over maxEvent: only its tail is kept
	lineData  bool   // with lineTrunc: the line is a data: line
	data      []byte // the current event's data lines, joined by '\n'
	dataTrunc bool   // data went over maxEvent: only its tail is kept
}

func newUsageReader(w wire, sse bool) *usageReader {
	return &usageReader{wire: w, sse: sse}
}

// Write takes the next bytes of the answer.
func (u *usageReader) Write(p []byte) {
	if u.wire == wireNone {
		return
	}
	if !u.sse {
		u.addLine(p)
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			u.addLine(p)
			return
		}
		if len(u.line) == 0 {
			u.endLine(p[:i])
		} else {
			u.addLine(p[:i])
			u.endLine(u.line)
			u.line, u.lineTrunc, u.lineData = u.line[:0], false, false
		}
		p = p[i+1:]
	}
}

// Close ends the answer (at EOF, or where it was cut) and returns its usage.
func (u *usageReader) Close() tally {
	if u.wire == wireNone {
		return u.t
	}
	if !u.sse {
		u.event(u.line, u.lineTrunc)
		return u.t
	}
	if len(u.line) > 0 {
		u.endLine(u.line)
	}
	u.dispatch()
	return u.t
}

// addLine appends p to the current line, keeping only a tail past maxEvent.
func (u *usageReader) addLine(p []byte) {
	if !u.lineTrunc && len(u.line)+len(p) > maxEvent {
		head := append([]byte(nil), u.line[:min(5, len(u.line))]...)
		head = append(head, p[:min(5-len(head), len(p))]...)
		u.lineData = bytes.HasPrefix(head, []byte("data:"))
	}
	u.line = keep(u.line, p, &u.lineTrunc)
}

// keep appends p to buf, keeping only the last tailKeep bytes once buf
// would pass maxEvent.
func keep(buf, p []byte, trunc *bool) []byte {
	if len(buf)+len(p) <= maxEvent {
		return append(buf, p...)
	}
	*trunc = true
	if len(p) >= tailKeep {
		return append(buf[:0], p[len(p)-tailKeep:]...)
	}
	buf = append(buf, p...)
	return append(buf[:0], buf[len(buf)-tailKeep:]...)
}

// endLine handles one SSE line (without its '\n').
func (u *usageReader) endLine(l []byte) {
	l = bytes.TrimSuffix(l, []byte{'\r'})
	if u.lineTrunc {
		if u.lineData { // a huge data line: its tail joins the event
			u.data = keep(u.data, l, &u.dataTrunc)
			u.dataTrunc = true
		}
		return
	}
	switch {
	case len(l) == 0:
		u.dispatch()
	case bytes.HasPrefix(l, []byte("data:")):
		v := l[5:]
		if len(v) > 0 && v[0] == ' ' {
			v = v[1:]
		}
		if len(u.data) > 0 {
			u.data = keep(u.data, []byte{'\n'}, &u.dataTrunc)
		}
		u.data = keep(u.data, v, &u.dataTrunc)
	}
	// event:, id:, retry: and comments carry no usage: the JSON payloads
	// name their own type.
}

func (u *usageReader) dispatch() {
	if len(u.data) > 0 {
		u.event(u.data, u.dataTrunc)
	}
	u.data, u.dataTrunc = u.data[:0], false
}

var usageKey = []byte(`"usage"`)

// event reads the usage of one event (or JSON body).
func (u *usageReader) event(b []byte, truncated bool) {
	if !bytes.Contains(b, usageKey) {
		return // most stream events: deltas without usage
	}
	if truncated {
		// Only a tail: the last "usage" object in it.
		i := bytes.LastIndex(b, usageKey)
		dec := json.NewDecoder(bytes.NewReader(bytes.TrimLeft(b[i+len(usageKey):], " \t\r\n:")))
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			u.t.malformed++
			return
		}
		u.apply(raw)
		return
	}
	var env struct {
		Model    string          `json:"model"`
		Usage    json.RawMessage `json:"usage"`
		Message  *envelope       `json:"message"`  // Anthropic message_start
		Response *envelope       `json:"response"` // Responses response.*
	}
	if json.Unmarshal(b, &env) != nil {
		u.t.malformed++
		return
	}
	for _, e := range []*envelope{env.Message, env.Response} {
		if e != nil {
			env.Model = cmpOr(env.Model, e.Model)
			if len(env.Usage) == 0 {
				env.Usage = e.Usage
			}
		}
	}
	if env.Model != "" {
		u.t.model = env.Model
	}
	u.apply(env.Usage)
}

type envelope struct {
	Model string          `json:"model"`
	Usage json.RawMessage `json:"usage"`
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// rawUsage is the union of the providers' usage objects.
type rawUsage struct {
	// chat completions
	PromptTokens     *count `json:"prompt_tokens"`
	CompletionTokens *count `json:"completion_tokens"`
	PromptDetails    *struct {
		CachedTokens     *count `json:"cached_tokens"`
		CacheWriteTokens *count `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	Cost *dollars `json:"cost"` // OpenRouter
	// Anthropic Messages and OpenAI Responses
	InputTokens  *count `json:"input_tokens"`
	OutputTokens *count `json:"output_tokens"`
	// Anthropic
	CacheCreation *count `json:"cache_creation_input_tokens"`
	CacheRead     *count `json:"cache_read_input_tokens"`
	// Responses
	InputDetails *struct {
		CachedTokens *count `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// count is a token count: a JSON number or numeric string, not negative.
// Anything else leaves it unset (bad).
type count struct {
	v   int64
	bad bool
}

func (c *count) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 && f <= math.MaxInt64/2 && f == math.Trunc(f) {
		c.v = int64(f)
		return nil
	}
	c.bad = true
	return nil
}

// dollars is a cost in USD: a JSON number or numeric string, finite, not
// negative.
type dollars struct {
	v   float64
	bad bool
}

func (d *dollars) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 && !math.IsInf(f, 0) && !math.IsNaN(f) {
		d.v = f
		return nil
	}
	d.bad = true
	return nil
}

// apply merges one usage object into the tally. Each format reports
// cumulative numbers, so a later object replaces what it names; nothing is
// ever summed (Anthropic's message_delta output_tokens is the total so far).
func (u *usageReader) apply(raw json.RawMessage) {
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	var r rawUsage
	if json.Unmarshal(raw, &r) != nil {
		u.t.malformed++
		return
	}
	t := &u.t
	get := func(c *count) (int64, bool) {
		if c == nil {
			return 0, false
		}
		if c.bad {
			t.malformed++
			return 0, false
		}
		return c.v, true
	}
	seen := false
	switch u.wire {
	case wireChat:
		prompt, okP := get(r.PromptTokens)
		out, okC := get(r.CompletionTokens)
		var cached, written int64
		if r.PromptDetails != nil {
			cached, _ = get(r.PromptDetails.CachedTokens)
			written, _ = get(r.PromptDetails.CacheWriteTokens)
		}
		if okP {
			cached = min(cached, prompt)
			written = min(written, prompt-cached)
			t.input, t.cacheRead, t.cacheWrite = prompt-cached-written, cached, written
			seen = true
		}
		if okC {
			t.output = out
			seen = true
		}
	case wireAnthropic:
		if v, ok := get(r.InputTokens); ok {
			t.input, seen = v, true
		}
		if v, ok := get(r.OutputTokens); ok {
			t.output, seen = v, true
		}
		if v, ok := get(r.CacheCreation); ok {
			t.cacheWrite, seen = v, true
		}
		if v, ok := get(r.CacheRead); ok {
			t.cacheRead, seen = v, true
		}
	case wireResponses:
		in, okI := get(r.InputTokens)
		var cached int64
		if r.InputDetails != nil {
			cached, _ = get(r.InputDetails.CachedTokens)
		}
		if okI {
			cached = min(cached, in)
			t.input, t.cacheRead = in-cached, cached
			seen = true
		}
		if v, ok := get(r.OutputTokens); ok {
			t.output, seen = v, true
		}
	}
	if r.Cost != nil {
		if r.Cost.bad {
			t.malformed++
		} else {
			c := r.Cost.v
			t.cost = &c
		}
	}
	t.seen = t.seen || seen
}
