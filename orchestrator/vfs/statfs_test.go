package vfs

import (
	"context"
	"syscall"
	"testing"
)

// Statfs reports the workspace's real use: the bytes its files hold
// against the quota, its inodes (a fork's through its fork point: the
// inherited ones, less what it removed, plus what it made), and no more
// free space than the data directory's filesystem has.
func TestStatfsCounts(t *testing.T) {
	const quota = 1 << 40 // more than the test machine's disk
	dir := t.TempDir()
	f := newFixture(t, Config{SessionQuota: quota, DataDir: dir})
	ctx := context.Background()
	want := func(fs *FS, files, usedBytes int64) {
		t.Helper()
		s, err := fs.Statfs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := int64(s.Files - s.Ffree); got != files {
			t.Fatalf("%s: statfs says %d inodes in use, want %d", fs.sid, got, files)
		}
		var disk syscall.Statfs_t
		if err := syscall.Statfs(dir, &disk); err != nil {
			t.Fatal(err)
		}
		if s.Blocks*uint64(s.Bsize) != quota {
			t.Fatalf("size %d, want the quota %d", s.Blocks*uint64(s.Bsize), quota)
		}
		free := int64(s.Bavail) * int64(s.Bsize)
		if diskFree := int64(disk.Bavail) * disk.Bsize; free > diskFree || free < diskFree-(64<<20) {
			t.Fatalf("free %d bytes, the data directory's disk has %d", free, diskFree)
		}
		if s.Bfree != s.Bavail {
			t.Fatalf("bfree %d, bavail %d", s.Bfree, s.Bavail)
		}
		var used int64
		if err := f.db.QueryRow(`SELECT used_bytes FROM fs_meta WHERE session_id=?`, fs.sid).Scan(&used); err != nil || used != usedBytes {
			t.Fatalf("used %d bytes (%v), want %d", used, err, usedBytes)
		}
	}
	want(f.fs, 1, 0) // the root
	mustWrite(t, f.fs, "/a/x", []byte("12345"))
	mustWrite(t, f.fs, "/a/y", []byte("123"))
	mustWrite(t, f.fs, "/b", []byte("1"))
	want(f.fs, 5, 9)

	fk := mustFork(t, f.v, f.sid)
	c := f.v.Session(fk.ID)
	want(c, 5, 9)
	mustWrite(t, c, "/a/x", []byte("changed")) // a copy-up: no new inode
	if err := c.Delete(ctx, "/b", false); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, c, "/n/1", []byte("1"))
	mustWrite(t, c, "/n/2", []byte("2"))
	want(c, 5-1+3, 7+3+2)
	want(f.fs, 5, 9)

	// small quota: what is left of it
	g := newFixture(t, Config{SessionQuota: 1 << 20, DataDir: dir})
	mustWrite(t, g.fs, "/f", make([]byte, 100<<10))
	s, err := g.fs.Statfs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Bavail != (1<<20-100<<10)/4096 {
		t.Fatalf("bavail %d blocks, want what the quota leaves", s.Bavail)
	}
}
