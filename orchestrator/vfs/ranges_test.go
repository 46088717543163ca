package vfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
)

func TestWriteAtPath(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 16})
	ctx := ctxT(t)
	steps := []struct {
		name string
		data string
		off  int64
		opt  WriteAtOptions
		want string // the content after, or the error code
	}{
		{"missing without create", "x", 0, WriteAtOptions{}, orchestrator.ENotFound},
		{"create", "hello", 0, WriteAtOptions{Create: true}, "hello"},
		{"append", " world", 99, WriteAtOptions{Append: true}, "hello world"},
		{"overwrite in the middle", "W", 6, WriteAtOptions{}, "hello World"},
		{"past the end zero-fills", "!", 13, WriteAtOptions{}, "hello World\x00\x00!"},
		{"truncate at the end of data", "there", 6, WriteAtOptions{Truncate: true}, "hello there"},
		{"if-match of another content", "x", 0, WriteAtOptions{IfMatch: strings.Repeat("a", 64)}, orchestrator.EPreconditionFailed},
	}
	for _, s := range steps {
		_, err := f.fs.WriteAtPath(ctx, "/d/f.txt", []byte(s.data), s.off, s.opt)
		if err != nil {
			if orchestrator.ErrorCode(err) != s.want {
				t.Fatalf("%s: %v", s.name, err)
			}
			continue
		}
		info, got, err := f.fs.ReadAll(ctx, "/d/f.txt")
		if err != nil || string(got) != s.want {
			t.Fatalf("%s: %q %v, want %q", s.name, got, err, s.want)
		}
		sum := sha256.Sum256(got)
		if info.Hash != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: hash %s of %q", s.name, info.Hash, got)
		}
	}
	info, _ := f.fs.Stat(ctx, "/d/f.txt")
	if _, err := f.fs.WriteAtPath(ctx, "/d/f.txt", []byte("Hello"), 0, WriteAtOptions{IfMatch: info.Hash}); err != nil {
		t.Fatalf("if-match of the content: %v", err)
	}
	f.check(t)
}

func TestOpenPathSeeks(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	data := streamBytes(3*readAhead + 777)
	if _, _, err := f.fs.WriteFile(ctx, "/big", data, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := f.fs.OpenPath(ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	// small reads through the read-ahead, then a seek back, then one large read
	got := make([]byte, 0, len(data))
	buf := make([]byte, 32<<10)
	for len(got) < 2*readAhead {
		n, err := r.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, data[:len(got)]) {
		t.Fatal("small reads differ")
	}
	if _, err := r.Seek(-100, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	tail, _ := io.ReadAll(r)
	if !bytes.Equal(tail, data[len(data)-100:]) {
		t.Fatal("tail differs")
	}
	r.Seek(5, io.SeekStart)
	big := make([]byte, 2*readAhead)
	if n, err := io.ReadFull(r, big); err != nil || !bytes.Equal(big[:n], data[5:5+n]) {
		t.Fatalf("large read: %d %v", n, err)
	}
	_, part, err := f.fs.ReadRange(ctx, "/big", int64(len(data)-10), 100)
	if err != nil || !bytes.Equal(part, data[len(data)-10:]) {
		t.Fatalf("range at the end: %d %v", len(part), err)
	}
}
