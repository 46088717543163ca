package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/filepath-dev/filepath/adapters/cli/codex"
	"github.com/filepath-dev/filepath/adapters/cli/internal/golden"
	"github.com/filepath-dev/filepath/adapters/cli/run"
	"github.com/filepath-dev/filepath/adapters/cli/streamjson"
	"github.com/filepath-dev/filepath/protocol"
)

// The adapter's cost per line of a CLI's stream (parse + emit as FAP),
// beside the same bytes through `cat`. The lines are the recorded
// transcripts of testdata (real claude-code 2.1.330 and codex 0.169.0
// output), repeated.
//
//	go test -run='^$' -bench=. -count=5 ./adapters/cli/

type benchCase struct {
	name   string
	dir    string
	parser func() golden.Parser
}

var benchCases = []benchCase{
	{"claude", "testdata/claude", func() golden.Parser { return streamjson.NewParser(streamjson.Claude, "/workspace") }},
	{"codex", "testdata/codex", func() golden.Parser { return codex.NewParser("/workspace") }},
}

// corpus is every line of every case of dir, in order.
func corpus(b *testing.B, dir string) [][]byte {
	b.Helper()
	cases, _ := os.ReadDir(dir)
	var lines [][]byte
	for _, c := range cases {
		lines = append(lines, golden.Lines(b, filepath.Join(dir, c.Name(), "stream.jsonl"))...)
	}
	return lines
}

// BenchmarkParseEmit is the adapter's work per line in process: parse it and
// write its events as FAP lines.
func BenchmarkParseEmit(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			lines := corpus(b, c.dir)
			size := 0
			for _, l := range lines {
				size += len(l) + 1
			}
			enc := protocol.NewEncoder(io.Discard)
			b.SetBytes(int64(size) / int64(len(lines)))
			b.ReportAllocs()
			b.ResetTimer()
			var p golden.Parser
			for i := range b.N {
				if i%len(lines) == 0 {
					p = c.parser() // a new session each pass over the corpus
				}
				evs, _ := p.Parse(lines[i%len(lines)])
				for _, ev := range evs {
					enc.Encode(ev)
				}
			}
		})
	}
}

// streamFile writes the corpus repeated to at least 16 MiB and returns its
// path and line count.
func streamFile(b *testing.B, dir string) (string, int) {
	b.Helper()
	lines := corpus(b, dir)
	var buf bytes.Buffer
	n := 0
	for buf.Len() < 16<<20 {
		for _, l := range lines {
			buf.Write(l)
			buf.WriteByte('\n')
			n++
		}
	}
	path := filepath.Join(b.TempDir(), "stream.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	return path, n
}

// BenchmarkPipe is the whole path of a line through the adapter (a child's
// stdout read through run.Child, parsed, emitted), the CLI played by `cat`;
// the baseline is the same bytes through `cat` read by Go into io.Discard.
// Reported per line.
func BenchmarkPipe(b *testing.B) {
	for _, c := range benchCases {
		path, n := streamFile(b, c.dir)
		b.Run(c.name+"/adapter", func(b *testing.B) {
			enc := protocol.NewEncoder(io.Discard)
			b.ResetTimer()
			for range b.N {
				child, err := run.StartChild(run.ChildSpec{Name: "cat", Path: "cat", Args: []string{path}, Env: os.Environ()})
				if err != nil {
					b.Fatal(err)
				}
				p := c.parser()
				for l := range child.Lines() {
					evs, _ := p.Parse(l)
					for _, ev := range evs {
						enc.Encode(ev)
					}
				}
				<-child.Done()
				child.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/line")
		})
		b.Run(c.name+"/cat", func(b *testing.B) {
			for range b.N {
				cmd := exec.Command("cat", path)
				out, err := cmd.StdoutPipe()
				if err != nil {
					b.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, out)
				cmd.Wait()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/line")
		})
	}
}
