package vfs

import (
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
)

// invalRecorder is an Invalidator that keeps every report.
type invalRecorder struct {
	mu  sync.Mutex
	got []invalReport
}

type invalReport struct {
	sid    string
	origin any
	ch     events.Change
}

func (r *invalRecorder) Invalidate(sid string, origin any, ch events.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, invalReport{sid, origin, ch})
}

// take returns the one report since the last take (failing on any other count).
func (r *invalRecorder) take(t *testing.T, what string) invalReport {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	if len(got) != 1 {
		t.Fatalf("%s: %d reports, want 1: %+v", what, len(got), got)
	}
	return got[0]
}

func (r *invalRecorder) none(t *testing.T, what string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) != 0 {
		t.Fatalf("%s: reported %+v, want nothing", what, r.got)
	}
}

func wantEntry(t *testing.T, rep invalReport, parent int64, name string) {
	t.Helper()
	if !slices.Contains(rep.ch.Entries, events.Entry{Parent: parent, Name: name}) {
		t.Fatalf("entries %v lack %d/%s", rep.ch.Entries, parent, name)
	}
	if !slices.Contains(rep.ch.Attrs, parent) {
		t.Fatalf("attrs %v lack the directory %d", rep.ch.Attrs, parent)
	}
}

// TestInvalidatorReports checks that every kind of change reports, once and
// after its commit, the names and inodes it touched with the origin of its
// context, through the inode API and the path API alike, and that reads and
// failed changes report nothing.
func TestInvalidatorReports(t *testing.T) {
	f := newFixture(t, Config{})
	rec := &invalRecorder{}
	f.v.SetInvalidator(rec)
	origin := &struct{ name string }{"mount a"}
	ctx := events.WithOrigin(ctxT(t), origin)

	d, err := f.fs.Mkdir(ctx, RootIno, "d", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	rep := rec.take(t, "mkdir")
	if rep.sid != f.sid || rep.origin != origin {
		t.Fatalf("report session %q origin %v, want %q %v", rep.sid, rep.origin, f.sid, origin)
	}
	wantEntry(t, rep, RootIno, "d")

	a, err := f.fs.Create(ctx, d.Ino, "f", 0o644, false)
	if err != nil {
		t.Fatal(err)
	}
	wantEntry(t, rec.take(t, "create"), d.Ino, "f")

	if _, err := f.fs.WriteAt(ctx, a.Ino, []byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	if rep := rec.take(t, "write"); !slices.Contains(rep.ch.Data, a.Ino) {
		t.Fatalf("write: data %v lacks %d", rep.ch.Data, a.Ino)
	}

	mode := uint32(0o600)
	if _, err := f.fs.SetAttr(ctx, a.Ino, AttrChange{Mode: &mode}); err != nil {
		t.Fatal(err)
	}
	if rep := rec.take(t, "chmod"); !slices.Contains(rep.ch.Attrs, a.Ino) {
		t.Fatalf("chmod: attrs %v lack %d", rep.ch.Attrs, a.Ino)
	}

	if _, err := f.fs.Link(ctx, a.Ino, RootIno, "g"); err != nil {
		t.Fatal(err)
	}
	rep = rec.take(t, "link")
	wantEntry(t, rep, RootIno, "g")
	if !slices.Contains(rep.ch.Attrs, a.Ino) {
		t.Fatalf("link: attrs %v lack the link count of %d", rep.ch.Attrs, a.Ino)
	}

	if err := f.fs.Rename(ctx, d.Ino, "f", RootIno, "r", 0); err != nil {
		t.Fatal(err)
	}
	rep = rec.take(t, "rename")
	wantEntry(t, rep, d.Ino, "f")
	wantEntry(t, rep, RootIno, "r")

	if err := f.fs.Unlink(ctx, RootIno, "g"); err != nil {
		t.Fatal(err)
	}
	wantEntry(t, rec.take(t, "unlink"), RootIno, "g")

	// The path API, with no origin (the REST API).
	plain := ctxT(t)
	if _, _, err := f.fs.WriteFile(plain, "/d/h", []byte("x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	rep = rec.take(t, "write file")
	if rep.origin != nil {
		t.Fatalf("origin %v, want none", rep.origin)
	}
	wantEntry(t, rep, d.Ino, "h")
	h, err := f.fs.Lookup(plain, d.Ino, "h")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.fs.WriteFile(plain, "/d/h", []byte("yy"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if rep := rec.take(t, "overwrite"); !slices.Contains(rep.ch.Data, h.Ino) {
		t.Fatalf("overwrite: data %v lacks %d", rep.ch.Data, h.Ino)
	}
	if _, err := f.fs.Move(plain, "/d", "/e"); err != nil {
		t.Fatal(err)
	}
	rep = rec.take(t, "move")
	wantEntry(t, rep, RootIno, "d")
	wantEntry(t, rep, RootIno, "e")
	if err := f.fs.Delete(plain, "/e", true); err != nil {
		t.Fatal(err)
	}
	wantEntry(t, rec.take(t, "recursive delete"), RootIno, "e")

	// Reads and failures report nothing.
	f.fs.Lookup(ctx, RootIno, "e")
	f.fs.ReadDir(ctx, RootIno)
	if _, err := f.fs.Mkdir(ctx, RootIno, "x", 0o755); err != nil {
		t.Fatal(err)
	}
	rec.take(t, "mkdir x")
	if _, err := f.fs.Mkdir(ctx, RootIno, "x", 0o755); !IsErrno(err, syscall.EEXIST) {
		t.Fatalf("second mkdir: %v, want EEXIST", err)
	}
	rec.none(t, "reads and a failed mkdir")
	f.check(t)
}
