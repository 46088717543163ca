package relay

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLogDir(t *testing.T) {
	dir := t.TempDir()
	d, err := NewLogDir(dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if err := d.Write("n1", []byte(fmt.Sprintf("line %02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		tail int
		want string
	}{
		{name: "tail 2", tail: 2, want: "line 28\nline 29\n"},
		{name: "tail 1", tail: 1, want: "line 29\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.Logs("n1", tt.tail)
			if err != nil || string(got) != tt.want {
				t.Fatalf("Logs = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	all, err := d.Logs("n1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) > 200 || !strings.HasSuffix(string(all), "line 29\n") {
		t.Fatalf("rotated log holds %d bytes (bound 2x100): %q", len(all), all)
	}
	if got, err := d.Logs("never", 5); err != nil || len(got) != 0 {
		t.Fatalf("log of a node without stderr = %q, %v", got, err)
	}
	if _, err := d.Logs("../x", 1); err == nil {
		t.Fatal("a node id with a slash was accepted")
	}
	if err := d.Remove("n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "n1.log")); !os.IsNotExist(err) {
		t.Fatalf("log file left after Remove: %v", err)
	}
}

func TestLastLines(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{name: "empty", in: "", n: 3, want: ""},
		{name: "fewer lines", in: "a\nb\n", n: 3, want: "a\nb\n"},
		{name: "exact", in: "a\nb\nc\n", n: 2, want: "b\nc\n"},
		{name: "no final newline", in: "a\nb", n: 1, want: "b"},
	}
	for _, tt := range tests {
		if got := string(lastLines([]byte(tt.in), tt.n)); got != tt.want {
			t.Errorf("%s: lastLines = %q, want %q", tt.name, got, tt.want)
		}
	}
}
