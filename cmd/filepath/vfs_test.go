package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

func TestVFSExportImport(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	// A data directory that a server has used: the database exists.
	first, err := store.Open(ctx, store.Config{Path: filepath.Join(data, "filepath.db")})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	st, v, err := vfsStore(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	e := storetest.On(st)
	u := e.User(t, "alice")
	s := e.Session(t, u.ID, "src")
	if _, _, err := v.Session(s.ID).WriteFile(ctx, "/src/main.go", []byte("package main\n"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	file := filepath.Join(t.TempDir(), "s.agentfs")
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{name: "no subcommand", args: []string{"vfs"}, code: 2, stderr: "usage"},
		{name: "export missing args", args: []string{"vfs", "export", s.ID, "--data", data}, code: 2, stderr: "want 2 arguments"},
		{name: "export unknown session", args: []string{"vfs", "export", "nope", file, "--data", data}, code: 1, stderr: "not found"},
		{name: "export", args: []string{"vfs", "export", s.ID, file, "--data", data}, code: 0},
		{name: "export exists", args: []string{"vfs", "export", "--data", data, s.ID, file}, code: 1, stderr: "already exists"},
		{name: "import unknown user", args: []string{"vfs", "import", file, "--user", "bob", "--data", data}, code: 1},
		{name: "import missing file", args: []string{"vfs", "import", file + ".x", "--data", data}, code: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, "", tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("code %d stderr %q, want %d %q", code, stderr, tc.code, tc.stderr)
			}
		})
	}
	t.Setenv("FILEPATH_DATA", data)
	code, stdout, stderr := runCLI(t, "", "vfs", "import", file, "--name", "copy")
	if code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	id := strings.TrimSpace(stdout)
	st, v, err = vfsStore(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got, err := storetest.On(st).Sessions.GetSession(ctx, u.ID, id)
	if err != nil || got.Name != "copy" {
		t.Fatalf("session %+v %v", got, err)
	}
	_, b, err := v.Session(id).ReadAll(ctx, "/src/main.go")
	if err != nil || string(b) != "package main\n" {
		t.Fatalf("imported %q %v", b, err)
	}
}
