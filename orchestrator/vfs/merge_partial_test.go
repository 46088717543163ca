package vfs

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
)

// modelOf reads workspace fs into a model (names of one inode share one
// *mfile): the model of a workspace a merge has just written.
func modelOf(tb testing.TB, fs *FS) mtree {
	tb.Helper()
	ctx := context.Background()
	m, files := mtree{}, map[int64]*mfile{}
	var walk func(dir int64, prefix string)
	walk = func(dir int64, prefix string) {
		ents, err := fs.ReadDirPlus(ctx, dir)
		if err != nil {
			tb.Fatal(err)
		}
		for _, e := range ents {
			p, a := prefix+"/"+e.Name, e.Attr
			switch {
			case a.IsDir():
				m[p] = &mnode{kind: 'd', mode: a.Mode & ModePerm}
				walk(a.Ino, p)
			case a.Mode&ModeType == ModeSymlink:
				t, err := fs.Readlink(ctx, a.Ino)
				if err != nil {
					tb.Fatal(err)
				}
				m[p] = &mnode{kind: 'l', target: t}
			default:
				if files[a.Ino] == nil {
					b := make([]byte, a.Size)
					n, err := fs.ReadAt(ctx, a.Ino, b, 0)
					if err != nil {
						tb.Fatal(err)
					}
					files[a.Ino] = &mfile{data: b[:n]}
				}
				m[p] = &mnode{kind: 'f', file: files[a.Ino], mode: a.Mode & ModePerm}
			}
		}
	}
	walk(RootIno, "")
	return m
}

// samePlans plans fork fk's merge from the trees restricted to what
// changed on either side (what Merge reads) and from the whole trees, and
// fails when the plans differ.
func samePlans(tb testing.TB, v *VFS, fk ForkInfo) {
	tb.Helper()
	ctx := context.Background()
	tx, err := v.r.beginRead(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.done(ctx)
	part, _, err := v.mergePlan(ctx, tx, fk, false)
	if err != nil {
		tb.Fatal(err)
	}
	whole, _, err := v.mergePlan(ctx, tx, fk, true)
	if err != nil {
		tb.Fatal(err)
	}
	if g, w := fmt.Sprintf("%+v", part), fmt.Sprintf("%+v", whole); g != w {
		tb.Fatalf("merge of %s from the changes:\n%s\nfrom the whole trees:\n%s", fk.ID, g, w)
	}
}

// TestMergeReadsOnlyChanges: a merge reads only what the fork and its
// origin changed since the fork (partialMergeTrees), and plans exactly
// what it planned from the whole trees: random changes on both sides
// (renames of files and directories, exchanges, hard links, symlinks,
// truncates, chmods, and in the session the path API's recursive delete
// and move), forks of forks with their fork points compacted or not
// (a lazy fork point of a fork records its origin's changes too), merges
// in between, and every fork's plan compared after each round.
func TestMergeReadsOnlyChanges(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			f := newFixture(t, Config{ChunkSize: 64})
			if seed%2 == 0 {
				// no background compaction: fork points of forks stay
				// views of their origin
				f.v.bgMu.Lock()
				f.v.bgClosed = true
				f.v.bgMu.Unlock()
			}
			ctx := context.Background()
			ops := &lazyOps{tb: t, rng: rand.New(rand.NewSource(seed * 104729))}
			models := map[string]mtree{f.sid: {}}
			ids := []string{f.sid}
			forks := map[string]ForkInfo{}
			for range 60 {
				ops.step(f.fs, models[f.sid])
			}
			for round := range 8 {
				for range 60 {
					ws := ids[ops.rng.Intn(len(ids))]
					if ops.rng.Intn(25) == 0 && len(ids) < 6 {
						fk := mustFork(t, f.v, ws)
						models[fk.ID] = models[ws].clone()
						ids = append(ids, fk.ID)
						forks[fk.ID] = fk
						continue
					}
					reviewStep(ops, f.v.Session(ws), models[ws], ws == f.sid)
				}
				for _, id := range ids[1:] {
					samePlans(t, f.v, forks[id])
				}
				if len(ids) > 1 && round%2 == 1 {
					fk := forks[ids[1+ops.rng.Intn(len(ids)-1)]]
					if _, err := f.v.Merge(ctx, fk.ID, MergeOptions{}); err != nil {
						t.Fatal(err)
					}
					models[fk.Origin] = modelOf(t, f.v.Session(fk.Origin))
					samePlans(t, f.v, fk)
					checkAll(t, f.v, fk.Origin, fk.ID, fk.Base)
				}
			}
		})
	}
}
