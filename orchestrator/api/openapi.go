package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/invopop/jsonschema"
	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/files"
	"github.com/filepath-dev/filepath/orchestrator/models"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/treediff"
	"github.com/filepath-dev/filepath/protocol"
)

//go:generate go run ./internal/cmd/genopenapi

// The OpenAPI document is generated from the routes' Go types (opDoc):
// invopop/jsonschema reflects each request, answer and query struct into a
// component schema named after its type; the log record, the node and the
// session (with the events and inputs a record carries) are protocol's
// schemas, the ones the UI's protocol types come from. openapi.json, the
// committed copy the UI's API types are generated from, is Document's
// output (TestCommittedOpenAPIIsCurrent).

const schemaRef = "#/components/schemas/"

// Document returns the OpenAPI 3.1 document of every /api/v1 route a server
// may serve (the session filesystem's too), as openapi.json holds it.
func Document() ([]byte, error) {
	doc, err := buildDocument(allRoutes())
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("openapi: encode: %w", err)
	}
	return buf.Bytes(), nil
}

// getOpenAPI answers the document of the routes this server serves (the
// session filesystem's only when it has one).
func (s *Server) getOpenAPI(c echo.Context) (map[string]any, error) {
	s.openAPIOnce.Do(func() {
		doc, err := buildDocument(s.routeList())
		if err == nil {
			var b []byte
			if b, err = json.Marshal(doc); err == nil {
				dec := json.NewDecoder(bytes.NewReader(b))
				dec.UseNumber() // 2^63-1 stays itself
				err = dec.Decode(&s.openAPI)
			}
		}
		s.openAPIErr = err
	})
	return s.openAPI, s.openAPIErr
}

// The OpenAPI objects the document uses.
type (
	openAPIDoc struct {
		OpenAPI    string                           `json:"openapi"`
		Info       openAPIInfo                      `json:"info"`
		Security   []map[string][]string            `json:"security"`
		Paths      map[string]map[string]*operation `json:"paths"`
		Components components                       `json:"components"`
	}
	openAPIInfo struct {
		Title   string `json:"title"`
		Version string `json:"version"`
	}
	components struct {
		SecuritySchemes map[string]securityScheme `json:"securitySchemes"`
		// Schemas holds *jsonschema.Schema values, and protocol's as it
		// wrote them.
		Schemas map[string]any `json:"schemas"`
	}
	securityScheme struct {
		Type   string `json:"type"`
		Scheme string `json:"scheme,omitempty"`
		In     string `json:"in,omitempty"`
		Name   string `json:"name,omitempty"`
	}
	operation struct {
		Summary     string              `json:"summary"`
		OperationID string              `json:"operationId"`
		Parameters  []parameter         `json:"parameters,omitempty"`
		RequestBody *requestBody        `json:"requestBody,omitempty"`
		Responses   map[string]response `json:"responses"`
	}
	parameter struct {
		Name        string             `json:"name"`
		In          string             `json:"in"`
		Description string             `json:"description,omitempty"`
		Required    bool               `json:"required,omitempty"`
		Schema      *jsonschema.Schema `json:"schema"`
	}
	requestBody struct {
		Required bool                 `json:"required"`
		Content  map[string]mediaType `json:"content"`
	}
	response struct {
		Description string               `json:"description"`
		Content     map[string]mediaType `json:"content,omitempty"`
	}
	mediaType struct {
		Schema *jsonschema.Schema `json:"schema"`
	}
)

var paramRE = regexp.MustCompile(`:([a-zA-Z_]+)|\*`)

// openAPIPath turns an Echo path (/sessions/:id, /fs/*) into OpenAPI syntax.
func openAPIPath(p string) string {
	return paramRE.ReplaceAllStringFunc(p, func(m string) string {
		if m == "*" {
			return "{path}"
		}
		return "{" + m[1:] + "}"
	})
}

