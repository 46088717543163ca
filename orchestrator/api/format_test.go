package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"strings"
	"testing"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/xuri/excelize/v2"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// The format tier on the user API: the routes the Files tab previews
// with (sheet summary, PDF info and text, thumbnails) and an edit's
// If-Match.
func TestFormatRoutes(t *testing.T) {
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
	root := tree.Data[0]

	// an xlsx, a PDF, a JPEG and a text file, uploaded
	wb := excelize.NewFile()
	wb.SetSheetRow("Sheet1", "A1", &[]any{"name", "total"})
	for i := 2; i <= 30; i++ {
		wb.SetSheetRow("Sheet1", fmt.Sprintf("A%d", i), &[]any{fmt.Sprintf("row %d", i), i * 10})
	}
	xb, _ := wb.WriteToBuffer()
	js := `{"paper":"A4P","origin":"LowerLeft","pages":{"1":{"content":{"text":[{"value":"Invoice 42","pos":[72,700],"font":{"name":"Helvetica","size":12}}]}}}}`
	var pdf bytes.Buffer
	if err := api.Create(nil, strings.NewReader(js), &pdf, nil); err != nil {
		t.Fatal(err)
	}
	img := image.NewRGBA(image.Rect(0, 0, 600, 300))
	for x := range 600 {
		img.Set(x, x%300, color.RGBA{200, 10, 10, 255})
	}
	var jb bytes.Buffer
	jpeg.Encode(&jb, img, nil)
	body, ct := multipartBody(t, [2]string{"book.xlsx", xb.String()}, [2]string{"inv.pdf", pdf.String()},
		[2]string{"pic.jpg", jb.String()}, [2]string{"notes.txt", "plain text\n"})
	if r := f.e.doT(t, "POST", "/api/v1/sessions/"+f.sid+"/fs/_/upload", f.a.key, body, "Content-Type", ct); r.status != 201 {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
	post := func(route, args string, hdr ...string) reply {
		return f.e.doT(t, "POST", "/api/v1/sessions/"+f.sid+"/fs/_/"+route, f.a.key, args, hdr...)
	}

	r := post("spreadsheet_get_sheet_summary", `{"id":"/book.xlsx","sample_rows":2}`)
	var sum struct {
		Sheet     string     `json:"sheet"`
		Rows      int        `json:"rows"`
		Cols      int        `json:"cols"`
		Headers   []string   `json:"headers"`
		FirstRows [][]string `json:"first_rows"`
		LastRows  [][]string `json:"last_rows"`
		Hash      string     `json:"hash"`
	}
	if json.Unmarshal(r.body, &sum); r.status != 200 || sum.Rows != 30 || sum.Cols != 2 || sum.Headers[1] != "total" ||
		len(sum.FirstRows) != 2 || sum.LastRows[1][1] != "300" {
		t.Fatalf("summary: %d %s", r.status, r.body)
	}

	r = post("pdf_info", `{"id":"/inv.pdf"}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"pages":1`) {
		t.Fatalf("pdf_info: %d %s", r.status, r.body)
	}
	r = post("pdf_extract_text", `{"id":"/inv.pdf"}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"text":"Invoice 42\n"`) {
		t.Fatalf("pdf_extract_text: %d %s", r.status, r.body)
	}
	if r = post("pdf_info", `{"id":"/notes.txt"}`); r.status != 422 {
		t.Fatalf("pdf_info of text: %d %s", r.status, r.body)
	}

	// an edit based on an old read: 412 with the current hash
	r = post("spreadsheet_write_cell", `{"id":"/book.xlsx","cell":"C1","value":"note"}`, "If-Match", `"`+strings.Repeat("0", 64)+`"`)
	if r.status != 412 || r.header.Get("ETag") != `"`+sum.Hash+`"` {
		t.Fatalf("stale If-Match: %d %s %s", r.status, r.header.Get("ETag"), r.body)
	}
	if r = post("spreadsheet_write_cell", `{"id":"/book.xlsx","cell":"C1","value":"note"}`, "If-Match", `"`+sum.Hash+`"`); r.status != 200 {
		t.Fatalf("write_cell: %d %s", r.status, r.body)
	}

	// thumbnails, on the session's files and a node's
	for _, base := range []string{"/api/v1/sessions/" + f.sid, "/api/v1/sessions/" + f.sid + "/nodes/" + root.ID} {
		th := f.e.doT(t, "GET", base+"/fs/_/thumbnail?path=/pic.jpg&size=120", f.a.key, "")
		if th.status != 200 || th.header.Get("Content-Type") != "image/jpeg" || th.header.Get("ETag") == "" {
			t.Fatalf("thumbnail: %d %v %s", th.status, th.header, th.body)
		}
		if cfg, _, err := image.DecodeConfig(bytes.NewReader(th.body)); err != nil || cfg.Width != 120 || cfg.Height != 60 {
			t.Fatalf("thumbnail %+v %v", cfg, err)
		}
		if again := f.e.doT(t, "GET", base+"/fs/_/thumbnail?path=/pic.jpg&size=120", f.a.key, "", "If-None-Match", th.header.Get("ETag")); again.status != 304 {
			t.Fatalf("If-None-Match: %d", again.status)
		}
	}
	th := f.e.doT(t, "GET", "/api/v1/sessions/"+f.sid+"/fs/_/thumbnail?path=/notes.txt", f.a.key, "")
	if code, msg, _ := th.errorOf(t); th.status != 415 || code != "unsupported_media_type" || !strings.Contains(msg, "/notes.txt is not an image") {
		t.Fatalf("thumbnail of text: %d %s", th.status, th.body)
	}
	if th = f.e.doT(t, "GET", "/api/v1/sessions/"+f.sid+"/fs/_/thumbnail?path=/pic.jpg&size=5000", f.a.key, ""); th.status != 422 && th.status != 400 {
		t.Fatalf("size 5000: %d %s", th.status, th.body)
	}
}
