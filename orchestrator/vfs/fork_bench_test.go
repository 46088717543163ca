package vfs

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
)

// fill10k writes benchFiles files of 1 KiB in directories of 100, plus a
// 100 MiB file when big is set (to show that a fork's cost does not depend on
// the bytes stored). Files go in one transaction per directory, through the
// inode API's CreateFile.
func fill10k(tb testing.TB, fs *FS, big bool) {
	tb.Helper()
	ctx := context.Background()
	data := content(1 << 10)
	var dir Attr
	var err error
	for n := range benchFiles {
		if n%100 == 0 {
			if dir, err = fs.Mkdir(ctx, RootIno, fmt.Sprintf("d%03d", n/100), 0o755); err != nil {
				tb.Fatal(err)
			}
		}
		ino, err := fs.ReserveIno(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		if _, _, err := fs.CreateFile(ctx, dir.Ino, fmt.Sprintf("f%05d.txt", n), 0o644, 0, 0, ino, data, 0, fs.v.cfg.Now()); err != nil {
			tb.Fatal(err)
		}
	}
	if big {
		a, err := fs.Create(ctx, RootIno, "big.bin", 0o644, true)
		if err != nil {
			tb.Fatal(err)
		}
		chunk := content(1 << 20)
		for off := int64(0); off < 100<<20; off += 1 << 20 {
			if _, err := fs.WriteAt(ctx, a.Ino, chunk, off); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// BenchmarkFork10k forks a workspace of 10,000 files (and, in the second
// case, a 100 MiB file besides): each iteration is one Fork. The baseline in
// the same run is what a fork costs without the VFS: `cp -a` of the same
// tree on the local disk. Run with:
//
//	go test -run '^$' -bench Fork10k -benchtime 5x -count 5 ./orchestrator/vfs/
func BenchmarkFork10k(b *testing.B) {
	b.Run("ext4/cp-a", func(b *testing.B) {
		dir := b.TempDir()
		src := filepath.Join(dir, "src")
		data := content(1 << 10)
		for n := range benchFiles {
			d := filepath.Join(src, fmt.Sprintf("d%03d", n/100))
			if n%100 == 0 {
				if err := os.MkdirAll(d, 0o755); err != nil {
					b.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.txt", n)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if out, err := exec.Command("cp", "-a", src, filepath.Join(dir, fmt.Sprint("copy", i))).CombinedOutput(); err != nil {
				b.Fatalf("cp: %v %s", err, out)
			}
		}
	})
	for _, big := range []bool{false, true} {
		b.Run(fmt.Sprintf("files=10000/big100MiB=%v", big), func(b *testing.B) {
			f := newFixture(b, Config{MaxFileSize: 1 << 30, SessionQuota: 1 << 40})
			fill10k(b, f.fs, big)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := f.v.Fork(ctx, f.sid, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// What the fork's first use costs instead: a fork, then a listing of
	// every directory (the first `git status` in the child copies each
	// directory it reads), then the rest copied at once (what a diff, or
	// the path API, does first; what every fork cost before forks were
	// lazy).
	b.Run("files=10000/fork+list-all", func(b *testing.B) {
		f := newFixture(b, Config{})
		fill10k(b, f.fs, false)
		ctx := context.Background()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			fk, err := f.v.Fork(ctx, f.sid, "")
			if err != nil {
				b.Fatal(err)
			}
			cfs := f.v.Session(fk.ID)
			ents, err := cfs.ReadDirPlus(ctx, RootIno)
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range ents {
				if e.Attr.IsDir() {
					if _, err := cfs.ReadDirPlus(ctx, e.Attr.Ino); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
}

// BenchmarkNewDirs: a mount (changes with an origin: group commit) makes
// 200 directories with a file in each, in a session (the baseline) and in
// a lazy fork, whose own new directories need no copy. Run with:
//
//	go test -run '^$' -bench NewDirs -benchtime 5x -count 5 ./orchestrator/vfs/
func BenchmarkNewDirs(b *testing.B) {
	for _, kind := range []string{"session", "lazy-fork"} {
		b.Run(kind, func(b *testing.B) {
			f := newFixture(b, Config{})
			ctx := events.WithOrigin(context.Background(), "mount")
			mustWrite(b, f.fs, "/x", []byte("x"))
			fs := f.fs
			if kind == "lazy-fork" {
				fk, err := f.v.Fork(context.Background(), f.sid, "")
				if err != nil {
					b.Fatal(err)
				}
				fs = f.v.Session(fk.ID)
			}
			b.ResetTimer()
			for i := range b.N {
				for d := range 200 {
					a, err := fs.Mkdir(ctx, RootIno, fmt.Sprintf("i%dd%d", i, d), 0o755)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := fs.Create(ctx, a.Ino, "f", 0o644, true); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkForkDiff100k: a fork of a workspace of 100,000 files (1,000
// directories of 100) changes 100 files (10 in each of 10 directories);
// then its diff is timed the first time and again, and its merge into the
// workspace. Setup (the fill, the fork, the changes, deleting the fork
// before) is not timed. Run with:
//
//	go test -run '^$' -bench ForkDiff100k -benchtime 5x -count 5 ./orchestrator/vfs/
func BenchmarkForkDiff100k(b *testing.B) {
	f := newFixture(b, Config{})
	ctx := context.Background()
	data := content(1 << 10)
	for d := range 1000 {
		dir, err := f.fs.Mkdir(ctx, RootIno, fmt.Sprintf("d%04d", d), 0o755)
		if err != nil {
			b.Fatal(err)
		}
		for n := range 100 {
			ino, err := f.fs.ReserveIno(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := f.fs.CreateFile(ctx, dir.Ino, fmt.Sprintf("f%03d.txt", n), 0o644, 0, 0, ino, data, 0, f.v.cfg.Now()); err != nil {
				b.Fatal(err)
			}
		}
	}
	round := 0
	var prev string
	forkChanged := func(b *testing.B) ForkInfo {
		round++
		// one fork at a time: every fork of a workspace makes its
		// changes (the merge's) save their rows into each fork point
		if prev != "" {
			if err := f.v.DeleteFork(ctx, prev); err != nil {
				b.Fatal(err)
			}
		}
		fk, err := f.v.Fork(ctx, f.sid, "")
		prev = fk.ID
		if err != nil {
			b.Fatal(err)
		}
		c := f.v.Session(fk.ID)
		for i := range 100 {
			mustWrite(b, c, fmt.Sprintf("/d%04d/f%03d.txt", (i/10)*97, i%10), []byte(fmt.Sprintf("changed %d in round %d\n", i, round)))
		}
		return fk
	}
	// The baseline: what reading the changed files costs, the least a
	// diff with text does (each changed path read in the fork and in
	// the workspace, through the path API).
	b.Run("baseline-read-200", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			fk := forkChanged(b)
			c := f.v.Session(fk.ID)
			b.StartTimer()
			for i := range 100 {
				p := fmt.Sprintf("/d%04d/f%03d.txt", (i/10)*97, i%10)
				for _, fs := range []*FS{c, f.fs} {
					_, r, err := fs.ReadFile(ctx, p)
					if err == nil {
						_, err = io.ReadAll(r)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
	for _, repeat := range []bool{false, true} {
		name := "diff-first"
		if repeat {
			name = "diff-repeated"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				fk := forkChanged(b)
				if repeat {
					if _, err := f.v.Diff(ctx, fk.ID, DiffOptions{Text: true}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				d, err := f.v.Diff(ctx, fk.ID, DiffOptions{Text: true})
				if err != nil {
					b.Fatal(err)
				}
				if len(d.Changes) != 100 {
					b.Fatalf("%d changes, want 100", len(d.Changes))
				}
			}
		})
	}
	b.Run("merge", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			fk := forkChanged(b)
			b.StartTimer()
			m, err := f.v.Merge(ctx, fk.ID, MergeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if len(m.Applied) != 100 {
				b.Fatalf("%d applied, want 100", len(m.Applied))
			}
		}
	})
}
