package vfs

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"path"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
	"github.com/filepath-dev/filepath/orchestrator/vfs/treediff"
)

// The model of a workspace for the lazy-fork tests: paths to nodes; the
// names of a hard link share one *mfile.
type mfile struct{ data []byte }

type mnode struct {
	kind   byte // 'f', 'd', 'l'
	file   *mfile
	target string
	mode   uint32 // permissions
}

type mtree map[string]*mnode

// clone deep-copies t, keeping hard links shared within the copy.
func (t mtree) clone() mtree {
	files := map[*mfile]*mfile{}
	out := mtree{}
	for p, n := range t {
		c := *n
		if n.file != nil {
			if files[n.file] == nil {
				files[n.file] = &mfile{data: bytes.Clone(n.file.data)}
			}
			c.file = files[n.file]
		}
		out[p] = &c
	}
	return out
}

func (t mtree) dirs() []string {
	out := []string{"/"}
	for p, n := range t {
		if n.kind == 'd' {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func (t mtree) paths(kind byte) []string {
	var out []string
	for p, n := range t {
		if kind == 0 || n.kind == kind {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func (t mtree) links(f *mfile) int {
	n := 0
	for _, m := range t {
		if m.file == f {
			n++
		}
	}
	return n
}

// inoOf walks p with Lookup, as the kernel does: in a lazy fork every step
// copies the directory it looks in.
func inoOf(tb testing.TB, fs *FS, p string) int64 {
	tb.Helper()
	ino := RootIno
	if p == "/" {
		return ino
	}
	for _, seg := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		a, err := fs.Lookup(context.Background(), ino, seg)
		if err != nil {
			tb.Fatalf("lookup %s (at %q): %v", p, seg, err)
		}
		ino = a.Ino
	}
	return ino
}

// compareTree walks the whole workspace with ReadDirPlus, ReadAt and
// Readlink and compares it, link counts included, with the model.
func compareTree(tb testing.TB, fs *FS, want mtree) {
	tb.Helper()
	ctx := context.Background()
	got := map[string]bool{}
	var walk func(dir int64, prefix string)
	walk = func(dir int64, prefix string) {
		ents, err := fs.ReadDirPlus(ctx, dir)
		if err != nil {
			tb.Fatalf("%s: readdir %q: %v", fs.sid, prefix, err)
		}
		for _, e := range ents {
			p := prefix + "/" + e.Name
			got[p] = true
			w := want[p]
			if w == nil {
				tb.Fatalf("%s: %s exists, the model has no such path", fs.sid, p)
			}
			a := e.Attr
			switch w.kind {
			case 'd':
				if !a.IsDir() {
					tb.Fatalf("%s: %s is not a directory", fs.sid, p)
				}
				walk(a.Ino, p)
			case 'l':
				t, err := fs.Readlink(ctx, a.Ino)
				if err != nil || t != w.target {
					tb.Fatalf("%s: %s -> %q (%v), want %q", fs.sid, p, t, err, w.target)
				}
			case 'f':
				if !a.IsRegular() {
					tb.Fatalf("%s: %s is not a file", fs.sid, p)
				}
				b := make([]byte, a.Size+10)
				n, err := fs.ReadAt(ctx, a.Ino, b, 0)
				if err != nil {
					tb.Fatal(err)
				}
				if !bytes.Equal(b[:n], w.file.data) {
					tb.Fatalf("%s: %s holds %d bytes, want %d (%q vs %q)", fs.sid, p, n, len(w.file.data), b[:min(n, 20)], w.file.data[:min(len(w.file.data), 20)])
				}
				if int(a.Nlink) != want.links(w.file) {
					tb.Fatalf("%s: %s has link count %d, want %d", fs.sid, p, a.Nlink, want.links(w.file))
				}
			}
			if w.kind != 'l' && a.Mode&ModePerm != w.mode {
				tb.Fatalf("%s: %s has mode %o, want %o", fs.sid, p, a.Mode&ModePerm, w.mode)
			}
		}
	}
	walk(RootIno, "")
	for p := range want {
		if !got[p] {
			tb.Fatalf("%s: %s is missing", fs.sid, p)
		}
	}
}

// lazyOps applies random changes through the inode API (what a mount does)
// to workspace fs and its model.
type lazyOps struct {
	tb  testing.TB
	rng *rand.Rand
	n   int
}

func (o *lazyOps) pick(list []string) string { return list[o.rng.Intn(len(list))] }

func (o *lazyOps) step(fs *FS, m mtree) {
	tb, rng, ctx := o.tb, o.rng, context.Background()
	o.n++
	name := fmt.Sprintf("n%d", o.n)
	dir := o.pick(m.dirs())
	child := path.Join(dir, name)
	switch op := rng.Intn(11); op {
	case 0, 1: // new file
		a, err := fs.Create(ctx, inoOf(tb, fs, dir), name, 0o644, true)
		if err != nil {
			tb.Fatalf("create %s: %v", child, err)
		}
		data := pattern(byte(o.n), rng.Intn(300))
		if _, err := fs.WriteAt(ctx, a.Ino, data, 0); err != nil {
			tb.Fatal(err)
		}
		m[child] = &mnode{kind: 'f', file: &mfile{data: data}, mode: 0o644}
	case 2: // write into a file (all its names see it)
		files := m.paths('f')
		if len(files) == 0 {
			return
		}
		p := o.pick(files)
		f := m[p].file
		off := rng.Intn(len(f.data) + 10)
		data := pattern(byte(o.n+3), 1+rng.Intn(100))
		if _, err := fs.WriteAt(ctx, inoOf(tb, fs, p), data, int64(off)); err != nil {
			tb.Fatal(err)
		}
		nb := make([]byte, max(len(f.data), off+len(data)))
		copy(nb, f.data)
		copy(nb[off:], data)
		f.data = nb
	case 3: // unlink a file or symlink
		var list []string
		for _, p := range m.paths(0) {
			if m[p].kind != 'd' {
				list = append(list, p)
			}
		}
		if len(list) == 0 {
			return
		}
		p := o.pick(list)
		if err := fs.Unlink(ctx, inoOf(tb, fs, path.Dir(p)), path.Base(p)); err != nil {
			tb.Fatalf("unlink %s: %v", p, err)
		}
		delete(m, p)
	case 4: // mkdir
		if _, err := fs.Mkdir(ctx, inoOf(tb, fs, dir), name, 0o755); err != nil {
			tb.Fatalf("mkdir %s: %v", child, err)
		}
		m[child] = &mnode{kind: 'd', mode: 0o755}
	case 5: // rmdir: refused while the directory has names (maybe only in the base)
		ds := m.dirs()[1:]
		if len(ds) == 0 {
			return
		}
		p := o.pick(ds)
		empty := true
		for q := range m {
			if isUnder(q, p) {
				empty = false
			}
		}
		err := fs.Rmdir(ctx, inoOf(tb, fs, path.Dir(p)), path.Base(p))
		switch {
		case empty && err != nil:
			tb.Fatalf("rmdir %s: %v", p, err)
		case !empty && !IsErrno(err, syscall.ENOTEMPTY):
			tb.Fatalf("rmdir of non-empty %s: %v, want ENOTEMPTY", p, err)
		case empty:
			delete(m, p)
		}
	case 6: // rename anything to a new name in another directory
		all := m.paths(0)
		if len(all) == 0 {
			return
		}
		p := o.pick(all)
		if dir == p || isUnder(dir, p) {
			return
		}
		if err := fs.Rename(ctx, inoOf(tb, fs, path.Dir(p)), path.Base(p), inoOf(tb, fs, dir), name, 0); err != nil {
			tb.Fatalf("rename %s to %s: %v", p, child, err)
		}
		moved := mtree{}
		for q, n := range m {
			if q == p || isUnder(q, p) {
				moved[child+strings.TrimPrefix(q, p)] = n
				delete(m, q)
			}
		}
		for q, n := range moved {
			m[q] = n
		}
	case 7: // hard link
		files := m.paths('f')
		if len(files) == 0 {
			return
		}
		p := o.pick(files)
		if _, err := fs.Link(ctx, inoOf(tb, fs, p), inoOf(tb, fs, dir), name); err != nil {
			tb.Fatalf("link %s to %s: %v", p, child, err)
		}
		m[child] = &mnode{kind: 'f', file: m[p].file, mode: m[p].mode}
	case 8: // symlink
		target := fmt.Sprintf("target-%d", o.n)
		if _, err := fs.Symlink(ctx, inoOf(tb, fs, dir), name, target); err != nil {
			tb.Fatal(err)
		}
		m[child] = &mnode{kind: 'l', target: target}
	case 9: // chmod
		all := m.paths(0)
		if len(all) == 0 {
			return
		}
		p := o.pick(all)
		if m[p].kind == 'l' {
			return
		}
		mode := uint32(0o600 + rng.Intn(0o100))
		if _, err := fs.SetAttr(ctx, inoOf(tb, fs, p), AttrChange{Mode: &mode}); err != nil {
			tb.Fatal(err)
		}
		for _, n := range m {
			if n == m[p] || (n.file != nil && n.file == m[p].file) {
				n.mode = mode
			}
		}
	case 10: // list a directory (copies it in a lazy fork, changes nothing)
		if _, err := fs.ReadDir(ctx, inoOf(tb, fs, dir)); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestLazyForkRandom makes forks (and forks of forks, of forks) of a tree
// with directories, hard links and symlinks, then changes the origin and
// the forks at random through the inode API, as a mount does, while they
// read through their layers, and compacts the fork points in between (as
// the background compaction does after a fork of a fork). Every workspace must match a
// model where each fork is a deep copy; then every one passes the
// consistency check, the bases (views) included, and each fork's diff
// lists exactly what differs from its fork point.
func TestLazyForkRandom(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			f := newFixture(t, Config{ChunkSize: 64})
			ops := &lazyOps{tb: t, rng: rand.New(rand.NewSource(seed))}
			models := map[string]mtree{f.sid: {}}
			ids := []string{f.sid}
			for range 60 {
				ops.step(f.fs, models[f.sid])
			}
			for step := range 400 {
				ws := ids[ops.rng.Intn(len(ids))]
				if ops.rng.Intn(50) == 0 {
					if err := f.v.CompactForks(ctxT(t), f.sid); err != nil {
						t.Fatal(err)
					}
				}
				if ops.rng.Intn(40) == 0 && len(ids) < 7 {
					fk := mustFork(t, f.v, ws)
					models[fk.ID] = models[ws].clone()
					models[fk.Base] = models[ws].clone()
					ids = append(ids, fk.ID)
					continue
				}
				ops.step(f.v.Session(ws), models[ws])
				if step%100 == 99 {
					// a fork that has not copied everything yet reads
					// like its model
					w := ids[ops.rng.Intn(len(ids))]
					compareTree(t, f.v.Session(w), models[w])
				}
			}
			checkAgainstModels(t, f, ids, models)
			var deep, full int
			if err := f.db.QueryRow(`SELECT (SELECT COUNT(*) FROM fs_fork b JOIN fs_fork o ON o.ws=b.parent_ws WHERE b.kind='base' AND o.kind='fork'),
				(SELECT COUNT(*) FROM fs_fork WHERE "full"=1)`).Scan(&deep, &full); err != nil {
				t.Fatal(err)
			}
			if deep > 0 && full == 0 {
				t.Fatalf("%d fork points of forks, none compacted", deep)
			}
			t.Logf("%d fork points of forks, %d compacted", deep, full)
		})
	}
}

func sortedMap(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// A fork copies nothing when it is made, whatever the workspace's size:
// its frozen base and the fork hold a handful of rows, and a directory is
// copied the first time the fork uses it.
func TestLazyForkCopiesNothingUpFront(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	for d := range 10 {
		for i := range 50 {
			mustWrite(t, f.fs, fmt.Sprintf("/d%d/f%d", d, i), []byte("x"))
		}
	}
	fk := mustFork(t, f.v, f.sid)
	rows := func(ws string) int {
		var n int
		if err := f.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM fs_inode WHERE session_id=?1) + (SELECT COUNT(*) FROM fs_dentry WHERE session_id=?1)
			+ (SELECT COUNT(*) FROM fs_fork_dentry WHERE ws=?1)`, ws).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows(fk.ID); n != 0 {
		t.Fatalf("a new fork holds %d metadata rows, want 0", n)
	}
	if n := rows(fk.Base); n != 0 {
		t.Fatalf("a new fork point holds %d metadata rows, want 0", n)
	}
	cfs := f.v.Session(fk.ID)
	if _, err := cfs.Lookup(ctx, RootIno, "d3"); err != nil {
		t.Fatal(err)
	}
	// reads go through to the fork point: a first use copies nothing
	if n := rows(fk.ID); n != 0 {
		t.Fatalf("after a lookup in the root the fork holds %d rows, want 0", n)
	}
	d3 := inoOf(t, cfs, "/d3")
	if kids, err := cfs.ReadDirPlus(ctx, d3); err != nil || len(kids) != 50 {
		t.Fatalf("listing /d3 of the fork: %d entries, %v; want 50", len(kids), err)
	}
	if _, err := cfs.List(ctx, "/d4"); err != nil {
		t.Fatal(err)
	}
	if n := rows(fk.ID); n != 0 {
		t.Fatalf("after listing /d3 the fork holds %d rows, want 0", n)
	}
	// a change copies up the one inode it changes and adds one name
	mustWrite(t, cfs, "/d3/f1", []byte("changed"))
	if err := cfs.Delete(ctx, "/d3/f2", false); err != nil {
		t.Fatal(err)
	}
	if n := rows(fk.ID); n > 6 {
		t.Fatalf("after a write and a delete the fork holds %d rows, want at most 6", n)
	}
	// the origin's changes after the fork are saved into the fork point
	// once each, before they happen, and the fork does not see them
	if err := f.fs.Delete(ctx, "/d5", true); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f.fs, "/d6/f1", []byte("new"))
	if n := rows(fk.Base); n == 0 {
		t.Fatal("the origin changed and deleted files, and its fork point saved none of them")
	}
	if got := readAt(t, cfs, "/d6/f1", 10, 0); string(got) != "x" {
		t.Fatalf("the fork reads %q, want the fork point's %q", got, "x")
	}
	if _, err := cfs.Stat(ctx, "/d5/f7"); err != nil {
		t.Fatalf("the fork lost a file its origin deleted: %v", err)
	}
	checkAll(t, f.v, fk.Base, fk.ID, f.sid)
}

// Many goroutines using the same directories of a new fork at once (what a
// parallel build in the child does) copy each directory once: every file
// is there once, with its link count, and every goroutine's new files too.
func TestLazyForkConcurrentFirstUse(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	model := mtree{}
	for d := range 12 {
		model[fmt.Sprintf("/d%d", d)] = &mnode{kind: 'd', mode: 0o755}
		for i := range 15 {
			p := fmt.Sprintf("/d%d/f%d", d, i)
			mustWrite(t, f.fs, p, []byte(p))
			model[p] = &mnode{kind: 'f', file: &mfile{data: []byte(p)}, mode: 0o644}
		}
	}
	// a hard link across two directories
	if _, err := f.fs.Link(ctx, inoOf(t, f.fs, "/d0/f0"), inoOf(t, f.fs, "/d7"), "link"); err != nil {
		t.Fatal(err)
	}
	model["/d7/link"] = &mnode{kind: 'f', file: model["/d0/f0"].file, mode: 0o644}
	// the modes the model gives: mustWrite's
	for p, n := range model {
		if n.kind == 'f' {
			n.mode = mustStat(t, f.fs, p).Mode & ModePerm
		}
	}
	fk := mustFork(t, f.v, f.sid)
	cfs := f.v.Session(fk.ID)
	const workers = 8
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			errs <- func() error {
				for d := range 12 {
					dir, err := cfs.Lookup(ctx, RootIno, fmt.Sprintf("d%d", (d+w)%12))
					if err != nil {
						return err
					}
					if _, err := cfs.Lookup(ctx, dir.Ino, "f3"); err != nil {
						return err
					}
					if _, err := cfs.Create(ctx, dir.Ino, fmt.Sprintf("w%d", w), 0o600, true); err != nil {
						return err
					}
				}
				return nil
			}()
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for d := range 12 {
		for w := range workers {
			model[fmt.Sprintf("/d%d/w%d", d, w)] = &mnode{kind: 'f', file: &mfile{}, mode: 0o600}
		}
	}
	compareTree(t, cfs, model)
	checkAll(t, f.v, fk.ID, fk.Base)
}

// A restarted orchestrator picks a lazy fork up where it was: directories
// copied before stay copied (no second copy), the rest are copied on use.
func TestLazyForkAfterRestart(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	for _, p := range []string{"/a/1", "/a/2", "/b/1", "/b/c/1"} {
		mustWrite(t, f.fs, p, []byte(p))
	}
	fk := mustFork(t, f.v, f.sid)
	cfs := f.v.Session(fk.ID)
	a := inoOf(t, cfs, "/a")
	if _, err := cfs.ReadDirPlus(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := cfs.Unlink(ctx, a, "1"); err != nil {
		t.Fatal(err)
	}
	f.v.Close()
	v2 := New(f.db, Config{})
	c2 := v2.Session(fk.ID)
	// /a is copied: its first name stays deleted, nothing is copied twice
	if _, err := c2.Lookup(ctx, a, "1"); !IsErrno(err, syscall.ENOENT) {
		t.Fatalf("after a restart the fork's deleted /a/1 looks up as %v, want ENOENT", err)
	}
	if _, err := c2.Create(ctx, a, "3", 0o644, true); err != nil {
		t.Fatal(err)
	}
	m := mtree{}
	for _, p := range []string{"/a", "/b", "/b/c"} {
		m[p] = &mnode{kind: 'd', mode: mustStat(t, f.fs, p).Mode & ModePerm}
	}
	for _, p := range []string{"/a/2", "/b/1", "/b/c/1"} {
		m[p] = &mnode{kind: 'f', file: &mfile{data: []byte(p)}, mode: mustStat(t, f.fs, p).Mode & ModePerm}
	}
	m["/a/3"] = &mnode{kind: 'f', file: &mfile{}, mode: 0o644}
	compareTree(t, c2, m)
	checkAll(t, v2, fk.ID, fk.Base, f.sid)
}

// A fork made by a caller whose changes may wait in the open batch (a
// mount's request carries an origin) is committed when Fork returns: the
// new fork at once reads as its origin did.
func TestForkFromABatchedCallerIsVisible(t *testing.T) {
	f := newFixture(t, Config{BatchDelay: time.Hour}) // only a commit makes changes visible
	ctx := events.WithOrigin(ctxT(t), "a mount")
	mustWrite(t, f.fs, "/a/1", []byte("one"))
	fk := mustFork(t, f.v, f.sid)
	cfs := f.v.Session(fk.ID)
	a, err := cfs.Lookup(ctx, RootIno, "a")
	if err != nil {
		t.Fatalf("the new fork does not show its origin's /a: %v", err)
	}
	if _, err := cfs.Lookup(ctx, a.Ino, "1"); err != nil {
		t.Fatal(err)
	}
}

// checkAgainstModels compares every workspace in ids with its model, runs
// Check on it and on every fork point, and checks that each fork's diff
// lists exactly the paths where its model differs from its fork point's.
func checkAgainstModels(t *testing.T, f *fixture, ids []string, models map[string]mtree) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		compareTree(t, f.v.Session(id), models[id])
		checkAll(t, f.v, id)
	}
	forks, err := f.v.Forks(ctx, f.sid)
	if err != nil {
		t.Fatal(err)
	}
	for _, fk := range forks {
		checkAll(t, f.v, fk.Base)
		got := diffOps(t, f, fk.ID)
		want := map[string]string{}
		base, cur := models[fk.Base], models[fk.ID]
		for p, n := range cur {
			b := base[p]
			switch {
			case b == nil:
				want[p] = treediff.Added
			case b.kind != n.kind || b.mode != n.mode || b.target != n.target ||
				(n.kind == 'f' && !bytes.Equal(b.file.data, n.file.data)):
				want[p] = treediff.Changed
			}
		}
		for p := range base {
			if cur[p] == nil {
				want[p] = treediff.Deleted
			}
		}
		if fmt.Sprint(sortedMap(got)) != fmt.Sprint(sortedMap(want)) {
			t.Fatalf("diff of %s:\n got %v\nwant %v", fk.ID, sortedMap(got), sortedMap(want))
		}
	}
}

// A fork copies inode rows with the columns inodeCols names, and migration
// 0013's triggers save them with their own list: both must name every
// column of fs_inode, or a migration that adds one would fork without it.
func TestLazyForkCopiesEveryInodeColumn(t *testing.T) {
	f := newFixture(t, Config{})
	q := `SELECT name FROM pragma_table_info('fs_inode') WHERE name != 'session_id' ORDER BY cid`
	if f.v.pg {
		q = `SELECT column_name FROM information_schema.columns WHERE table_name = 'fs_inode' AND column_name != 'session_id' ORDER BY ordinal_position`
	}
	rows, err := f.db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	rows.Close()
	if got, want := inodeCols, strings.Join(cols, ", "); got != want {
		t.Fatalf("inodeCols = %q, fs_inode has %q", got, want)
	}
	for _, trig := range []string{"fs_inode_fork_update", "fs_inode_fork_delete"} {
		var sqlText string
		q := `SELECT sql FROM sqlite_master WHERE type='trigger' AND name=?`
		if f.v.pg { // the trigger's function
			q = `SELECT p.prosrc FROM pg_trigger tg JOIN pg_proc p ON p.oid = tg.tgfoid WHERE tg.tgname = ?`
		}
		if err := f.db.QueryRow(q, trig).Scan(&sqlText); err != nil {
			t.Fatalf("trigger %s: %v", trig, err)
		}
		for _, c := range cols {
			if !strings.Contains(sqlText, "OLD."+c) {
				t.Errorf("trigger %s does not save column %s", trig, c)
			}
		}
	}
}