// buildDocument builds the OpenAPI 3.1 document of routes.
func buildDocument(routes []route) (*openAPIDoc, error) {
	sr := newSchemaReflector()
	bytesSchema := func() *jsonschema.Schema { return &jsonschema.Schema{Type: "string", Format: "binary"} }
	paths := map[string]map[string]*operation{}
	for _, r := range routes {
		p := apiPrefix + openAPIPath(r.path)
		op := &operation{
			Summary:     r.doc.summary,
			OperationID: strings.ToLower(r.method) + strings.NewReplacer("/", "_", "{", "", "}", "", ".", "_").Replace(openAPIPath(r.path)),
			Responses:   map[string]response{},
		}
		for _, m := range paramRE.FindAllStringSubmatch(r.path, -1) {
			name := m[1]
			if name == "" {
				name = "path"
			}
			op.Parameters = append(op.Parameters, parameter{Name: name, In: "path", Required: true, Schema: &jsonschema.Schema{Type: "string"}})
		}
		if r.doc.query != nil {
			ps, err := queryParameters(reflect.TypeOf(r.doc.query))
			if err != nil {
				return nil, fmt.Errorf("openapi: %s %s: %w", r.method, r.path, err)
			}
			op.Parameters = append(op.Parameters, ps...)
		}
		if r.doc.req != nil {
			content := map[string]mediaType{echo.MIMEApplicationJSON: {sr.schema(reflect.TypeOf(r.doc.req))}}
			if r.doc.reqRaw {
				content[echo.MIMEOctetStream] = mediaType{bytesSchema()}
			}
			op.RequestBody = &requestBody{Required: true, Content: content}
		}
		ok := response{Description: http.StatusText(r.doc.status)}
		switch resp := r.doc.resp.(type) {
		case nil:
		case oneOf:
			alt := &jsonschema.Schema{}
			for _, v := range resp {
				alt.OneOf = append(alt.OneOf, sr.schema(reflect.TypeOf(v)))
			}
			ok.Content = map[string]mediaType{echo.MIMEApplicationJSON: {alt}}
		default:
			ok.Content = map[string]mediaType{echo.MIMEApplicationJSON: {sr.schema(reflect.TypeOf(resp))}}
		}
		if r.doc.text {
			ok.Content = map[string]mediaType{echo.MIMETextPlain: {&jsonschema.Schema{Type: "string"}}}
		}
		if r.doc.respRaw {
			// the raw bytes, typed as their content sniffs
			if ok.Content == nil {
				ok.Content = map[string]mediaType{}
			}
			ok.Content["*/*"] = mediaType{bytesSchema()}
		}
		if r.doc.status != 0 {
			op.Responses[strconv.Itoa(r.doc.status)] = ok
		}
		if r.doc.partial {
			part := response{Description: "a range of the file's bytes (Content-Range)"}
			if r.method != http.MethodHead {
				part.Content = map[string]mediaType{"*/*": {bytesSchema()}}
			}
			op.Responses[strconv.Itoa(http.StatusPartialContent)] = part
		}
		if r.doc.notModified {
			op.Responses[strconv.Itoa(http.StatusNotModified)] = response{Description: "the file's hash is If-None-Match's"}
		}
		op.Responses["default"] = response{Description: "error", Content: map[string]mediaType{
			echo.MIMEApplicationJSON: {sr.schema(reflect.TypeFor[orchestrator.ErrorBody]())}}}
		if paths[p] == nil {
			paths[p] = map[string]*operation{}
		}
		method := strings.ToLower(r.method)
		if paths[p][method] != nil {
			return nil, fmt.Errorf("openapi: %s %s is registered twice", r.method, p)
		}
		paths[p][method] = op
	}
	schemas, err := sr.components()
	if err != nil {
		return nil, err
	}
	return &openAPIDoc{
		OpenAPI:  "3.1.0",
		Info:     openAPIInfo{Title: "filepath API", Version: "1"},
		Security: []map[string][]string{{"bearer": {}}, {"cookie": {}}},
		Paths:    paths,
		Components: components{
			SecuritySchemes: map[string]securityScheme{
				"bearer": {Type: "http", Scheme: "bearer"},
				"cookie": {Type: "apiKey", In: "cookie", Name: CookieName},
			},
			Schemas: schemas,
		},
	}, nil
}

// protocolTwins are the store's types whose JSON is a protocol type's
// (store's schema tests check it): the document refers to protocol's
// schema for them.
var protocolTwins = map[reflect.Type]string{
	reflect.TypeFor[sessions.Node]():    "Node",
	reflect.TypeFor[protocol.Session](): "Session",
	reflect.TypeFor[protocol.Record]():  "Record",
}

// schemaNames renames the Go types whose names would collide with another
// component (protocol's Approval, Memory, FileChange) or say too little
// outside their package.
var schemaNames = map[reflect.Type]string{
	reflect.TypeFor[collab.Approval]():     "ApprovalRequest",
	reflect.TypeFor[collab.Memory]():       "StoredMemory",
	reflect.TypeFor[treediff.FileChange](): "ForkChange",
	reflect.TypeFor[treediff.Conflict]():   "MergeConflict",
	reflect.TypeFor[vfs.AuditEntry]():      "FileAuditEntry",
	reflect.TypeFor[models.List]():         "ModelList",
	reflect.TypeFor[models.Provider]():     "ModelProvider",
	reflect.TypeFor[files.Entry]():         "FileEntry",
	reflect.TypeFor[files.Info]():          "FileDetail",
	reflect.TypeFor[files.Bytes]():         "FileBytes",
	reflect.TypeFor[files.Named]():         "FileRef",
	reflect.TypeFor[files.Written]():       "FileWritten",
	reflect.TypeFor[files.Deleted]():       "FileDeleted",
	reflect.TypeFor[files.CacheStats]():    "FileCacheStats",
	reflect.TypeFor[vfs.KV]():              "KVEntry",
}

