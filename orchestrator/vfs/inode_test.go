package vfs

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
)

func TestInodeBasics(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 16})
	ctx := ctxT(t)
	fs := f.fs

	root, err := fs.GetAttr(ctx, RootIno)
	if err != nil || !root.IsDir() {
		t.Fatalf("root: %+v %v", root, err)
	}
	dir, err := fs.Mkdir(ctx, RootIno, "src", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Mkdir(ctx, RootIno, "src", 0o755); !errors.Is(err, syscall.EEXIST) || orchestrator.ErrorCode(err) != orchestrator.EConflict {
		t.Fatalf("mkdir twice: %v", err)
	}
	a, err := fs.Create(ctx, dir.Ino, "a.txt", 0o644, true)
	if err != nil {
		t.Fatal(err)
	}
	if a.Mode != ModeRegular|0o644 || a.Nlink != 1 {
		t.Fatalf("created attr %+v", a)
	}
	data := []byte("hello, world. this spans several chunks of sixteen bytes")
	if n, err := fs.WriteAt(ctx, a.Ino, data, 0); err != nil || n != len(data) {
		t.Fatal(n, err)
	}
	f.check(t)
	// overwrite in the middle: only touched chunks change
	if _, err := fs.WriteAt(ctx, a.Ino, []byte("WORLD"), 7); err != nil {
		t.Fatal(err)
	}
	want := []byte("hello, WORLD. this spans several chunks of sixteen bytes")
	got := make([]byte, 100)
	n, err := fs.ReadAt(ctx, a.Ino, got, 0)
	if err != nil || !bytes.Equal(got[:n], want) {
		t.Fatalf("read %q %v", got[:n], err)
	}
	// partial read across chunk boundary
	n, err = fs.ReadAt(ctx, a.Ino, got[:10], 12)
	if err != nil || string(got[:n]) != string(want[12:22]) {
		t.Fatalf("partial read %q", got[:n])
	}
	// sparse extend
	if _, err := fs.WriteAt(ctx, a.Ino, []byte("END"), 100); err != nil {
		t.Fatal(err)
	}
	at, _ := fs.GetAttr(ctx, a.Ino)
	if at.Size != 103 {
		t.Fatalf("size %d", at.Size)
	}
	n, _ = fs.ReadAt(ctx, a.Ino, got[:50], 60)
	if n != 43 || !bytes.Equal(got[:40], make([]byte, 40)) || string(got[40:43]) != "END" {
		t.Fatalf("sparse read %d %q", n, got[:n])
	}
	f.check(t)
	// truncate down and up
	sz := int64(20)
	if at, err = fs.SetAttr(ctx, a.Ino, AttrChange{Size: &sz}); err != nil || at.Size != 20 {
		t.Fatal(at, err)
	}
	sz = 40
	if at, err = fs.SetAttr(ctx, a.Ino, AttrChange{Size: &sz}); err != nil || at.Size != 40 {
		t.Fatal(at, err)
	}
	n, _ = fs.ReadAt(ctx, a.Ino, got, 0)
	if n != 40 || string(got[:20]) != string(want[:20]) || !bytes.Equal(got[20:40], make([]byte, 20)) {
		t.Fatalf("after truncate %q", got[:n])
	}
	f.check(t)
	// hard link, symlink, readdir
	if _, err := fs.Link(ctx, a.Ino, RootIno, "hard.txt"); err != nil {
		t.Fatal(err)
	}
	if at, _ = fs.GetAttr(ctx, a.Ino); at.Nlink != 2 {
		t.Fatalf("nlink %d", at.Nlink)
	}
	if _, err := fs.Link(ctx, dir.Ino, RootIno, "dirlink"); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("link dir: %v", err)
	}
	ln, err := fs.Symlink(ctx, RootIno, "ln", "src/a.txt")
	if err != nil || !ln.IsSymlink() || ln.Size != 9 {
		t.Fatal(ln, err)
	}
	if tg, err := fs.Readlink(ctx, ln.Ino); err != nil || tg != "src/a.txt" {
		t.Fatal(tg, err)
	}
	ents, err := fs.ReadDir(ctx, RootIno)
	if err != nil || len(ents) != 3 || ents[0].Name != "hard.txt" || ents[1].Name != "ln" || ents[2].Name != "src" {
		t.Fatalf("readdir %+v %v", ents, err)
	}
	if p, err := fs.PathOf(ctx, a.Ino); err != nil || p != "/src/a.txt" {
		t.Fatal(p, err)
	}
	f.check(t)
	// rmdir non-empty, unlink dir, unlink file keeps the hard link
	if err := fs.Rmdir(ctx, RootIno, "src"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir: %v", err)
	}
	if err := fs.Unlink(ctx, RootIno, "src"); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("unlink dir: %v", err)
	}
	if err := fs.Unlink(ctx, dir.Ino, "a.txt"); err != nil {
		t.Fatal(err)
	}
	if at, err = fs.GetAttr(ctx, a.Ino); err != nil || at.Nlink != 1 {
		t.Fatal(at, err)
	}
	if err := fs.Rmdir(ctx, RootIno, "src"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Lookup(ctx, RootIno, "src"); !errors.Is(err, syscall.ENOENT) || orchestrator.ErrorCode(err) != orchestrator.ENotFound {
		t.Fatalf("lookup removed: %v", err)
	}
	f.check(t)
	st, err := fs.Statfs(ctx)
	if err != nil || st.Bsize != 4096 || st.Blocks == 0 {
		t.Fatal(st, err)
	}
}

