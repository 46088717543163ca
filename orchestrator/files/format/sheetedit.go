package format

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/xuri/excelize/v2"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/files"
)

// The spreadsheet tools, and their edits: each reads the file, edits a
// fresh copy of it (the cached book is shared and read-only) and writes
// it back if the file is still what was read.

// Arguments of the spreadsheet tools.
type (
	SheetArgs struct {
		FileID
		Sheet string `json:"sheet,omitempty" jsonschema_description:"the sheet's name (omitted: the first sheet; a CSV file has one)"`
	}
	SummaryArgs struct {
		SheetArgs
		SampleRows int `json:"sample_rows,omitempty" jsonschema_description:"rows to show from the top and from the bottom (default 5, at most 100)"`
	}
	ReadRangeArgs struct {
		SheetArgs
		Range string `json:"range" jsonschema_description:"an A1 range: A1:D50, B7, A:C (whole columns) or 2:5 (whole rows); at most 100000 cells of data"`
	}
	WriteRangeArgs struct {
		SheetArgs
		StartCell string  `json:"start_cell" jsonschema_description:"the top-left cell the data goes to, e.g. A1"`
		Data      [][]any `json:"data" jsonschema_description:"rows of values: strings, numbers, true/false, null (an empty cell); a string starting with = is a formula (xlsx)"`
		IfMatch
	}
	CellArgs struct {
		SheetArgs
		Cell string `json:"cell" jsonschema_description:"the cell, e.g. B7"`
	}
	WriteCellArgs struct {
		SheetArgs
		Cell    string      `json:"cell" jsonschema_description:"the cell, e.g. B7"`
		Value   any         `json:"value,omitempty" jsonschema_description:"a string, number, true/false or null"`
		Formula string      `json:"formula,omitempty" jsonschema_description:"a formula such as SUM(A1:A9) (xlsx; = optional); replaces value"`
		Format  *CellFormat `json:"format,omitempty" jsonschema_description:"the cell's format (xlsx)"`
		IfMatch
	}
	SheetNameArgs struct {
		FileID
		Name string `json:"name" jsonschema_description:"the sheet's name"`
		IfMatch
	}
	InsertRowsArgs struct {
		SheetArgs
		AfterRow int `json:"after_row" jsonschema_description:"insert after this row (0: at the top)"`
		Count    int `json:"count" jsonschema_description:"how many empty rows (at most 10000)"`
		IfMatch
	}
	DeleteRowsArgs struct {
		SheetArgs
		StartRow int `json:"start_row" jsonschema_description:"the first row to delete (1-based)"`
		Count    int `json:"count" jsonschema_description:"how many rows (at most 10000)"`
		IfMatch
	}
	SetFormatArgs struct {
		SheetArgs
		Range  string     `json:"range" jsonschema_description:"an A1 range such as E2:E50"`
		Format CellFormat `json:"format"`
		IfMatch
	}
	AutoFilterArgs struct {
		SheetArgs
		Range string `json:"range" jsonschema_description:"the range with its header row, e.g. A1:F200"`
		IfMatch
	}
)

// CellFormat is what set_format and write_cell can set on cells.
type CellFormat struct {
	Bold         bool    `json:"bold,omitempty"`
	Italic       bool    `json:"italic,omitempty"`
	FontColor    string  `json:"font_color,omitempty" jsonschema_description:"#RRGGBB"`
	FillColor    string  `json:"fill_color,omitempty" jsonschema_description:"#RRGGBB background"`
	NumberFormat string  `json:"number_format,omitempty" jsonschema_description:"an Excel number format, e.g. $#,##0.00 or 0% or yyyy-mm-dd"`
	Align        string  `json:"align,omitempty" jsonschema:"enum=left,enum=center,enum=right"`
	ColumnWidth  float64 `json:"column_width,omitempty" jsonschema_description:"the width of the range's columns (characters, at most 255)"`
}

// CellRead is spreadsheet_read_cell's answer.
type CellRead struct {
	ID      string      `json:"id"`
	Sheet   string      `json:"sheet"`
	Cell    string      `json:"cell"`
	Value   string      `json:"value" jsonschema_description:"the formatted value (a formula's last computed value)"`
	Type    string      `json:"type" jsonschema_description:"empty, string, number, bool, date, formula, error"`
	Formula string      `json:"formula,omitempty"`
	Format  *CellFormat `json:"format,omitempty"`
	Hash    string      `json:"hash"`
}

