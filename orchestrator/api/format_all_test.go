package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"strings"
	"testing"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/xuri/excelize/v2"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// TestFormatToolsAnswerAsDocumented: every tool of the format tier, on the
// session's files and on a node's, answers 200 with what the document
// says (doT checks each answer against openapi.json), on real files made
// here: a workbook, a PDF, a form, PNG images.
func TestFormatToolsAnswerAsDocumented(t *testing.T) {
	f := newFilesEnv(t, vfs.Config{})
	tr := f.e.doT(t, "GET", "/api/v1/sessions/"+f.sid+"/tree", f.a.key, "")
	var tree struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if json.Unmarshal(tr.body, &tree); len(tree.Data) == 0 {
		t.Fatalf("tree: %s", tr.body)
	}
	wb := excelize.NewFile()
	wb.SetSheetRow("Sheet1", "A1", &[]any{"name", "total"})
	for i := 2; i <= 10; i++ {
		wb.SetSheetRow("Sheet1", fmt.Sprintf("A%d", i), &[]any{fmt.Sprintf("row %d", i), i})
	}
	xb, _ := wb.WriteToBuffer()
	page := func(text string) string {
		js := `{"paper":"A4P","origin":"LowerLeft","pages":{"1":{"content":{"text":[{"value":"` + text + `","pos":[72,700],"font":{"name":"Helvetica","size":12}}]}}}}`
		var b bytes.Buffer
		if err := api.Create(nil, strings.NewReader(js), &b, nil); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	pngOf := func(w, h int, c color.Color) string {
		img := image.NewNRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				img.Set(x, y, c)
			}
		}
		var b bytes.Buffer
		png.Encode(&b, img)
		return b.String()
	}
	form, err := os.ReadFile("../files/format/testdata/form.pdf")
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{"/api/v1/sessions/" + f.sid, "/api/v1/sessions/" + f.sid + "/nodes/" + tree.Data[0].ID} {
		dir := "/s"
		if strings.Contains(base, "/nodes/") {
			dir = "/n"
		}
		body, ct := multipartBody(t, [2]string{"b.xlsx", xb.String()}, [2]string{"a.pdf", page("first")}, [2]string{"c.pdf", page("second")},
			[2]string{"form.pdf", string(form)}, [2]string{"p.png", pngOf(60, 40, color.NRGBA{B: 255, A: 255})}, [2]string{"logo.png", pngOf(10, 10, color.NRGBA{R: 255, A: 128})})
		if r := f.e.doT(t, "POST", base+"/fs/_/upload?dir="+dir, f.a.key, body, "Content-Type", ct); r.status != 201 {
			t.Fatalf("upload: %d %s", r.status, r.body)
		}
		call := func(tool string, args map[string]any) []byte {
			t.Helper()
			b, _ := json.Marshal(args)
			r := f.e.doT(t, "POST", base+"/fs/_/"+tool, f.a.key, string(b))
			if r.status != 200 {
				t.Fatalf("%s %s: %d %s", base, tool, r.status, r.body)
			}
			return r.body
		}
		x, p, img := dir+"/b.xlsx", dir+"/a.pdf", dir+"/p.png"
		call("spreadsheet_list_sheets", map[string]any{"id": x})
		call("spreadsheet_get_sheet_summary", map[string]any{"id": x})
		call("spreadsheet_read_range", map[string]any{"id": x, "range": "A1:B5"})
		call("spreadsheet_read_cell", map[string]any{"id": x, "cell": "B2"})
		call("spreadsheet_write_range", map[string]any{"id": x, "start_cell": "C1", "data": [][]any{{"double"}, {"=B2*2"}}})
		call("spreadsheet_write_cell", map[string]any{"id": x, "cell": "B11", "formula": "SUM(B2:B10)"})
		call("spreadsheet_add_sheet", map[string]any{"id": x, "name": "Notes"})
		call("spreadsheet_delete_sheet", map[string]any{"id": x, "name": "Notes"})
		call("spreadsheet_insert_rows", map[string]any{"id": x, "after_row": 1, "count": 2})
		call("spreadsheet_delete_rows", map[string]any{"id": x, "start_row": 2, "count": 2})
		call("spreadsheet_set_format", map[string]any{"id": x, "range": "A1:C1", "format": map[string]any{"bold": true, "fill_color": "#eeeeee"}})
		call("spreadsheet_auto_filter", map[string]any{"id": x, "range": "A1:C10"})

		call("pdf_info", map[string]any{"id": p})
		call("pdf_extract_text", map[string]any{"id": p})
		call("pdf_add_page", map[string]any{"id": p})
		call("pdf_delete_page", map[string]any{"id": p, "page": 2})
		call("pdf_add_text", map[string]any{"id": p, "page": 1, "text": "stamped"})
		call("pdf_add_image", map[string]any{"id": p, "page": 1, "image": dir + "/logo.png", "width": 40})
		call("pdf_merge", map[string]any{"ids": []string{p, dir + "/c.pdf"}, "output": dir + "/ac.pdf"})
		call("pdf_split_pages", map[string]any{"id": dir + "/ac.pdf", "ranges": []string{"1", "2"}})
		var fields struct {
			Fields []struct {
				Name string `json:"name"`
				Type string `json:"type"`
			} `json:"fields"`
		}
		json.Unmarshal(call("pdf_get_form_fields", map[string]any{"id": dir + "/form.pdf"}), &fields)
		fill := map[string]any{}
		for _, fl := range fields.Fields {
			if fl.Type == "text" {
				fill[fl.Name] = "filled"
				break
			}
		}
		if len(fill) == 0 {
			t.Fatalf("form.pdf has no text field: %+v", fields)
		}
		call("pdf_fill_form", map[string]any{"id": dir + "/form.pdf", "fields": fill, "output": dir + "/filled.pdf"})

		call("image_info", map[string]any{"id": img})
		call("image_resize", map[string]any{"id": img, "width": 30, "output": dir + "/small.png"})
		call("image_crop", map[string]any{"id": img, "left": 5, "top": 5, "width": 20, "height": 10, "output": dir + "/crop.png"})
		call("image_rotate", map[string]any{"id": img, "degrees": 90, "output": dir + "/rot.png"})
		call("image_composite", map[string]any{"id": img, "overlay": dir + "/logo.png", "left": 3, "top": 3, "opacity": 0.5})
		call("image_convert", map[string]any{"id": img, "format": "jpeg"})
	}
}
