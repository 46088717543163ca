package files

import (
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

func TestLineEdits(t *testing.T) {
	cases := []struct {
		name     string
		before   string
		edit     func(f *fixture, p string) (TextEdit, error)
		after    string
		lines    int
		wantCode string
	}{
		{"replace a middle line", "a\nb\nc\n", func(f *fixture, p string) (TextEdit, error) {
			return f.s.ReplaceLines(f.ctx, f.fs, p, 2, 2, "B", "")
		}, "a\nB\nc\n", 3, ""},
		{"replace two lines with three", "a\nb\nc\n", func(f *fixture, p string) (TextEdit, error) {
			return f.s.ReplaceLines(f.ctx, f.fs, p, 1, 2, "x\ny\nz\n", "")
		}, "x\ny\nz\nc\n", 4, ""},
		{"replace the last line of a file without a final newline", "a\nb", func(f *fixture, p string) (TextEdit, error) {
			return f.s.ReplaceLines(f.ctx, f.fs, p, 2, 2, "B", "")
		}, "a\nB", 2, ""},
		{"insert at the start", "a\nb\n", func(f *fixture, p string) (TextEdit, error) {
			return f.s.InsertLines(f.ctx, f.fs, p, 0, "first", "")
		}, "first\na\nb\n", 3, ""},
		{"insert at the end", "a\nb\n", func(f *fixture, p string) (TextEdit, error) {
			return f.s.InsertLines(f.ctx, f.fs, p, 2, "c", "")
		}, "a\nb\nc\n", 3, ""},
		{"insert after a last line without its newline", "a\nb", func(f *fixture, p string) (TextEdit, error) {
			return f.s.InsertLines(f.ctx, f.fs, p, 2, "c", "")
		}, "a\nb\nc", 3, ""},
		{"insert into an empty file", "", func(f *fixture, p string) (TextEdit, error) {
			return f.s.InsertLines(f.ctx, f.fs, p, 0, "only", "")
		}, "only\n", 1, ""},
		{"delete the last lines", "a\nb\nc", func(f *fixture, p string) (TextEdit, error) {
			return f.s.DeleteLines(f.ctx, f.fs, p, 2, 3, "")
		}, "a", 1, ""},
		{"delete everything", "a\nb\n", func(f *fixture, p string) (TextEdit, error) {
			return f.s.DeleteLines(f.ctx, f.fs, p, 1, 2, "")
		}, "", 0, ""},
		{"CRLF lines keep their CR", "a\r\nb\r\n", func(f *fixture, p string) (TextEdit, error) {
			return f.s.ReplaceLines(f.ctx, f.fs, p, 1, 1, "A\r\n", "")
		}, "A\r\nb\r\n", 2, ""},
		{"a range past the end", "a\n", func(f *fixture, p string) (TextEdit, error) {
			return f.s.ReplaceLines(f.ctx, f.fs, p, 1, 2, "x", "")
		}, "a\n", 1, orchestrator.EInvalid},
		{"line 0", "a\n", func(f *fixture, p string) (TextEdit, error) {
			return f.s.ReplaceLines(f.ctx, f.fs, p, 0, 1, "x", "")
		}, "a\n", 1, orchestrator.EInvalid},
		{"if-match of another content", "a\n", func(f *fixture, p string) (TextEdit, error) {
			return f.s.ReplaceLines(f.ctx, f.fs, p, 1, 1, "x", strings.Repeat("0", 64))
		}, "a\n", 1, orchestrator.EPreconditionFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{}, vfs.Config{ChunkSize: 4})
			before := f.write(t, "/t.txt", tc.before)
			got, err := tc.edit(f, "/t.txt")
			if orchestrator.ErrorCode(err) != tc.wantCode {
				t.Fatalf("err %v, want code %q", err, tc.wantCode)
			}
			if tc.wantCode == orchestrator.EPreconditionFailed && CurrentHash(err) != before.Hash {
				t.Fatalf("412 gives hash %q, want the current %q", CurrentHash(err), before.Hash)
			}
			if s := f.read(t, "/t.txt"); s != tc.after {
				t.Fatalf("content %q, want %q", s, tc.after)
			}
			if err != nil {
				return
			}
			now, _ := f.fs.Stat(f.ctx, "/t.txt")
			if got.Hash != now.Hash || got.TotalLines != tc.lines || got.Size != int64(len(tc.after)) {
				t.Fatalf("edit says %+v; the file has hash %s", got, now.Hash)
			}
			r, err := f.s.ReadText(f.ctx, f.fs, "/t.txt", 0, 0)
			if err != nil || r.Content != tc.after || r.TotalLines != tc.lines {
				t.Fatalf("read after: %+v %v", r, err)
			}
		})
	}
}