const maxRowsChange = 10000

func (t *tier) sheetTools() []files.Tool {
	return []files.Tool{
		files.Define("spreadsheet_list_sheets", "The sheets of a spreadsheet (xlsx or csv) with their sizes in rows and columns.", true,
			func(ctx context.Context, c files.Caller, in FileID) (SheetList, error) {
				src, err := t.read(ctx, c, "id", in.ID)
				if err != nil {
					return SheetList{}, err
				}
				return t.listSheets(ctx, src)
			}).WithRoute("spreadsheet_list_sheets"),
		files.Define("spreadsheet_get_sheet_summary", "What a sheet looks like without reading it all: its row and column counts, row 1 as headers, the first and the last rows. Call it first.", true,
			func(ctx context.Context, c files.Caller, in SummaryArgs) (SheetSummary, error) {
				src, err := t.read(ctx, c, "id", in.ID)
				if err != nil {
					return SheetSummary{}, err
				}
				return t.summary(ctx, src, in.Sheet, in.SampleRows)
			}).WithRoute("spreadsheet_get_sheet_summary"),
		files.Define("spreadsheet_read_range", "Read a range of cells (A1:D50, A:C, 2:5) as rows of formatted values, clipped to the sheet's data; at most 100000 cells per call.", true,
			func(ctx context.Context, c files.Caller, in ReadRangeArgs) (RangeRead, error) {
				src, err := t.read(ctx, c, "id", in.ID)
				if err != nil {
					return RangeRead{}, err
				}
				return t.readRange(ctx, src, in.Sheet, in.Range)
			}).WithRoute("spreadsheet_read_range"),
		files.Define("spreadsheet_read_cell", "Read one cell: its value, type, formula and format.", true,
			func(ctx context.Context, c files.Caller, in CellArgs) (CellRead, error) {
				src, err := t.read(ctx, c, "id", in.ID)
				if err != nil {
					return CellRead{}, err
				}
				return t.readCell(ctx, src, in.Sheet, in.Cell)
			}).WithRoute("spreadsheet_read_cell"),
		files.Define("spreadsheet_write_range", "Write rows of values from start_cell on (a file that does not exist is created, .xlsx or .csv). With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in WriteRangeArgs) (Edited, error) {
				return t.sheetEdit(ctx, c, in.ID, in.IfMatch.IfMatch, true, func(w *wbook) error {
					return w.writeRange(in.Sheet, in.StartCell, in.Data)
				})
			}).WithRoute("spreadsheet_write_range"),
		files.Define("spreadsheet_write_cell", "Write one cell: a value, or a formula (xlsx), and optionally its format. With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in WriteCellArgs) (Edited, error) {
				return t.sheetEdit(ctx, c, in.ID, in.IfMatch.IfMatch, true, func(w *wbook) error {
					return w.writeCell(in)
				})
			}).WithRoute("spreadsheet_write_cell"),
		files.Define("spreadsheet_add_sheet", "Add an empty sheet to a workbook (xlsx; a file that does not exist is created). With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in SheetNameArgs) (Edited, error) {
				return t.sheetEdit(ctx, c, in.ID, in.IfMatch.IfMatch, true, func(w *wbook) error { return w.addSheet(in.Name) })
			}).WithRoute("spreadsheet_add_sheet"),
		files.Define("spreadsheet_delete_sheet", "Delete a sheet of a workbook (xlsx; not its only sheet). With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in SheetNameArgs) (Edited, error) {
				return t.sheetEdit(ctx, c, in.ID, in.IfMatch.IfMatch, false, func(w *wbook) error { return w.deleteSheet(in.Name) })
			}).WithRoute("spreadsheet_delete_sheet"),
		files.Define("spreadsheet_insert_rows", "Insert empty rows after after_row (0: at the top); formulas' references move with the rows (xlsx). With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in InsertRowsArgs) (Edited, error) {
				return t.sheetEdit(ctx, c, in.ID, in.IfMatch.IfMatch, false, func(w *wbook) error {
					return w.insertRows(in.Sheet, in.AfterRow, in.Count)
				})
			}).WithRoute("spreadsheet_insert_rows"),
		files.Define("spreadsheet_delete_rows", "Delete count rows from start_row on. With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in DeleteRowsArgs) (Edited, error) {
				return t.sheetEdit(ctx, c, in.ID, in.IfMatch.IfMatch, false, func(w *wbook) error {
					return w.deleteRows(in.Sheet, in.StartRow, in.Count)
				})
			}).WithRoute("spreadsheet_delete_rows"),
		files.Define("spreadsheet_set_format", "Format a range of cells (xlsx): bold, italic, colors, number format, alignment, column width. With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in SetFormatArgs) (Edited, error) {
				return t.sheetEdit(ctx, c, in.ID, in.IfMatch.IfMatch, false, func(w *wbook) error {
					return w.setFormat(in.Sheet, in.Range, in.Format)
				})
			}).WithRoute("spreadsheet_set_format"),
		files.Define("spreadsheet_auto_filter", "Put an autofilter on a range (xlsx; its first row is the header). With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in AutoFilterArgs) (Edited, error) {
				return t.sheetEdit(ctx, c, in.ID, in.IfMatch.IfMatch, false, func(w *wbook) error {
					return w.autoFilter(in.Sheet, in.Range)
				})
			}).WithRoute("spreadsheet_auto_filter"),
	}
}