func TestRename(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(*testing.T, *fixture)
		from    string
		to      string
		flags   uint32
		errno   syscall.Errno
		wantDir []string
	}{
		{name: "simple", from: "a", to: "z", wantDir: []string{"b", "d", "e", "z"}},
		{name: "replace file", from: "a", to: "b", wantDir: []string{"b", "d", "e"}},
		{name: "noreplace", from: "a", to: "b", flags: RenameNoReplace, errno: syscall.EEXIST},
		{name: "exchange", from: "a", to: "d", flags: RenameExchange, wantDir: []string{"a", "b", "d", "e"}},
		{name: "exchange missing", from: "a", to: "zz", flags: RenameExchange, errno: syscall.ENOENT},
		{name: "file over dir", from: "a", to: "d", errno: syscall.EISDIR},
		{name: "dir over file", from: "d", to: "a", errno: syscall.ENOTDIR},
		{name: "dir over non-empty dir", from: "e", to: "d", errno: syscall.ENOTEMPTY},
		{name: "dir over empty dir", from: "d", to: "e", wantDir: []string{"a", "b", "e"}},
		{name: "missing", from: "nope", to: "x", errno: syscall.ENOENT},
		{name: "same", from: "a", to: "a", wantDir: []string{"a", "b", "d", "e"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{ChunkSize: 8})
			ctx := ctxT(t)
			fs := f.fs
			a, _ := fs.Create(ctx, RootIno, "a", 0o644, true)
			fs.WriteAt(ctx, a.Ino, []byte("aaaa"), 0)
			b, _ := fs.Create(ctx, RootIno, "b", 0o644, true)
			fs.WriteAt(ctx, b.Ino, []byte("bbbbbbbbbbbb"), 0)
			d, _ := fs.Mkdir(ctx, RootIno, "d", 0o755)
			fs.Create(ctx, d.Ino, "inner", 0o644, true)
			fs.Mkdir(ctx, RootIno, "e", 0o755)
			err := fs.Rename(ctx, RootIno, tc.from, RootIno, tc.to, tc.flags)
			if tc.errno != 0 {
				if !errors.Is(err, tc.errno) {
					t.Fatalf("got %v, want %v", err, tc.errno)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			f.check(t)
			if tc.wantDir == nil {
				return
			}
			ents, _ := fs.ReadDir(ctx, RootIno)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name)
			}
			if len(names) != len(tc.wantDir) {
				t.Fatalf("dir %v, want %v", names, tc.wantDir)
			}
			for i := range names {
				if names[i] != tc.wantDir[i] {
					t.Fatalf("dir %v, want %v", names, tc.wantDir)
				}
			}
		})
	}
}

