package format

import (
	"bytes"
	"context"
	"image"
	"os"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
)

// The parsers' entry points on arbitrary bytes: an error (a 422, or a
// timeout) or a result, never a panic, a hang or an unbounded allocation.
// Seeds: the sample files in testdata, made by the libraries the tests
// use (regenerate them with pdfOf, xlsxOf, ... of helpers_test.go).

func seeds(f *testing.F, names ...string) {
	for _, n := range names {
		b, err := os.ReadFile("testdata/" + n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// notPanic fails on an error that is neither coded nor a timeout: a
// parser's panic turned into an error by guard is still a finding.
func notPanic(t *testing.T, err error) {
	t.Helper()
	if err != nil && orchestrator.ErrorCode(err) == orchestrator.EInternal && bytes.Contains([]byte(err.Error()), []byte("the parser failed on it")) {
		t.Fatalf("panic: %v", err)
	}
}

func FuzzPDF(f *testing.F) {
	seeds(f, "sample.pdf", "form.pdf")
	f.Add([]byte("%PDF-1.7\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := guard(context.Background(), func() (*pdfDoc, error) { return parsePDF(data) })
		if err != nil {
			notPanic(t, err)
			return
		}
		for p := 1; p <= min(d.info.Pages, 3); p++ {
			_, err := guard(context.Background(), func() (pageTextResult, error) { return d.pageText(p) })
			notPanic(t, err)
		}
	})
}

func FuzzPageText(f *testing.F) {
	f.Add([]byte("BT /F1 12 Tf 72 700 Td (Hello \\(x\\) \\101) Tj 0 -20 Td [(a) -300 (b)] TJ T* <48656c6c6f> Tj ET"))
	f.Add([]byte("BI /W 1 /H 1 ID \x00\x01 EI BT (after) ' ET"))
	f.Add([]byte("(unterminated \\"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, _ := pageText(data, nil, 4096)
		if len(s) > 4096 {
			t.Fatalf("%d bytes past the bound", len(s))
		}
	})
}

func FuzzToUnicode(f *testing.F) {
	f.Add([]byte("1 begincodespacerange <0000> <FFFF> endcodespacerange 2 beginbfchar <0001> <0041> <0002> <00E9> endbfchar 1 beginbfrange <0010> <0020> <0061> endbfrange 1 beginbfrange <0030> <0031> [<0062> <0063>] endbfrange"))
	f.Add([]byte("beginbfrange <00> <FFFFFFFF> <0041> endbfrange"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tu := parseToUnicode(data)
		if len(tu.m) > maxCMapEntries+1<<16 {
			t.Fatalf("%d entries", len(tu.m))
		}
		tu.decode(string(data))
	})
}

func FuzzSpreadsheet(f *testing.F) {
	seeds(f, "sample.xlsx")
	f.Fuzz(func(t *testing.T, data []byte) {
		// 4 MiB uncompressed: a small zip may inflate a thousandfold, and
		// what is looked for here is a crash, not the time a big sheet takes
		b, err := guard(context.Background(), func() (*book, error) { return loadBook("/f.xlsx", data, 4<<20) })
		if err != nil {
			notPanic(t, err)
			return
		}
		for _, n := range b.names {
			_, err := b.sheetRows(context.Background(), n)
			notPanic(t, err)
		}
	})
}

func FuzzCSV(f *testing.F) {
	seeds(f, "sample.csv")
	f.Add([]byte("a,\"b\nc\"\"\",d\n\"unterminated"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := loadBook("/f.csv", data, MaxUnzip)
		if err != nil {
			return
		}
		w := &wbook{path: "/f.csv", csv: b.rows[csvSheet]}
		if _, err := w.bytes(); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzImage(f *testing.F) {
	seeds(f, "sample.png", "sample.jpg", "sample.webp")
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, _, err := imageHeader("/f", data)
		if err != nil {
			return
		}
		if int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
			t.Fatalf("%dx%d passed the bound", cfg.Width, cfg.Height)
		}
		th, err := thumbnail(context.Background(), source{path: "/f", data: data}, 64)
		notPanic(t, err)
		if err == nil {
			if _, _, err := image.DecodeConfig(bytes.NewReader(th.Data)); err != nil {
				t.Fatalf("the thumbnail does not decode: %v", err)
			}
		}
	})
}

func FuzzRange(f *testing.F) {
	for _, s := range []string{"A1:D50", "B7", "A:C", "2:5", "$A$1:$B$2", "Sheet1!A1", "XFD1048576", "ZZZZ1", "A0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseRange("range", s, 100, 10)
		if err != nil {
			return
		}
		if r.c0 < 1 || r.r0 < 1 || r.c1 > maxCol || r.r1 > maxRow || r.c0 > r.c1 || r.r0 > r.r1 {
			t.Fatalf("%q: %+v", s, r)
		}
	})
}
