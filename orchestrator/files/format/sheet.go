package format

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"io"
	"path"
	"strings"
	"sync"

	"github.com/xuri/excelize/v2"

	"github.com/filepath-dev/filepath/orchestrator"
)

// Spreadsheets with github.com/xuri/excelize/v2 (the maintained pure-Go
// xlsx library: values, formulas, styles, autofilters, row inserts with
// references adjusted, and limits on what it unzips) and encoding/csv for
// .csv, which is one sheet of text cells without formulas or formats.

// csvSheet is the one sheet of a CSV file.
const csvSheet = "Sheet1"

// book is a parsed spreadsheet as the cache keeps it: read-only, its
// sheets' cells parsed on first use.
type book struct {
	csv   bool
	names []string
	mu    sync.Mutex // guards f and rows (excelize's reads fill caches)
	f     *excelize.File
	rows  map[string][][]string
}

func isCSV(p string) bool { return strings.EqualFold(path.Ext(p), ".csv") }

// openXLSX opens data with excelize, at most unzip bytes of it
// uncompressed (MaxUnzip).
func openXLSX(data []byte, unzip int64) (*excelize.File, error) {
	return excelize.OpenReader(bytes.NewReader(data), excelize.Options{UnzipSizeLimit: unzip, UnzipXMLSizeLimit: unzip})
}

// parseCSV reads data as CSV: ragged rows allowed, quotes lenient.
func parseCSV(data []byte) ([][]string, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord, r.LazyQuotes, r.ReuseRecord = -1, true, false
	var rows [][]string
	cells := 0
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, err
		}
		if cells += len(rec); cells > MaxSheetCells {
			return nil, orchestrator.Errorf(orchestrator.EInvalid, "it has more than %d cells, the most the spreadsheet tools read", MaxSheetCells)
		}
		rows = append(rows, rec)
	}
}

// loadBook parses data, the content of file p (.csv: CSV; else xlsx, at
// most unzip bytes uncompressed).
func loadBook(p string, data []byte, unzip int64) (*book, error) {
	if isCSV(p) {
		rows, err := parseCSV(data)
		if err != nil {
			return nil, err
		}
		return &book{csv: true, names: []string{csvSheet}, rows: map[string][][]string{csvSheet: rows}}, nil
	}
	f, err := openXLSX(data, unzip)
	if err != nil {
		return nil, err
	}
	return &book{f: f, names: f.GetSheetList(), rows: map[string][][]string{}}, nil
}

