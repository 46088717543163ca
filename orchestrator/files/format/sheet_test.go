package format

import (
	"reflect"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/files"
)

func TestSheetSummary(t *testing.T) {
	f := newFixture(t, 0)
	f.put(t, "/ledger.xlsx", xlsxOf(t, ledger(20)))
	f.put(t, "/ledger.csv", []byte("item,qty,price\nitem 1,1,1.5\nitem 2,2,2.5\n\"a, quoted\",3\n"))
	var s SheetSummary
	f.must(t, "spreadsheet_get_sheet_summary", map[string]any{"id": "/ledger.xlsx", "sample_rows": 3}, &s)
	if s.Sheet != "Sheet1" || !reflect.DeepEqual(s.Sheets, []string{"Sheet1"}) || s.Rows != 21 || s.Cols != 3 ||
		!reflect.DeepEqual(s.Headers, []string{"item", "qty", "price"}) || len(s.FirstRows) != 3 || len(s.LastRows) != 3 ||
		s.LastRowsStart != 19 || s.FirstRows[0][0] != "item 1" || s.LastRows[2][2] != "20.5" {
		t.Fatalf("summary %+v", s)
	}
	f.must(t, "spreadsheet_get_sheet_summary", map[string]any{"id": "/ledger.csv"}, &s)
	if s.Rows != 4 || s.Cols != 3 || len(s.FirstRows) != 3 || len(s.LastRows) != 0 || s.LastRowsStart != 0 ||
		!reflect.DeepEqual(s.FirstRows[2], []string{"a, quoted", "3", ""}) {
		t.Fatalf("csv summary %+v", s)
	}
	err := f.call(t, "spreadsheet_get_sheet_summary", map[string]any{"id": "/ledger.xlsx", "sheet": "Nope"}, nil)
	if orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(err.Error(), "Sheet1") {
		t.Fatalf("unknown sheet: %v", err)
	}
	f.put(t, "/broken.xlsx", []byte("PK\x03\x04 not really a zip"))
	err = f.call(t, "spreadsheet_get_sheet_summary", map[string]any{"id": "/broken.xlsx"}, nil)
	if orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(err.Error(), "/broken.xlsx is not a readable spreadsheet") {
		t.Fatalf("broken: %v", err)
	}
}

