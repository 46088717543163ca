package testkit

import (
	"os"
	"strings"
	"testing"
)

// WantErr checks the error of a table case: want is text the error must
// hold, or "" when none may come. It reports whether an error was wanted
// (and came), where such a case usually ends.
func WantErr(t testing.TB, err error, want string) bool {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("error %v, want none", err)
		}
		return false
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one holding %q", err, want)
	}
	return true
}

// WantText checks that out holds every string of want and none of absent.
func WantText(t testing.TB, out string, want, absent []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%.800s", w, out)
		}
	}
	for _, a := range absent {
		if strings.Contains(out, a) {
			t.Errorf("output has %q:\n%.800s", a, out)
		}
	}
}

// Lines returns the lines of a golden file that are neither blank nor
// comments (starting with #).
func Lines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}
