package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DecodeError says why a line is not a valid event or input, in words meant
// for the author of the agent that wrote it.
type DecodeError struct {
	// Field is the field at fault, as a path like "content" or
	// "workers[1].status"; "" when the line as a whole is wrong (not JSON,
	// not an object, invalid UTF-8).
	Field string
	// Reason is the whole message, e.g. `missing field "content"`.
	Reason string
}

func (e *DecodeError) Error() string { return e.Reason }

func lineError(format string, args ...any) *DecodeError {
	return &DecodeError{Reason: fmt.Sprintf(format, args...)}
}

func fieldError(field, format string, args ...any) *DecodeError {
	return &DecodeError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

var (
	allTypes      = append(EventTypes(), InputTypes()...)
	stepStatuses  = []string{StepStart, StepDone, StepError}
	agentStates   = []string{StateIdle, StateThinking, StateRunning, StateDone, StateError}
	messageSource = []string{FromUser, FromParent, FromSystem}
	signalActions = []string{ActionStop, ActionPause, ActionResume}
)

// DecodeEvent decodes one stdout line (without its line ending) into one of
// the nine event structs. Unknown fields are ignored; a wrong line gives a
// *DecodeError.
func DecodeEvent(line []byte) (Event, error) {
	var f fields
	if err := f.parse(line); err != nil {
		return nil, err
	}
	typ, err := f.typeName()
	if err != nil {
		return nil, err
	}
	d := fieldDecoder{miscased: f.miscased, elem: -1}
	var ev Event
	switch typ {
	case TypeText:
		ev = TextEvent{Type: typ, Content: d.str(f.content, "content")}
	case TypeTool:
		ev = ToolEvent{
			Type:   typ,
			Name:   d.str(f.name, "name"),
			Path:   d.optStr(f.path, "path"),
			Status: d.enum(f.status, "status", stepStatuses),
			Output: d.optStr(f.output, "output"),
		}
	case TypeCommand:
		ev = CommandEvent{
			Type:   typ,
			Cmd:    d.str(f.cmd, "cmd"),
			Status: d.enum(f.status, "status", stepStatuses),
			Exit:   d.optNum(f.exit, "exit", anyNumber),
			Stdout: d.optStr(f.stdout, "stdout"),
			Stderr: d.optStr(f.stderr, "stderr"),
		}
	case TypeCommit:
		ev = CommitEvent{Type: typ, Hash: d.str(f.hash, "hash"), Message: d.str(f.message, "message")}
	case TypeSpawn:
		sp := SpawnEvent{
			Type:  typ,
			Name:  d.str(f.name, "name"),
			Agent: d.str(f.agent, "agent"),
			Model: d.str(f.model, "model"),
			Task:  d.optStr(f.task, "task"),
		}
		if f.workspace != nil {
			w := d.enum(f.workspace, "workspace", WorkspaceModes())
			sp.Workspace = &w
		}
		ev = sp
	case TypeWorkers:
		ev = WorkersEvent{Type: typ, Workers: d.workers(f.workers)}
	case TypeStatus:
		ev = StatusEvent{
			Type:       typ,
			State:      d.enum(f.state, "state", agentStates),
			ContextPct: d.optNum(f.contextPct, "context_pct", unitRange),
		}
	case TypeHandoff:
		ev = HandoffEvent{Type: typ, Summary: d.str(f.summary, "summary")}
	case TypeDone:
		ev = DoneEvent{Type: typ, Summary: d.optStr(f.summary, "summary")}
	default:
		return nil, unknownType(typ, EventTypes(), typesOfEvent, InputTypes(), "an input (stdin), not an event")
	}
	if d.err != nil {
		return nil, d.err
	}
	return ev, nil
}

// DecodeInput decodes one stdin line (without its line ending) into a
// MessageInput or a SignalInput. Unknown fields are ignored; a wrong line gives
// a *DecodeError.
func DecodeInput(line []byte) (Input, error) {
	var f fields
	if err := f.parse(line); err != nil {
		return nil, err
	}
	typ, err := f.typeName()
	if err != nil {
		return nil, err
	}
	d := fieldDecoder{miscased: f.miscased, elem: -1}
	var in Input
	switch typ {
	case TypeMessage:
		in = MessageInput{Type: typ, From: d.enum(f.from, "from", messageSource), Content: d.str(f.content, "content"), FromNode: d.nodeRef(f.fromNode, "from_node"), Comment: d.comment(f.comment)}
	case TypeSignal:
		in = SignalInput{Type: typ, Action: d.enum(f.action, "action", signalActions)}
	default:
		return nil, unknownType(typ, InputTypes(), typesOfInput, EventTypes(), "an event (stdout), not an input")
	}
	if d.err != nil {
		return nil, d.err
	}
	return in, nil
}

func unknownType(typ string, known []string, list string, other []string, otherHint string) error {
	hint := ""
	for _, k := range known {
		if strings.EqualFold(k, typ) {
			hint = fmt.Sprintf("; type names are lower case: %q", k)
		}
	}
	for _, k := range other {
		if k == typ {
			hint = fmt.Sprintf("; %q is %s", k, otherHint)
		}
	}
	return fieldError("type", "unknown type %s (known types: %s%s)", quoteCut(typ), list, hint)
}

// fields holds the raw JSON value of every top-level field FAP knows, nil
// when absent. One struct for all types keeps decoding to a single pass
// without a map.
type fields struct {
	typ, content, name, path, status, output, cmd, exit, stdout, stderr,
	hash, message, agent, model, task, workers, state, contextPct, summary,
	from, action, fromNode, workspace, comment []byte
	// miscased holds keys that match a known name only when case is
	// ignored ("Content"), to explain a missing field.
	miscased []string
}

func (f *fields) set(key []byte, v []byte) {
	switch string(key) { // no allocation: the compiler compares in place
	case "type":
		f.typ = v
	case "content":
		f.content = v
	case "name":
		f.name = v
	case "path":
		f.path = v
	case "status":
		f.status = v
	case "output":
		f.output = v
	case "cmd":
		f.cmd = v
	case "exit":
		f.exit = v
	case "stdout":
		f.stdout = v
	case "stderr":
		f.stderr = v
	case "hash":
		f.hash = v
	case "message":
		f.message = v
	case "agent":
		f.agent = v
	case "model":
		f.model = v
	case "task":
		f.task = v
	case "workers":
		f.workers = v
	case "state":
		f.state = v
	case "context_pct":
		f.contextPct = v
	case "summary":
		f.summary = v
	case "from":
		f.from = v
	case "action":
		f.action = v
	case "from_node":
		f.fromNode = v
	case "workspace":
		f.workspace = v
	case "comment":
		f.comment = v
	default:
		if knownFold(key) {
			f.miscased = append(f.miscased, string(key))
		}
	}
}

var knownNames = []string{"type", "content", "name", "path", "status", "output", "cmd", "exit", "stdout", "stderr",
	"hash", "message", "agent", "model", "task", "workers", "state", "context_pct", "summary", "from", "action", "from_node", "workspace", "comment"}

func knownFold(key []byte) bool {
	if len(key) > len("context_pct") {
		return false
	}
	for _, k := range knownNames {
		if bytes.EqualFold([]byte(k), key) {
			return true
		}
	}
	return false
}

// parse checks that line is one UTF-8 JSON object and collects its fields.
func (f *fields) parse(line []byte) error {
	if !utf8.Valid(line) {
		return lineError("not valid UTF-8 (first bad byte at column %d)", badUTF8(line)+1)
	}
	if bytes.HasPrefix(line, []byte("\xEF\xBB\xBF")) {
		return lineError("starts with a UTF-8 byte order mark (BOM, bytes EF BB BF); write JSON without one (an editor's \"UTF-8 with BOM\" adds it)")
	}
	if !json.Valid(line) {
		return notJSON(line)
	}
	i := skipWS(line, 0)
	if line[i] != '{' {
		return lineError("not a JSON object (got %s); each line must be one object like {\"type\":\"text\",\"content\":\"hi\"}", kindOf(line[i:]))
	}
	eachMember(line, i, func(key []byte, escaped bool, v []byte) {
		if escaped {
			f.set(unescape(key), v)
			return
		}
		f.set(key, v)
	})
	return nil
}

func (f *fields) typeName() (string, error) {
	if f.typ == nil {
		return "", fieldError("type", `missing field "type"%s`, miscasedHint("type", f.miscased))
	}
	if f.typ[0] != '"' {
		return "", fieldError("type", `field "type" must be a string, got %s`, kindOf(f.typ))
	}
	if t, ok := match(f.typ, allTypes); ok {
		return t, nil
	}
	return unquote(f.typ), nil
}

func badUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func notJSON(line []byte) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return lineError("not JSON: the line is empty")
	}
	var v struct{}
	err := json.Unmarshal(line, &v)
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		if syn.Error() == "unexpected end of JSON input" {
			return lineError("not JSON: the line ends before the JSON value is complete")
		}
		return lineError("not JSON: %s (column %d)", syn.Error(), syn.Offset)
	}
	return lineError("not JSON")
}