// wbook is a spreadsheet being edited: an excelize file, or a CSV's rows.
type wbook struct {
	path string
	f    *excelize.File
	csv  [][]string // a CSV's rows (f is nil)
}

func (w *wbook) sheet(name string) (string, error) {
	if w.f == nil {
		if name != "" && !strings.EqualFold(name, csvSheet) {
			return "", orchestrator.FieldErrorf("sheet", "%s is a CSV file: it has one sheet (%s)", w.path, csvSheet)
		}
		return csvSheet, nil
	}
	list := w.f.GetSheetList()
	if name == "" && len(list) > 0 {
		return list[0], nil
	}
	for _, n := range list {
		if strings.EqualFold(n, name) {
			return n, nil
		}
	}
	return "", orchestrator.FieldErrorf("sheet", "no sheet %q (the sheets: %s)", name, strings.Join(list, ", "))
}

func (w *wbook) xlsxOnly(what string) error {
	if w.f == nil {
		return orchestrator.Errorf(orchestrator.EInvalid, "%s is a CSV file, which has no %s: write it as .xlsx (spreadsheet_write_range to a new .xlsx path)", w.path, what)
	}
	return nil
}

// sheetEdit reads file id (a missing one, when create, starts empty),
// runs edit on a fresh copy and writes the result over what was read.
func (t *tier) sheetEdit(ctx context.Context, c files.Caller, id, ifMatch string, create bool, edit func(w *wbook) error) (Edited, error) {
	src, err := t.read(ctx, c, "id", id)
	w := &wbook{path: src.path}
	switch {
	case err == nil:
		if err := src.checkIfMatch(ifMatch); err != nil {
			return Edited{}, err
		}
		if _, err := t.book(ctx, src); err != nil { // a clear 422 first, and cached
			return Edited{}, err
		}
		if isCSV(src.path) {
			if w.csv, err = parseCSV(src.data); err != nil {
				return Edited{}, malformed(src.path, "CSV file", err)
			}
		} else if w.f, err = openXLSX(src.data, MaxUnzip); err != nil {
			return Edited{}, malformed(src.path, "spreadsheet (xlsx)", err)
		}
	case create && orchestrator.ErrorCode(err) == orchestrator.ENotFound && ifMatch == "":
		p, cerr := files.CleanID("id", id)
		if cerr != nil {
			return Edited{}, cerr
		}
		w.path, src.path = p, p
		ext := strings.ToLower(p[strings.LastIndexByte(p, '.')+1:])
		switch {
		case isCSV(p):
		case ext == "xlsx" || ext == "xlsm":
			w.f = excelize.NewFile()
		default:
			return Edited{}, orchestrator.FieldErrorf("id", "%s does not exist; a new spreadsheet is named .xlsx or .csv", p)
		}
	default:
		return Edited{}, err
	}
	data, err := guard(ctx, func() ([]byte, error) {
		if w.f != nil {
			defer w.f.Close()
		}
		if err := edit(w); err != nil {
			return nil, err
		}
		return w.bytes()
	})
	if err != nil {
		return Edited{}, sheetError(src.path, err)
	}
	return t.write(ctx, c, src.path, data, src.info.Hash, false)
}

// sheetError is an edit's failure: ours as they are, excelize's as a 422
// with its words.
func sheetError(p string, err error) error {
	var oe *orchestrator.Error
	if errors.As(err, &oe) {
		return err
	}
	return orchestrator.Errorf(orchestrator.EInvalid, "%s: %v", p, err)
}

