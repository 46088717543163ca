package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"regexp"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/filepath-dev/filepath/protocol"
)

func addCorpus(f *testing.F, files ...string) {
	for _, file := range files {
		for _, line := range corpusLines(f, file) {
			f.Add(line)
		}
	}
}

// hugeExponent matches numbers the schema validator would turn into huge
// big.Rat values (slow, memory hungry); the fuzzers skip the schema
// comparison for them.
var hugeExponent = regexp.MustCompile(`[eE][+-]?0*[0-9]{4,}`)

// fuzzDecode checks one decoder against its schema: same verdict, errors of
// type *DecodeError, and a valid value that survives encode + decode with the
// same string values encoding/json reads from the line.
func fuzzDecode(t *testing.T, s *jsonschema.Schema, decode func([]byte) (any, error), line []byte) {
	v, err := decode(line)
	if err != nil {
		var de *protocol.DecodeError
		if !errors.As(err, &de) || de.Reason == "" {
			t.Fatalf("error %T %v, want *protocol.DecodeError with a reason", err, err)
		}
	}
	// The schema can only judge valid UTF-8 (see schemaVerdict).
	if utf8.Valid(line) && !hugeExponent.Match(line) {
		if serr := schemaVerdict(s, line); (serr == nil) != (err == nil) {
			t.Fatalf("decoder and schema disagree on %q:\ndecoder: %v\nschema: %v", line, err, serr)
		}
	}
	if err != nil {
		return
	}
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %#v: %v", v, err)
	}
	again, err := decode(enc)
	if err != nil {
		t.Fatalf("decode of re-encoded %s: %v", enc, err)
	}
	if !reflect.DeepEqual(again, v) {
		t.Fatalf("round trip changed %#v to %#v", v, again)
	}
	// Every field of the typed value has the value encoding/json reads from
	// the line (this checks unquoting and last-key-wins).
	orig, typed := useNumber(t, line), useNumber(t, enc)
	for k, tv := range typed {
		if k == "workers" {
			continue // compared below, element by element, minus unknown fields
		}
		if !sameJSON(orig[k], tv) {
			t.Fatalf("field %q: decoder read %#v, encoding/json reads %#v", k, tv, orig[k])
		}
	}
	if w, ok := v.(protocol.WorkersEvent); ok {
		ow := orig["workers"].([]any)
		for i, worker := range w.Workers {
			m := ow[i].(map[string]any)
			if m["name"] != worker.Name || m["status"] != worker.Status {
				t.Fatalf("workers[%d]: decoder read %#v, encoding/json reads %#v", i, worker, m)
			}
		}
	}
}

func useNumber(t *testing.T, line []byte) map[string]any {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("encoding/json rejects a line the decoder accepted: %v", err)
	}
	return m
}

// sameJSON compares decoded values, numbers by their float64 value.
func sameJSON(a, b any) bool {
	if na, ok := a.(json.Number); ok {
		nb, ok := b.(json.Number)
		fa, erra := na.Float64()
		fb, errb := nb.Float64()
		return ok && erra == nil && errb == nil && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func FuzzDecodeEvent(f *testing.F) {
	addCorpus(f, "events_valid.ndjson", "events_invalid.ndjson")
	f.Add([]byte("{\"type\":\"text\",\"content\":\"\xff\"}"))
	s := compileSchema(f, "event.schema.json", protocol.EventSchema())
	decode := func(b []byte) (any, error) { return protocol.DecodeEvent(b) }
	f.Fuzz(func(t *testing.T, line []byte) { fuzzDecode(t, s, decode, line) })
}

func FuzzDecodeInput(f *testing.F) {
	addCorpus(f, "inputs_valid.ndjson", "inputs_invalid.ndjson")
	s := compileSchema(f, "input.schema.json", protocol.InputSchema())
	decode := func(b []byte) (any, error) { return protocol.DecodeInput(b) }
	f.Fuzz(func(t *testing.T, line []byte) { fuzzDecode(t, s, decode, line) })
}

// FuzzReader checks that the reader never returns a line over its limit,
// keeps its memory within the limit, numbers lines like a plain split, and
// goes on after an over-long line.
func FuzzReader(f *testing.F) {
	for _, file := range []string{"events_valid.ndjson", "events_invalid.ndjson"} {
		b := bytes.Join(corpusLines(f, file), []byte("\n"))
		f.Add(b, uint16(64))
		f.Add(bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")), uint16(40))
	}
	f.Add([]byte("a\n\n  \r\nbb\r\nccc"), uint16(2))
	f.Add([]byte("\r\r\n\n"), uint16(1))
	f.Fuzz(checkReader)
}

func checkReader(t *testing.T, data []byte, limit uint16) {
	{
		maxLine := int(limit%512) + 1
		r := protocol.NewReader(bytes.NewReader(data), maxLine)
		// The expected lines, from a plain split.
		want := bytes.Split(data, []byte("\n"))
		if len(want) > 0 && len(want[len(want)-1]) == 0 {
			want = want[:len(want)-1] // data ends with "\n": no extra line
		}
		type result struct {
			num     int
			line    string
			tooLong bool
			size    int64
		}
		var exp []result
		for i, w := range want {
			w = bytes.TrimSuffix(w, []byte("\r"))
			switch {
			case len(w) > maxLine:
				exp = append(exp, result{num: i + 1, tooLong: true, size: int64(len(w))})
			case len(bytes.Trim(w, " \t\r")) > 0:
				exp = append(exp, result{num: i + 1, line: string(w)})
			}
		}
		var got []result
		for len(got) <= len(exp) {
			line, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			var tooLong *protocol.LineTooLongError
			switch {
			case errors.As(err, &tooLong):
				if tooLong.Line != r.Line() || tooLong.Limit != maxLine || len(tooLong.Head) > maxLine ||
					!bytes.HasPrefix(want[tooLong.Line-1], tooLong.Head) {
					t.Fatalf("bad %#v (line %d, limit %d)", tooLong, r.Line(), maxLine)
				}
				got = append(got, result{num: tooLong.Line, tooLong: true, size: tooLong.Size})
			case err != nil:
				t.Fatalf("unexpected error %v", err)
			default:
				if len(line) > maxLine {
					t.Fatalf("line %d is %d bytes, over the limit %d", r.Line(), len(line), maxLine)
				}
				got = append(got, result{num: r.Line(), line: string(line)})
			}
		}
		if !reflect.DeepEqual(got, exp) {
			t.Fatalf("limit %d:\ngot  %+v\nwant %+v", maxLine, got, exp)
		}
	}
}