// fieldDecoder reads typed values out of raw fields, keeping the first error.
type fieldDecoder struct {
	err      error
	elem     int      // index of the worker being read, -1 outside workers
	miscased []string // see fields.miscased
}

// miscasedHint explains a missing field that is present with other case.
func miscasedHint(name string, miscased []string) string {
	for _, k := range miscased {
		if strings.EqualFold(k, name) {
			return fmt.Sprintf(" (there is %q: field names are case-sensitive)", cut(k))
		}
	}
	return ""
}

func (d *fieldDecoder) fail(name, format string, args ...any) {
	if d.err == nil {
		path := name
		if d.elem >= 0 {
			path = "workers[" + strconv.Itoa(d.elem) + "]"
			if name != "" {
				path += "." + name
			}
		}
		d.err = fieldError(path, format, append([]any{path}, args...)...)
	}
}

func (d *fieldDecoder) str(v []byte, name string) string {
	if d.err != nil {
		return ""
	}
	if v == nil {
		d.fail(name, "missing field %q%s", miscasedHint(name, d.miscased))
		return ""
	}
	if v[0] != '"' {
		d.fail(name, "field %q must be a string, got %s", kindOf(v))
		return ""
	}
	return unquote(v)
}

func (d *fieldDecoder) optStr(v []byte, name string) *string {
	if v == nil || d.err != nil {
		return nil
	}
	s := d.str(v, name)
	if d.err != nil {
		return nil
	}
	return &s
}

