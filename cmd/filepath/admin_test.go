package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminCommandsNeedADatabase: admin commands never create an empty
// database beside the real one when --data is wrong.
func TestAdminCommandsNeedADatabase(t *testing.T) {
	for _, args := range [][]string{{"apikey", "create"}, {"user", "login", "admin"}, {"user", "add", "bob"}, {"vfs", "import", "x.agentfs"}} {
		data := t.TempDir()
		var out, errOut strings.Builder
		code := Main(context.Background(), append(args, "--data", data), nil, &out, &errOut)
		if code != 1 || !strings.Contains(errOut.String(), "no filepath database at") || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
		if _, err := os.Stat(filepath.Join(data, "filepath.db")); err == nil {
			t.Errorf("%v created a database", args)
		}
	}
}

func TestBaseURL(t *testing.T) {
	data := t.TempDir()
	if got := baseURL("", data); got != "http://127.0.0.1:8080" && os.Getenv("FILEPATH_ADDR") == "" {
		t.Errorf("no url file: %q", got)
	}
	os.WriteFile(filepath.Join(data, urlFile), []byte("http://127.0.0.1:41234\n"), 0o600)
	if got := baseURL("", data); got != "http://127.0.0.1:41234" {
		t.Errorf("url file: %q", got)
	}
	if got := baseURL("https://fp.example/", data); got != "https://fp.example" {
		t.Errorf("--url wins: %q", got)
	}
}
