package vfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
)

func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// streamBytes is n bytes that differ from chunk to chunk.
func streamBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/65536)
	}
	return b
}

func upload(t *testing.T, fs *FS, p string, data []byte, opt WriteOptions) (Detail, bool, error) {
	t.Helper()
	ctx := ctxT(t)
	u, err := fs.NewUpload(ctx, p)
	if err != nil {
		return Detail{}, false, err
	}
	// odd-sized writes, as a network stream gives them
	r := bytes.NewReader(data)
	buf := make([]byte, 70001)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if _, err := u.Write(buf[:n]); err != nil {
				u.Abort()
				return Detail{}, false, err
			}
		}
		if rerr == io.EOF {
			break
		}
	}
	return u.Commit(ctx, opt)
}

func TestUploadRoundTrip(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	data := streamBytes(3*UploadFlush + 12345)
	d, created, err := upload(t, f.fs, "/in/big.bin", data, WriteOptions{})
	if err != nil || !created {
		t.Fatalf("upload: created=%v err=%v", created, err)
	}
	sum := sha256.Sum256(data)
	if d.Hash != hex.EncodeToString(sum[:]) || d.Size != int64(len(data)) || d.Source != SourceUpload {
		t.Fatalf("uploaded %+v", d)
	}
	_, got, err := f.fs.ReadAll(ctx, "/in/big.bin")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, err %v", len(got), err)
	}
	if ev := f.rec.take(); strings.Join(ev, ",") != "created /in,created /in/big.bin" {
		t.Fatalf("events %v", ev)
	}
	// Replacing keeps the inode (and so its links and metadata) and
	// counts the bytes once.
	data2 := streamBytes(100)
	d2, created, err := upload(t, f.fs, "/in/big.bin", data2, WriteOptions{IfMatch: d.Hash})
	if err != nil || created || d2.Ino != d.Ino || d2.Size != 100 {
		t.Fatalf("replace: %+v created=%v err=%v", d2, created, err)
	}
	if u := settledUsage(t, f); u != 100 {
		t.Fatalf("usage %d, want 100", u)
	}
	if ev := f.rec.take(); strings.Join(ev, ",") != "modified /in/big.bin" {
		t.Fatalf("events %v", ev)
	}
	// again (the statements are prepared by now)
	if d3, _, err := upload(t, f.fs, "/in/big.bin", data, WriteOptions{}); err != nil || d3.Ino != d.Ino || d3.Hash != d.Hash {
		t.Fatalf("replace again: %+v %v", d3, err)
	}
	if u := settledUsage(t, f); u != int64(len(data)) {
		t.Fatalf("usage %d, want %d", u, len(data))
	}
	f.check(t)
}

func settledUsage(t *testing.T, f *fixture) int64 {
	t.Helper()
	if err := f.v.Sync(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	return usedBytes(t, f, f.sid)
}

func orphans(t *testing.T, f *fixture) int {
	t.Helper()
	if err := f.v.Sync(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	var n int
	f.db.QueryRow(`SELECT COUNT(*) FROM fs_inode WHERE session_id=? AND nlink=0 AND ino!=1`, f.sid).Scan(&n)
	return n
}

func TestUploadFailuresLeaveNothing(t *testing.T) {
	f := newFixture(t, Config{MaxFileSize: 2 * UploadFlush, SessionQuota: 3 * UploadFlush})
	ctx := ctxT(t)
	if _, _, err := f.fs.WriteFile(ctx, "/keep.txt", []byte("old"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	old, _ := f.fs.Stat(ctx, "/keep.txt")
	cases := []struct {
		name string
		p    string
		data []byte
		opt  WriteOptions
		want string
	}{
		{"over the file limit", "/a.bin", streamBytes(2*UploadFlush + 1), WriteOptions{}, orchestrator.ETooLarge},
		{"if-match of another content", "/keep.txt", []byte("new"), WriteOptions{IfMatch: strings.Repeat("0", 64)}, orchestrator.EPreconditionFailed},
		{"create over an existing file", "/keep.txt", []byte("new"), WriteOptions{Mode: WriteCreate}, orchestrator.EConflict},
		{"update of a missing file", "/none.txt", []byte("new"), WriteOptions{Mode: WriteUpdate}, orchestrator.ENotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := upload(t, f.fs, tc.p, tc.data, tc.opt)
			if orchestrator.ErrorCode(err) != tc.want {
				t.Fatalf("err %v (%s), want %s", err, orchestrator.ErrorCode(err), tc.want)
			}
			if n := orphans(t, f); n != 0 {
				t.Fatalf("%d nameless inodes left", n)
			}
			if u := settledUsage(t, f); u != 3 {
				t.Fatalf("usage %d, want 3", u)
			}
			if st, err := f.fs.Stat(ctx, "/keep.txt"); err != nil || st.Hash != old.Hash {
				t.Fatalf("keep.txt changed: %+v %v", st, err)
			}
			if _, err := f.fs.Stat(ctx, "/a.bin"); !IsErrno(err, syscall.ENOENT) {
				t.Fatalf("a.bin: %v", err)
			}
		})
	}
	// The quota: two uploads at once, each under the file limit, over the
	// session's quota together.
	u1, err := f.fs.NewUpload(ctx, "/q1")
	if err != nil {
		t.Fatal(err)
	}
	u2, _ := f.fs.NewUpload(ctx, "/q2")
	if _, err := u1.Write(streamBytes(2 * UploadFlush)); err != nil {
		t.Fatal(err)
	}
	_, err = u2.Write(streamBytes(2 * UploadFlush))
	if !IsErrno(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "quota") {
		t.Fatalf("second upload past the quota: %v", err)
	}
	u2.Abort()
	u1.Abort()
	if n := orphans(t, f); n != 0 {
		t.Fatalf("%d nameless inodes left", n)
	}
	f.check(t)
}

func TestUploadLeftByACrashIsPurged(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	u, err := f.fs.NewUpload(ctx, "/x.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(streamBytes(UploadFlush + 10)); err != nil {
		t.Fatal(err)
	}
	// no Commit, no Abort: the process died
	if err := f.v.Sync(ctx, false); err != nil {
		t.Fatal(err)
	}
	n, err := New(f.db, Config{}).PurgeOrphans(ctx)
	if err != nil || n != 1 {
		t.Fatalf("purged %d, err %v", n, err)
	}
	if got := settledUsage(t, f); got != 0 {
		t.Fatalf("usage %d after purge", got)
	}
	f.check(t)
}

func TestUploadThroughPolicy(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	nfs, err := f.fs.ForNode("n1", []string{"/src"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nfs.NewUpload(ctx, "/etc/x"); !IsErrno(err, syscall.EACCES) {
		t.Fatalf("upload outside allowed paths: %v", err)
	}
	d, _, err := upload(t, nfs, "/src/a.txt", []byte("hello\n"), WriteOptions{})
	if err != nil || d.Source != SourceCreated || d.NodeID != "n1" || !strings.HasPrefix(d.MimeType, "text/plain") {
		t.Fatalf("node upload %+v %v", d, err)
	}
	if errors.Is(err, syscall.EACCES) {
		t.Fatal(err)
	}
}