func (d *fieldDecoder) enum(v []byte, name string, allowed []string) string {
	if d.err == nil && v != nil {
		if a, ok := match(v, allowed); ok {
			return a
		}
	}
	s := d.str(v, name)
	if d.err != nil {
		return ""
	}
	if a, ok := match(v, allowed); ok { // an escaped spelling
		return a
	}
	d.fail(name, "field %q must be one of %s, got %s", strings.Join(allowed, "|"), quoteCut(s))
	return ""
}

// match returns the name in names that the JSON string v spells, without
// allocating (the constant is returned).
func match(v []byte, names []string) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	raw := v[1 : len(v)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		raw = unescape(raw)
	}
	for _, n := range names {
		if string(raw) == n {
			return n, true
		}
	}
	return "", false
}

// numRange is an inclusive range, with its bounds both as float64 and as
// the decimal text the JSON Schema states.
type numRange struct {
	lo, hi         float64
	loText, hiText string
	reason         string // the message after `field "x" must be `
}

var (
	unitRange = numRange{0, 1, "0", "1", "between 0 and 1"}
	// anyNumber is every number a float64 (and JavaScript's JSON.parse) can
	// hold; the schema states these bounds for "exit".
	anyNumber = numRange{-math.MaxFloat64, math.MaxFloat64, "-1.7976931348623157e308", "1.7976931348623157e308",
		"a number a float64 can hold (magnitude at most 1.7976931348623157e308)"}
)

