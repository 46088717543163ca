package vfs

import (
	"strings"
	"testing"
)

// A file's type comes from its bytes, follows it through a rename, is
// detected again after a write through the inode API (the mount), and a
// copy is derived with the same type.
func TestFileMetaFollowsTheBytes(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	img := pngBytes(t)
	if _, _, err := f.fs.WriteFile(ctx, "/pic.txt", img, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := f.fs.Info(ctx, "/pic.txt")
	if err != nil || d.MimeType != "image/png" || d.Source != SourceUpload || d.NodeID != "" {
		t.Fatalf("a PNG named .txt: %+v %v", d.Meta, err)
	}
	if _, err := f.fs.Move(ctx, "/pic.txt", "/notes.md"); err != nil {
		t.Fatal(err)
	}
	if d, _ = f.fs.Info(ctx, "/notes.md"); d.MimeType != "image/png" {
		t.Fatalf("after a rename: %+v", d.Meta)
	}

	// The mount of node n1 overwrites it with text: the type is detected
	// again, the writer is n1.
	mount, _ := f.fs.ForNode("n1", nil)
	a, err := mount.Lookup(ctx, RootIno, "notes.md")
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if _, err := mount.SetAttr(ctx, a.Ino, AttrChange{Size: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, err := mount.WriteAt(ctx, a.Ino, []byte("# notes\n\nplain words\n"), 0); err != nil {
		t.Fatal(err)
	}
	d, err = f.fs.Info(ctx, "/notes.md")
	if err != nil || !strings.HasPrefix(d.MimeType, "text/plain") || d.Source != SourceCreated || d.NodeID != "n1" {
		t.Fatalf("after the mount's write: %+v %v", d.Meta, err)
	}

	// A copy is derived, with the copier and the type.
	if _, _, err := f.fs.WriteFile(ctx, "/img.png", img, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mount.Copy(ctx, "/img.png", "/copy.bin"); err != nil {
		t.Fatal(err)
	}
	d, err = f.fs.Info(ctx, "/copy.bin")
	if err != nil || d.MimeType != "image/png" || d.Source != SourceDerived || d.NodeID != "n1" {
		t.Fatalf("a copy: %+v %v", d.Meta, err)
	}

	// A file the mount creates is the node's.
	c, err := mount.Create(ctx, RootIno, "made.sh", 0o755, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mount.WriteAt(ctx, c.Ino, []byte("#!/bin/sh\necho hi\n"), 0); err != nil {
		t.Fatal(err)
	}
	d, err = f.fs.Info(ctx, "/made.sh")
	if err != nil || d.MimeType != "text/x-shellscript" || d.Source != SourceCreated || d.NodeID != "n1" {
		t.Fatalf("made by the mount: %+v %v", d.Meta, err)
	}
	// Deleting a file deletes its metadata.
	if err := f.fs.Delete(ctx, "/made.sh", false); err != nil {
		t.Fatal(err)
	}
	var n int
	f.v.Sync(ctx, false)
	f.db.QueryRow(`SELECT COUNT(*) FROM fs_file_meta WHERE session_id=? AND ino=?`, f.sid, c.Ino).Scan(&n)
	if n != 0 {
		t.Fatalf("metadata of a deleted file left")
	}
	f.check(t)
}

// A fork reads its origin's provenance for what it inherited, detects the
// type itself, and keeps its own for what it writes.
func TestFileMetaInAFork(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := ctxT(t)
	if _, _, err := f.fs.WriteFile(ctx, "/pic.dat", pngBytes(t), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	fk, err := f.v.Fork(ctx, f.sid, "")
	if err != nil {
		t.Fatal(err)
	}
	ffs := f.v.Session(fk.ID)
	d, err := ffs.Info(ctx, "/pic.dat")
	if err != nil || d.MimeType != "image/png" || d.Source != SourceUpload {
		t.Fatalf("inherited: %+v %v", d.Meta, err)
	}
	kid, _ := ffs.ForNode("kid", nil)
	if _, _, err := kid.WriteFile(ctx, "/pic.dat", []byte("{\"a\": 1}"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err = ffs.Info(ctx, "/pic.dat")
	if err != nil || d.MimeType != "application/json" || d.NodeID != "kid" {
		t.Fatalf("written in the fork: %+v %v", d.Meta, err)
	}
	if d, _ = f.fs.Info(ctx, "/pic.dat"); d.MimeType != "image/png" || d.NodeID != "" {
		t.Fatalf("the origin's changed: %+v", d.Meta)
	}
}
