package vfs

import (
	"context"
	"fmt"
	"math/rand"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
	"github.com/filepath-dev/filepath/orchestrator/vfs/treediff"
)

// A lazy fork renames, as any workspace does, a directory to a longer
// name although a path below it, in directories the fork has not copied
// yet, is then longer than paths.MaxPathLen (the kernel limits the path a
// call is given, not how deep a file lies); the fork's diff lists the
// moved files at their new paths and a merge makes them in the parent.
func TestLazyForkRenameDeep(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	name := strings.Repeat("n", 250)
	deep := "/s" + strings.Repeat("/"+name, 16) // 4018 bytes
	mustWrite(t, f.fs, deep+"/f", []byte("x"))
	mustWrite(t, f.fs, "/t/g", []byte("y"))
	fk := mustFork(t, f.v, f.sid)
	cfs := f.v.Session(fk.ID)
	// a mount looks /s up (it copies the root, not /s nor below)
	if _, err := cfs.Lookup(ctx, RootIno, "s"); err != nil {
		t.Fatal(err)
	}
	longer := "s" + strings.Repeat("x", 100)
	if err := cfs.Rename(ctx, RootIno, "s", RootIno, longer, 0); err != nil {
		t.Fatalf("rename /s to a longer name in the fork: %v", err)
	}
	d, err := cfs.Lookup(ctx, mustLookup(t, cfs, RootIno, longer).Ino, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfs.Rename(ctx, RootIno, "t", d.Ino, "t", 0); err != nil {
		t.Fatalf("rename /t below it: %v", err)
	}
	diff, err := f.v.Diff(ctx, fk.ID, DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moved := "/" + longer + deep[2:] + "/f" // 4120 bytes
	var found bool
	for _, c := range diff.Changes {
		found = found || c.Path == moved && c.Op == treediff.Added
	}
	if !found {
		t.Fatalf("the diff has no %d-byte path %s...", len(moved), moved[:20])
	}
	res, err := f.v.Merge(ctx, fk.ID, MergeOptions{})
	if err != nil || len(res.Conflicts) > 0 {
		t.Fatalf("merge: %+v, %v", res.Conflicts, err)
	}
	// the parent has the deep file, reached by lookups of one name each
	dir := mustLookup(t, f.fs, RootIno, longer).Ino
	for range 16 {
		dir = mustLookup(t, f.fs, dir, name).Ino
	}
	if got := readAll(t, f.fs, mustLookup(t, f.fs, dir, "f").Ino); got != "x" {
		t.Fatalf("the merged deep file holds %q", got)
	}
	wantContent(t, f.fs, "/"+longer+"/"+name+"/t/g", []byte("y"))
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
		fk := mustFork(t, f.v, f.sid)
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

// reviewStep applies one change the lazy-fork random test does not make
// (rename over an existing file, RENAME_EXCHANGE, truncate, and the path
// API's recursive delete and move, which change many rows of the origin
// at once), or else one of lazyOps'.
func reviewStep(o *lazyOps, fs *FS, m mtree, pathAPI bool) {
	tb, rng, ctx := o.tb, o.rng, context.Background()
	o.n++
	parentOf := func(p string) int64 { return inoOf(tb, fs, path.Dir(p)) }
	move := func(from, to string, sub mtree) {
		for q, n := range m {
			if q == from || isUnder(q, from) {
				sub[to+strings.TrimPrefix(q, from)] = n
				delete(m, q)
			}
		}
	}
	all := m.paths(0)
	switch rng.Intn(6) {
	case 0: // rename a file over another file
		files := m.paths('f')
		if len(files) < 2 {
			return
		}
		p, q := o.pick(files), o.pick(files)
		if p == q {
			return
		}
		if err := fs.Rename(ctx, parentOf(p), path.Base(p), parentOf(q), path.Base(q), 0); err != nil {
			tb.Fatalf("rename %s over %s: %v", p, q, err)
		}
		if m[p].file != m[q].file { // two names of one file: nothing happens
			m[q] = m[p]
			delete(m, p)
		}
	case 1: // exchange two entries, neither below the other
		if len(all) < 2 {
			return
		}
		p, q := o.pick(all), o.pick(all)
		if p == q || isUnder(p, q) || isUnder(q, p) {
			return
		}
		if err := fs.Rename(ctx, parentOf(p), path.Base(p), parentOf(q), path.Base(q), RenameExchange); err != nil {
			tb.Fatalf("exchange %s and %s: %v", p, q, err)
		}
		sp, sq := mtree{}, mtree{}
		move(p, q, sp)
		move(q, p, sq)
		for k, n := range sp {
			m[k] = n
		}
		for k, n := range sq {
			m[k] = n
		}
	case 2: // truncate
		files := m.paths('f')
		if len(files) == 0 {
			return
		}
		p := o.pick(files)
		f := m[p].file
		size := int64(rng.Intn(len(f.data) + 80))
		if _, err := fs.SetAttr(ctx, inoOf(tb, fs, p), AttrChange{Size: &size}); err != nil {
			tb.Fatal(err)
		}
		nb := make([]byte, size)
		copy(nb, f.data)
		f.data = nb
	case 3: // the path API deletes a directory and all below it
		if !pathAPI {
			o.step(fs, m)
			return
		}
		ds := m.dirs()[1:]
		if len(ds) == 0 {
			return
		}
		p := o.pick(ds)
		if err := fs.Delete(ctx, p, true); err != nil {
			tb.Fatalf("delete %s: %v", p, err)
		}
		move(p, p, mtree{})
	case 4: // the path API moves anything
		if !pathAPI || len(all) == 0 {
			o.step(fs, m)
			return
		}
		p := o.pick(all)
		dst := path.Join(o.pick(m.dirs()), fmt.Sprintf("m%d", o.n))
		if dst == p || isUnder(dst, p) {
			return
		}
		if _, err := fs.Move(ctx, p, dst); err != nil {
			tb.Fatalf("move %s to %s: %v", p, dst, err)
		}
		sub := mtree{}
		move(p, dst, sub)
		for k, n := range sub {
			m[k] = n
		}
	default:
		o.step(fs, m)
	}
}

// TestLazyForkReviewRandom: lazy forks (and forks of forks) whose origin
// and forks change by renames over files, exchanges, truncates, and in the
// origin by the path API (recursive delete, move: many saved rows at once),
// besides lazyOps' changes. Every workspace matches its deep-copy model,
// passes the check, and each fork's diff against its (view) fork point is
// what the models differ by.
func TestLazyForkReviewRandom(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			f := newFixture(t, Config{ChunkSize: 64})
			ops := &lazyOps{tb: t, rng: rand.New(rand.NewSource(seed * 7919))}
			models := map[string]mtree{f.sid: {}}
			ids := []string{f.sid}
			for range 80 {
				ops.step(f.fs, models[f.sid])
			}
			for range 500 {
				ws := ids[ops.rng.Intn(len(ids))]
				if ops.rng.Intn(40) == 0 && len(ids) < 6 {
					fk := mustFork(t, f.v, ws)
					models[fk.ID] = models[ws].clone()
					models[fk.Base] = models[ws].clone()
					ids = append(ids, fk.ID)
					continue
				}
				// the path API copies a fork whole: keep it to the session
				reviewStep(ops, f.v.Session(ws), models[ws], ws == f.sid)
			}
			checkAgainstModels(t, f, ids, models)
		})
	}
}

