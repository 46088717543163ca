package vfs

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestRandomWrites compares WriteAt/truncate/ReadAt against an in-memory model
// across chunk boundaries.
func TestRandomWrites(t *testing.T) {
	for _, cs := range []int{7, 64, 4096} {
		t.Run(fmt.Sprint("chunk ", cs), func(t *testing.T) {
			f := newFixture(t, Config{ChunkSize: cs})
			ctx := ctxT(t)
			a, err := f.fs.Create(ctx, RootIno, "f", 0o644, true)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, uint64(cs)))
			var model []byte
			for i := 0; i < 300; i++ {
				switch rng.IntN(4) {
				case 0, 1:
					off := rng.IntN(len(model) + 3*cs + 1)
					p := make([]byte, rng.IntN(3*cs+1))
					for j := range p {
						p[j] = byte(rng.IntN(255) + 1)
					}
					if _, err := f.fs.WriteAt(ctx, a.Ino, p, int64(off)); err != nil {
						t.Fatal(err)
					}
					if end := off + len(p); end > len(model) {
						model = append(model, make([]byte, end-len(model))...)
					}
					copy(model[off:], p)
				case 2:
					n := int64(rng.IntN(len(model) + 2*cs + 1))
					if _, err := f.fs.SetAttr(ctx, a.Ino, AttrChange{Size: &n}); err != nil {
						t.Fatal(err)
					}
					if int(n) < len(model) {
						model = model[:n]
					} else {
						model = append(model, make([]byte, int(n)-len(model))...)
					}
				case 3:
					off := rng.IntN(len(model) + 2)
					p := make([]byte, rng.IntN(3*cs+1))
					n, err := f.fs.ReadAt(ctx, a.Ino, p, int64(off))
					if err != nil {
						t.Fatal(err)
					}
					want := []byte{}
					if off < len(model) {
						want = model[off:min(len(model), off+len(p))]
					}
					if !bytes.Equal(p[:n], want) {
						t.Fatalf("step %d: read at %d got %d bytes differing from the model", i, off, n)
					}
				}
				f.check(t)
			}
			_, got, err := f.fs.ReadAll(ctx, "/f")
			if err != nil || !bytes.Equal(got, model) {
				t.Fatalf("final content differs (%d vs %d bytes): %v", len(got), len(model), err)
			}
		})
	}
}

// TestRandomTree runs random operations of both APIs and checks the
// consistency rules after every one.
func TestRandomTree(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 16, SessionQuota: 4000, MaxFileSize: 500})
	ctx := ctxT(t)
	fs := f.fs
	rng := rand.New(rand.NewPCG(7, 7))
	names := []string{"a", "b", "c", "d"}
	randPath := func() string {
		p := ""
		for n := rng.IntN(3) + 1; n > 0; n-- {
			p += "/" + names[rng.IntN(len(names))]
		}
		return p
	}
	var open []int64
	ok := 0
	for i := 0; i < 600; i++ {
		p, q := randPath(), randPath()
		var err error
		switch rng.IntN(12) {
		case 0:
			_, _, err = fs.WriteFile(ctx, p, bytes.Repeat([]byte{'x'}, rng.IntN(600)), WriteOptions{})
		case 1:
			_, _, err = fs.MkdirAll(ctx, p, false)
		case 2:
			err = fs.Delete(ctx, p, rng.IntN(2) == 0)
		case 3:
			_, err = fs.Move(ctx, p, q)
		case 4:
			_, err = fs.Copy(ctx, p, q)
		case 5:
			var a Attr
			if a, err = fs.resolveAttr(ctx, p); err == nil {
				_, err = fs.WriteAt(ctx, a.Ino, []byte("hello world, hello"), int64(rng.IntN(100)))
			}
		case 6:
			var a Attr
			if a, err = fs.resolveAttr(ctx, p); err == nil {
				n := int64(rng.IntN(200))
				_, err = fs.SetAttr(ctx, a.Ino, AttrChange{Size: &n})
			}
		case 7:
			var a, d Attr
			if a, err = fs.resolveAttr(ctx, p); err == nil {
				if d, err = fs.resolveAttr(ctx, "/a"); err == nil {
					_, err = fs.Link(ctx, a.Ino, d.Ino, names[rng.IntN(4)])
				}
			}
		case 8:
			var d Attr
			if d, err = fs.resolveAttr(ctx, "/b"); err == nil {
				err = fs.Rename(ctx, d.Ino, names[rng.IntN(4)], RootIno, names[rng.IntN(4)], uint32(rng.IntN(3)))
			}
		case 9:
			var a Attr
			if a, err = fs.resolveAttr(ctx, p); err == nil && a.IsRegular() {
				fs.Open(a.Ino)
				open = append(open, a.Ino)
			}
		case 10:
			if len(open) > 0 {
				k := rng.IntN(len(open))
				err = fs.Release(ctx, open[k])
				open = append(open[:k], open[k+1:]...)
			}
		case 11:
			_, err = fs.Symlink(ctx, RootIno, names[rng.IntN(4)], q)
		}
		if err == nil {
			ok++
		}
		if cerr := f.v.Check(ctx, f.sid); cerr != nil {
			t.Fatalf("step %d: %v", i, cerr)
		}
	}
	for _, ino := range open {
		if err := fs.Release(ctx, ino); err != nil {
			t.Fatal(err)
		}
	}
	f.check(t)
	t.Logf("%d of 600 operations succeeded", ok)
	var orphans int
	f.db.QueryRow(`SELECT COUNT(*) FROM fs_orphan`).Scan(&orphans)
	if orphans != 0 {
		t.Fatalf("%d orphans left after every release", orphans)
	}
}
