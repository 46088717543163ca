package vfs

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// snapshot describes a session's tree: path → "mode size hash-or-target".
func snapshot(t *testing.T, fs *FS) map[string]string {
	t.Helper()
	ctx := ctxT(t)
	out := map[string]string{}
	var walk func(p string)
	walk = func(p string) {
		list, err := fs.List(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range list {
			desc := fmt.Sprintf("%o %d %s readonly=%v ", e.Mode, e.Size, e.Target, e.Readonly)
			if !e.IsDir && !e.IsSymlink {
				info, err := fs.Stat(ctx, e.Path)
				if err != nil {
					t.Fatal(err)
				}
				desc += info.Hash
			}
			out[e.Path] = desc
			if e.IsDir {
				walk(e.Path)
			}
		}
	}
	walk("/")
	return out
}

func TestExportImportRoundTrip(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 1024})
	ctx := ctxT(t)
	fs := f.fs
	big := bytes.Repeat([]byte("0123456789"), 1000) // spans 10 chunks
	for p, data := range map[string][]byte{"/src/main.go": []byte("package main\n"), "/big.bin": big, "/empty": nil, "/a/b/c/deep.txt": []byte("deep")} {
		if _, _, err := fs.WriteFile(ctx, p, data, WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := fs.MkdirAll(ctx, "/emptydir", true); err != nil {
		t.Fatal(err)
	}
	src, _ := fs.Lookup(ctx, RootIno, "src")
	mainGo, _ := fs.Lookup(ctx, src.Ino, "main.go")
	if _, err := fs.Link(ctx, mainGo.Ino, RootIno, "hardlink.go"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Symlink(ctx, RootIno, "link", "src/main.go"); err != nil {
		t.Fatal(err)
	}
	ro := true
	if _, _, err := fs.WriteFile(ctx, "/a/b/c/deep.txt", nil, WriteOptions{Readonly: &ro, NoContent: true}); err != nil {
		t.Fatal(err)
	}
	if err := f.v.KVSet(ctx, f.sid, "k", json.RawMessage(`[1,2]`)); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(2000, 0)
	if _, err := f.v.RecordToolCall(ctx, f.sid, NewToolCall{Name: "read_file", Result: json.RawMessage(`"ok"`), StartedAt: now, CompletedAt: now}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "export.db")
	if err := f.v.Export(ctx, f.sid, file); err != nil {
		t.Fatal(err)
	}
	if err := f.v.Export(ctx, f.sid, file); err == nil {
		t.Fatal("export over an existing file")
	}
	// the file is plain agentfs: no session_id anywhere, root is inode 1
	db, err := sql.Open("sqlite3", file)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var schema string
	db.QueryRow(`SELECT group_concat(sql, ';') FROM sqlite_master`).Scan(&schema)
	if strings.Contains(schema, "session_id") || !strings.Contains(schema, "CREATE TABLE fs_inode") {
		t.Fatalf("schema %s", schema)
	}
	var rootMode int
	if err := db.QueryRow(`SELECT mode FROM fs_inode WHERE ino=1`).Scan(&rootMode); err != nil || rootMode&ModeType != ModeDir {
		t.Fatal(rootMode, err)
	}
	var nlink int
	db.QueryRow(`SELECT COUNT(*) FROM fs_dentry WHERE ino=?`, mainGo.Ino).Scan(&nlink)
	if nlink != 2 {
		t.Fatalf("hard link lost: nlink %d", nlink)
	}
	var readonly []int64
	if rows, err := db.Query(`SELECT ino FROM fs_readonly`); err == nil {
		for rows.Next() {
			var ino int64
			rows.Scan(&ino)
			readonly = append(readonly, ino)
		}
		rows.Close()
	}
	if deep, err := fs.Stat(ctx, "/a/b/c/deep.txt"); err != nil || len(readonly) != 1 || readonly[0] != deep.Ino {
		t.Fatalf("readonly inodes in the file: %v, want the one of deep.txt (%v)", readonly, err)
	}

	// import into a new session with another chunk size
	v2 := New(f.v.db, Config{ChunkSize: 4096, ReadDB: f.v.r.db})
	sid2 := newSession(t, f.v.db)
	if err := v2.Import(ctx, sid2, file); err != nil {
		t.Fatal(err)
	}
	if err := v2.Check(ctx, sid2); err != nil {
		t.Fatal(err)
	}
	a, b := snapshot(t, fs), snapshot(t, v2.Session(sid2))
	if len(a) != len(b) || len(a) < 10 {
		t.Fatalf("trees differ:\n%v\n%v", a, b)
	}
	for k, va := range a {
		if b[k] != va {
			t.Fatalf("%s: %q vs %q", k, va, b[k])
		}
	}
	if got, err := v2.KVGet(ctx, sid2, "k"); err != nil || string(got) != `[1,2]` {
		t.Fatal(string(got), err)
	}
	if calls, _ := v2.ToolCalls(ctx, sid2, "", 10); len(calls) != 1 {
		t.Fatalf("tool calls %v", calls)
	}
	// the readonly flag came along: the imported file refuses changes
	if _, _, err := v2.Session(sid2).WriteFile(ctx, "/a/b/c/deep.txt", []byte("x"), WriteOptions{}); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("write to the imported readonly file: %v, want EACCES", err)
	}
	// a plain agentfs file (no fs_readonly table) imports too
	if _, err := db.Exec(`DROP TABLE fs_readonly`); err != nil {
		t.Fatal(err)
	}
	sid3 := newSession(t, f.v.db)
	if err := v2.Import(ctx, sid3, file); err != nil {
		t.Fatal(err)
	}
	if info, err := v2.Session(sid3).Stat(ctx, "/a/b/c/deep.txt"); err != nil || info.Readonly {
		t.Fatalf("imported from plain agentfs: %+v, %v", info, err)
	}
	// importing into a session that has files is refused, atomically
	if err := v2.Import(ctx, sid2, file); err == nil {
		t.Fatal("import into a non-empty session")
	}
	if err := v2.Check(ctx, sid2); err != nil {
		t.Fatal(err)
	}
}

func TestSessionDeleteCascades(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	if _, _, err := f.fs.WriteFile(ctx, "/a/b.txt", []byte("x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.v.KVSet(ctx, f.sid, "k", json.RawMessage(`1`))
	if _, err := f.db.Exec(`DELETE FROM agent_session WHERE id=?`, f.sid); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"fs_meta", "fs_inode", "fs_dentry", "fs_data", "kv_store"} {
		var n int
		f.db.QueryRow(`SELECT COUNT(*) FROM `+table+` WHERE session_id=?`, f.sid).Scan(&n)
		if n != 0 {
			t.Fatalf("%s keeps %d rows", table, n)
		}
	}
	// a missing session is not_found, not an internal error
	_, err := New(f.v.db, Config{}).Session("nope").Stat(ctx, "/")
	if !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("missing session: %v", err)
	}
}
