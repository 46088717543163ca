package vfs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hostTree makes a directory tree on the host like a checkout: nested
// directories, an executable, an empty file, a file of several chunks, a
// relative and a dangling symlink, a hard link and a FIFO, with set times.
func hostTree(t *testing.T) (string, time.Time) {
	t.Helper()
	dir := t.TempDir()
	mt := time.Date(2024, 3, 4, 5, 6, 7, 123456000, time.UTC) // utimes takes microseconds
	write := func(rel string, data []byte, mode os.FileMode) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", []byte("# hello\n"), 0o644)
	write("bin/run.sh", []byte("#!/bin/sh\necho run\n"), 0o755)
	write("src/a/b/c.go", []byte("package b\n"), 0o600)
	write("src/empty", nil, 0o644)
	write("data/big.bin", bytes.Repeat([]byte("0123456789abcdef"), 10000), 0o644)
	write(".git/HEAD", []byte("ref: refs/heads/main\n"), 0o644)
	if err := os.Mkdir(filepath.Join(dir, ".git", "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"../README.md", "src/readme"}, {"nowhere", "dangling"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(dir, "README.md"), filepath.Join(dir, "src", "README.hard")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = unix.Lutimes(p, []unix.Timeval{unix.NsecToTimeval(mt.UnixNano()), unix.NsecToTimeval(mt.UnixNano())})
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir, mt
}

// TestImportTree: a host tree imported in large transactions keeps its
// types, modes, contents, symlinks, hard links and modification times;
// its change times are the import's; the attributes it returns are what
// lookups report; the tree is consistent and gives one event per entry
// made in the directory imported into.
func TestImportTree(t *testing.T) {
	for _, perTx := range []int{importBatchEntries, 3} {
		f := newFixture(t, Config{ChunkSize: 4096})
		ctx := ctxT(t)
		fs := f.fs
		host, mt := hostTree(t)
		before := time.Now()
		got, err := fs.importTree(ctx, "/", host, perTx, importBatchBytes)
		if err != nil {
			t.Fatalf("import (%d entries a transaction): %v", perTx, err)
		}
		for rel, want := range map[string]struct {
			mode  uint32
			nlink uint32
			body  string
		}{
			"README.md":       {ModeRegular | 0o644, 2, "# hello\n"},
			"src/README.hard": {ModeRegular | 0o644, 2, "# hello\n"},
			"bin/run.sh":      {ModeRegular | 0o755, 1, "#!/bin/sh\necho run\n"},
			"src/a/b/c.go":    {ModeRegular | 0o600, 1, "package b\n"},
			"src/empty":       {ModeRegular | 0o644, 1, ""},
			"src":             {ModeDir | 0o755, 3, ""},
			".git":            {ModeDir | 0o755, 3, ""},
			"src/readme":      {ModeSymlink | 0o777, 1, ""},
			"fifo":            {ModeFIFO | 0o600, 1, ""},
		} {
			a, ok := got[rel]
			if !ok {
				t.Fatalf("%s not imported", rel)
			}
			if a.Mode != want.mode || a.Nlink != want.nlink || !a.Mtime.Equal(mt) || a.Ctime.Before(before.Truncate(time.Second)) {
				t.Fatalf("%s: %+v; want mode %o nlink %d mtime %v", rel, a, want.mode, want.nlink, mt)
			}
			if l, err := fs.resolveRead(ctx, "/"+rel, false); err != nil || l.attr != a {
				t.Fatalf("%s: imported as %+v, looked up as %+v, %v", rel, a, l.attr, err)
			}
			if a.IsRegular() {
				wantContent(t, fs, "/"+rel, []byte(want.body))
			}
		}
		if got["README.md"].Ino != got["src/README.hard"].Ino {
			t.Fatal("the hard link is two files")
		}
		_, big, err := fs.ReadAll(ctx, "/data/big.bin")
		if err != nil || !bytes.Equal(big, bytes.Repeat([]byte("0123456789abcdef"), 10000)) {
			t.Fatalf("data/big.bin: %d bytes, %v", len(big), err)
		}
		if target, err := fs.Readlink(ctx, got["dangling"].Ino); err != nil || target != "nowhere" {
			t.Fatalf("dangling: %q, %v", target, err)
		}
		if root, _ := fs.GetAttr(ctx, RootIno); root.Nlink != 2+4 {
			t.Fatalf("the root's link count %d, want 6 (.git bin data src)", root.Nlink)
		}
		evs := f.rec.take()
		if len(evs) != 7 || !strings.Contains(strings.Join(evs, " "), "created /.git") {
			t.Fatalf("events %q, want one per entry of the root", evs)
		}
		f.check(t)
	}
}

// TestImportTreeLimits: an import goes only into an empty directory, and
// stops at the largest file and the session quota with their errors.
func TestImportTreeLimits(t *testing.T) {
	host, _ := hostTree(t)
	ctx := ctxT(t)
	f := newFixture(t, Config{MaxFileSize: 100 << 10})
	mustWrite(t, f.fs, "/x", []byte("x"))
	if _, err := f.fs.ImportTree(ctx, "/", host); !IsErrno(err, syscall.ENOTEMPTY) {
		t.Fatalf("import into a directory with files: %v", err)
	}
	if _, err := f.fs.ImportTree(ctx, "/x", host); !IsErrno(err, syscall.ENOTDIR) {
		t.Fatalf("import into a file: %v", err)
	}
	if _, _, err := f.fs.MkdirAll(ctx, "/d", false); err != nil {
		t.Fatal(err)
	}
	// three entries a transaction: the ones before the refused file were
	// committed, and are removed again
	if _, err := f.fs.importTree(ctx, "/d", host, 3, importBatchBytes); !IsErrno(err, syscall.EFBIG) || !strings.Contains(err.Error(), "big.bin") {
		t.Fatalf("import of a file past the largest: %v", err)
	}
	if l, err := f.fs.List(ctx, "/d"); err != nil || len(l) != 0 {
		t.Fatalf("/d after a failed import: %+v, %v", l, err)
	}
	f.check(t)
	g := newFixture(t, Config{SessionQuota: 100 << 10})
	if _, err := g.fs.ImportTree(ctx, "/", host); !IsErrno(err, syscall.ENOSPC) {
		t.Fatalf("import past the quota: %v", err)
	}
	g.check(t)
}