// TestSheetRoundTrip: every spreadsheet edit, read back by the tools and
// by a fresh excelize reader of the bytes written.
func TestSheetRoundTrip(t *testing.T) {
	f := newFixture(t, 0)
	var e Edited
	f.must(t, "spreadsheet_write_range", map[string]any{"id": "/new.xlsx", "start_cell": "A1",
		"data": [][]any{{"item", "qty", "price"}, {"pen", 2, 1.5}, {"ink", 3, 4.25}, {"total", "=SUM(B2:B3)", nil}}}, &e)
	if !e.OK || e.ID != "/new.xlsx" || e.Hash == "" {
		t.Fatalf("created %+v", e)
	}
	var rr RangeRead
	f.must(t, "spreadsheet_read_range", map[string]any{"id": "/new.xlsx", "range": "A1:C3"}, &rr)
	if !reflect.DeepEqual(rr.Values, [][]string{{"item", "qty", "price"}, {"pen", "2", "1.5"}, {"ink", "3", "4.25"}}) || rr.Hash != e.Hash {
		t.Fatalf("read %+v", rr)
	}
	f.must(t, "spreadsheet_read_range", map[string]any{"id": "/new.xlsx", "range": "B:B"}, &rr)
	if rr.Range != "B1:B4" || len(rr.Values) != 4 {
		t.Fatalf("column B: %+v", rr)
	}
	var cell CellRead
	f.must(t, "spreadsheet_read_cell", map[string]any{"id": "/new.xlsx", "cell": "B4"}, &cell)
	if cell.Formula != "SUM(B2:B3)" || cell.Type != "formula" {
		t.Fatalf("formula cell %+v", cell)
	}
	f.must(t, "spreadsheet_write_cell", map[string]any{"id": "/new.xlsx", "cell": "C2", "value": 1.75,
		"format": map[string]any{"bold": true, "number_format": "$#,##0.00", "fill_color": "#ffee00"}, "if_match": e.Hash}, &e)
	cell = CellRead{}
	f.must(t, "spreadsheet_read_cell", map[string]any{"id": "/new.xlsx", "cell": "C2"}, &cell)
	if cell.Format == nil || !cell.Format.Bold || cell.Format.NumberFormat != "$#,##0.00" || cell.Format.FillColor != "#FFEE00" || cell.Value != "$1.75" || cell.Formula != "" {
		t.Fatalf("formatted cell %+v %+v", cell, cell.Format)
	}
	f.must(t, "spreadsheet_add_sheet", map[string]any{"id": "/new.xlsx", "name": "Notes"}, &e)
	if err := f.call(t, "spreadsheet_add_sheet", map[string]any{"id": "/new.xlsx", "name": "notes"}, nil); orchestrator.ErrorCode(err) != orchestrator.EConflict {
		t.Fatalf("a second Notes: %v", err)
	}
	f.must(t, "spreadsheet_insert_rows", map[string]any{"id": "/new.xlsx", "after_row": 1, "count": 2}, &e)
	f.must(t, "spreadsheet_read_range", map[string]any{"id": "/new.xlsx", "range": "A1:A6"}, &rr)
	if !reflect.DeepEqual(rr.Values, [][]string{{"item"}, {""}, {""}, {"pen"}, {"ink"}, {"total"}}) {
		t.Fatalf("after insert: %v", rr.Values)
	}
	cell = CellRead{}
	f.must(t, "spreadsheet_read_cell", map[string]any{"id": "/new.xlsx", "cell": "B6"}, &cell)
	if cell.Formula != "SUM(B4:B5)" {
		t.Fatalf("the formula did not move with its rows: %+v", cell)
	}
	f.must(t, "spreadsheet_delete_rows", map[string]any{"id": "/new.xlsx", "start_row": 2, "count": 2}, &e)
	f.must(t, "spreadsheet_set_format", map[string]any{"id": "/new.xlsx", "range": "A1:C1", "format": map[string]any{"bold": true, "column_width": 20}}, &e)
	f.must(t, "spreadsheet_auto_filter", map[string]any{"id": "/new.xlsx", "range": "A1:C4"}, &e)
	f.must(t, "spreadsheet_delete_sheet", map[string]any{"id": "/new.xlsx", "name": "Notes"}, &e)

	var list SheetList
	f.must(t, "spreadsheet_list_sheets", map[string]any{"id": "/new.xlsx"}, &list)
	if len(list.Sheets) != 1 || list.Sheets[0] != (SheetInfo{"Sheet1", 4, 3}) {
		t.Fatalf("sheets %+v", list)
	}
	// a second reader: the bytes as excelize reads them afresh
	x, err := openXLSX(f.get(t, "/new.xlsx"), MaxUnzip)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := x.GetRows("Sheet1")
	fm, _ := x.GetCellFormula("Sheet1", "B4")
	w, _ := x.GetColWidth("Sheet1", "B")
	if !reflect.DeepEqual(rows[:3], [][]string{{"item", "qty", "price"}, {"pen", "2", "$1.75"}, {"ink", "3", "4.25"}}) || fm != "SUM(B2:B3)" || w != 20 {
		t.Fatalf("reread: %v %q width %v", rows, fm, w)
	}
	if af := x.GetSheetList(); len(af) != 1 {
		t.Fatalf("sheets %v", af)
	}
}