// An edit based on a read never overwrites a change made since: the
// mount's write between the read and the edit makes the edit fail with
// the current hash, and the edit with it succeeds.
func TestEditSeesEveryChange(t *testing.T) {
	f := newFixture(t, Config{}, vfs.Config{})
	f.write(t, "/log.txt", "one\ntwo\n")
	r, err := f.s.ReadText(f.ctx, f.fs, "/log.txt", 1, 1)
	if err != nil || r.Content != "one\n" || r.TotalLines != 2 {
		t.Fatalf("read %+v %v", r, err)
	}
	// another agent writes through its mount (the inode API)
	mount, _ := f.fs.ForNode("other", nil)
	info, _ := f.fs.Stat(f.ctx, "/log.txt")
	if _, err := mount.WriteAt(f.ctx, info.Ino, []byte("ONE"), 0); err != nil {
		t.Fatal(err)
	}
	_, err = f.s.ReplaceLines(f.ctx, f.fs, "/log.txt", 2, 2, "2", r.Hash)
	cur, _ := f.fs.Stat(f.ctx, "/log.txt")
	if orchestrator.ErrorCode(err) != orchestrator.EPreconditionFailed || CurrentHash(err) != cur.Hash || !strings.Contains(err.Error(), cur.Hash) {
		t.Fatalf("edit over an unseen change: %v", err)
	}
	if got := f.read(t, "/log.txt"); got != "ONE\ntwo\n" {
		t.Fatalf("content %q", got)
	}
	if _, err := f.s.ReplaceLines(f.ctx, f.fs, "/log.txt", 2, 2, "2", CurrentHash(err)); err != nil {
		t.Fatal(err)
	}
	if got := f.read(t, "/log.txt"); got != "ONE\n2\n" {
		t.Fatalf("content %q", got)
	}
}

func TestReadTextBounds(t *testing.T) {
	f := newFixture(t, Config{}, vfs.Config{})
	line := strings.Repeat("x", 1000) + "\n"
	f.write(t, "/big.txt", strings.Repeat(line, 1000)) // ~1 MB
	r, err := f.s.ReadText(f.ctx, f.fs, "/big.txt", 0, 0)
	if err != nil || !r.Truncated || r.StartLine != 1 || r.EndLine != MaxTextRead/len(line) || len(r.Content) != r.EndLine*len(line) || r.TotalLines != 1000 {
		t.Fatalf("a read past the bound: end %d, %d bytes, truncated %v, %v", r.EndLine, len(r.Content), r.Truncated, err)
	}
	r, err = f.s.ReadText(f.ctx, f.fs, "/big.txt", 999, 2000)
	if err != nil || r.StartLine != 999 || r.EndLine != 1000 || r.Truncated {
		t.Fatalf("the end: %+v %v", r.EndLine, err)
	}
	if _, err := f.s.ReadText(f.ctx, f.fs, "/big.txt", 1001, 0); orchestrator.ErrorCode(err) != orchestrator.EInvalid {
		t.Fatalf("past the end: %v", err)
	}
	// one line longer than the bound comes cut
	f.write(t, "/wide.txt", strings.Repeat("é", MaxTextRead))
	r, err = f.s.ReadText(f.ctx, f.fs, "/wide.txt", 0, 0)
	if err != nil || !r.Truncated || len(r.Content) > MaxTextRead || r.EndLine != 1 || !strings.HasSuffix(r.Content, "é") {
		t.Fatalf("one wide line: %d bytes, %v", len(r.Content), err)
	}
	// a PNG is no text: the error says what it is
	f.write(t, "/pic.txt", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	if _, err := f.s.ReadText(f.ctx, f.fs, "/pic.txt", 0, 0); orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(err.Error(), "image/png") {
		t.Fatalf("binary: %v", err)
	}
}

func TestSearchText(t *testing.T) {
	f := newFixture(t, Config{}, vfs.Config{})
	var b strings.Builder
	for i := 1; i <= 300; i++ {
		if i%10 == 0 {
			b.WriteString("TOTAL " + strings.Repeat("9", 2*i) + "\n")
		} else {
			b.WriteString("row\n")
		}
	}
	f.write(t, "/s.csv", b.String())
	r, err := f.s.SearchText(f.ctx, f.fs, "/s.csv", `(?i)^total \d+`, 0)
	if err != nil || len(r.Matches) != 30 || r.Matches[0].Line != 10 || r.Truncated || r.TotalLines != 300 {
		t.Fatalf("search: %d matches, %+v", len(r.Matches), err)
	}
	if m := r.Matches[29]; m.Line != 300 || len(m.Content) != MaxSearchLine+len("…") {
		t.Fatalf("a long line is cut: %d bytes", len(m.Content))
	}
	r, _ = f.s.SearchText(f.ctx, f.fs, "/s.csv", `TOTAL`, 5)
	if len(r.Matches) != 5 || !r.Truncated {
		t.Fatalf("max_results: %d, truncated %v", len(r.Matches), r.Truncated)
	}
	for _, bad := range []struct{ pattern string }{{"("}, {""}, {strings.Repeat("a", MaxPattern+1)}} {
		if _, err := f.s.SearchText(f.ctx, f.fs, "/s.csv", bad.pattern, 0); orchestrator.ErrorField(err) != "pattern" {
			t.Fatalf("pattern %.10q: %v", bad.pattern, err)
		}
	}
}