func TestRenameIntoItself(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	d, _ := f.fs.Mkdir(ctx, RootIno, "d", 0o755)
	sub, _ := f.fs.Mkdir(ctx, d.Ino, "sub", 0o755)
	if err := f.fs.Rename(ctx, RootIno, "d", sub.Ino, "x", 0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("got %v", err)
	}
	f.check(t)
}

func TestOrphan(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	fs := f.fs
	a, _ := fs.Create(ctx, RootIno, "a", 0o644, true)
	fs.WriteAt(ctx, a.Ino, []byte("data"), 0)
	fs.Open(a.Ino)
	if err := fs.Unlink(ctx, RootIno, "a"); err != nil {
		t.Fatal(err)
	}
	f.check(t)
	buf := make([]byte, 10)
	if n, err := fs.ReadAt(ctx, a.Ino, buf, 0); err != nil || string(buf[:n]) != "data" {
		t.Fatalf("read orphan %q %v", buf[:n], err)
	}
	if _, err := fs.WriteAt(ctx, a.Ino, []byte("more"), 4); err != nil {
		t.Fatal(err)
	}
	if err := fs.Release(ctx, a.Ino); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.GetAttr(ctx, a.Ino); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("orphan kept after release: %v", err)
	}
	f.check(t)

	// a leftover orphan (crash) is purged at start
	b, _ := fs.Create(ctx, RootIno, "b", 0o644, true)
	fs.Open(b.Ino)
	fs.Unlink(ctx, RootIno, "b")
	v2 := New(f.v.db, Config{ReadDB: f.v.r.db})
	n, err := v2.PurgeOrphans(ctx)
	if err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if _, err := fs.GetAttr(ctx, b.Ino); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("orphan not purged: %v", err)
	}
	f.check(t)
}

func TestLimits(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 1024, MaxFileSize: 10000, SessionQuota: 15000})
	ctx := ctxT(t)
	fs := f.fs
	a, _ := fs.Create(ctx, RootIno, "a", 0o644, true)
	if _, err := fs.WriteAt(ctx, a.Ino, make([]byte, 10001), 0); !errors.Is(err, syscall.EFBIG) || orchestrator.ErrorCode(err) != orchestrator.ETooLarge {
		t.Fatalf("file limit: %v", err)
	}
	if _, err := fs.WriteAt(ctx, a.Ino, make([]byte, 9000), 0); err != nil {
		t.Fatal(err)
	}
	b, _ := fs.Create(ctx, RootIno, "b", 0o644, true)
	_, err := fs.WriteAt(ctx, b.Ino, make([]byte, 7000), 0)
	if !errors.Is(err, syscall.ENOSPC) || orchestrator.ErrorCode(err) != orchestrator.EInsufficientStorage {
		t.Fatalf("quota: %v", err)
	}
	if at, _ := fs.GetAttr(ctx, b.Ino); at.Size != 0 {
		t.Fatalf("half-written: size %d", at.Size)
	}
	f.check(t)
	// deleting frees quota
	if err := fs.Unlink(ctx, RootIno, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.WriteAt(ctx, b.Ino, make([]byte, 7000), 0); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

func TestInodeEvents(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	fs := f.fs
	d, _ := fs.Mkdir(ctx, RootIno, "d", 0o755)
	a, _ := fs.Create(ctx, d.Ino, "a", 0o644, true)
	fs.WriteAt(ctx, a.Ino, []byte("x"), 0)
	fs.Rename(ctx, d.Ino, "a", RootIno, "b", 0)
	fs.Unlink(ctx, RootIno, "b")
	got := f.rec.take()
	want := []string{"created /d", "created /d/a", "modified /d/a", "deleted /d/a", "created /b", "deleted /b"}
	if len(got) != len(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("events %q, want %q", got, want)
		}
	}
}
