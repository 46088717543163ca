package vfs

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCreateFile(t *testing.T) {
	tests := []struct {
		name    string
		parent  func(t *testing.T, fs *FS) int64
		file    string
		data    string
		off     int64
		wantErr syscall.Errno
		want    string // content after
	}{
		{name: "with data", file: "a.txt", data: "hello, world across chunks of 16", want: "hello, world across chunks of 16"},
		{name: "empty", file: "empty", want: ""},
		{name: "data at an offset", file: "holes", data: "xy", off: 20, want: strings.Repeat("\x00", 20) + "xy"},
		{name: "existing name", file: "dup", wantErr: syscall.EEXIST},
		{name: "parent is a file", file: "x", wantErr: syscall.ENOTDIR, parent: func(t *testing.T, fs *FS) int64 {
			a, err := fs.Create(ctxT(t), RootIno, "plain", 0o644, true)
			if err != nil {
				t.Fatal(err)
			}
			return a.Ino
		}},
		{name: "parent missing", file: "x", wantErr: syscall.ENOENT, parent: func(t *testing.T, fs *FS) int64 { return 1 << 40 }},
		{name: "over the quota", file: "big", data: strings.Repeat("q", 2000), wantErr: syscall.ENOSPC},
		{name: "invalid name", file: "a/b", wantErr: syscall.EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{ChunkSize: 16, SessionQuota: 1000})
			ctx := ctxT(t)
			fs := f.fs
			if _, err := fs.Create(ctx, RootIno, "dup", 0o644, true); err != nil {
				t.Fatal(err)
			}
			parent := RootIno
			if tt.parent != nil {
				parent = tt.parent(t, fs)
			}
			f.rec.take()
			ino, err := fs.ReserveIno(ctx)
			if err != nil {
				t.Fatal(err)
			}
			a, _, err := fs.CreateFile(ctx, parent, tt.file, 0o640, 1000, 1001, ino, []byte(tt.data), tt.off, time.Time{})
			f.check(t)
			if tt.wantErr != 0 {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if evs := f.rec.take(); len(evs) != 0 {
					t.Fatalf("events after a failed create: %v", evs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := fs.GetAttr(ctx, ino)
			if err != nil {
				t.Fatal(err)
			}
			if a.Ino != ino || got.Mode != ModeRegular|0o640 || got.UID != 1000 || got.GID != 1001 || got.Size != int64(len(tt.want)) || got.Nlink != 1 ||
				!got.Mtime.Equal(a.Mtime) || a.Size != got.Size {
				t.Fatalf("attr %+v, returned %+v", got, a)
			}
			root, _ := fs.GetAttr(ctx, RootIno)
			if !root.Mtime.Equal(a.Created) {
				t.Fatalf("parent mtime %v, created %v", root.Mtime, a.Created)
			}
			buf := make([]byte, 100)
			n, err := fs.ReadAt(ctx, ino, buf, 0)
			if err != nil || string(buf[:n]) != tt.want {
				t.Fatalf("content %q, %v", buf[:n], err)
			}
			if evs := f.rec.take(); len(evs) != 1 || evs[0] != "created /"+tt.file {
				t.Fatalf("events %v", evs)
			}
		})
	}
}

func TestReserveIno(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	seen := map[int64]bool{RootIno: true}
	for i := 0; i < 3*inoBlock; i++ {
		var ino int64
		if i%2 == 0 {
			var err error
			if ino, err = f.fs.ReserveIno(ctx); err != nil {
				t.Fatal(err)
			}
			if _, _, err := f.fs.CreateFile(ctx, RootIno, fmt.Sprint("r", i), 0o644, 0, 0, ino, nil, 0, time.Time{}); err != nil {
				t.Fatal(err)
			}
		} else {
			a, err := f.fs.Create(ctx, RootIno, fmt.Sprint("c", i), 0o644, true)
			if err != nil {
				t.Fatal(err)
			}
			ino = a.Ino
		}
		if seen[ino] {
			t.Fatalf("inode %d given twice", ino)
		}
		seen[ino] = true
	}
	f.check(t) // includes next_ino > every inode
	// a failed create does not hand out its number again
	if _, err := f.fs.Create(ctx, RootIno, "c1", 0o644, true); !errors.Is(err, syscall.EEXIST) {
		t.Fatal(err)
	}
	a, err := f.fs.Create(ctx, RootIno, "fresh", 0o644, true)
	if err != nil || seen[a.Ino] {
		t.Fatalf("after a failed create: %+v %v", a, err)
	}
}

func TestEventPathsAfterRename(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	fs := f.fs
	a, err := fs.Mkdir(ctx, RootIno, "a", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.Mkdir(ctx, a.Ino, "b", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	x, err := fs.Create(ctx, b.Ino, "x", 0o644, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.WriteAt(ctx, x.Ino, []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	// a failed rename (target exists, no-replace) must not leave its view cached
	if _, err := fs.Mkdir(ctx, RootIno, "c", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fs.Rename(ctx, RootIno, "a", RootIno, "c", RenameNoReplace); !errors.Is(err, syscall.EEXIST) {
		t.Fatal(err)
	}
	if err := fs.Rename(ctx, RootIno, "a", RootIno, "z", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.WriteAt(ctx, x.Ino, []byte("2"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Create(ctx, b.Ino, "y", 0o644, true); err != nil {
		t.Fatal(err)
	}
	want := []string{"created /a", "created /a/b", "created /a/b/x", "modified /a/b/x", "created /c",
		"deleted /a", "created /z", "modified /z/b/x", "created /z/b/y"}
	if got := f.rec.take(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
}

// TestCreateFileDirTime: the directory's mtime and ctime move to the
// creation time CreateFile is given (the mount's CREATE, which the kernel
// was told), or to now when the directory changed since (never backwards,
// and others see that it changed); CreateFile returns the new mtime.
func TestCreateFileDirTime(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	d, err := f.fs.Mkdir(ctx, RootIno, "d", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	create := func(name string, at time.Time) (Attr, time.Time) {
		t.Helper()
		ino, err := f.fs.ReserveIno(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := f.fs.CreateFile(ctx, d.Ino, name, 0o644, 0, 0, ino, []byte("x"), 0, at)
		if err != nil {
			t.Fatal(err)
		}
		a, err := f.fs.GetAttr(ctx, d.Ino)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(a.Mtime) {
			t.Fatalf("CreateFile returned the directory mtime %v, the directory has %v", got, a.Mtime)
		}
		return a, got
	}
	t0 := time.Now().Add(time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if a, _ := create("a", t0); !a.Mtime.Equal(t0) || !a.Ctime.Equal(t0) {
		t.Fatalf("after a create at %v the directory has mtime %v, ctime %v", t0, a.Mtime, a.Ctime)
	}
	before := time.Now()
	if a, _ := create("b", t0.Add(-time.Hour)); !a.Mtime.After(t0) || a.Mtime.Before(before) {
		t.Fatalf("a create dated before the directory's last change left its mtime at %v, want now", a.Mtime)
	}
	before = time.Now()
	if a, _ := create("c", time.Time{}); a.Mtime.Before(before) {
		t.Fatalf("a create with no time left the directory's mtime at %v, before the call", a.Mtime)
	}
	f.check(t)
}