// A lazy fork changed through the inode API (some of its directories
// copied, a hard link with names in two directories, one copied) merges
// into its origin, which changed too; both keep changing and a second
// merge applies only the new change, lists the conflict and leaves the
// rest; the fork point stays what it was.
func TestLazyForkMergeThenChange(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 64})
	ctx := ctxT(t)
	p := f.fs
	for _, q := range []string{"/a/x", "/a/y", "/b/z", "/c/d/e"} {
		mustWrite(t, p, q, []byte("orig "+q))
	}
	if _, err := p.Link(ctx, inoOf(t, p, "/a/x"), inoOf(t, p, "/b"), "hx"); err != nil {
		t.Fatal(err)
	}
	fk := mustFork(t, f.v, f.sid)
	c := f.v.Session(fk.ID)
	// the fork: writes /a/x (/b is not copied), creates /c/d/new
	if _, err := c.WriteAt(ctx, inoOf(t, c, "/a/x"), []byte("CHILD"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, inoOf(t, c, "/c/d"), "new", 0o644, true); err != nil {
		t.Fatal(err)
	}
	// the origin: changes /b/z, renames /c/d/e (the view keeps them)
	mustWrite(t, p, "/b/z", []byte("parent z"))
	if _, err := p.Move(ctx, "/c/d/e", "/c/e2"); err != nil {
		t.Fatal(err)
	}
	res, err := f.v.Merge(ctx, fk.ID, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Conflicts) != 0 {
		t.Fatalf("first merge: conflicts %+v", res.Conflicts)
	}
	child := []byte("CHILD/a/x")
	wantContent(t, p, "/a/x", child)
	wantContent(t, p, "/b/hx", child)
	wantContent(t, p, "/b/z", []byte("parent z"))
	wantContent(t, p, "/c/e2", []byte("orig /c/d/e"))
	wantMissing(t, p, "/c/d/e")
	if _, err := p.Stat(ctx, "/c/d/new"); err != nil {
		t.Fatal(err)
	}
	// both change /a/y; the fork also changes /b/z's neighbour
	mustWrite(t, p, "/a/y", []byte("parent y"))
	if _, err := c.WriteAt(ctx, inoOf(t, c, "/a/y"), []byte("CHILD"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mkdir(ctx, inoOf(t, c, "/b"), "sub", 0o755); err != nil {
		t.Fatal(err)
	}
	res, err = f.v.Merge(ctx, fk.ID, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	for _, a := range res.Applied {
		applied = append(applied, a.Path)
	}
	if fmt.Sprint(applied) != "[/b/sub]" || len(res.Conflicts) != 1 || res.Conflicts[0].Path != "/a/y" {
		t.Fatalf("second merge applied %v, conflicts %+v; want [/b/sub] and /a/y", applied, res.Conflicts)
	}
	wantContent(t, p, "/a/y", []byte("parent y"))
	// the fork point is still the origin at the fork
	got := diffOps(t, f, fk.ID)
	want := map[string]string{"/a/x": treediff.Changed, "/b/hx": treediff.Changed, "/a/y": treediff.Changed, "/c/d/new": treediff.Added, "/b/sub": treediff.Added}
	if fmt.Sprint(sortedMap(got)) != fmt.Sprint(sortedMap(want)) {
		t.Fatalf("diff after merges: %v, want %v", sortedMap(got), sortedMap(want))
	}
	checkAll(t, f.v, f.sid, fk.ID, fk.Base)
}

// Deleting a lazy fork while its origin changes (the triggers save rows
// into its fork point) and while its mount still looks up directories:
// the origin's changes all succeed, the fork's calls fail or succeed but
// leave nothing behind, and no row of the fork or its base remains.
func TestLazyForkDeletedWhileOriginChanges(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	for d := range 20 {
		mustWrite(t, f.fs, fmt.Sprintf("/d%d/f", d), []byte("x"))
	}
	fk := mustFork(t, f.v, f.sid)
	cfs := f.v.Session(fk.ID)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { // the origin
		defer wg.Done()
		for i := range 60 {
			p := fmt.Sprintf("/d%d/f", i%20)
			if i%3 == 2 {
				if err := f.fs.Delete(ctx, p, false); err != nil {
					errs <- err
					return
				}
				continue
			}
			if _, _, err := f.fs.WriteFile(ctx, p, []byte(fmt.Sprint(i)), WriteOptions{}); err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() { // the fork's mount
		defer wg.Done()
		for d := range 20 {
			if a, err := cfs.Lookup(ctx, RootIno, fmt.Sprintf("d%d", d)); err == nil {
				_, _ = cfs.Lookup(ctx, a.Ino, "f")
			}
		}
	}()
	if err := f.v.DeleteFork(ctx, fk.ID); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("the origin's change failed while its fork was deleted: %v", err)
	}
	var n int
	if err := f.db.QueryRow(`SELECT (SELECT COUNT(*) FROM fs_inode WHERE session_id IN (?1, ?2)) + (SELECT COUNT(*) FROM fs_dentry WHERE session_id IN (?1, ?2))
		+ (SELECT COUNT(*) FROM fs_fork_dentry WHERE ws IN (?1, ?2))
		+ (SELECT COUNT(*) FROM fs_data WHERE session_id IN (?1, ?2)) + (SELECT COUNT(*) FROM agent_session WHERE id IN (?1, ?2))`, fk.ID, fk.Base).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d rows of the deleted fork remain", n)
	}
	f.check(t)
}

// A lazy fork's own new directories have no names in its fork point: a
// mount's creates in them stay in the open batch (group commit) as in any
// workspace. Each first use of one was a change and a commit of its own,
// which made creating 200 directories with a file each about 7x slower in
// a lazy fork than in a session (BenchmarkNewDirs).
func TestLazyForkNewDirKeepsGroupCommit(t *testing.T) {
	f := newFixture(t, Config{BatchDelay: time.Hour})
	ctx := ctxT(t)
	mustWrite(t, f.fs, "/a/x", []byte("x"))
	fk := mustFork(t, f.v, f.sid)
	c := f.v.Session(fk.ID)
	mctx := events.WithOrigin(ctx, "mount")
	if _, err := c.Lookup(mctx, RootIno, "a"); err != nil { // copies the root, committed
		t.Fatal(err)
	}
	committed := func() int {
		t.Helper()
		var n int
		if err := f.v.rq.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM fs_dentry WHERE session_id=?`, fk.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := committed()
	d, err := c.Mkdir(mctx, RootIno, "new", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(mctx, d.Ino, "f", 0o644, true); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Mkdir(mctx, d.Ino, "sub", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Symlink(mctx, sub.Ino, "l", "../f"); err != nil {
		t.Fatal(err)
	}
	if n := committed(); n != before {
		t.Fatalf("%d names committed while the batch is open, want %d", n, before)
	}
	if err := c.Fsync(mctx, RootIno); err != nil {
		t.Fatal(err)
	}
	m := mtree{
		"/a": {kind: 'd', mode: mustStat(t, f.fs, "/a").Mode & ModePerm}, "/a/x": {kind: 'f', file: &mfile{data: []byte("x")}, mode: mustStat(t, f.fs, "/a/x").Mode & ModePerm},
		"/new": {kind: 'd', mode: 0o755}, "/new/f": {kind: 'f', file: &mfile{}, mode: 0o644}, "/new/sub": {kind: 'd', mode: 0o755}, "/new/sub/l": {kind: 'l', target: "../f"},
	}
	compareTree(t, c, m)
	checkAll(t, f.v, fk.ID, fk.Base)
}