// book returns the parsed spreadsheet of src, from the cache when current.
func (t *tier) book(ctx context.Context, src source) (*book, error) {
	v, err := t.s.Cache().Parsed(src.key, src.info.Gen, "sheet", func() (any, int64, error) {
		b, err := guard(ctx, func() (*book, error) { return loadBook(src.path, src.data, MaxUnzip) })
		if err != nil {
			return nil, 0, malformed(src.path, "spreadsheet (xlsx or csv)", err)
		}
		// the cells, parsed, take several times the zipped bytes
		return b, int64(len(src.data))*8 + 4096, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*book), nil
}

// sheetName is the sheet asked for ("": the first).
func (b *book) sheetName(name string) (string, error) {
	if name == "" {
		if len(b.names) == 0 {
			return "", orchestrator.Errorf(orchestrator.EInvalid, "the workbook has no sheet")
		}
		return b.names[0], nil
	}
	for _, n := range b.names {
		if n == name {
			return n, nil
		}
	}
	for _, n := range b.names {
		if strings.EqualFold(n, name) {
			return n, nil
		}
	}
	return "", orchestrator.FieldErrorf("sheet", "no sheet %q (the sheets: %s)", name, strings.Join(b.names, ", "))
}

// sheetRows returns the cells of sheet name (formatted values, rows
// without their trailing empty cells), parsed once, at most
// MaxSheetCells.
func (b *book) sheetRows(ctx context.Context, name string) ([][]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rows, ok := b.rows[name]; ok {
		return rows, nil
	}
	rows, err := guard(ctx, func() ([][]string, error) {
		it, err := b.f.Rows(name)
		if err != nil {
			return nil, err
		}
		defer it.Close()
		var rows [][]string
		cells := 0
		for it.Next() {
			r, err := it.Columns()
			if err != nil {
				return nil, err
			}
			if cells += len(r) + 1; cells > MaxSheetCells {
				return nil, orchestrator.Errorf(orchestrator.EInvalid, "sheet %s has more than %d cells, the most the spreadsheet tools read", name, MaxSheetCells)
			}
			rows = append(rows, r)
		}
		// drop trailing empty rows (a style on a row makes excelize list it)
		for len(rows) > 0 && len(rows[len(rows)-1]) == 0 {
			rows = rows[:len(rows)-1]
		}
		return rows, it.Error()
	})
	if err != nil {
		return nil, err
	}
	b.rows[name] = rows
	return rows, nil
}

func width(rows [][]string) int {
	w := 0
	for _, r := range rows {
		w = max(w, len(r))
	}
	return w
}

// SheetInfo is a sheet with its size.
type SheetInfo struct {
	Name string `json:"name"`
	Rows int    `json:"rows"`
	Cols int    `json:"cols"`
}

// SheetList is spreadsheet_list_sheets' answer.
type SheetList struct {
	ID     string      `json:"id"`
	Sheets []SheetInfo `json:"sheets"`
	Hash   string      `json:"hash"`
}

// SheetSummary is spreadsheet_get_sheet_summary's answer: the first row
// as headers, rows from the top and the bottom.
type SheetSummary struct {
	ID     string   `json:"id"`
	Sheet  string   `json:"sheet"`
	Sheets []string `json:"sheets" jsonschema_description:"every sheet of the workbook, in order"`
	Rows   int      `json:"rows" jsonschema_description:"the rows with data, the header row included"`
	Cols   int      `json:"cols"`
	// Headers is row 1; FirstRows the rows after it, LastRows the last
	// ones (from row LastRowsStart), without the rows FirstRows has.
	Headers       []string   `json:"headers" jsonschema_description:"row 1, padded to cols"`
	FirstRows     [][]string `json:"first_rows" jsonschema_description:"rows 2 to 1+sample_rows, each padded to cols"`
	LastRows      [][]string `json:"last_rows" jsonschema_description:"the last sample_rows rows not in first_rows"`
	LastRowsStart int        `json:"last_rows_start" jsonschema_description:"the row number (1-based) of last_rows[0] (0: none)"`
	Hash          string     `json:"hash"`
}

func (s SheetSummary) AuditSummary() any {
	return map[string]any{"sheet": s.Sheet, "rows": s.Rows, "cols": s.Cols}
}

// pad returns r with cols cells (a copy).
func pad(r []string, cols int) []string {
	out := make([]string, cols)
	copy(out, r)
	return out
}

func (t *tier) summary(ctx context.Context, src source, sheet string, sample int) (SheetSummary, error) {
	switch {
	case sample < 0 || sample > MaxSampleRows:
		return SheetSummary{}, orchestrator.FieldErrorf("sample_rows", "sample_rows must be 1 to %d", MaxSampleRows)
	case sample == 0:
		sample = 5
	}
	b, err := t.book(ctx, src)
	if err != nil {
		return SheetSummary{}, err
	}
	name, err := b.sheetName(sheet)
	if err != nil {
		return SheetSummary{}, err
	}
	rows, err := b.sheetRows(ctx, name)
	if err != nil {
		return SheetSummary{}, malformed(src.path, "spreadsheet", err)
	}
	cols := width(rows)
	out := SheetSummary{ID: src.path, Sheet: name, Sheets: b.names, Rows: len(rows), Cols: cols, Headers: []string{},
		FirstRows: [][]string{}, LastRows: [][]string{}, Hash: src.info.Hash}
	if len(rows) == 0 {
		return out, nil
	}
	out.Headers = pad(rows[0], cols)
	firstEnd := min(len(rows), 1+sample)
	for _, r := range rows[1:firstEnd] {
		out.FirstRows = append(out.FirstRows, pad(r, cols))
	}
	lastStart := max(firstEnd, len(rows)-sample)
	for _, r := range rows[lastStart:] {
		out.LastRows = append(out.LastRows, pad(r, cols))
	}
	if len(out.LastRows) > 0 {
		out.LastRowsStart = lastStart + 1
	}
	return out, nil
}

func (t *tier) listSheets(ctx context.Context, src source) (SheetList, error) {
	b, err := t.book(ctx, src)
	if err != nil {
		return SheetList{}, err
	}
	out := SheetList{ID: src.path, Sheets: []SheetInfo{}, Hash: src.info.Hash}
	for _, n := range b.names {
		rows, err := b.sheetRows(ctx, n)
		if err != nil {
			return SheetList{}, malformed(src.path, "spreadsheet", err)
		}
		out.Sheets = append(out.Sheets, SheetInfo{Name: n, Rows: len(rows), Cols: width(rows)})
	}
	return out, nil
}

// cellRange is a rectangle of cells, 1-based and inclusive.
type cellRange struct{ c0, r0, c1, r1 int }

// maxRow and maxCol are Excel's bounds.
const (
	maxRow = 1048576
	maxCol = 16384
)

// parseRange reads an A1 range ("A1:D50", "B7", "A:C", "2:5"); an open
// side (a whole column or row) ends at rows/cols.
func parseRange(field, s string, rows, cols int) (cellRange, error) {
	s = strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "$", ""))
	if i := strings.LastIndexByte(s, '!'); i >= 0 {
		s = s[i+1:]
	}
	bad := orchestrator.FieldErrorf(field, "%q is not an A1 range such as A1:D50, B7, A:C or 2:5", s)
	a, b, isRange := strings.Cut(s, ":")
	if !isRange {
		b = a
	}
	c0, r0, ok0 := cellRef(a)
	c1, r1, ok1 := cellRef(b)
	if !ok0 || !ok1 {
		return cellRange{}, bad
	}
	// a whole column (A:C): rows 1 to the last; a whole row (2:5): columns
	// 1 to the last
	if r0 == 0 && r1 == 0 && c0 > 0 && c1 > 0 {
		r0, r1 = 1, max(rows, 1)
	}
	if c0 == 0 && c1 == 0 && r0 > 0 && r1 > 0 {
		c0, c1 = 1, max(cols, 1)
	}
	if c0 == 0 || r0 == 0 || c1 == 0 || r1 == 0 {
		return cellRange{}, bad
	}
	if c1 < c0 {
		c0, c1 = c1, c0
	}
	if r1 < r0 {
		r0, r1 = r1, r0
	}
	return cellRange{c0, r0, c1, r1}, nil
}

