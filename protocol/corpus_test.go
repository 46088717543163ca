package protocol_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/filepath-dev/filepath/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// corpusLines returns the lines of testdata/corpus/name, numbered from 1.
func corpusLines(t testing.TB, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "corpus", name))
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for _, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		lines = append(lines, l)
	}
	return lines
}

func compileSchema(t testing.TB, name string, doc []byte) *jsonschema.Schema {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(name, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	s, err := c.Compile(name)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	return s
}

// schemaVerdict validates one line against the schema. Lines with invalid
// UTF-8 cannot be judged this way: a JSON decoder replaces the bad bytes with
// U+FFFD, so the schema sees a different, valid line. The Go decoder rejects
// them; TestInvalidUTF8 covers that case.
func schemaVerdict(s *jsonschema.Schema, line []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

type corpusKind struct {
	name   string
	schema func() []byte
	decode func([]byte) (any, error)
}

var kinds = []corpusKind{
	{"events", protocol.EventSchema, func(b []byte) (any, error) { return protocol.DecodeEvent(b) }},
	{"inputs", protocol.InputSchema, func(b []byte) (any, error) { return protocol.DecodeInput(b) }},
}

// TestCorpus runs every corpus line through the Go decoder and the JSON
// Schema and requires both to give the expected verdict. The reasons for the
// invalid lines are kept in testdata/corpus/*_invalid.golden (-update).
func TestCorpus(t *testing.T) {
	for _, k := range kinds {
		s := compileSchema(t, k.name+".schema.json", k.schema())
		for _, valid := range []bool{true, false} {
			file := k.name + "_valid.ndjson"
			if !valid {
				file = k.name + "_invalid.ndjson"
			}
			var golden strings.Builder
			for i, line := range corpusLines(t, file) {
				where := fmt.Sprintf("%s:%d %s", file, i+1, line)
				_, err := k.decode(line)
				if (err == nil) != valid {
					t.Errorf("%s: Go decoder says valid=%v (err %v), want valid=%v", where, err == nil, err, valid)
				}
				if err != nil {
					if _, ok := err.(*protocol.DecodeError); !ok {
						t.Errorf("%s: error %T, want *protocol.DecodeError", where, err)
					}
					fmt.Fprintf(&golden, "%d: %v\n", i+1, err)
				}
				if serr := schemaVerdict(s, line); (serr == nil) != valid {
					t.Errorf("%s: JSON Schema says valid=%v (%v), want valid=%v", where, serr == nil, serr, valid)
				}
			}
			if !valid {
				checkGolden(t, filepath.Join("testdata", "corpus", k.name+"_invalid.golden"), golden.String())
			}
		}
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./protocol -run TestCorpus -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run go test ./protocol -run TestCorpus -update and review the diff):\n--- got\n%s", path, got)
	}
}

// TestCorpusRoundTrip re-encodes every valid line's typed value and decodes
// it again: the encoder must write what the decoder reads.
func TestCorpusRoundTrip(t *testing.T) {
	for _, k := range kinds {
		for i, line := range corpusLines(t, k.name+"_valid.ndjson") {
			v, err := k.decode(line)
			if err != nil {
				t.Fatalf("%s:%d: %v", k.name, i+1, err)
			}
			var buf bytes.Buffer
			if err := protocol.NewEncoder(&buf).Encode(v); err != nil {
				t.Fatalf("%s:%d: encode: %v", k.name, i+1, err)
			}
			if bytes.Count(buf.Bytes(), []byte("\n")) != 1 || !bytes.HasSuffix(buf.Bytes(), []byte("\n")) {
				t.Fatalf("%s:%d: encoder did not write exactly one line: %q", k.name, i+1, buf.String())
			}
			again, err := k.decode(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
			if err != nil {
				t.Fatalf("%s:%d: decode %s: %v", k.name, i+1, buf.Bytes(), err)
			}
			if !reflect.DeepEqual(again, v) {
				t.Errorf("%s:%d: round trip changed\n%#v\nto\n%#v", k.name, i+1, v, again)
			}
		}
	}
}