// schemaReflector reflects Go types into the document's component schemas.
type schemaReflector struct {
	r        jsonschema.Reflector
	protocol map[string]any          // protocol's schemas by name
	defs     jsonschema.Definitions  // the reflected ones by name
	types    map[string]reflect.Type // the Go type of each name
	errs     []error
}

func newSchemaReflector() *schemaReflector {
	sr := &schemaReflector{defs: jsonschema.Definitions{}, types: map[string]reflect.Type{}}
	var err error
	if sr.protocol, err = protocol.SchemaComponents(schemaRef); err != nil {
		// the committed schemas are broken: protocol's tests fail too
		sr.errs = append(sr.errs, fmt.Errorf("protocol schemas: %w", err))
	}
	sr.r = jsonschema.Reflector{Anonymous: true, Namer: sr.name, Mapper: sr.mapProtocol}
	return sr
}

// name is the component name of t: its Go name, a list's "<item>List", or
// schemaNames'. Two types of one name are an error.
func (sr *schemaReflector) name(t reflect.Type) string {
	name := schemaNames[t]
	switch {
	case name != "":
	case protocolTwins[t] != "":
		return protocolTwins[t]
	case t.PkgPath() == reflect.TypeFor[route]().PkgPath() && strings.HasPrefix(t.Name(), "listBody["):
		name = sr.name(t.Field(0).Type.Elem()) + "List"
	default:
		name = t.Name()
	}
	if k := t.Kind(); name == "" || (k != reflect.Struct && k != reflect.Slice && k != reflect.Map) || t == reflect.TypeFor[json.RawMessage]() {
		return name // never a definition of its own
	}
	if was, ok := sr.types[name]; ok && was != t {
		sr.errs = append(sr.errs, fmt.Errorf("%s and %s are both named %s: add one to schemaNames", was, t, name))
	}
	sr.types[name] = t
	return name
}

// mapProtocol refers to protocol's schema for protocol's types and their
// store twins.
func (sr *schemaReflector) mapProtocol(t reflect.Type) *jsonschema.Schema {
	name := protocolTwins[t]
	if name == "" && t.PkgPath() == reflect.TypeFor[protocol.Node]().PkgPath() {
		name = t.Name()
	}
	if name == "" {
		return nil
	}
	if _, ok := sr.protocol[name]; !ok {
		sr.errs = append(sr.errs, fmt.Errorf("%s has no schema in protocol's", t))
	}
	return &jsonschema.Schema{Ref: schemaRef + name}
}

// schema returns the schema of t: a reference to its component for a
// named struct, else inline.
func (sr *schemaReflector) schema(t reflect.Type) *jsonschema.Schema {
	s := sr.r.ReflectFromType(t)
	for name, d := range s.Definitions {
		sr.defs[name] = d
	}
	s.Version, s.Definitions = "", nil
	fixSchema(s)
	return s
}

// components returns every schema reflected so far, and protocol's, with
// their references pointing into the document.
func (sr *schemaReflector) components() (map[string]any, error) {
	out := map[string]any{}
	for name, s := range sr.protocol {
		out[name] = s
	}
	for name, d := range sr.defs {
		if _, dup := out[name]; dup {
			sr.errs = append(sr.errs, fmt.Errorf("%s is both protocol's and %s", name, sr.types[name]))
		}
		out[name] = d
	}
	if len(sr.errs) > 0 {
		return nil, fmt.Errorf("openapi: %w", errors.Join(sr.errs...))
	}
	for _, d := range sr.defs {
		fixSchema(d)
	}
	return out, nil
}

// fixSchema points the references under s into the document, says of a
// free-form object (json.RawMessage typed object, a map of anything) that
// it takes any property (else generators read "no properties"), and puts
// a nullable field's description beside its oneOf.
func fixSchema(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if name, ok := strings.CutPrefix(s.Ref, "#/$defs/"); ok {
		s.Ref = schemaRef + name
	}
	if s.Type == "object" && s.Properties == nil && s.AdditionalProperties == nil && s.PatternProperties == nil {
		s.AdditionalProperties = jsonschema.TrueSchema
	}
	if len(s.OneOf) == 2 && s.OneOf[1].Type == "null" && s.Description == "" {
		// a nullable field (its tag): the description is the field's
		s.Description, s.OneOf[0].Description = s.OneOf[0].Description, ""
	}
	for _, sub := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems} {
		for _, x := range sub {
			fixSchema(x)
		}
	}
	fixSchema(s.Items)
	fixSchema(s.AdditionalProperties)
	if s.Properties != nil {
		for p := s.Properties.Oldest(); p != nil; p = p.Next() {
			fixSchema(p.Value)
		}
	}
}