// cellRef reads "B7" (col 2, row 7), "B" (col 2, row 0) or "7" (col 0,
// row 7).
func cellRef(s string) (col, row int, ok bool) {
	i := 0
	for i < len(s) && s[i] >= 'A' && s[i] <= 'Z' {
		if col = col*26 + int(s[i]-'A'+1); col > maxCol {
			return 0, 0, false
		}
		i++
	}
	if i == len(s) {
		return col, 0, i > 0
	}
	for j := i; j < len(s); j++ {
		if s[j] < '0' || s[j] > '9' {
			return 0, 0, false
		}
		if row = row*10 + int(s[j]-'0'); row > maxRow {
			return 0, 0, false
		}
	}
	return col, row, row > 0
}

func cellName(col, row int) string {
	n, _ := excelize.CoordinatesToCellName(col, row)
	return n
}

func (r cellRange) String() string {
	return cellName(r.c0, r.r0) + ":" + cellName(r.c1, r.r1)
}

// RangeRead is spreadsheet_read_range's answer.
type RangeRead struct {
	ID     string     `json:"id"`
	Sheet  string     `json:"sheet"`
	Range  string     `json:"range" jsonschema_description:"the range read, clipped to the sheet's data"`
	Values [][]string `json:"values" jsonschema_description:"rows of cells (formatted values; empty cells are \"\")"`
	Hash   string     `json:"hash"`
}

func (r RangeRead) AuditSummary() any {
	return map[string]any{"sheet": r.Sheet, "range": r.Range, "rows": len(r.Values)}
}

// readRange returns the values of rng on sheet, clipped to the data.
func (t *tier) readRange(ctx context.Context, src source, sheet, rng string) (RangeRead, error) {
	b, err := t.book(ctx, src)
	if err != nil {
		return RangeRead{}, err
	}
	name, err := b.sheetName(sheet)
	if err != nil {
		return RangeRead{}, err
	}
	rows, err := b.sheetRows(ctx, name)
	if err != nil {
		return RangeRead{}, malformed(src.path, "spreadsheet", err)
	}
	cr, err := parseRange("range", rng, len(rows), width(rows))
	if err != nil {
		return RangeRead{}, err
	}
	out := RangeRead{ID: src.path, Sheet: name, Values: [][]string{}, Hash: src.info.Hash}
	// clip to the data (a range past it reads nothing there)
	r1, c1 := min(cr.r1, max(len(rows), cr.r0)), min(cr.c1, max(width(rows), cr.c0))
	if n := (r1 - cr.r0 + 1) * (c1 - cr.c0 + 1); n > MaxReadCells {
		return RangeRead{}, orchestrator.FieldErrorf("range", "%s has %d cells of data; at most %d per read: read fewer rows", cellRange{cr.c0, cr.r0, c1, r1}, n, MaxReadCells)
	}
	out.Range = cellRange{cr.c0, cr.r0, c1, r1}.String()
	for r := cr.r0; r <= r1; r++ {
		row := make([]string, c1-cr.c0+1)
		if r-1 < len(rows) {
			src := rows[r-1]
			for c := cr.c0; c <= c1 && c-1 < len(src); c++ {
				row[c-cr.c0] = src[c-1]
			}
		}
		out.Values = append(out.Values, row)
	}
	return out, nil
}
