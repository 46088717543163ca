package vfs

import (
	"fmt"
	"strings"
	"sync"
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
	mustWrite(t, f.fs, deep+"/f", []byte("x"))          // exactly MaxPathLen
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

// A mount using a lazy fork while a whole-tree reader (diff, the path API,
// a fork of the fork) copies the rest of it: a directory the mount uses
// for the first time just after that copy committed is not copied a second
// time (it failed with "UNIQUE constraint failed", EIO to the agent).
func TestLazyForkFirstUseDuringMaterialize(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	const dirs = 120
	for d := range dirs {
		mustWrite(t, f.fs, fmt.Sprintf("/d%d/f", d), []byte("x"))
	}
	for round := range 10 {
		fk, err := f.v.Fork(ctx, f.sid, "")
		if err != nil {
			t.Fatal(err)
		}
		cfs := f.v.Session(fk.ID)
		if _, err := cfs.Lookup(ctx, RootIno, "d0"); err != nil { // the mount's state is loaded
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for d := w; d < dirs; d += 4 {
					a, err := cfs.Lookup(ctx, RootIno, fmt.Sprintf("d%d", d))
					if err == nil {
						_, err = cfs.Lookup(ctx, a.Ino, "f")
					}
					if err != nil {
						errs <- fmt.Errorf("round %d: lookup /d%d/f: %w", round, d, err)
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.v.Diff(ctx, fk.ID, DiffOptions{}); err != nil {
				errs <- err
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		checkAll(t, f.v, fk.ID)
	}
}
