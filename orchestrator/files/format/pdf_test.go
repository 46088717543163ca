package format

import (
	"bytes"
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

// TestPDFEdits: pages added and deleted, merge, split, forms: each read
// back from the bytes written.
func TestPDFEdits(t *testing.T) {
	f := newFixture(t, 0)
	f.put(t, "/a.pdf", pdfOf(t, "alpha one", "alpha two"))
	f.put(t, "/b.pdf", pdfOf(t, "beta one"))
	var info PDFInfo
	f.must(t, "pdf_info", map[string]any{"id": "/a.pdf"}, &info)

	var e Edited
	f.must(t, "pdf_add_page", map[string]any{"id": "/a.pdf", "after_page": 1, "size": "Letter", "landscape": true, "if_match": info.Hash}, &e)
	f.must(t, "pdf_info", map[string]any{"id": "/a.pdf"}, &info)
	if info.Pages != 3 || info.PageSizes[1] != (PageDim{792, 612}) || info.Hash != e.Hash {
		t.Fatalf("after add: %+v", info)
	}
	// the old hash no longer matches
	err := f.call(t, "pdf_delete_page", map[string]any{"id": "/a.pdf", "page": 2, "if_match": strings.Repeat("0", 64)}, nil)
	if orchestrator.ErrorCode(err) != orchestrator.EPreconditionFailed {
		t.Fatalf("stale if_match: %v", err)
	}
	f.must(t, "pdf_delete_page", map[string]any{"id": "/a.pdf", "page": 2}, &e)
	var text PDFText
	f.must(t, "pdf_extract_text", map[string]any{"id": "/a.pdf"}, &text)
	if len(text.Pages) != 2 || !strings.Contains(text.Pages[1].Text, "alpha two") {
		t.Fatalf("after delete: %+v", text)
	}

	f.must(t, "pdf_merge", map[string]any{"ids": []string{"/a.pdf", "/b.pdf"}, "output": "/out/ab.pdf"}, &e)
	f.must(t, "pdf_extract_text", map[string]any{"id": "/out/ab.pdf"}, &text)
	if text.TotalPages != 3 || !strings.Contains(text.Pages[2].Text, "beta one") {
		t.Fatalf("merged: %+v", text)
	}
	if m, err := f.fs.MetaOf(f.ctx, mustStat(t, f, "/out/ab.pdf")); err != nil || m.Source != "derived" {
		t.Fatalf("merged file's source: %+v %v", m, err)
	}

	var split SplitResult
	f.must(t, "pdf_split_pages", map[string]any{"id": "/out/ab.pdf", "ranges": []string{"1-2", "3"}, "output_dir": "/parts"}, &split)
	if len(split.Files) != 2 || split.Files[0].ID != "/parts/ab_1to2.pdf" || split.Files[1].ID != "/parts/ab_3.pdf" {
		t.Fatalf("split: %+v", split)
	}
	f.must(t, "pdf_extract_text", map[string]any{"id": "/parts/ab_3.pdf"}, &text)
	if text.TotalPages != 1 || !strings.Contains(text.Pages[0].Text, "beta one") {
		t.Fatalf("part 2: %+v", text)
	}
	if err := f.call(t, "pdf_split_pages", map[string]any{"id": "/out/ab.pdf", "ranges": []string{"4-9"}}, nil); orchestrator.ErrorCode(err) != orchestrator.EInvalid {
		t.Fatalf("a range past the end: %v", err)
	}
	if err := f.call(t, "pdf_delete_page", map[string]any{"id": "/b.pdf", "page": 1}, nil); orchestrator.ErrorCode(err) != orchestrator.EInvalid {
		t.Fatalf("deleting the only page: %v", err)
	}
}

func TestPDFForm(t *testing.T) {
	f := newFixture(t, 0)
	f.put(t, "/form.pdf", formPDF(t))
	var info PDFInfo
	f.must(t, "pdf_info", map[string]any{"id": "/form.pdf"}, &info)
	if !info.HasForm {
		t.Fatalf("info %+v", info)
	}
	var ff FormFields
	f.must(t, "pdf_get_form_fields", map[string]any{"id": "/form.pdf"}, &ff)
	types := map[string]string{}
	for _, x := range ff.Fields {
		types[x.Name] = x.Type
	}
	if types["name"] != "text" || types["agree"] != "checkbox" {
		t.Fatalf("fields %+v", ff.Fields)
	}
	var e Edited
	f.must(t, "pdf_fill_form", map[string]any{"id": "/form.pdf", "fields": map[string]any{"name": "Ada Lovelace", "agree": true}, "output": "/filled.pdf"}, &e)
	f.must(t, "pdf_get_form_fields", map[string]any{"id": "/filled.pdf"}, &ff)
	vals := map[string]string{}
	for _, x := range ff.Fields {
		vals[x.Name] = x.Value
	}
	if vals["name"] != "Ada Lovelace" || (vals["agree"] != "true" && vals["agree"] != "Yes") {
		t.Fatalf("filled %+v", ff.Fields)
	}
	err := f.call(t, "pdf_fill_form", map[string]any{"id": "/form.pdf", "fields": map[string]any{"nope": "x"}}, nil)
	if orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(err.Error(), "no field \"nope\"") {
		t.Fatalf("unknown field: %v", err)
	}
}

// TestPDFAddTextAndImage: text written on a page is read back from that
// page only (the stamp is a form XObject the extraction follows); an image
// placed on a page adds an image XObject there and keeps the page count;
// bad arguments are refused by name and leave the file as it was.
func TestPDFAddTextAndImage(t *testing.T) {
	f := newFixture(t, 0)
	f.put(t, "/r.pdf", pdfOf(t, "page one", "page two"))
	var e Edited
	f.must(t, "pdf_add_text", map[string]any{"id": "/r.pdf", "page": 2, "text": "APPROVED by Alice", "x": 72, "y": 700, "size": 18, "color": "#c00000"}, &e)
	var text PDFText
	f.must(t, "pdf_extract_text", map[string]any{"id": "/r.pdf"}, &text)
	if len(text.Pages) != 2 || !strings.Contains(text.Pages[1].Text, "APPROVED by Alice") || !strings.Contains(text.Pages[1].Text, "page two") ||
		strings.Contains(text.Pages[0].Text, "APPROVED") {
		t.Fatalf("after add_text: %+v", text)
	}

	f.put(t, "/logo.png", pngOf(t, gradient(50, 20, false)))
	before := f.get(t, "/r.pdf")
	f.must(t, "pdf_add_image", map[string]any{"id": "/r.pdf", "page": 1, "image": "/logo.png", "x": 36, "y": 36, "width": 100, "output": "/signed.pdf"}, &e)
	var info PDFInfo
	f.must(t, "pdf_info", map[string]any{"id": "/signed.pdf"}, &info)
	if info.Pages != 2 {
		t.Fatalf("after add_image: %+v", info)
	}
	if n := bytes.Count(f.get(t, "/signed.pdf"), []byte("/Subtype/Image")) + bytes.Count(f.get(t, "/signed.pdf"), []byte("/Subtype /Image")); n == 0 {
		t.Fatal("no image XObject in the PDF after add_image")
	}
	if m, err := f.fs.MetaOf(f.ctx, mustStat(t, f, "/signed.pdf")); err != nil || m.Source != "derived" {
		t.Fatalf("the output's source: %+v %v", m, err)
	}

	for _, c := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"pdf_add_text", map[string]any{"id": "/r.pdf", "page": 3, "text": "x"}, "page"},
		{"pdf_add_text", map[string]any{"id": "/r.pdf", "page": 1, "text": " "}, "text"},
		{"pdf_add_text", map[string]any{"id": "/r.pdf", "page": 1, "text": "x", "color": "red"}, "color"},
		{"pdf_add_image", map[string]any{"id": "/r.pdf", "page": 1, "image": "/nope.png"}, "image"},
		{"pdf_add_image", map[string]any{"id": "/r.pdf", "page": 1, "image": "/r.pdf"}, ""},
	} {
		err := f.call(t, c.tool, c.args, nil)
		if code := orchestrator.ErrorCode(err); code != orchestrator.EInvalid && code != orchestrator.ENotFound && code != orchestrator.EUnsupportedMedia {
			t.Errorf("%s %v: %v, want a refusal", c.tool, c.args, err)
		}
		if c.field != "" && c.field != "image" && orchestrator.ErrorField(err) != c.field {
			t.Errorf("%s %v: field %q, want %q (%v)", c.tool, c.args, orchestrator.ErrorField(err), c.field, err)
		}
	}
	if after := f.get(t, "/r.pdf"); !bytes.Equal(after, before) {
		t.Fatal("a refused edit changed the file")
	}
}
