// Package golden runs a parser over the recorded CLI transcripts in
// adapters/cli/testdata and compares the FAP it makes with the golden files.
//
// A case is a directory with stream.jsonl (the CLI's output, one message a
// line; lines starting with "#" are comments and name the source) and
// want.jsonl (the expected FAP events, one a line, and "# note: ..." lines for
// what the parser skipped). `go test -update` rewrites want.jsonl.
package golden

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden want.jsonl files")

// Parser is what the CLI parsers have in common.
type Parser interface {
	Parse(line []byte) ([]protocol.Event, string)
}

// Lines returns the non-comment, non-blank lines of a stream file.
func Lines(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		l := sc.Bytes()
		if len(bytes.TrimSpace(l)) == 0 || l[0] == '#' {
			continue
		}
		out = append(out, append([]byte(nil), l...))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Ender is a parser that can close a stream that stopped mid-turn.
type Ender interface {
	End(reason string) []protocol.Event
}

// EndReason is what the golden files give End.
const EndReason = "the CLI stopped"

// Translate feeds lines to p and returns the events encoded as FAP lines
// interleaved with "# note: " lines. Every event must pass protocol.DecodeEvent.
func Translate(t testing.TB, p Parser, lines [][]byte) []string {
	t.Helper()
	var out []string
	for i, l := range lines {
		evs, note := p.Parse(l)
		out = append(out, encode(t, i+1, evs)...)
		if note != "" {
			out = append(out, "# note: "+note)
		}
	}
	if e, ok := p.(Ender); ok {
		if evs := e.End(EndReason); len(evs) > 0 {
			out = append(out, "# end of stream")
			out = append(out, encode(t, len(lines)+1, evs)...)
		}
	}
	return out
}

func encode(t testing.TB, line int, evs []protocol.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		var buf bytes.Buffer
		if err := protocol.NewEncoder(&buf).Encode(ev); err != nil {
			t.Fatalf("line %d: encode %#v: %v", line, ev, err)
		}
		enc := strings.TrimSuffix(buf.String(), "\n")
		if _, err := protocol.DecodeEvent([]byte(enc)); err != nil {
			t.Errorf("line %d: the parser made an invalid FAP event %s: %v", line, enc, err)
		}
		out = append(out, enc)
	}
	return out
}

// Run checks every case under dir (e.g. testdata/claude) with a fresh
// parser from newParser.
func Run(t *testing.T, dir string, newParser func() Parser) {
	t.Helper()
	cases, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("no cases in %s", dir)
	}
	for _, c := range cases {
		if !c.IsDir() {
			continue
		}
		t.Run(c.Name(), func(t *testing.T) {
			caseDir := filepath.Join(dir, c.Name())
			got := Translate(t, newParser(), Lines(t, filepath.Join(caseDir, "stream.jsonl")))
			Compare(t, filepath.Join(caseDir, "want.jsonl"), got)
		})
	}
}

const header = "# FAP made from stream.jsonl; `go test -update` rewrites this file"

// Compare checks got against the golden file, or rewrites it with -update.
func Compare(t testing.TB, path string, got []string) {
	t.Helper()
	if *update {
		body := header + "\n" + strings.Join(got, "\n") + "\n"
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	var want []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l != header {
			want = append(want, l)
		}
	}
	n := max(len(want), len(got))
	for i := range n {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			t.Errorf("%s: first difference at event %d:\n got: %s\nwant: %s\n(%d events, want %d; -update rewrites the golden file)", path, i+1, g, w, len(got), len(want))
			return
		}
	}
}
