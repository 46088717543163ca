package format

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
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
	_ = fmt.Sprint
}