func (w *wbook) bytes() ([]byte, error) {
	if w.f == nil {
		// an empty row is written as empty fields ("" alone in a file of
		// one column): a blank line would be no row at all to a reader
		var buf bytes.Buffer
		cw := csv.NewWriter(&buf)
		cols := max(width(w.csv), 1)
		for _, r := range w.csv {
			if len(r) == 0 {
				if cols == 1 {
					cw.Flush()
					buf.WriteString("\"\"\n")
					continue
				}
				r = make([]string, cols)
			}
			if err := cw.Write(r); err != nil {
				return nil, err
			}
		}
		cw.Flush()
		return buf.Bytes(), cw.Error()
	}
	buf, err := w.f.WriteToBuffer()
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// cellAt checks an A1 cell.
func cellAt(field, s string) (col, row int, err error) {
	col, row, ok := cellRef(strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), "$", "")))
	if !ok || col == 0 || row == 0 {
		return 0, 0, orchestrator.FieldErrorf(field, "%q is not a cell such as B7", s)
	}
	return col, row, nil
}

// csvValue is v as CSV text.
func csvValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// setCSV sets cell (col, row) of the CSV rows, growing them.
func (w *wbook) setCSV(col, row int, s string) {
	for len(w.csv) < row {
		w.csv = append(w.csv, nil)
	}
	r := w.csv[row-1]
	for len(r) < col {
		r = append(r, "")
	}
	r[col-1] = s
	w.csv[row-1] = r
}

// setValue sets one xlsx cell from a JSON value.
func (w *wbook) setValue(sheet, cell string, v any) error {
	switch x := v.(type) {
	case nil:
		return w.f.SetCellValue(sheet, cell, nil)
	case string:
		if f, ok := strings.CutPrefix(x, "="); ok && f != "" {
			return w.f.SetCellFormula(sheet, cell, f)
		}
		return w.f.SetCellValue(sheet, cell, x)
	case float64, bool:
		return w.f.SetCellValue(sheet, cell, x)
	}
	return orchestrator.FieldErrorf("data", "cell %s: a value is a string, number, true/false or null, not %T", cell, v)
}

