package format

import (
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
)

func TestPDFInfoAndText(t *testing.T) {
	f := newFixture(t, 0)
	f.put(t, "/doc.pdf", pdfOf(t, "Quarterly report\nRevenue 1200", "Second page (with parens) and café"))
	var info PDFInfo
	f.must(t, "pdf_info", map[string]any{"id": "/doc.pdf"}, &info)
	if info.Pages != 2 || len(info.PageSizes) != 2 || info.PageSizes[0].Width != 595 || info.PageSizes[0].Height != 842 || info.HasForm || info.Hash == "" {
		t.Fatalf("info %+v", info)
	}
	var text PDFText
	f.must(t, "pdf_extract_text", map[string]any{"id": "doc.pdf"}, &text)
	if text.TotalPages != 2 || len(text.Pages) != 2 || text.Truncated {
		t.Fatalf("text %+v", text)
	}
	if got := text.Pages[0].Text; !strings.Contains(got, "Quarterly report\nRevenue 1200") {
		t.Fatalf("page 1: %q", got)
	}
	if got := text.Pages[1].Text; !strings.Contains(got, "Second page (with parens) and café") {
		t.Fatalf("page 2: %q", got)
	}
	f.must(t, "pdf_extract_text", map[string]any{"id": "doc.pdf", "pages": []int{2}}, &text)
	if len(text.Pages) != 1 || text.Pages[0].Page != 2 {
		t.Fatalf("page 2 only: %+v", text)
	}
	err := f.call(t, "pdf_extract_text", map[string]any{"id": "doc.pdf", "pages": []int{3}}, nil)
	if orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(err.Error(), "page 3") {
		t.Fatalf("page 3 of 2: %v", err)
	}
}

func TestPDFMalformed(t *testing.T) {
	f := newFixture(t, 0)
	good := pdfOf(t, "x")
	for _, c := range []struct{ name, data string }{
		{"not a pdf", "hello, world"},
		{"cut", string(good[:len(good)/2])},
		{"header only", "%PDF-1.7\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.put(t, "/bad.pdf", []byte(c.data))
			err := f.call(t, "pdf_info", map[string]any{"id": "/bad.pdf"}, nil)
			if orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(err.Error(), "/bad.pdf is not a readable PDF") {
				t.Fatalf("err %v", err)
			}
		})
	}
}
