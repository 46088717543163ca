package vfs

import (
	"strings"
	"syscall"
	"testing"
)

// A lazy fork refuses, as any workspace does, to rename a directory to a
// longer name when a path below it, in directories the fork has not copied
// yet, would then be longer than MaxPathLen: the check reads those names
// through the fork point's view. The fork is left as it was.
func TestLazyForkRenameKeepsPathLimit(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	deep := "/s" + strings.Repeat("/d", MaxPathLen/2-2) // 4094 bytes
	mustWrite(t, f.fs, deep+"/f", []byte("x"))         // exactly MaxPathLen
	mustWrite(t, f.fs, "/t/g", []byte("y"))
	fk, err := f.v.Fork(ctx, f.sid, "")
	if err != nil {
		t.Fatal(err)
	}
	cfs := f.v.Session(fk.ID)
	// a mount looks /s up (it copies the root, not /s nor below)
	s, err := cfs.Lookup(ctx, RootIno, "s")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfs.Rename(ctx, RootIno, "s", RootIno, "sx", 0); !IsErrno(err, syscall.ENAMETOOLONG) {
		t.Fatalf("rename /s to /sx in the fork: %v, want ENAMETOOLONG", err)
	}
	// one level copied, the rest still in the view
	d, err := cfs.Lookup(ctx, s.Ino, "d")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfs.Rename(ctx, s.Ino, "d", s.Ino, "dx", 0); !IsErrno(err, syscall.ENAMETOOLONG) {
		t.Fatalf("rename /s/d to /s/dx in the fork: %v, want ENAMETOOLONG", err)
	}
	// a directory with short paths below it moves
	if err := cfs.Rename(ctx, RootIno, "t", d.Ino, "t", 0); err != nil {
		t.Fatalf("rename /t to /s/d/t: %v", err)
	}
	if _, err := cfs.Stat(ctx, deep+"/f"); err != nil {
		t.Fatalf("the fork lost %s: %v", deep[:20], err)
	}
	wantContent(t, cfs, "/s/d/t/g", []byte("y"))
	checkAll(t, f.v, fk.ID, fk.Base, f.sid)
}