func (w *wbook) writeRange(sheet, start string, data [][]any) error {
	col, row, err := cellAt("start_cell", start)
	if err != nil {
		return err
	}
	n := 0
	for _, r := range data {
		n += len(r)
	}
	switch {
	case n > MaxWriteCells:
		return orchestrator.FieldErrorf("data", "%d cells; at most %d per write", n, MaxWriteCells)
	case row+len(data)-1 > maxRow:
		return orchestrator.FieldErrorf("data", "the rows go past row %d", maxRow)
	}
	name, err := w.sheet(sheet)
	if err != nil {
		return err
	}
	for i, r := range data {
		if col+len(r)-1 > maxCol {
			return orchestrator.FieldErrorf("data", "row %d goes past column XFD", i+1)
		}
		for j, v := range r {
			if w.f == nil {
				w.setCSV(col+j, row+i, csvValue(v))
				continue
			}
			if err := w.setValue(name, cellName(col+j, row+i), v); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *wbook) writeCell(in WriteCellArgs) error {
	col, row, err := cellAt("cell", in.Cell)
	if err != nil {
		return err
	}
	name, err := w.sheet(in.Sheet)
	if err != nil {
		return err
	}
	if w.f == nil {
		if in.Formula != "" || in.Format != nil {
			return w.xlsxOnly("formulas or formats")
		}
		w.setCSV(col, row, csvValue(in.Value))
		return nil
	}
	cell := cellName(col, row)
	if in.Formula != "" {
		err = w.f.SetCellFormula(name, cell, strings.TrimPrefix(in.Formula, "="))
	} else {
		err = w.setValue(name, cell, in.Value)
	}
	if err != nil {
		return err
	}
	if in.Format != nil {
		return w.format(name, cellRange{col, row, col, row}, *in.Format)
	}
	return nil
}

func (w *wbook) addSheet(name string) error {
	if err := w.xlsxOnly("sheets besides its one"); err != nil {
		return err
	}
	name = strings.TrimSpace(name)
	if name == "" || len([]rune(name)) > 31 || strings.ContainsAny(name, `:\/?*[]`) {
		return orchestrator.FieldErrorf("name", "a sheet's name is 1 to 31 characters without : \\ / ? * [ ]")
	}
	for _, n := range w.f.GetSheetList() {
		if strings.EqualFold(n, name) {
			return orchestrator.Errorf(orchestrator.EConflict, "%s already has a sheet %q", w.path, n)
		}
	}
	_, err := w.f.NewSheet(name)
	return err
}

func (w *wbook) deleteSheet(name string) error {
	if err := w.xlsxOnly("sheets besides its one"); err != nil {
		return err
	}
	n, err := w.sheet(name)
	if err != nil {
		return err
	}
	if len(w.f.GetSheetList()) == 1 {
		return orchestrator.FieldErrorf("name", "%s is the workbook's only sheet", n)
	}
	return w.f.DeleteSheet(n)
}

func rowsCount(field string, count int) error {
	if count < 1 || count > maxRowsChange {
		return orchestrator.FieldErrorf(field, "count must be 1 to %d", maxRowsChange)
	}
	return nil
}

func (w *wbook) insertRows(sheet string, after, count int) error {
	if err := rowsCount("count", count); err != nil {
		return err
	}
	if after < 0 || after >= maxRow {
		return orchestrator.FieldErrorf("after_row", "after_row must be 0 to %d", maxRow-1)
	}
	name, err := w.sheet(sheet)
	if err != nil {
		return err
	}
	if w.f == nil {
		at := min(after, len(w.csv))
		w.csv = append(w.csv[:at], append(make([][]string, count), w.csv[at:]...)...)
		return nil
	}
	return w.f.InsertRows(name, after+1, count)
}

func (w *wbook) deleteRows(sheet string, start, count int) error {
	if err := rowsCount("count", count); err != nil {
		return err
	}
	if start < 1 || start > maxRow {
		return orchestrator.FieldErrorf("start_row", "start_row must be 1 to %d", maxRow)
	}
	name, err := w.sheet(sheet)
	if err != nil {
		return err
	}
	if w.f == nil {
		if start <= len(w.csv) {
			end := min(start-1+count, len(w.csv))
			w.csv = append(w.csv[:start-1], w.csv[end:]...)
		}
		return nil
	}
	// from the last, so each removal leaves the next one's number as it was
	for r := start + count - 1; r >= start; r-- {
		if err := w.f.RemoveRow(name, r); err != nil {
			return err
		}
	}
	return nil
}

func (w *wbook) setFormat(sheet, rng string, f CellFormat) error {
	if err := w.xlsxOnly("formats"); err != nil {
		return err
	}
	name, err := w.sheet(sheet)
	if err != nil {
		return err
	}
	cr, err := parseRange("range", rng, maxRow, maxCol)
	if err != nil {
		return err
	}
	return w.format(name, cr, f)
}

var hexColor = func(field, s string) (string, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "#")
	if len(s) != 6 {
		return "", orchestrator.FieldErrorf(field, "a color is #RRGGBB, not %q", s)
	}
	if _, err := strconv.ParseUint(s, 16, 32); err != nil {
		return "", orchestrator.FieldErrorf(field, "a color is #RRGGBB, not %q", s)
	}
	return "#" + strings.ToUpper(s), nil
}

// format applies f to the cells of cr (a style per call: cells keep none
// of their former style's settings that f does not name).
func (w *wbook) format(sheet string, cr cellRange, f CellFormat) error {
	st := &excelize.Style{}
	if f.Bold || f.Italic || f.FontColor != "" {
		st.Font = &excelize.Font{Bold: f.Bold, Italic: f.Italic}
		if f.FontColor != "" {
			c, err := hexColor("font_color", f.FontColor)
			if err != nil {
				return err
			}
			st.Font.Color = c
		}
	}
	if f.FillColor != "" {
		c, err := hexColor("fill_color", f.FillColor)
		if err != nil {
			return err
		}
		st.Fill = excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{c}}
	}
	if f.NumberFormat != "" {
		if len(f.NumberFormat) > 255 {
			return orchestrator.FieldErrorf("number_format", "a number format is at most 255 characters")
		}
		st.CustomNumFmt = &f.NumberFormat
	}
	switch f.Align {
	case "":
	case "left", "center", "right":
		st.Alignment = &excelize.Alignment{Horizontal: f.Align}
	default:
		return orchestrator.FieldErrorf("align", "align is left, center or right")
	}
	if f.ColumnWidth != 0 {
		if f.ColumnWidth < 0 || f.ColumnWidth > 255 {
			return orchestrator.FieldErrorf("column_width", "column_width is 0 to 255")
		}
		c0, _ := excelize.ColumnNumberToName(cr.c0)
		c1, _ := excelize.ColumnNumberToName(cr.c1)
		if err := w.f.SetColWidth(sheet, c0, c1, f.ColumnWidth); err != nil {
			return err
		}
	}
	if st.Font == nil && st.Fill.Type == "" && st.CustomNumFmt == nil && st.Alignment == nil {
		return nil
	}
	if (cr.r1-cr.r0+1)*(cr.c1-cr.c0+1) > MaxWriteCells {
		return orchestrator.FieldErrorf("range", "%s has more than %d cells to format", cr, MaxWriteCells)
	}
	id, err := w.f.NewStyle(st)
	if err != nil {
		return err
	}
	return w.f.SetCellStyle(sheet, cellName(cr.c0, cr.r0), cellName(cr.c1, cr.r1), id)
}

