package vfs

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/vfs/treediff"
	"golang.org/x/sys/unix"
)

// TestSpecialFiles: FIFOs, sockets and devices are inodes like any other:
// made with their type and device number, looked up, listed, linked,
// renamed and removed; the path API shows them as what they are, copies
// them, and refuses to read or write one as a file with an error that
// says why.
func TestSpecialFiles(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	fs := f.fs
	dev := uint32(unix.Mkdev(1, 3))
	made := map[string]Attr{}
	for _, tt := range []struct {
		name string
		mode uint32
		rdev uint32
		typ  string
	}{
		{"fifo", ModeFIFO | 0o640, 0, "fifo"},
		{"sock", ModeSocket | 0o755, 0, "socket"},
		{"null", ModeCharDev | 0o666, dev, "char-device"},
		{"disk", ModeBlkDev | 0o660, uint32(unix.Mkdev(8, 1)), "block-device"},
		{"plain", 0o600, 0, "file"}, // mknod(2) of no type: a regular file
	} {
		a, err := fs.Mknod(ctx, RootIno, tt.name, tt.mode, tt.rdev)
		if err != nil {
			t.Fatalf("mknod %s: %v", tt.name, err)
		}
		got, err := fs.Lookup(ctx, RootIno, tt.name)
		if err != nil || got.Mode != a.Mode || got.Rdev != tt.rdev || got.Nlink != 1 || got.Size != 0 {
			t.Fatalf("lookup %s = %+v, %v; made %+v", tt.name, got, err, a)
		}
		if want := tt.mode; tt.typ == "file" && got.Mode != ModeRegular|0o600 || tt.typ != "file" && got.Mode != want {
			t.Fatalf("%s has mode %o", tt.name, got.Mode)
		}
		info, err := fs.Stat(ctx, "/"+tt.name)
		if err != nil || info.Type != tt.typ {
			t.Fatalf("stat /%s = %+v, %v; want type %s", tt.name, info, err, tt.typ)
		}
		made[tt.name] = got
	}
	if _, err := fs.Mknod(ctx, RootIno, "fifo", ModeFIFO|0o644, 0); !IsErrno(err, syscall.EEXIST) {
		t.Fatalf("mknod over an existing name: %v", err)
	}
	if _, err := fs.Mknod(ctx, RootIno, "dir", ModeDir|0o755, 0); !IsErrno(err, syscall.EINVAL) {
		t.Fatalf("mknod of a directory: %v", err)
	}
	if info, err := fs.Stat(ctx, "/null"); err != nil || info.Device != "1:3" {
		t.Fatalf("stat /null: %+v, %v; want device 1:3", info, err)
	}
	plus, err := fs.ReadDirPlus(ctx, RootIno)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range plus {
		if m := made[e.Name]; e.Attr.Mode != m.Mode || e.Attr.Rdev != m.Rdev {
			t.Fatalf("listed %s as %o/%d, made %o/%d", e.Name, e.Attr.Mode, e.Attr.Rdev, m.Mode, m.Rdev)
		}
	}
	// reading or writing one through the path API says what it is
	for _, p := range []string{"/fifo", "/sock", "/null"} {
		_, _, err := fs.ReadAll(ctx, p)
		if !IsErrno(err, syscall.EINVAL) || orchestrator.ErrorCode(err) != orchestrator.EConflict || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("read %s: %v", p, err)
		}
		if _, _, err := fs.WriteFile(ctx, p, []byte("x"), WriteOptions{}); !IsErrno(err, syscall.EINVAL) {
			t.Fatalf("write %s: %v", p, err)
		}
		if _, err := fs.WriteAt(ctx, made[strings.TrimPrefix(p, "/")].Ino, []byte("x"), 0); !IsErrno(err, syscall.EINVAL) {
			t.Fatalf("inode write to %s: %v", p, err)
		}
	}
	// linked, renamed, copied and removed like any inode
	d, err := fs.Mkdir(ctx, RootIno, "d", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := fs.Link(ctx, made["fifo"].Ino, d.Ino, "fifo2"); err != nil || a.Nlink != 2 {
		t.Fatalf("link the fifo: %+v, %v", a, err)
	}
	if err := fs.Rename(ctx, RootIno, "sock", d.Ino, "sock", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Copy(ctx, "/null", "/d/null"); err != nil {
		t.Fatal(err)
	}
	if c, err := fs.Lookup(ctx, d.Ino, "null"); err != nil || c.Mode != made["null"].Mode || c.Rdev != dev || c.Ino == made["null"].Ino {
		t.Fatalf("the copy of /null: %+v, %v", c, err)
	}
	list, err := fs.List(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range list {
		got = append(got, e.Name+":"+e.Type)
	}
	if s := strings.Join(got, " "); s != "fifo2:fifo null:char-device sock:socket" {
		t.Fatalf("list /d = %s", s)
	}
	if err := fs.Unlink(ctx, RootIno, "fifo"); err != nil {
		t.Fatal(err)
	}
	if a, err := fs.GetAttr(ctx, made["fifo"].Ino); err != nil || a.Nlink != 1 {
		t.Fatalf("the fifo after one of its names went: %+v, %v", a, err)
	}
	f.check(t)
	if err := fs.Delete(ctx, "/d", true); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

// TestSpecialFilesExportForkMerge: special files keep their type and
// device number in an AgentFS export and its import, in a lazy fork, in
// the fork's diff (by kind) and when it is merged.
func TestSpecialFilesExportForkMerge(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	dev := uint32(unix.Mkdev(1, 5))
	d, err := f.fs.Mkdir(ctx, RootIno, "run", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		name       string
		mode, rdev uint32
	}{{"fifo", ModeFIFO | 0o600, 0}, {"sock", ModeSocket | 0o755, 0}, {"zero", ModeCharDev | 0o666, dev}} {
		if _, err := f.fs.Mknod(ctx, d.Ino, m.name, m.mode, m.rdev); err != nil {
			t.Fatal(err)
		}
	}
	wantSpecial := func(fs *FS, p, typ, device string) {
		t.Helper()
		info, err := fs.Stat(ctx, p)
		if err != nil || info.Type != typ || info.Device != device {
			t.Fatalf("%s in %s: %+v, %v; want %s %q", p, fs.sid, info, err, typ, device)
		}
	}
	// export and import
	out := filepath.Join(t.TempDir(), "export.db")
	if err := f.v.Export(ctx, f.sid, out); err != nil {
		t.Fatal(err)
	}
	g := newFixture(t, Config{})
	if err := g.v.Import(ctx, g.sid, out); err != nil {
		t.Fatal(err)
	}
	wantSpecial(g.fs, "/run/fifo", "fifo", "")
	wantSpecial(g.fs, "/run/sock", "socket", "")
	wantSpecial(g.fs, "/run/zero", "char-device", "1:5")
	// a lazy fork reads them; its new ones and changes are its diff and merge
	fk := mustFork(t, f.v, f.sid)
	cfs := f.v.Session(fk.ID)
	run := mustLookup(t, cfs, RootIno, "run")
	if z := mustLookup(t, cfs, run.Ino, "zero"); z.Rdev != dev || z.Mode != ModeCharDev|0o666 {
		t.Fatalf("the fork's /run/zero: %+v", z)
	}
	if err := cfs.Unlink(ctx, run.Ino, "zero"); err != nil {
		t.Fatal(err)
	}
	if _, err := cfs.Mknod(ctx, run.Ino, "zero", ModeCharDev|0o666, uint32(unix.Mkdev(1, 7))); err != nil {
		t.Fatal(err)
	}
	if _, err := cfs.Mknod(ctx, RootIno, "pipe", ModeFIFO|0o644, 0); err != nil {
		t.Fatal(err)
	}
	diff, err := f.v.Diff(ctx, fk.ID, DiffOptions{Text: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range diff.Changes {
		got = append(got, c.Op+" "+c.Path+" "+c.Kind)
	}
	if s := strings.Join(got, ", "); s != "added /pipe fifo, changed /run/zero char-device" {
		t.Fatalf("diff = %s", s)
	}
	res, err := f.v.Merge(ctx, fk.ID, MergeOptions{})
	if err != nil || len(res.Conflicts) > 0 {
		t.Fatalf("merge: %+v, %v", res, err)
	}
	wantSpecial(f.fs, "/pipe", "fifo", "")
	wantSpecial(f.fs, "/run/zero", "char-device", "1:7")
	if c := (treediff.Entry{Mode: ModeSocket}).Kind(); c != "socket" {
		t.Fatalf("kind of a socket: %s", c)
	}
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)
	g.check(t)
}

// TestDirLinkCount: a directory's link count is 2 plus its subdirectories
// (the root's too), kept through mkdir, rmdir, renames between
// directories, an exchange of a directory with a file, the path API's
// copy, move and delete, and in a lazy fork and its merge.
func TestDirLinkCount(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	fs := f.fs
	links := func(fs *FS, p string) uint32 {
		t.Helper()
		info, err := fs.resolveAttr(ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return info.Nlink
	}
	want := func(fs *FS, what string, w map[string]uint32) {
		t.Helper()
		for p, n := range w {
			if got := links(fs, p); got != n {
				t.Fatalf("%s: nlink of %s in %s = %d, want %d", what, p, fs.sid, got, n)
			}
		}
	}
	want(fs, "empty", map[string]uint32{"/": 2})
	a, err := fs.Mkdir(ctx, RootIno, "a", 0o755)
	if err != nil || a.Nlink != 2 {
		t.Fatalf("mkdir /a: %+v, %v", a, err)
	}
	b, _ := fs.Mkdir(ctx, RootIno, "b", 0o755)
	for _, n := range []string{"x", "y"} {
		if _, err := fs.Mkdir(ctx, a.Ino, n, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fs.Create(ctx, a.Ino, "file", 0o644, true); err != nil {
		t.Fatal(err)
	}
	want(fs, "mkdir", map[string]uint32{"/": 4, "/a": 4, "/b": 2, "/a/x": 2})
	if err := fs.Rename(ctx, a.Ino, "x", b.Ino, "x", 0); err != nil {
		t.Fatal(err)
	}
	want(fs, "rename between directories", map[string]uint32{"/": 4, "/a": 3, "/b": 3})
	if err := fs.Rename(ctx, a.Ino, "y", b.Ino, "x", 0); err != nil { // replaces the empty /b/x
		t.Fatal(err)
	}
	want(fs, "rename over a directory", map[string]uint32{"/a": 2, "/b": 3})
	if err := fs.Rename(ctx, a.Ino, "file", b.Ino, "x", RenameExchange); err != nil {
		t.Fatal(err)
	}
	want(fs, "exchange of a directory and a file", map[string]uint32{"/a": 3, "/b": 2, "/a/file": 2})
	if err := fs.Rmdir(ctx, a.Ino, "file"); err != nil {
		t.Fatal(err)
	}
	want(fs, "rmdir", map[string]uint32{"/": 4, "/a": 2})
	if _, _, err := fs.MkdirAll(ctx, "/c/d/e", false); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Copy(ctx, "/c", "/a/c"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Move(ctx, "/c/d", "/b/d"); err != nil {
		t.Fatal(err)
	}
	want(fs, "path API", map[string]uint32{"/": 5, "/a": 3, "/a/c": 3, "/b": 3, "/c": 2, "/b/d": 3})
	if err := fs.Delete(ctx, "/a/c", true); err != nil {
		t.Fatal(err)
	}
	want(fs, "delete", map[string]uint32{"/a": 2})
	f.check(t)
	// a lazy fork: counts copied with the directories, kept by its changes
	fk := mustFork(t, f.v, f.sid)
	cfs := f.v.Session(fk.ID)
	ca := mustLookup(t, cfs, RootIno, "a")
	cb := mustLookup(t, cfs, RootIno, "b")
	if ca.Nlink != 2 || cb.Nlink != 3 {
		t.Fatalf("the fork's /a %d, /b %d; want 2, 3", ca.Nlink, cb.Nlink)
	}
	if err := cfs.Rename(ctx, RootIno, "b", ca.Ino, "b", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := cfs.Mkdir(ctx, mustLookup(t, cfs, cb.Ino, "d").Ino, "f", 0o755); err != nil {
		t.Fatal(err)
	}
	want(cfs, "fork", map[string]uint32{"/": 4, "/a": 3, "/a/b": 3, "/a/b/d": 4})
	want(fs, "the fork's parent", map[string]uint32{"/": 5, "/a": 2, "/b": 3, "/b/d": 3})
	if res, err := f.v.Merge(ctx, fk.ID, MergeOptions{}); err != nil || len(res.Conflicts) > 0 {
		t.Fatalf("merge: %+v, %v", res, err)
	}
	want(fs, "merged", map[string]uint32{"/": 4, "/a": 3, "/a/b": 3, "/a/b/d": 4})
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)
}
