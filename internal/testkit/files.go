package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes content to path (mode 0644), making its directories
// first; a failure fails the test.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// WriteFiles writes files (a path below dir → its content) with WriteFile.
func WriteFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		WriteFile(t, filepath.Join(dir, name), content)
	}
}

// ReadFile returns the content of path; a failure fails the test.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}