func (w *wbook) autoFilter(sheet, rng string) error {
	if err := w.xlsxOnly("autofilter"); err != nil {
		return err
	}
	name, err := w.sheet(sheet)
	if err != nil {
		return err
	}
	cr, err := parseRange("range", rng, maxRow, maxCol)
	if err != nil {
		return err
	}
	return w.f.AutoFilter(name, cr.String(), nil)
}

// readCell reads one cell's value, type, formula and format.
func (t *tier) readCell(ctx context.Context, src source, sheet, cell string) (CellRead, error) {
	col, row, err := cellAt("cell", cell)
	if err != nil {
		return CellRead{}, err
	}
	b, err := t.book(ctx, src)
	if err != nil {
		return CellRead{}, err
	}
	name, err := b.sheetName(sheet)
	if err != nil {
		return CellRead{}, err
	}
	out := CellRead{ID: src.path, Sheet: name, Cell: cellName(col, row), Type: "empty", Hash: src.info.Hash}
	if b.csv {
		rows := b.rows[csvSheet]
		if row <= len(rows) && col <= len(rows[row-1]) {
			out.Value = rows[row-1][col-1]
		}
		if out.Value != "" {
			out.Type = "string"
			if _, err := strconv.ParseFloat(out.Value, 64); err == nil {
				out.Type = "number"
			}
		}
		return out, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_, err = guard(ctx, func() (struct{}, error) {
		f := b.f
		var err error
		if out.Value, err = f.GetCellValue(name, out.Cell); err != nil {
			return struct{}{}, err
		}
		if out.Formula, err = f.GetCellFormula(name, out.Cell); err != nil {
			return struct{}{}, err
		}
		ct, err := f.GetCellType(name, out.Cell)
		if err != nil {
			return struct{}{}, err
		}
		out.Type = cellType(ct, out.Value, out.Formula)
		sid, err := f.GetCellStyle(name, out.Cell)
		if err != nil || sid == 0 {
			return struct{}{}, nil
		}
		st, err := f.GetStyle(sid)
		if err != nil || st == nil {
			return struct{}{}, nil
		}
		cf := CellFormat{}
		if st.Font != nil {
			cf.Bold, cf.Italic, cf.FontColor = st.Font.Bold, st.Font.Italic, st.Font.Color
		}
		if len(st.Fill.Color) > 0 {
			cf.FillColor = "#" + strings.TrimPrefix(st.Fill.Color[0], "#")
		}
		if cf.FontColor != "" {
			cf.FontColor = "#" + strings.TrimPrefix(cf.FontColor, "#")
		}
		if st.CustomNumFmt != nil {
			cf.NumberFormat = *st.CustomNumFmt
		}
		if st.Alignment != nil {
			cf.Align = st.Alignment.Horizontal
		}
		if cf != (CellFormat{}) {
			out.Format = &cf
		}
		return struct{}{}, nil
	})
	if err != nil {
		return CellRead{}, sheetError(src.path, err)
	}
	return out, nil
}

func cellType(ct excelize.CellType, value, formula string) string {
	switch {
	case formula != "":
		return "formula"
	case value == "" && ct == excelize.CellTypeUnset:
		return "empty"
	}
	switch ct {
	case excelize.CellTypeBool:
		return "bool"
	case excelize.CellTypeDate:
		return "date"
	case excelize.CellTypeError:
		return "error"
	case excelize.CellTypeNumber:
		return "number"
	case excelize.CellTypeUnset:
		if _, err := strconv.ParseFloat(value, 64); err == nil {
			return "number"
		}
	}
	return "string"
}