func TestSheetCSV(t *testing.T) {
	f := newFixture(t, 0)
	f.must(t, "spreadsheet_write_range", map[string]any{"id": "/t.csv", "start_cell": "A1", "data": [][]any{{"a", "b"}, {1, true}, {"x,y", nil}}}, nil)
	if got := string(f.get(t, "/t.csv")); got != "a,b\n1,true\n\"x,y\",\n" {
		t.Fatalf("csv %q", got)
	}
	f.must(t, "spreadsheet_write_cell", map[string]any{"id": "/t.csv", "cell": "C2", "value": "z"}, nil)
	f.must(t, "spreadsheet_insert_rows", map[string]any{"id": "/t.csv", "after_row": 0, "count": 1}, nil)
	f.must(t, "spreadsheet_delete_rows", map[string]any{"id": "/t.csv", "start_row": 3, "count": 1}, nil)
	var rr RangeRead
	f.must(t, "spreadsheet_read_range", map[string]any{"id": "/t.csv", "range": "A1:C3"}, &rr)
	if !reflect.DeepEqual(rr.Values, [][]string{{"", "", ""}, {"a", "b", ""}, {"x,y", "", ""}}) {
		t.Fatalf("csv values %v", rr.Values)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"spreadsheet_add_sheet", map[string]any{"id": "/t.csv", "name": "Two"}},
		{"spreadsheet_set_format", map[string]any{"id": "/t.csv", "range": "A1", "format": map[string]any{"bold": true}}},
		{"spreadsheet_write_cell", map[string]any{"id": "/t.csv", "cell": "A1", "formula": "SUM(B1:B2)"}},
	} {
		if err := f.call(t, c.tool, c.args, nil); orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(err.Error(), "CSV") {
			t.Fatalf("%s on a CSV: %v", c.tool, err)
		}
	}
}

func TestSheetLimitsAndConflicts(t *testing.T) {
	f := newFixture(t, 0)
	info := f.put(t, "/big.xlsx", xlsxOf(t, ledger(40000)))
	err := f.call(t, "spreadsheet_read_range", map[string]any{"id": "/big.xlsx", "range": "A1:C40001"}, nil)
	if orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(err.Error(), "at most 100000 per read") {
		t.Fatalf("a read of 120003 cells: %v", err)
	}
	var rr RangeRead
	f.must(t, "spreadsheet_read_range", map[string]any{"id": "/big.xlsx", "range": "A39999:C50000"}, &rr)
	if rr.Range != "A39999:C40001" || len(rr.Values) != 3 || rr.Values[2][0] != "item 40000" {
		t.Fatalf("the end: %s %v", rr.Range, rr.Values)
	}
	// an edit based on a read the file has moved past: 412 with its hash
	f.put(t, "/big.xlsx", xlsxOf(t, ledger(3)))
	err = f.call(t, "spreadsheet_write_cell", map[string]any{"id": "/big.xlsx", "cell": "A1", "value": "x", "if_match": info.Hash}, nil)
	if orchestrator.ErrorCode(err) != orchestrator.EPreconditionFailed || files.CurrentHash(err) == "" || files.CurrentHash(err) == info.Hash {
		t.Fatalf("stale if_match: %v", err)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"spreadsheet_read_range", map[string]any{"id": "/big.xlsx", "range": "A0:B2"}, "not an A1 range"},
		{"spreadsheet_read_range", map[string]any{"id": "/big.xlsx", "range": "XFE1"}, "not an A1 range"},
		{"spreadsheet_write_range", map[string]any{"id": "/big.xlsx", "start_cell": "A1048576", "data": [][]any{{1}, {2}}}, "past row"},
		{"spreadsheet_insert_rows", map[string]any{"id": "/big.xlsx", "after_row": 1, "count": 20000}, "count must be"},
		{"spreadsheet_delete_sheet", map[string]any{"id": "/big.xlsx", "name": "Sheet1"}, "only sheet"},
		{"spreadsheet_write_range", map[string]any{"id": "/new.txt", "start_cell": "A1", "data": [][]any{{1}}}, ".xlsx or .csv"},
	} {
		if err := f.call(t, c.tool, c.args, nil); orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want %q", c.tool, c.args, err, c.want)
		}
	}
}
