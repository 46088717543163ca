package format

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/HugoSmits86/nativewebp"
	_ "github.com/mattn/go-sqlite3"
	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/xuri/excelize/v2"

	"github.com/filepath-dev/filepath/orchestrator/files"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// openDB opens a fresh database with the store's migrations (read from
// its directory: this package does not import the store).
func openDB(t testing.TB) (w, r *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "filepath.db")
	dsn := func(ro bool) string {
		v := url.Values{"_journal_mode": {"WAL"}, "_foreign_keys": {"on"}, "_busy_timeout": {"5000"}, "_synchronous": {"NORMAL"}}
		if ro {
			v.Set("_query_only", "true")
		} else {
			v.Set("_txlock", "immediate")
		}
		return path + "?" + v.Encode()
	}
	w, err := sql.Open("sqlite3", dsn(false))
	if err != nil {
		t.Fatal(err)
	}
	w.SetMaxOpenConns(1)
	migrations, _ := filepath.Glob("../../store/migrations/*.sql")
	sort.Strings(migrations)
	for _, f := range migrations {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Exec(string(b)); err != nil {
			t.Fatalf("apply %s: %v", f, err)
		}
	}
	if r, err = sql.Open("sqlite3", dsn(true)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return w, r
}

type fixture struct {
	s   *files.Service
	fs  *vfs.FS
	ctx context.Context
}

func newFixture(t testing.TB, cacheBytes int64) *fixture {
	t.Helper()
	w, r := openDB(t)
	now := time.Now().UnixMilli()
	if _, err := w.Exec(`INSERT INTO users(id, name, is_admin, created_at) VALUES('u1','alice',0,?)`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Exec(`INSERT INTO agent_session(id, user_id, name, created_at, updated_at) VALUES('s1','u1','s',?,?)`, now, now); err != nil {
		t.Fatal(err)
	}
	v := vfs.New(w, vfs.Config{ReadDB: r, Logger: slog.New(slog.DiscardHandler), MaxFileSize: 200 << 20, SessionQuota: 1 << 30})
	t.Cleanup(v.Close)
	s, err := files.New(files.Config{VFS: v, CacheBytes: cacheBytes})
	if err != nil {
		t.Fatal(err)
	}
	if err := Register(s); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &fixture{s: s, fs: v.Session("s1"), ctx: ctx}
}

func (f *fixture) put(t testing.TB, p string, data []byte) vfs.FileInfo {
	t.Helper()
	info, _, err := f.fs.WriteFile(f.ctx, p, data, vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func (f *fixture) get(t testing.TB, p string) []byte {
	t.Helper()
	_, b, err := f.fs.ReadAll(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// call runs tool name with args as the session's user and decodes its
// answer into out (when not nil).
func (f *fixture) call(t testing.TB, name string, args any, out any) error {
	t.Helper()
	raw, _ := json.Marshal(args)
	res, err := f.s.Call(f.ctx, files.Caller{SessionID: "s1", Actor: "alice", FS: f.fs}, name, raw)
	if err != nil {
		return err
	}
	if out != nil {
		b, _ := json.Marshal(res)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
	return nil
}

// must is call that must succeed.
func (f *fixture) must(t testing.TB, name string, args any, out any) {
	t.Helper()
	if err := f.call(t, name, args, out); err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
}

// xlsxOf writes rows (row 1: the headers) to a new workbook's Sheet1.
func xlsxOf(t testing.TB, rows [][]any) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	sw, err := f.NewStreamWriter("Sheet1")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		if err := sw.SetRow(cell, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Flush(); err != nil {
		t.Fatal(err)
	}
	buf, err := f.WriteToBuffer()
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ledger is n rows of data under a header row: item, qty, price.
func ledger(n int) [][]any {
	rows := [][]any{{"item", "qty", "price"}}
	for i := 1; i <= n; i++ {
		rows = append(rows, []any{fmt.Sprintf("item %d", i), i, float64(i) + 0.5})
	}
	return rows
}

// pdfOf makes a PDF with pdfcpu: one page per text, each text drawn in
// Helvetica.
func pdfOf(t testing.TB, texts ...string) []byte {
	t.Helper()
	pages := map[string]any{}
	for i, s := range texts {
		var lines []any
		for j, l := range strings.Split(s, "\n") {
			lines = append(lines, map[string]any{"value": l, "pos": []int{72, 700 - 20*j}, "font": map[string]any{"name": "Helvetica", "size": 12}})
		}
		pages[fmt.Sprint(i+1)] = map[string]any{"content": map[string]any{"text": lines}}
	}
	return createPDF(t, map[string]any{"paper": "A4P", "origin": "LowerLeft", "pages": pages})
}

// formPDF makes a one-page PDF with a text field "name" and a checkbox
// "agree".
func formPDF(t testing.TB) []byte {
	t.Helper()
	return createPDF(t, map[string]any{"paper": "A4P", "origin": "LowerLeft",
		"fonts": map[string]any{"input": map[string]any{"name": "Helvetica", "size": 12}, "label": map[string]any{"name": "Helvetica", "size": 12}},
		"pages": map[string]any{"1": map[string]any{"content": map[string]any{
			"textfield": []any{map[string]any{"id": "name", "value": "", "pos": []int{100, 700}, "width": 200, "font": map[string]any{"name": "$input"}}},
			"checkbox":  []any{map[string]any{"id": "agree", "value": false, "pos": []int{100, 650}, "width": 12, "font": map[string]any{"name": "$input"}, "label": map[string]any{"value": "I agree", "width": 60, "pos": "right", "gap": 5}}},
		}}}})
}

func createPDF(t testing.TB, spec map[string]any) []byte {
	t.Helper()
	js, _ := json.Marshal(spec)
	var buf bytes.Buffer
	if err := api.Create(nil, bytes.NewReader(js), &buf, pdfConf()); err != nil {
		t.Fatalf("create a PDF: %v", err)
	}
	return buf.Bytes()
}

// gradient is a w x h image with a colour gradient (opaque, or with a
// transparent left half).
func gradient(w, h int, alpha bool) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			a := uint8(255)
			if alpha && x < w/2 {
				a = 0
			}
			img.SetNRGBA(x, y, color.NRGBA{uint8(x * 255 / w), uint8(y * 255 / h), 128, a})
		}
	}
	return img
}

func pngOf(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegOf(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func webpOf(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := nativewebp.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mustStat(t testing.TB, f *fixture, p string) vfs.FileInfo {
	t.Helper()
	info, err := f.fs.Stat(f.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return info
}
