package files

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/invopop/jsonschema"

	"github.com/filepath-dev/filepath/orchestrator"
)

// The tools: every file operation by name, with a JSON Schema of its
// arguments, for the agent API (REST and MCP), the native agents (which
// read the list from the agent API) and the user API (routes made from
// the tools that name one). A package with more tools (the format tier:
// spreadsheet_*, pdf_*, image_*) defines them with Define and adds them
// with Service.Register; they are then served everywhere the built-in
// ones are.

// Tool is one operation callable by name.
type Tool struct {
	Name        string
	Description string
	// ReadOnly: it changes nothing (read-only agents such as pi get only
	// these).
	ReadOnly bool
	// Route, when set, is the name of the tool's user API route: POST
	// /api/v1/sessions/{id}/fs/_/{Route}.
	Route string
	// In and Out are zero values of its argument and answer types (their
	// schemas document it).
	In, Out any
	// IfMatch: its arguments have if_match (an HTTP If-Match header may
	// give it).
	IfMatch bool

	schema json.RawMessage
	run    func(ctx context.Context, c Caller, args json.RawMessage) (any, error)
}

// Schema is the JSON Schema of the tool's arguments (an object).
func (t Tool) Schema() json.RawMessage { return t.schema }

// Define makes a tool of run, whose arguments are In (decoded strictly:
// an unknown field is an error naming it) and whose answer is Out.
func Define[In, Out any](name, description string, readOnly bool, run func(ctx context.Context, c Caller, in In) (Out, error)) Tool {
	it := reflect.TypeFor[In]()
	t := Tool{Name: name, Description: description, ReadOnly: readOnly, In: *new(In), Out: *new(Out)}
	t.schema = inputSchema(it)
	t.IfMatch = hasField(it, "if_match")
	t.run = func(ctx context.Context, c Caller, args json.RawMessage) (any, error) {
		var in In
		if err := decodeArgs(args, &in); err != nil {
			return nil, err
		}
		return run(ctx, c, in)
	}
	return t
}

// WithRoute returns t served on the user API as POST .../fs/_/route.
func (t Tool) WithRoute(route string) Tool { t.Route = route; return t }

var schemaCache sync.Map // reflect.Type -> json.RawMessage

// inputSchema is the standalone schema (no references) of t.
func inputSchema(t reflect.Type) json.RawMessage {
	if s, ok := schemaCache.Load(t); ok {
		return s.(json.RawMessage)
	}
	r := jsonschema.Reflector{ExpandedStruct: true, DoNotReference: true, Anonymous: true}
	s := r.ReflectFromType(t)
	s.Version, s.ID = "", ""
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("files: schema of %s: %v", t, err))
	}
	schemaCache.Store(t, json.RawMessage(b))
	return b
}

func hasField(t reflect.Type, name string) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name || (f.Anonymous && hasField(f.Type, name)) {
			return true
		}
	}
	return false
}

// decodeArgs reads the arguments strictly: one JSON object, no unknown
// field.
func decodeArgs(args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if f, ok := strings.CutPrefix(msg, "unknown field "); ok {
			name, _ := strconv.Unquote(f)
			return orchestrator.FieldErrorf(name, "unknown argument %s", f)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return orchestrator.FieldErrorf(te.Field, "argument %s must be %s, not %s", te.Field, jsonType(te.Type), te.Value)
		}
		return orchestrator.FieldErrorf("", "the arguments are not a JSON object: %s", msg)
	}
	if _, err := dec.Token(); err != io.EOF {
		return orchestrator.FieldErrorf("", "the arguments are not one JSON object: more follows it")
	}
	return nil
}

func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "a whole number"
	case reflect.Bool:
		return "true or false"
	}
	return "a " + t.Kind().String()
}

// registry is the tools by name, in the order registered.
type registry struct {
	mu     sync.RWMutex // guards byName and order (leaf)
	byName map[string]Tool
	order  []string
}

var toolName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// Register adds tools (a name taken, or not snake_case, is an error).
func (s *Service) Register(tools ...Tool) error {
	s.tools.mu.Lock()
	defer s.tools.mu.Unlock()
	for _, t := range tools {
		switch {
		case !toolName.MatchString(t.Name):
			return fmt.Errorf("files: tool name %q: want snake_case", t.Name)
		case t.run == nil:
			return fmt.Errorf("files: tool %s was not made with Define", t.Name)
		}
		if _, dup := s.tools.byName[t.Name]; dup {
			return fmt.Errorf("files: tool %s is registered twice", t.Name)
		}
		s.tools.byName[t.Name] = t
		s.tools.order = append(s.tools.order, t.Name)
	}
	return nil
}

// Tools returns every tool, in the order registered.
func (s *Service) Tools() []Tool {
	s.tools.mu.RLock()
	defer s.tools.mu.RUnlock()
	out := make([]Tool, len(s.tools.order))
	for i, n := range s.tools.order {
		out[i] = s.tools.byName[n]
	}
	return out
}

// Tool returns the tool called name.
func (s *Service) Tool(name string) (Tool, bool) {
	s.tools.mu.RLock()
	defer s.tools.mu.RUnlock()
	t, ok := s.tools.byName[name]
	return t, ok
}

// Call runs tool name with args (a JSON object) for c, and audits it.
func (s *Service) Call(ctx context.Context, c Caller, name string, args json.RawMessage) (any, error) {
	t, ok := s.Tool(name)
	if !ok {
		return nil, orchestrator.Errorf(orchestrator.ENotFound, "no tool %q (the tools: GET /api/v1/tools)", cutText(name, 100))
	}
	return Do(s, ctx, c, name, args, func() (any, error) { return t.run(ctx, c, args) })
}

// ToolInfo is a tool as the agent API lists it.
type ToolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	ReadOnly    bool            `json:"read_only"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ToolInfos lists every tool for a client that offers them to a model.
func (s *Service) ToolInfos() []ToolInfo {
	ts := s.Tools()
	out := make([]ToolInfo, len(ts))
	for i, t := range ts {
		out[i] = ToolInfo{Name: t.Name, Description: t.Description, ReadOnly: t.ReadOnly, InputSchema: t.schema}
	}
	return out
}
