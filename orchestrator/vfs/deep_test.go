package vfs

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
)

// allocated returns the bytes f allocates on the Go heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// insertChain writes a chain /top/d/d/... of depth directories with the
// file needle.txt at the bottom straight into the tables, as a mount
// without a path limit could make it however deep.
func insertChain(t *testing.T, f *fixture, top string, depth int) {
	t.Helper()
	ctx := ctxT(t)
	if _, err := f.fs.init(ctx); err != nil {
		t.Fatal(err)
	}
	err := f.v.tx(ctx, func(tx *txn) error {
		var next int64
		if err := tx.QueryRowContext(ctx, `UPDATE fs_meta SET next_ino=next_ino+?, used_bytes=used_bytes+7 WHERE session_id=? RETURNING next_ino-?`, depth+1, f.sid, depth+1).Scan(&next); err != nil {
			return err
		}
		now := time.Now().Unix()
		parent := RootIno
		for i := 0; i <= depth; i++ {
			ino, mode, name, size := next+int64(i), uint32(ModeDir|0o755), "d", 0
			if i == 0 {
				name = top
			}
			if i == depth {
				mode, name, size = ModeRegular|0o644, "needle.txt", 7
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns, created_ns) VALUES(?,?,?,0,0,?,?,?,?,0,0,0,0)`,
				f.sid, ino, mode, size, now, now, now); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO fs_dentry(session_id, name, parent_ino, ino) VALUES(?,?,?,?)`, f.sid, name, parent, ino); err != nil {
				return err
			}
			if i == depth {
				_, err := tx.ExecContext(ctx, `INSERT INTO fs_data(session_id, ino, "offset", size, data) VALUES(?,?,0,7,?)`, f.sid, ino, []byte("needle\n"))
				return err
			}
			parent = ino
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

// TestDeepTreeLinear: grep, copy, move, export and delete of a directory
// chain cost memory in proportion to the tree, not to the sum of its
// paths (which grows with the square of its depth): the Go heap they
// allocate at twice the depth is about twice, not four times, as much.
// Chains within the path limit are made through the API; deeper ones, as
// a mount without the limit made them, straight in the tables.
func TestDeepTreeLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("builds deep trees")
	}
	within := func(depth int) map[string]uint64 {
		f := newFixture(t, Config{})
		ctx := ctxT(t)
		p := strings.Repeat("/d", depth)
		if _, _, err := f.fs.WriteFile(ctx, p+"/needle.txt", []byte("needle\n"), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		f.rec.take()
		res := map[string]uint64{}
		res["grep"] = allocated(func() {
			r, err := f.fs.Grep(ctx, GrepOptions{Pattern: "needle"})
			if err != nil || len(r.Files) != 1 || len(r.Files[0].Path) != len(p)+len("/needle.txt") {
				t.Fatalf("grep: %+v, %v", r, err)
			}
		})
		res["copy"] = allocated(func() {
			if _, err := f.fs.Copy(ctx, "/d", "/e"); err != nil {
				t.Fatal(err)
			}
		})
		res["move"] = allocated(func() {
			if _, err := f.fs.Move(ctx, "/e", "/x/e"); err != nil {
				t.Fatal(err)
			}
		})
		res["export"] = allocated(func() {
			if err := f.v.Export(ctx, f.sid, filepath.Join(t.TempDir(), "export.db")); err != nil {
				t.Fatal(err)
			}
		})
		res["delete"] = allocated(func() {
			if err := f.fs.Delete(ctx, "/x", true); err != nil {
				t.Fatal(err)
			}
		})
		f.check(t)
		return res
	}
	beyond := func(depth int) map[string]uint64 {
		f := newFixture(t, Config{})
		ctx := ctxT(t)
		insertChain(t, f, "d", depth)
		res := map[string]uint64{}
		res["grep"] = allocated(func() {
			r, err := f.fs.Grep(ctx, GrepOptions{Pattern: "needle"})
			if err != nil || len(r.Files) != 1 || !strings.HasSuffix(r.Files[0].Path, "/d/needle.txt") {
				t.Fatalf("grep: %d files, %v", len(r.Files), err)
			}
		})
		res["delete"] = allocated(func() {
			if err := f.fs.Delete(ctx, "/d", true); err != nil {
				t.Fatal(err)
			}
		})
		f.check(t)
		return res
	}
	ratios := func(what string, small, big map[string]uint64) {
		t.Helper()
		for op, a := range small {
			b := big[op]
			t.Logf("%s %s: %d → %d bytes (×%.2f)", what, op, a, b, float64(b)/float64(a))
			// Twice the tree: at most 2.2 times the memory (plus 128 KiB
			// for what the runtime allocates meanwhile). Within the path
			// limit a path costs at most 4 KiB, so building one per entry
			// shows only as a ratio of 2.35 to 2.5 (measured before the
			// fix); beyond it, as a ratio towards 4.
			if b > a*11/5+128<<10 {
				t.Errorf("%s %s: %d bytes at twice the depth of %d bytes: grows faster than the tree", what, op, b, a)
			}
		}
	}
	ratios("chain within the limit", within(1000), within(2000))
	ratios("chain beyond the limit", beyond(2500), beyond(5000))
}

// TestPathLimitPerCall: as in the kernel, a path limit bounds the path a
// call is given, not how deep a file lies. The inode API (the mount's)
// makes, renames and links entries whose path from the root is longer
// than paths.MaxPathLen, and refuses only a name longer than
// paths.MaxNameLen; the path API refuses a path longer than
// paths.MaxPathLen that it is given, with an error that says so, but
// reaches deeper through a symlink, and reports a change it cannot name as
// a change of the deepest directory it can.
func TestPathLimitPerCall(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	fs := f.fs
	deep := strings.Repeat("/d", paths.MaxPathLen/2-1) // 4094 bytes
	if _, _, err := fs.WriteFile(ctx, deep+"/f", []byte("x"), WriteOptions{}); err != nil {
		t.Fatalf("a file at exactly %d bytes: %v", paths.MaxPathLen, err)
	}
	bottom, err := fs.resolveAttr(ctx, deep)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := fs.WriteFile(ctx, "/s/t", []byte("t"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	file, err := fs.resolveAttr(ctx, "/s/t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Symlink(ctx, RootIno, "l", deep[1:]); err != nil {
		t.Fatal(err)
	}
	f.rec.take()
	long := strings.Repeat("n", paths.MaxNameLen+1)
	for _, tt := range []struct {
		name string
		call func(name string) error
	}{
		{"mkdir", func(n string) error { _, err := fs.Mkdir(ctx, bottom.Ino, n, 0o755); return err }},
		{"create", func(n string) error { _, err := fs.Create(ctx, bottom.Ino, n, 0o644, true); return err }},
		{"mknod", func(n string) error { _, err := fs.Mknod(ctx, bottom.Ino, n, ModeFIFO|0o644, 0); return err }},
		{"symlink", func(n string) error { _, err := fs.Symlink(ctx, bottom.Ino, n, "t"); return err }},
		{"link", func(n string) error { _, err := fs.Link(ctx, file.Ino, bottom.Ino, n); return err }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(tt.name + "-beyond"); err != nil {
				t.Fatalf("%s at %d bytes: %v", tt.name, len(deep)+len("/"+tt.name+"-beyond"), err)
			}
			if err := tt.call(long); !IsErrno(err, syscall.ENAMETOOLONG) {
				t.Fatalf("%s of a %d-byte name: %v, want ENAMETOOLONG", tt.name, len(long), err)
			}
		})
	}
	// a directory moved below the bottom takes its files past the limit
	if err := fs.Rename(ctx, RootIno, "s", bottom.Ino, "s", 0); err != nil {
		t.Fatalf("rename /s below the bottom: %v", err)
	}
	if err := fs.Rename(ctx, bottom.Ino, "s", bottom.Ino, long, 0); !IsErrno(err, syscall.ENAMETOOLONG) {
		t.Fatalf("rename to a %d-byte name: %v, want ENAMETOOLONG", len(long), err)
	}
	s, err := fs.Lookup(ctx, bottom.Ino, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, fs, mustLookup(t, fs, s.Ino, "t").Ino); got != "t" {
		t.Fatalf("the moved file holds %q", got)
	}
	// a change there is reported as a change of the deepest directory
	// the path API can name
	if _, err := fs.Create(ctx, s.Ino, "u", 0o644, true); err != nil {
		t.Fatal(err)
	}
	evs := f.rec.take()
	if want := "modified " + deep + "/s"; len(evs) == 0 || evs[len(evs)-1] != want {
		t.Fatalf("events %.200q, the last one want %q", evs, want[:40]+"...")
	}
	// the path API: a path it is given is at most MaxPathLen bytes
	for _, p := range []string{deep + "/mkdir-beyond", deep + "/" + long} {
		if _, err := fs.Stat(ctx, p); !IsErrno(err, syscall.ENAMETOOLONG) || !strings.Contains(err.Error(), "longer than") {
			t.Fatalf("stat of a %d-byte path: %v, want ENAMETOOLONG saying so", len(p), err)
		}
	}
	// ... and reaches deeper through a symlink
	if _, _, err := fs.WriteFile(ctx, "/l/w", []byte("w"), WriteOptions{}); err != nil {
		t.Fatalf("write /l/w (%d bytes from the root): %v", len(deep)+2, err)
	}
	wantContent(t, fs, "/l/s/t", []byte("t"))
	list, err := fs.List(ctx, "/l")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name+":"+e.Type)
	}
	if got := strings.Join(names, " "); got != "create-beyond:file f:file link-beyond:file mkdir-beyond:directory mknod-beyond:fifo s:directory symlink-beyond:symlink w:file" {
		t.Fatalf("list /l = %s", got)
	}
	if _, err := fs.Copy(ctx, "/l/s", "/l/s2"); err != nil {
		t.Fatalf("copy below the symlink: %v", err)
	}
	f.check(t)
	if err := fs.Delete(ctx, "/d", true); err != nil {
		t.Fatal(err)
	}
	f.check(t)
}

func mustLookup(tb testing.TB, fs *FS, dir int64, name string) Attr {
	tb.Helper()
	a, err := fs.Lookup(context.Background(), dir, name)
	if err != nil {
		tb.Fatalf("look up %s: %v", name, err)
	}
	return a
}

func readAll(tb testing.TB, fs *FS, ino int64) string {
	tb.Helper()
	b := make([]byte, 1<<16)
	n, err := fs.ReadAt(context.Background(), ino, b, 0)
	if err != nil {
		tb.Fatalf("read inode %d: %v", ino, err)
	}
	return string(b[:n])
}