// optNum reads an optional number within r. A value that rounds to a bound
// is compared with the bound's exact decimal text, as a JSON Schema validator
// does, so that both always agree.
func (d *fieldDecoder) optNum(v []byte, name string, r numRange) *float64 {
	if v == nil || d.err != nil {
		return nil
	}
	if kindOf(v) != "number" {
		d.fail(name, "field %q must be a number, got %s", kindOf(v))
		return nil
	}
	x, err := strconv.ParseFloat(string(v), 64)
	if err != nil || x < r.lo || x > r.hi ||
		(x == r.lo && parseDecimal(v).cmp(parseDecimal([]byte(r.loText))) < 0) ||
		(x == r.hi && parseDecimal(v).cmp(parseDecimal([]byte(r.hiText))) > 0) {
		d.fail(name, "field %q must be %s, got %s", r.reason, cut(string(v)))
		return nil
	}
	return &x
}

// nodeRef reads an optional {"id","name"} object (from_node).
func (d *fieldDecoder) nodeRef(v []byte, name string) *NodeRef {
	if v == nil || d.err != nil {
		return nil
	}
	var raw struct {
		ID   *string `json:"id"`
		Name *string `json:"name"`
	}
	if v[0] != '{' || json.Unmarshal(v, &raw) != nil || raw.ID == nil || raw.Name == nil {
		d.fail(name, "field %q must be an object with the string fields \"id\" and \"name\", got %s", cut(string(v)))
		return nil
	}
	return &NodeRef{ID: *raw.ID, Name: *raw.Name}
}

// comment reads an optional DiffComment object (a message's comment).
func (d *fieldDecoder) comment(v []byte) *DiffComment {
	if v == nil || d.err != nil {
		return nil
	}
	var c DiffComment
	if v[0] != '{' || json.Unmarshal(v, &c) != nil || c.Path == "" || c.StartLine < 1 || c.EndLine < c.StartLine || (c.Side != "old" && c.Side != "new") {
		d.fail("comment", "field %q must be an object with \"path\", \"start_line\" and \"end_line\" (1 <= start <= end) and \"side\" (old or new), got %s", cut(string(v)))
		return nil
	}
	return &c
}

func (d *fieldDecoder) workers(v []byte) []Worker {
	if d.err != nil {
		return nil
	}
	if v == nil {
		d.fail("workers", "missing field %q")
		return nil
	}
	if v[0] != '[' {
		d.fail("workers", "field %q must be an array, got %s", kindOf(v))
		return nil
	}
	ws := make([]Worker, 0, 4)
	_ = eachElement(v, 0, func(n int, el []byte) error {
		d.elem = n
		if el[0] != '{' {
			d.fail("", "field %q must be an object, got %s", kindOf(el))
			return d.err
		}
		var name, status []byte
		top := d.miscased
		d.miscased = nil
		eachMember(el, 0, func(key []byte, escaped bool, val []byte) {
			k := string(key)
			if escaped {
				k = string(unescape(key))
			}
			switch k {
			case "name":
				name = val
			case "status":
				status = val
			default:
				if strings.EqualFold(k, "name") || strings.EqualFold(k, "status") {
					d.miscased = append(d.miscased, k)
				}
			}
		})
		w := Worker{Name: d.str(name, "name"), Status: d.enum(status, "status", agentStates)}
		d.miscased = top
		if d.err != nil {
			return d.err
		}
		ws = append(ws, w)
		return nil
	})
	d.elem = -1
	return ws
}

// cut shortens s for an error message.
func cut(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func quoteCut(s string) string { return strconv.Quote(cut(s)) }
