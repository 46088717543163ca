package format

import (
	"bytes"
	"encoding/json"
	"image"
	"image/jpeg"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/filepath-dev/filepath/orchestrator/files"
)

// go test -run '^$' -bench 'ReadRange|Thumbnail' -count 5 ./orchestrator/files/format/
//
// ReadRange: A1:C10001 of a 10,000-row workbook through the tool (audit
// off): cold (no cache: the file read from the vfs and parsed on every
// call), cached (the parsed sheet kept), and the floor, excelize's own
// GetRows on the bytes in memory. Thumbnail: a 12-megapixel JPEG (4000 x
// 3000) to 256 px: cold (decoded each time), cached, and the floor,
// image/jpeg's decode alone.

func benchFixture(b *testing.B, cache int64, p string, data []byte) *fixture {
	f := newFixture(b, cache)
	f.put(b, p, data)
	return f
}

func benchRead(b *testing.B, f *fixture) {
	args, _ := json.Marshal(map[string]any{"id": "/ledger.xlsx", "range": "A1:C10001"})
	c := files.Caller{SessionID: "s1", FS: f.fs}
	if _, err := f.s.Call(f.ctx, c, "spreadsheet_read_range", args); err != nil { // warm the cache (outside the timing)
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		out, err := f.s.Call(f.ctx, c, "spreadsheet_read_range", args)
		if err != nil {
			b.Fatal(err)
		}
		if n := len(out.(RangeRead).Values); n != 10001 {
			b.Fatalf("%d rows", n)
		}
	}
}

func BenchmarkReadRange(b *testing.B) {
	data := xlsxOf(b, ledger(10000))
	b.Run("cold", func(b *testing.B) { benchRead(b, benchFixture(b, -1, "/ledger.xlsx", data)) })
	b.Run("cached", func(b *testing.B) { benchRead(b, benchFixture(b, 256<<20, "/ledger.xlsx", data)) })
	b.Run("floor-excelize-GetRows", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x, err := excelize.OpenReader(bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			rows, err := x.GetRows("Sheet1")
			if err != nil || len(rows) != 10001 {
				b.Fatal(len(rows), err)
			}
		}
	})
}

func BenchmarkThumbnail(b *testing.B) {
	data := jpegOf(b, gradient(4000, 3000, false))
	run := func(b *testing.B, f *fixture) {
		if _, err := Thumbnail(f.ctx, f.s, f.fs, "/photo.jpg", DefaultThumbnail); err != nil { // warm the cache (outside the timing)
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			th, err := Thumbnail(f.ctx, f.s, f.fs, "/photo.jpg", DefaultThumbnail)
			if err != nil || th.Width != 256 {
				b.Fatal(err, th.Width)
			}
		}
	}
	b.Run("cold", func(b *testing.B) { run(b, benchFixture(b, -1, "/photo.jpg", data)) })
	b.Run("cached", func(b *testing.B) { run(b, benchFixture(b, 256<<20, "/photo.jpg", data)) })
	b.Run("floor-jpeg-decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			img, err := jpeg.Decode(bytes.NewReader(data))
			if err != nil || img.Bounds() != image.Rect(0, 0, 4000, 3000) {
				b.Fatal(err)
			}
		}
	})
}
