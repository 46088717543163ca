package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"mime"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/filepath-dev/filepath/orchestrator/api"
)

// Every answer a test gets from /api/v1 (doT) is checked against the
// OpenAPI document, generated from the routes' Go types: a success against
// the schema its route documents for the status and media type, an error
// against ErrorBody; and a body a route accepted against its request
// schema. A handler that answers another shape than its route declares, a
// field a struct has and its schema lacks (or the other way round), a
// status or media type the route does not document, each fails the test
// that met it. TestMain fails the package when a documented answer was
// never met.

// docOp is one operation of the document.
type docOp struct {
	method, path string // "get", "/api/v1/sessions/{id}"
	re           *regexp.Regexp
	literal      int // characters outside parameters: the most specific path wins
	statuses     map[string]map[string]bool
	reqJSON      bool
}

var apiDoc struct {
	once     sync.Once
	err      error
	compiler *jsonschema.Compiler
	ops      []*docOp
	mu       sync.Mutex
	schemas  map[string]*jsonschema.Schema // by JSON pointer
	met      map[string]bool               // "get /api/v1/me 200"
}

const docURL = "https://filepath.test/openapi.json"

func loadDoc() error {
	apiDoc.once.Do(func() {
		b, err := api.Document()
		if err != nil {
			apiDoc.err = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			apiDoc.err = err
			return
		}
		apiDoc.compiler = jsonschema.NewCompiler()
		if apiDoc.err = apiDoc.compiler.AddResource(docURL, doc); apiDoc.err != nil {
			return
		}
		var d struct {
			Paths map[string]map[string]struct {
				RequestBody *struct {
					Content map[string]json.RawMessage `json:"content"`
				} `json:"requestBody"`
				Responses map[string]struct {
					Content map[string]json.RawMessage `json:"content"`
				} `json:"responses"`
			} `json:"paths"`
		}
		if apiDoc.err = json.Unmarshal(b, &d); apiDoc.err != nil {
			return
		}
		param := regexp.MustCompile(`\{[^}]+\}`)
		for p, methods := range d.Paths {
			for m, o := range methods {
				op := &docOp{method: m, path: p, statuses: map[string]map[string]bool{}}
				var re strings.Builder
				re.WriteString("^")
				last := 0
				for _, loc := range param.FindAllStringIndex(p, -1) {
					re.WriteString(regexp.QuoteMeta(p[last:loc[0]]))
					op.literal += loc[0] - last
					if p[loc[0]:loc[1]] == "{path}" {
						re.WriteString(".*")
					} else {
						re.WriteString("[^/]+")
					}
					last = loc[1]
				}
				re.WriteString(regexp.QuoteMeta(p[last:]) + "$")
				op.literal += len(p) - last
				op.re = regexp.MustCompile(re.String())
				for status, r := range o.Responses {
					op.statuses[status] = map[string]bool{}
					for mt := range r.Content {
						op.statuses[status][mt] = true
					}
				}
				op.reqJSON = o.RequestBody != nil && o.RequestBody.Content["application/json"] != nil
				apiDoc.ops = append(apiDoc.ops, op)
			}
		}
		apiDoc.schemas = map[string]*jsonschema.Schema{}
		apiDoc.met = map[string]bool{}
	})
	return apiDoc.err
}

// docSchema compiles the schema at ptr, a JSON pointer into the document.
func docSchema(ptr ...string) (*jsonschema.Schema, error) {
	for i, p := range ptr {
		ptr[i] = strings.NewReplacer("~", "~0", "/", "~1").Replace(p)
	}
	loc := docURL + "#/" + strings.Join(ptr, "/")
	apiDoc.mu.Lock()
	defer apiDoc.mu.Unlock()
	if s, ok := apiDoc.schemas[loc]; ok {
		return s, nil
	}
	s, err := apiDoc.compiler.Compile(loc)
	if err != nil {
		return nil, err
	}
	apiDoc.schemas[loc] = s
	return s, nil
}

