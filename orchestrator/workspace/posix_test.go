package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

func TestPOSIX(t *testing.T) {
	const quota = 64 << 20
	e := newEnv(t, vfs.Config{SessionQuota: quota, MaxFileSize: 1 << 30})
	m := e.mount(t, Options{})
	root := m.Dir()

	tests := []struct {
		name string
		run  func(t *testing.T, dir string)
	}{
		{"create read write", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "f.txt")
			mustWrite(t, p, "hello world")
			wantContent(t, p, "hello world")
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("HELLO"), 0); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 11)
			if _, err := f.ReadAt(buf, 0); err != nil {
				t.Fatal(err)
			}
			if string(buf) != "HELLO world" {
				t.Fatalf("read through the writing fd = %q", buf)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			wantContent(t, p, "HELLO world")
		}},
		{"append", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "log")
			mustWrite(t, p, "a\n")
			for _, line := range []string{"b\n", "c\n"} {
				f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteString(line); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			wantContent(t, p, "a\nb\nc\n")
		}},
		{"ftruncate and O_TRUNC", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "t")
			mustWrite(t, p, "0123456789")
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(4); err != nil {
				t.Fatal(err)
			}
			if fi, _ := f.Stat(); fi.Size() != 4 {
				t.Fatalf("size after ftruncate = %d", fi.Size())
			}
			if err := f.Truncate(6); err != nil { // grow: zero filled
				t.Fatal(err)
			}
			f.Close()
			wantContent(t, p, "0123\x00\x00")
			f, err = os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("xy")
			f.Close()
			wantContent(t, p, "xy")
		}},
		{"rename over an existing file", func(t *testing.T, dir string) {
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			mustWrite(t, a, "new")
			mustWrite(t, b, "old")
			var old syscall.Stat_t
			if err := syscall.Stat(b, &old); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(a, b); err != nil {
				t.Fatal(err)
			}
			wantContent(t, b, "new")
			// The replaced inode goes once the kernel forgets it (nothing
			// has it open): no orphan is left behind, holding its bytes.
			testkit.EventuallyNil(t, 5*time.Second, "the replaced inode removed", func() error {
				var n int
				e.st.SQL().QueryRow(`SELECT COUNT(*) FROM fs_inode WHERE session_id=? AND ino=?`, e.sid, old.Ino).Scan(&n)
				if n != 0 {
					return fmt.Errorf("inode %d still stored", old.Ino)
				}
				return nil
			})
			wantErrno(t, statErr(a), syscall.ENOENT)
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(b, filepath.Join(dir, "sub", "c")); err != nil {
				t.Fatal(err)
			}
			wantContent(t, filepath.Join(dir, "sub", "c"), "new")
		}},
		{"unlink an open file", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "tmp")
			f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("still here")
			var st syscall.Stat_t
			if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			wantErrno(t, statErr(p), syscall.ENOENT)
			buf := make([]byte, 10)
			if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "still here" {
				t.Fatalf("read after unlink = %q, %v", buf, err)
			}
			if _, err := f.WriteAt([]byte("STILL"), 0); err != nil {
				t.Fatalf("write after unlink: %v", err)
			}
			f.ReadAt(buf, 0)
			if string(buf) != "STILL here" {
				t.Fatalf("read after write after unlink = %q", buf)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			// The inode is freed when the kernel forgets it, after the
			// close: nothing of it is left.
			testkit.EventuallyNil(t, 5*time.Second, "orphan removed", func() error {
				var n int
				e.st.SQL().QueryRow(`SELECT COUNT(*) FROM fs_inode WHERE session_id=? AND ino=?`, e.sid, st.Ino).Scan(&n)
				if n != 0 {
					return fmt.Errorf("%d orphans left", n)
				}
				return nil
			})
		}},
		{"mkdir rmdir", func(t *testing.T, dir string) {
			d := filepath.Join(dir, "d")
			if err := os.Mkdir(d, 0o750); err != nil {
				t.Fatal(err)
			}
			wantErrno(t, os.Mkdir(d, 0o750), syscall.EEXIST)
			mustWrite(t, filepath.Join(d, "x"), "x")
			wantErrno(t, syscall.Rmdir(d), syscall.ENOTEMPTY)
			wantErrno(t, syscall.Rmdir(filepath.Join(d, "x")), syscall.ENOTDIR)
			os.Remove(filepath.Join(d, "x"))
			if err := syscall.Rmdir(d); err != nil {
				t.Fatal(err)
			}
			wantErrno(t, statErr(d), syscall.ENOENT)
			wantErrno(t, os.WriteFile(filepath.Join(dir, "nodir", "f"), nil, 0o644), syscall.ENOENT)
		}},
		{"readdir with d_type", func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, "sub"), 0o755)
			mustWrite(t, filepath.Join(dir, "file"), "")
			os.Symlink("file", filepath.Join(dir, "link"))
			ents, err := os.ReadDir(dir) // Go takes the type from d_type
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, en := range ents {
				got = append(got, fmt.Sprintf("%s:%v", en.Name(), en.Type()))
			}
			want := "file:----------,link:L---------,sub:d---------"
			if strings.Join(got, ",") != want {
				t.Fatalf("readdir = %v, want %v", got, want)
			}
		}},
		{"stat chmod utimes", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "s")
			mustWrite(t, p, "12345")
			if err := os.Chmod(p, 0o640); err != nil {
				t.Fatal(err)
			}
			mt := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
			at := time.Date(2023, 1, 2, 3, 4, 5, 987654321, time.UTC)
			if err := os.Chtimes(p, at, mt); err != nil {
				t.Fatal(err)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			if st.Mode != syscall.S_IFREG|0o640 || st.Size != 5 || st.Nlink != 1 {
				t.Fatalf("stat = mode %o size %d nlink %d", st.Mode, st.Size, st.Nlink)
			}
			if got := time.Unix(st.Mtim.Unix()); !got.Equal(mt) {
				t.Fatalf("mtime = %v, want %v", got, mt)
			}
			if got := time.Unix(st.Atim.Unix()); !got.Equal(at) {
				t.Fatalf("atime = %v, want %v", got, at)
			}
		}},
		{"symlink readlink ELOOP", func(t *testing.T, dir string) {
			mustWrite(t, filepath.Join(dir, "target"), "via link")
			if err := os.Symlink("target", filepath.Join(dir, "l")); err != nil {
				t.Fatal(err)
			}
			if got, err := os.Readlink(filepath.Join(dir, "l")); err != nil || got != "target" {
				t.Fatalf("readlink = %q, %v", got, err)
			}
			wantContent(t, filepath.Join(dir, "l"), "via link")
			os.Symlink("loop2", filepath.Join(dir, "loop1"))
			os.Symlink("loop1", filepath.Join(dir, "loop2"))
			_, err := os.ReadFile(filepath.Join(dir, "loop1"))
			wantErrno(t, err, syscall.ELOOP)
			os.Symlink("self", filepath.Join(dir, "self"))
			_, err = os.Stat(filepath.Join(dir, "self"))
			wantErrno(t, err, syscall.ELOOP)
		}},
		{"hard links", func(t *testing.T, dir string) {
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			mustWrite(t, a, "shared")
			if err := os.Link(a, b); err != nil {
				t.Fatal(err)
			}
			wantNlink(t, a, 2)
			f, _ := os.OpenFile(b, os.O_WRONLY|os.O_APPEND, 0)
			f.WriteString("+")
			f.Close()
			wantContent(t, a, "shared+")
			os.Remove(a)
			wantNlink(t, b, 1)
			wantContent(t, b, "shared+")
		}},
		{"fsync and O_EXCL", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "x")
			f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("durable")
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			// Fsync returned: the bytes are in the VFS, not only in a buffer.
			buf := make([]byte, 7)
			if n, err := e.fs.ReadAt(ctxT(t), inoOf(t, p), buf, 0); err != nil || string(buf[:n]) != "durable" {
				t.Fatalf("vfs after fsync = %q, %v", buf[:n], err)
			}
			f.Close()
			_, err = os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			wantErrno(t, err, syscall.EEXIST)
		}},
		{"statfs reflects the quota", func(t *testing.T, dir string) {
			var s syscall.Statfs_t
			if err := syscall.Statfs(dir, &s); err != nil {
				t.Fatal(err)
			}
			if got := s.Blocks * uint64(s.Bsize); got != quota {
				t.Fatalf("statfs size = %d, want the quota %d", got, quota)
			}
			if s.Bavail == 0 || s.Bavail > s.Blocks {
				t.Fatalf("statfs bavail = %d of %d", s.Bavail, s.Blocks)
			}
			// the counts are the workspace's: two more files are two
			// more inodes in use and their bytes fewer free blocks
			mustWrite(t, filepath.Join(dir, "sf1"), strings.Repeat("x", 64<<10))
			mustWrite(t, filepath.Join(dir, "sf2"), "y")
			var s2 syscall.Statfs_t
			if err := syscall.Statfs(dir, &s2); err != nil {
				t.Fatal(err)
			}
			if used, used2 := s.Files-s.Ffree, s2.Files-s2.Ffree; used2 != used+2 {
				t.Fatalf("statfs: %d inodes in use, then %d after two new files", used, used2)
			}
			if d := s.Bavail - s2.Bavail; d != 16 && d != 17 {
				t.Fatalf("statfs: %d blocks free, then %d after 64 KiB more", s.Bavail, s2.Bavail)
			}
		}},
		{"quota exceeded is ENOSPC", func(t *testing.T, dir string) {
			f, err := os.Create(filepath.Join(dir, "big"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			chunk := make([]byte, 1<<20)
			var werr error
			for i := 0; i < quota>>20+2 && werr == nil; i++ {
				_, werr = f.Write(chunk)
			}
			if werr == nil {
				werr = f.Sync()
			}
			wantErrno(t, werr, syscall.ENOSPC)
			f.Close()
			os.Remove(filepath.Join(dir, "big"))
		}},
		{"mmap read", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "m")
			want := bytes.Repeat([]byte("mmap!"), 3000)
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
			// In another process: a page fault on a FUSE mapping holds
			// the faulting process's mmap lock while the server answers,
			// and a server in the same process may need that lock to
			// grow its heap.
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMmap$")
			cmd.Env = append(os.Environ(), "FILEPATH_WS_MMAP="+p)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), fmt.Sprintf("mmap ok %x", sha256.Sum256(want))) {
				t.Fatalf("mmap in a child process: %v\n%s", err, out)
			}
		}},
		{"new file while still open", func(t *testing.T, dir string) {
			// A new file exists for the VFS only from its first flush
			// (lazy create); everything this mount does with its
			// directory or the file must see it before that.
			p := filepath.Join(dir, "open")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString("partial"); err != nil {
				t.Fatal(err)
			}
			names, err := os.ReadDir(dir)
			if err != nil || len(names) != 1 || names[0].Name() != "open" {
				t.Fatalf("readdir with a new open file = %v, %v", names, err)
			}
			names, err = os.ReadDir(dir)
			if err != nil || len(names) != 1 {
				t.Fatalf("readdir with a new open file = %v, %v", names, err)
			}
			sub := filepath.Join(dir, "sub")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			s, err := os.Create(filepath.Join(sub, "s"))
			if err != nil {
				t.Fatal(err)
			}
			wantErrno(t, os.Remove(sub), syscall.ENOTEMPTY)
			if err := os.Rename(filepath.Join(dir, "empty-dir-does-not-exist"), sub); !errors.Is(err, syscall.ENOENT) {
				t.Fatalf("rename of a missing name = %v", err)
			}
			s.Close()
			if err := os.RemoveAll(sub); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(" more"); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			if b, err := e.fs.PathOf(ctxT(t), inoOf(t, p)); err != nil || b != "/"+filepath.Base(dir)+"/open" {
				t.Fatalf("after fsync the VFS has %q, %v", b, err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			wantContent(t, p, "partial more")

			// rename and unlink of a file not flushed yet
			g, err := os.Create(filepath.Join(dir, "g"))
			if err != nil {
				t.Fatal(err)
			}
			g.WriteString("gg")
			if err := os.Rename(filepath.Join(dir, "g"), filepath.Join(dir, "g2")); err != nil {
				t.Fatal(err)
			}
			h, err := os.Create(filepath.Join(dir, "h"))
			if err != nil {
				t.Fatal(err)
			}
			h.WriteString("hh")
			if err := os.Remove(filepath.Join(dir, "h")); err != nil {
				t.Fatal(err)
			}
			if _, err := h.WriteString(" after unlink"); err != nil {
				t.Fatal(err)
			}
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			wantContent(t, filepath.Join(dir, "g2"), "gg")
			wantErrno(t, statErr(filepath.Join(dir, "h")), syscall.ENOENT)

			// an empty new file, stat and hard link before close
			k, err := os.Create(filepath.Join(dir, "k"))
			if err != nil {
				t.Fatal(err)
			}
			if st, err := k.Stat(); err != nil || st.Size() != 0 || !st.Mode().IsRegular() {
				t.Fatalf("fstat of a new file = %v, %v", st, err)
			}
			if err := os.Link(filepath.Join(dir, "k"), filepath.Join(dir, "k2")); err != nil {
				t.Fatal(err)
			}
			if err := k.Close(); err != nil {
				t.Fatal(err)
			}
			wantNlink(t, filepath.Join(dir, "k"), 2)
			wantContent(t, filepath.Join(dir, "k2"), "")

			// O_EXCL stays exclusive
			_, err = os.OpenFile(filepath.Join(dir, "k"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			wantErrno(t, err, syscall.EEXIST)
		}},
		{"another uid", func(t *testing.T, dir string) {
			os.Chmod(filepath.Dir(root), 0o755) // t.TempDir is 0700
			os.Chmod(dir, 0o777)
			mustWrite(t, filepath.Join(dir, "private"), "secret")
			os.Chmod(filepath.Join(dir, "private"), 0o600)
			out, err := asUser(1000, "echo mine > "+dir+"/mine && cat "+dir+"/mine && ! cat "+dir+"/private 2>/dev/null")
			if err != nil || out != "mine\n" {
				t.Fatalf("as uid 1000: %q, %v", out, err)
			}
			var st syscall.Stat_t
			syscall.Stat(filepath.Join(dir, "mine"), &st)
			if st.Uid != 1000 || st.Gid != 1000 {
				t.Fatalf("file created by uid 1000 is owned by %d:%d", st.Uid, st.Gid)
			}
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(root, fmt.Sprintf("case%02d", i))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.run(t, dir)
		})
	}
	e.check(t)
}

func asUser(uid uint32, script string) (string, error) {
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func inoOf(t *testing.T, p string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Ino)
}

func mustWrite(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantContent(t *testing.T, p, want string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Fatalf("%s = %q, want %q", filepath.Base(p), b, want)
	}
}

func wantNlink(t *testing.T, p string, n uint64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if st.Nlink != n {
		t.Fatalf("nlink of %s = %d, want %d", filepath.Base(p), st.Nlink, n)
	}
}

func statErr(p string) error {
	_, err := os.Lstat(p)
	return err
}

func wantErrno(t *testing.T, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
}

// TestHelperMmap is not a test: the "mmap read" case runs it in a child
// process to read FILEPATH_WS_MMAP through a shared mapping.
func TestHelperMmap(t *testing.T) {
	p := os.Getenv("FILEPATH_WS_MMAP")
	if p == "" {
		t.Skip("helper process only")
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(b)
	fmt.Printf("mmap ok %x\n", sha256.Sum256(b))
}

// TestTwoMountsUnshared checks what nodes of one session see of each
// other's changes without a Fanout: created, changed and removed files show
// within the cache timeouts (close-to-open consistency), never torn.
func TestTwoMountsUnshared(t *testing.T) {
	e := newEnv(t, vfs.Config{})
	opts := Options{EntryTimeout: 200 * time.Millisecond, AttrTimeout: 200 * time.Millisecond, NegativeTimeout: 200 * time.Millisecond}
	a, b := e.mountUnshared(t, opts).Dir(), e.mountUnshared(t, opts).Dir()
	eventually := func(what string, cond func() error) { testkit.EventuallyNil(t, 3*time.Second, what, cond) }
	_, err := os.Stat(filepath.Join(b, "f")) // cache a negative entry in b
	wantErrno(t, err, syscall.ENOENT)
	mustWrite(t, filepath.Join(a, "f"), "one")
	wantContent(t, filepath.Join(a, "f"), "one")
	eventually("b sees the new file", readsAs(filepath.Join(b, "f"), "one"))
	mustWrite(t, filepath.Join(a, "f"), "two, longer")
	eventually("b sees the new content", readsAs(filepath.Join(b, "f"), "two, longer"))
	os.Remove(filepath.Join(a, "f"))
	eventually("b sees the removal", isGone(filepath.Join(b, "f")))
}

// TestTwoMounts checks that with the Fanout (as the Manager mounts), every
// change made through one mount or the REST API shows in another mount at
// once, although its kernel caches names, attributes and pages for an hour:
// new, removed and renamed names (also a cached negative lookup), changed
// content of the same size (cached pages), mode and link count.
func TestTwoMounts(t *testing.T) {
	e := newEnv(t, vfs.Config{})
	ma, mb := e.mount(t, Options{}), e.mount(t, Options{})
	if ma.opts.EntryTimeout != time.Hour || mb.opts.AttrTimeout != time.Hour {
		t.Fatalf("timeouts %v/%v, want the 1 h default of a shared mount", ma.opts.EntryTimeout, mb.opts.AttrTimeout)
	}
	a, b := ma.Dir(), mb.Dir()
	ctx := ctxT(t)
	// Well below the 30 s the kernel may cache for: only a notice explains
	// seeing the change in time.
	soon := func(what string, cond func() error) { testkit.EventuallyNil(t, 2*time.Second, what, cond) }
	fa, fb := filepath.Join(a, "f"), filepath.Join(b, "f")

	_, err := os.Stat(fb) // a negative entry in b's kernel
	wantErrno(t, err, syscall.ENOENT)
	mustWrite(t, fa, "one")
	soon("b sees the new file", readsAs(fb, "one"))
	wantContent(t, fb, "one") // b's pages of f are cached now

	mustWrite(t, fa, "two") // same size
	soon("b sees the new content of the same size", readsAs(fb, "two"))

	if err := os.Chmod(fa, 0o600); err != nil {
		t.Fatal(err)
	}
	soon("b sees the new mode", func() error {
		if st, err := os.Stat(fb); err != nil || st.Mode().Perm() != 0o600 {
			return fmt.Errorf("mode %v, %v", st.Mode(), err)
		}
		return nil
	})

	if err := os.Link(fa, filepath.Join(a, "g")); err != nil {
		t.Fatal(err)
	}
	soon("b sees the link count and the new name", func() error {
		var st syscall.Stat_t
		if err := syscall.Stat(fb, &st); err != nil || st.Nlink != 2 {
			return fmt.Errorf("nlink %d, %v", st.Nlink, err)
		}
		return readsAs(filepath.Join(b, "g"), "two")()
	})

	if err := os.Rename(fa, filepath.Join(a, "h")); err != nil {
		t.Fatal(err)
	}
	soon("b sees the rename", func() error {
		if err := isGone(fb)(); err != nil {
			return err
		}
		return readsAs(filepath.Join(b, "h"), "two")()
	})

	// A file a created is in a's page cache (cacheStore); b changes it.
	mustWrite(t, filepath.Join(a, "s"), "mine")
	wantContent(t, filepath.Join(a, "s"), "mine")
	soon("b sees a's new file", readsAs(filepath.Join(b, "s"), "mine"))
	mustWrite(t, filepath.Join(b, "s"), "ours")
	soon("a sees b's change to the file a created", readsAs(filepath.Join(a, "s"), "ours"))

	// The REST API (no mount) reaches every mount.
	wantContent(t, filepath.Join(a, "h"), "two")
	if _, _, err := e.fs.WriteFile(ctx, "/h", []byte("api"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	soon("a sees the API's write", readsAs(filepath.Join(a, "h"), "api"))
	soon("b sees the API's write", readsAs(filepath.Join(b, "h"), "api"))
	if _, _, err := e.fs.MkdirAll(ctx, "/d/e", false); err != nil {
		t.Fatal(err)
	}
	soon("b sees the API's directories", func() error {
		st, err := os.Stat(filepath.Join(b, "d", "e"))
		if err != nil || !st.IsDir() {
			return fmt.Errorf("stat: %v", err)
		}
		return nil
	})
	if err := e.fs.Delete(ctx, "/d", true); err != nil {
		t.Fatal(err)
	}
	soon("b sees the API's recursive delete", isGone(filepath.Join(b, "d", "e")))

	os.Remove(filepath.Join(a, "h"))
	soon("b sees the removal", isGone(filepath.Join(b, "h")))
}

// readsAs reports whether p holds want.
func readsAs(p, want string) func() error {
	return func() error {
		b, err := os.ReadFile(p)
		if err != nil || string(b) != want {
			return fmt.Errorf("%s: %q, %v; want %q", filepath.Base(p), b, err, want)
		}
		return nil
	}
}

// isGone reports whether p does not exist.
func isGone(p string) func() error {
	return func() error {
		if _, err := os.Stat(p); !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("stat %s: %v", filepath.Base(p), err)
		}
		return nil
	}
}

// TestPolicy: a node restricted to some paths is refused a new file outside
// them at open (not only at close), also with the lazy create.
func TestPolicy(t *testing.T) {
	e := newEnv(t, vfs.Config{})
	ctx := ctxT(t)
	if _, err := e.fs.Mkdir(ctx, vfs.RootIno, "ok", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Mkdir(ctx, vfs.RootIno, "other", 0o755); err != nil {
		t.Fatal(err)
	}
	restricted, err := e.fs.ForNode("node-1", []string{"/ok", "/new/sub"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.RequireFUSE(t)
	m, err := Mount(ctx, t.TempDir(), restricted, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tests := []struct {
		name  string
		flags int
		path  string
		want  syscall.Errno
	}{
		{"allowed", os.O_CREATE | os.O_WRONLY | os.O_TRUNC, "ok/a", 0},
		{"allowed exclusive", os.O_CREATE | os.O_WRONLY | os.O_EXCL, "ok/b", 0},
		{"outside", os.O_CREATE | os.O_WRONLY | os.O_TRUNC, "other/a", syscall.EACCES},
		{"outside exclusive", os.O_CREATE | os.O_WRONLY | os.O_EXCL, "other/b", syscall.EACCES},
		{"outside at the root", os.O_CREATE | os.O_WRONLY, "c", syscall.EACCES},
		// "/new" may be looked up (it leads to an allowed path) but not created
		{"ancestor of an allowed path", os.O_CREATE | os.O_WRONLY | os.O_TRUNC, "new", syscall.EACCES},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := os.OpenFile(filepath.Join(m.Dir(), tt.path), tt.flags, 0o644)
			if tt.want != 0 {
				wantErrno(t, err, tt.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString("x"); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			wantContent(t, filepath.Join(m.Dir(), tt.path), "x")
		})
	}
}

// mountCounting mounts the session through a countingFS, told of other
// changes as the Manager's mounts are, until the test ends.
func (e *env) mountCounting(t *testing.T) (*MountPoint, *countingFS) {
	t.Helper()
	testkit.RequireFUSE(t)
	cfs := &countingFS{FS: e.fs}
	m, err := Mount(ctxT(t), t.TempDir(), cfs, Options{Fanout: e.fanout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, cfs
}

// countingFS counts the VFS reads of file content and the lookups.
type countingFS struct {
	*vfs.FS
	reads   atomic.Int64
	lookups atomic.Int64
}

func (c *countingFS) Lookup(ctx context.Context, parent int64, name string) (Attr, error) {
	c.lookups.Add(1)
	return c.FS.Lookup(ctx, parent, name)
}

func (c *countingFS) ReadAt(ctx context.Context, ino int64, p []byte, off int64) (int, error) {
	c.reads.Add(1)
	return c.FS.ReadAt(ctx, ino, p, off)
}

// TestNewFileFromPageCache: a file read through a mount stays in the
// kernel's page cache, also across opens (no_open: the kernel keeps it, and
// only a notice of a change elsewhere drops it), so reading it again does
// not reach the VFS, and reads the right bytes.
func TestNewFileFromPageCache(t *testing.T) {
	e := newEnv(t, vfs.Config{})
	m, cfs := e.mountCounting(t)
	for i := 0; i < 3; i++ {
		p := filepath.Join(m.Dir(), fmt.Sprintf("f%d", i))
		want := fmt.Sprintf("content of file %d\n", i)
		mustWrite(t, p, want)
		wantContent(t, p, want)
		before := cfs.reads.Load()
		wantContent(t, p, want)
		if n := cfs.reads.Load() - before; n != 0 {
			t.Fatalf("second read of %s: %d VFS reads, want 0", p, n)
		}
	}
	// A file written in several writes reads whole.
	p := filepath.Join(m.Dir(), "multi")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"one ", "two ", "three"} {
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wantContent(t, p, "one two three")
	// Changed through the API: the next read shows it (the notice dropped
	// the cached pages).
	if _, _, err := e.fs.WriteFile(ctxT(t), "/multi", []byte("ONE TWO THREE"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantContent(t, p, "ONE TWO THREE")
}

// TestReadonly: a file made readonly through the API shows no write bits
// through the mount, so the kernel refuses, at open, every open that could
// write it for a user without CAP_DAC_OVERRIDE; root, which the kernel's
// mode check lets through (the mount sees no open: no_open), is refused at
// its first write, and every truncate is refused at open; nothing changes.
// It can still be read, renamed and removed. Clearing the flag gives the
// write bits back.
func TestReadonly(t *testing.T) {
	e := newEnv(t, vfs.Config{})
	ctx := ctxT(t)
	m := e.mount(t, Options{})
	p := filepath.Join(m.Dir(), "ro.txt")
	mustWrite(t, p, "keep")
	os.Chmod(p, 0o664)
	ro := true
	if _, _, err := e.fs.WriteFile(ctx, "/ro.txt", nil, vfs.WriteOptions{Readonly: &ro, NoContent: true}); err != nil {
		t.Fatal(err)
	}
	wantMode := func(want uint32) {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode != syscall.S_IFREG|want {
			t.Fatalf("mode = %o, want %o", st.Mode, syscall.S_IFREG|want)
		}
	}
	testkit.EventuallyNil(t, 3*time.Second, "the readonly flag shows in the mode", func() error {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil || st.Mode&0o222 != 0 {
			return fmt.Errorf("mode %o, %v", st.Mode, err)
		}
		return nil
	})
	wantMode(0o444)
	for _, tt := range []struct {
		name  string
		flags int
	}{
		{"append", os.O_WRONLY | os.O_APPEND},
		{"create append (>>)", os.O_WRONLY | os.O_APPEND | os.O_CREATE},
		{"write", os.O_WRONLY},
		{"read write", os.O_RDWR},
		{"truncate (>)", os.O_WRONLY | os.O_CREATE | os.O_TRUNC},
		{"read truncate", os.O_RDONLY | os.O_TRUNC},
	} {
		f, err := os.OpenFile(p, tt.flags, 0o644)
		if err == nil {
			_, err = f.WriteString("x")
			f.Close()
		}
		if !errors.Is(err, syscall.EACCES) {
			t.Errorf("%s: open or first write = %v, want EACCES", tt.name, err)
		}
		if tt.flags&os.O_TRUNC != 0 && err != nil && !strings.Contains(err.Error(), "open") {
			t.Errorf("%s: refused at %v, want at open", tt.name, err)
		}
	}
	wantErrno(t, os.Truncate(p, 0), syscall.EACCES)
	wantErrno(t, os.Truncate(p, 4), syscall.EACCES)
	wantContent(t, p, "keep")
	// chmod is metadata: allowed, and the flag still hides the write bits
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	wantMode(0o444)
	wantContent(t, p, "keep")

	// Another uid: refused by the kernel's own check of the 0444 mode.
	os.Chmod(filepath.Dir(m.Dir()), 0o755) // t.TempDir is 0700
	os.Chmod(m.Dir(), 0o777)
	os.Chown(p, 1000, 1000)
	if out, err := asUser(1000, "echo x >> "+p); err == nil || !strings.Contains(out, "Permission denied") {
		t.Fatalf("as uid 1000, echo x >> ro.txt: %q, %v; want Permission denied", out, err)
	}
	wantContent(t, p, "keep")

	rw := false
	if _, _, err := e.fs.WriteFile(ctx, "/ro.txt", nil, vfs.WriteOptions{Readonly: &rw, NoContent: true}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNil(t, 3*time.Second, "the write bits are back", func() error {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil || st.Mode&0o777 != 0o644 {
			return fmt.Errorf("mode %o, %v", st.Mode, err)
		}
		return nil
	})
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("+more")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wantContent(t, p, "keep+more")

	// A readonly file can still be renamed and removed.
	if _, _, err := e.fs.WriteFile(ctx, "/ro.txt", nil, vfs.WriteOptions{Readonly: &ro, NoContent: true}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p, p+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p + ".old"); err != nil {
		t.Fatal(err)
	}
	e.check(t)
}

// TestAbsoluteSymlink: a symlink made through the mount with an absolute
// target under /workspace (the mount's path in a container) resolves
// through the session filesystem's path API as the session path, and keeps
// its target as written; one pointing outside /workspace is refused there
// and audited.
func TestAbsoluteSymlink(t *testing.T) {
	e := newEnv(t, vfs.Config{})
	ctx := ctxT(t)
	m := e.mount(t, Options{})
	mustWrite(t, filepath.Join(m.Dir(), "agent.txt"), "from the agent")
	if err := os.Symlink("/workspace/agent.txt", filepath.Join(m.Dir(), "abs-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(m.Dir(), "out-link")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(filepath.Join(m.Dir(), "abs-link")); err != nil || got != "/workspace/agent.txt" {
		t.Fatalf("readlink = %q, %v", got, err)
	}
	if _, b, err := e.fs.ReadAll(ctx, "/abs-link"); err != nil || string(b) != "from the agent" {
		t.Fatalf("read /abs-link through the VFS = %q, %v", b, err)
	}
	if _, _, err := e.fs.ReadAll(ctx, "/out-link"); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("read /out-link through the VFS = %v, want EACCES", err)
	}
	if log, err := e.v.AuditLog(ctx, e.sid, 10); err != nil || len(log) != 1 || !strings.Contains(log[0].Error, "/etc/hostname is outside /workspace") {
		t.Fatalf("audit = %+v, %v", log, err)
	}
}
