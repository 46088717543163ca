package protocol

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

type readResult struct {
	line    int
	text    string
	tooLong int64 // size of an over-long line, 0 otherwise
}

func readAll(t *testing.T, r *Reader) []readResult {
	t.Helper()
	var out []readResult
	for {
		line, err := r.Next()
		var tl *LineTooLongError
		switch {
		case errors.Is(err, io.EOF):
			return out
		case errors.As(err, &tl):
			if tl.Line != r.Line() {
				t.Fatalf("LineTooLongError.Line %d, Reader.Line %d", tl.Line, r.Line())
			}
			out = append(out, readResult{line: tl.Line, tooLong: tl.Size})
		case err != nil:
			t.Fatalf("Next: %v", err)
		default:
			out = append(out, readResult{line: r.Line(), text: string(line)})
		}
	}
}

func TestReader(t *testing.T) {
	tests := []struct {
		name  string
		input string
		max   int
		want  []readResult
	}{
		{name: "lines", input: "a\nbb\n", max: 10, want: []readResult{{1, "a", 0}, {2, "bb", 0}}},
		{name: "no final newline", input: "a\nbb", max: 10, want: []readResult{{1, "a", 0}, {2, "bb", 0}}},
		{name: "crlf", input: "a\r\nbb\r\n", max: 10, want: []readResult{{1, "a", 0}, {2, "bb", 0}}},
		{name: "final \\r", input: "a\r", max: 10, want: []readResult{{1, "a", 0}}},
		{name: "blank lines count", input: "\n \t\n\r\na\n\n\nb", max: 10, want: []readResult{{4, "a", 0}, {7, "b", 0}}},
		{name: "empty", input: "", max: 10, want: nil},
		{name: "only newlines", input: "\n\n\n", max: 10, want: nil},
		{name: "exactly the limit", input: "12345\n12345\r\n12345", max: 5, want: []readResult{{1, "12345", 0}, {2, "12345", 0}, {3, "12345", 0}}},
		{name: "one over", input: "123456\n123456\r\n123456\nok", max: 5,
			want: []readResult{{1, "", 6}, {2, "", 6}, {3, "", 6}, {4, "ok", 0}}},
		{name: "long line across buffers", input: strings.Repeat("x", 300<<10) + "\r\n{}\n", max: 100 << 10,
			want: []readResult{{1, "", 300 << 10}, {2, "{}", 0}}},
		{name: "long last line", input: "{}\n" + strings.Repeat("x", 200<<10), max: 1000,
			want: []readResult{{1, "{}", 0}, {2, "", 200 << 10}}},
		{name: "default limit", input: strings.Repeat("y", DefaultMaxLine) + "\n" + strings.Repeat("y", DefaultMaxLine+1), max: 0,
			want: []readResult{{1, strings.Repeat("y", DefaultMaxLine), 0}, {2, "", DefaultMaxLine + 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A one-byte-at-a-time reader must give the same result.
			srcs := []io.Reader{strings.NewReader(tt.input)}
			if len(tt.input) < 64<<10 {
				srcs = append(srcs, &oneByteReader{s: tt.input})
			}
			for _, src := range srcs {
				got := readAll(t, NewReader(src, tt.max))
				if len(got) != len(tt.want) {
					t.Fatalf("got %d results, want %d: %.200v", len(got), len(tt.want), got)
				}
				for i := range got {
					if got[i] != tt.want[i] {
						t.Fatalf("result %d: got %.100v, want %.100v", i, got[i], tt.want[i])
					}
				}
			}
		})
	}
}

type oneByteReader struct{ s string }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.s) == 0 {
		return 0, io.EOF
	}
	p[0] = r.s[0]
	r.s = r.s[1:]
	return 1, nil
}

func TestReaderLineTooLongError(t *testing.T) {
	r := NewReader(strings.NewReader(strings.Repeat("z", 10000)+"\n"), 5000)
	_, err := r.Next()
	var tl *LineTooLongError
	if !errors.As(err, &tl) {
		t.Fatalf("error %v, want *LineTooLongError", err)
	}
	if tl.Line != 1 || tl.Limit != 5000 || tl.Size != 10000 || len(tl.Head) != 4096 || tl.Head[0] != 'z' {
		t.Fatalf("got %+v", tl)
	}
	if want := "line 1 is 10000 bytes, over the limit of 5000 bytes per line"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

type failingReader struct{ data io.Reader }

var errBroken = errors.New("broken pipe")

func (r *failingReader) Read(p []byte) (int, error) {
	n, err := r.data.Read(p)
	if err == io.EOF {
		return n, errBroken
	}
	return n, err
}

func TestReaderReadError(t *testing.T) {
	r := NewReader(&failingReader{strings.NewReader("{}\npartial")}, 100)
	if line, err := r.Next(); err != nil || string(line) != "{}" {
		t.Fatalf("first line %q, %v", line, err)
	}
	if _, err := r.Next(); !errors.Is(err, errBroken) {
		t.Fatalf("error %v, want %v", err, errBroken)
	}
}

var xs = bytes.Repeat([]byte("x"), 64<<10)

// endlessLine is an infinite line of 'x' followed, after n bytes, by "\n{}\n".
type endlessLine struct{ n, off int64 }

func (r *endlessLine) Read(p []byte) (int, error) {
	tail := []byte("\n{}\n")
	if r.off >= r.n+int64(len(tail)) {
		return 0, io.EOF
	}
	i := 0
	if r.off < r.n {
		i = int(min(int64(len(p)), int64(len(xs)), r.n-r.off))
		copy(p[:i], xs[:i])
		r.off += int64(i)
	}
	for ; i < len(p) && r.off >= r.n && r.off < r.n+int64(len(tail)); i++ {
		p[i] = tail[r.off-r.n]
		r.off++
	}
	return i, nil
}

// TestReaderMemoryBound reads a 64 MiB line with the default 1 MiB limit: the
// reader must skip it without allocating anywhere near its size.
func TestReaderMemoryBound(t *testing.T) {
	const size = 64 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := NewReader(&endlessLine{n: size}, 0)
	got := readAll(t, r)
	runtime.ReadMemStats(&after)
	if len(got) != 2 || got[0].tooLong != size || got[1].text != "{}" {
		t.Fatalf("got %.100v", got)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Fatalf("allocated %d bytes to skip a %d-byte line", alloc, size)
	}
}

// benchLinesOf runs read over 10,000 text event lines each iteration.
func benchLinesOf(b *testing.B, read func(r io.Reader)) {
	line := []byte(`{"type":"text","content":"I'll start by reading the repository layout and the failing test."}` + "\n")
	data := bytes.Repeat(line, 10000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		read(bytes.NewReader(data))
	}
}

func BenchmarkReader(b *testing.B) {
	benchLinesOf(b, func(in io.Reader) {
		r := NewReader(in, 0)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	})
}

// BenchmarkScannerBaseline is bufio.Scanner over the same data, for
// comparison (it stops at the first over-long line, so FAP cannot use it).
func BenchmarkScannerBaseline(b *testing.B) {
	benchLinesOf(b, func(in io.Reader) {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), DefaultMaxLine)
		for sc.Scan() {
		}
	})
}
