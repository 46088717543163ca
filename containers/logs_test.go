package containers

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

type frame struct {
	s       Stream
	t       time.Time
	content string
}

func frames(fs ...frame) io.ReadCloser {
	var b []byte
	for _, f := range fs {
		b = appendFrame(b, f.s, f.t, []byte(f.content))
	}
	return io.NopCloser(bytes.NewReader(b))
}

func readAll(t *testing.T, r *LogReader) ([]LogLine, error) {
	t.Helper()
	var out []LogLine
	for {
		l, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, l)
	}
}

func TestLogReader(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	t1, t2 := t0.Add(time.Nanosecond), t0.Add(2*time.Millisecond)
	type want struct {
		s      Stream
		t      time.Time
		ord    int
		line   string
		size   int
		trunc  bool
		unterm bool
	}
	tests := []struct {
		name    string
		in      []frame
		opts    LogOptions
		want    []want
		wantErr string
	}{
		{
			name: "whole lines",
			in:   []frame{{Stdout, t0, "a\n"}, {Stderr, t1, "err\n"}, {Stdout, t2, "b\n"}},
			want: []want{{Stdout, t0, 0, "a", 1, false, false}, {Stderr, t1, 0, "err", 3, false, false}, {Stdout, t2, 0, "b", 1, false, false}},
		},
		{
			name: "fragments joined across an interleaved stream",
			in:   []frame{{Stdout, t0, "ab"}, {Stderr, t1, "x\n"}, {Stdout, t0, "cd"}, {Stdout, t0, "e\n"}},
			want: []want{{Stderr, t1, 0, "x", 1, false, false}, {Stdout, t0, 0, "abcde", 5, false, false}},
		},
		{
			name: "truncated at max line, next line intact",
			in:   []frame{{Stdout, t0, "0123"}, {Stdout, t0, "456789\n"}, {Stdout, t1, "ok\n"}},
			opts: LogOptions{MaxLine: 5},
			want: []want{{Stdout, t0, 0, "01234", 10, true, false}, {Stdout, t1, 0, "ok", 2, false, false}},
		},
		{
			name: "ordinals for equal times per stream",
			in:   []frame{{Stdout, t0, "a\n"}, {Stderr, t0, "e\n"}, {Stdout, t0, "b\n"}, {Stdout, t1, "c\n"}, {Stdout, t1, "d\n"}},
			want: []want{{Stdout, t0, 0, "a", 1, false, false}, {Stderr, t0, 0, "e", 1, false, false}, {Stdout, t0, 1, "b", 1, false, false},
				{Stdout, t1, 0, "c", 1, false, false}, {Stdout, t1, 1, "d", 1, false, false}},
		},
		{
			name: "since is inclusive",
			in:   []frame{{Stdout, t0, "a\n"}, {Stdout, t1, "b\n"}, {Stdout, t1, "c\n"}, {Stdout, t2, "d\n"}},
			opts: LogOptions{Since: t1},
			want: []want{{Stdout, t1, 0, "b", 1, false, false}, {Stdout, t1, 1, "c", 1, false, false}, {Stdout, t2, 0, "d", 1, false, false}},
		},
		{
			name: "stream selection",
			in:   []frame{{Stdout, t0, "a\n"}, {Stderr, t1, "e\n"}},
			opts: LogOptions{Stderr: true},
			want: []want{{Stderr, t1, 0, "e", 1, false, false}},
		},
		{
			name: "unterminated last lines, oldest first",
			in:   []frame{{Stderr, t0, "err"}, {Stdout, t1, "out"}},
			want: []want{{Stderr, t0, 0, "err", 3, false, true}, {Stdout, t1, 0, "out", 3, false, true}},
		},
		{
			name: "a new time ends a dangling fragment",
			in:   []frame{{Stdout, t0, "half"}, {Stdout, t1, "next\n"}},
			want: []want{{Stdout, t0, 0, "half", 4, false, true}, {Stdout, t1, 0, "next", 4, false, false}},
		},
		{
			name: "empty line",
			in:   []frame{{Stdout, t0, "\n"}},
			want: []want{{Stdout, t0, 0, "", 0, false, false}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(t, NewLogReader(frames(tt.in...), tt.opts))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d lines %+v, want %d", len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Stream != w.s || !g.Time.Equal(w.t) || g.Ordinal != w.ord || string(g.Line) != w.line ||
					g.Size != w.size || g.Truncated != w.trunc || g.Unterminated != w.unterm {
					t.Errorf("line %d = {%v %v %d %q size %d trunc %v unterm %v}, want %+v",
						i, g.Stream, g.Time, g.Ordinal, g.Line, g.Size, g.Truncated, g.Unterminated, w)
				}
			}
		})
	}
}

func TestLogReaderErrors(t *testing.T) {
	hdr := func(s byte, n int) []byte {
		b := []byte{s, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(b[4:], uint32(n))
		return b
	}
	tests := []struct {
		name    string
		raw     []byte
		wantErr string
	}{
		{name: "docker error frame", raw: append(hdr(3, 4), "boom"...), wantErr: "docker log error: boom"},
		{name: "no timestamp", raw: append(hdr(1, 6), "hello\n"...), wantErr: "without a timestamp"},
		{name: "bad timestamp", raw: append(hdr(1, 8), "notime x"...), wantErr: "bad timestamp"},
		{name: "cut frame", raw: append(hdr(1, 100), "2026-01-02T03:04:05.000000000Z abc"...), wantErr: "ended inside a frame"},
		{name: "cut header", raw: []byte{1, 0, 0}, wantErr: "inside a frame header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readAll(t, NewLogReader(io.NopCloser(bytes.NewReader(tt.raw)), LogOptions{}))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestLogReaderBoundedMemory feeds a 64 MiB line in 16 KiB fragments and
// checks the reader keeps only MaxLine of it.
func TestLogReaderBoundedMemory(t *testing.T) {
	t0 := time.Now()
	pr, pw := io.Pipe()
	go func() {
		chunk := bytes.Repeat([]byte("x"), 16<<10)
		for i := 0; i < 4096; i++ {
			pw.Write(appendFrame(nil, Stdout, t0, chunk))
		}
		pw.Write(appendFrame(nil, Stdout, t0, []byte("\n")))
		pw.Close()
	}()
	l, err := NewLogReader(pr, LogOptions{MaxLine: 1000}).Next()
	if err != nil {
		t.Fatal(err)
	}
	if !l.Truncated || len(l.Line) != 1000 || cap(l.Line) > 4096 || l.Size != 64<<20 {
		t.Fatalf("line len %d cap %d size %d truncated %v", len(l.Line), cap(l.Line), l.Size, l.Truncated)
	}
}