// findOp returns the operation of method on path, the most specific one.
func findOp(method, path string) *docOp {
	var best *docOp
	for _, op := range apiDoc.ops {
		if op.method == method && op.re.MatchString(path) && (best == nil || op.literal > best.literal ||
			op.literal == best.literal && strings.Count(op.path, "{") < strings.Count(best.path, "{")) {
			best = op
		}
	}
	return best
}

func validateJSON(body []byte, ptr ...string) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	s, err := docSchema(ptr...)
	if err != nil {
		return fmt.Errorf("no schema at %v: %w", ptr, err)
	}
	return s.Validate(v)
}

func mediaType(h http.Header) string {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt
}

// checkAnswer checks one exchange with the API against the document.
func checkAnswer(t testing.TB, req *http.Request, reqBody string, rep reply) {
	t.Helper()
	if !strings.HasPrefix(req.URL.Path, "/api/v1/") {
		return
	}
	if err := loadDoc(); err != nil {
		t.Fatalf("openapi document: %v", err)
	}
	method := strings.ToLower(req.Method)
	what := req.Method + " " + req.URL.Path
	if rep.status >= 400 {
		if method != "head" && len(rep.body) > 0 {
			if err := validateJSON(rep.body, "components", "schemas", "ErrorBody"); err != nil {
				t.Errorf("%s: error answer %d is no ErrorBody: %v\n%s", what, rep.status, err, rep.body)
			}
		}
		return
	}
	op := findOp(method, req.URL.Path)
	if op == nil {
		t.Errorf("%s answered %d, but the document has no such operation", what, rep.status)
		return
	}
	status := strconv.Itoa(rep.status)
	media, ok := op.statuses[status]
	if !ok {
		t.Errorf("%s answered %d, but %s %s documents only %v", what, rep.status, op.method, op.path, keys(op.statuses))
		return
	}
	apiDoc.mu.Lock()
	apiDoc.met[op.method+" "+op.path+" "+status] = true
	apiDoc.mu.Unlock()
	mt := mediaType(rep.header)
	switch {
	case method == "head":
	case len(media) == 0:
		if len(rep.body) > 0 {
			t.Errorf("%s answered %d with a body, which %s %s does not document: %q", what, rep.status, op.method, op.path, rep.body)
		}
	case !media[mt] && !(media["*/*"] && mt != "application/json"):
		t.Errorf("%s answered %d as %q, but %s %s documents %v", what, rep.status, mt, op.method, op.path, keys(media))
	case mt == "application/json":
		if err := validateJSON(rep.body, "paths", op.path, op.method, "responses", status, "content", mt, "schema"); err != nil {
			t.Errorf("%s: the answer does not match its documented schema: %v\n%s", what, err, rep.body)
		}
	}
	if op.reqJSON && reqBody != "" && mediaType(req.Header) == "application/json" {
		if err := validateJSON([]byte(reqBody), "paths", op.path, op.method, "requestBody", "content", "application/json", "schema"); err != nil {
			t.Errorf("%s accepted a body its documented schema refuses: %v\n%s", what, err, reqBody)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// uncheckedAnswers lists the documented answers no test met (the
// WebSocket upgrade excepted: the stream's tests dial it).
func uncheckedAnswers() []string {
	if err := loadDoc(); err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, op := range apiDoc.ops {
		for status := range op.statuses {
			key := op.method + " " + op.path + " " + status
			if status != "default" && status != "101" && !apiDoc.met[key] {
				out = append(out, key)
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestMain(m *testing.M) {
	code := m.Run()
	filtered := false
	for _, name := range []string{"test.run", "test.skip", "test.fuzz"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			filtered = true
		}
	}
	if code == 0 && !filtered {
		if missing := uncheckedAnswers(); len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: no test checked these documented answers against the document (checkAnswer): %v\n", missing)
			code = 1
		}
	}
	os.Exit(code)
}
