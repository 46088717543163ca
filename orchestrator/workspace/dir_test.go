package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// TestReadDirPlus: a listing tells the kernel every entry's attributes
// (READDIRPLUS from one VFS query), so the lstat of each entry that follows
// needs no VFS lookup, and shows the right size.
func TestReadDirPlus(t *testing.T) {
	e := newEnv(t, vfs.Config{})
	m, cfs := e.mountCounting(t)
	ctx := ctxT(t)
	const n = 300
	for i := 0; i < n; i++ { // through the API: the kernel knows none of them
		if _, _, err := e.fs.WriteFile(ctx, fmt.Sprintf("/d/f%03d", i), []byte(fmt.Sprint("x", i)), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(m.Dir(), "d")
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != n {
		t.Fatalf("readdir: %d entries, %v", len(ents), err)
	}
	before := cfs.lookups.Load()
	for i, de := range ents {
		fi, err := os.Lstat(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(len(fmt.Sprint("x", i))); fi.Size() != want || !fi.Mode().IsRegular() {
			t.Fatalf("%s: size %d mode %v, want %d, regular", de.Name(), fi.Size(), fi.Mode(), want)
		}
	}
	if got := cfs.lookups.Load() - before; got != 0 {
		t.Fatalf("%d VFS lookups for the lstats after a listing, want 0", got)
	}
}

// TestListingSeesOtherMounts: a directory listing the kernel cached
// (FOPEN_CACHE_DIR) shows a name added or removed through another mount or
// the API at once: the notice drops it.
func TestListingSeesOtherMounts(t *testing.T) {
	e := newEnv(t, vfs.Config{})
	ma, mb := e.mount(t, Options{}), e.mount(t, Options{})
	ctx := ctxT(t)
	names := func(dir string) string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, de := range ents {
			out = append(out, de.Name())
		}
		sort.Strings(out)
		return fmt.Sprint(out)
	}
	mustWrite(t, filepath.Join(ma.Dir(), "a"), "1")
	for i := 0; i < 3; i++ { // cached in b's kernel
		if got := names(mb.Dir()); got != "[a]" {
			t.Fatalf("b lists %s, want [a]", got)
		}
	}
	soon := func(what, want string) {
		t.Helper()
		testkit.EventuallyNil(t, 2*time.Second, what, func() error {
			if got := names(mb.Dir()); got != want {
				return fmt.Errorf("b lists %s, want %s", got, want)
			}
			return nil
		})
	}
	mustWrite(t, filepath.Join(ma.Dir(), "b"), "2")
	soon("a name added through a", "[a b]")
	if _, _, err := e.fs.WriteFile(ctx, "/c", []byte("3"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	soon("a name added through the API", "[a b c]")
	if err := os.Remove(filepath.Join(ma.Dir(), "a")); err != nil {
		t.Fatal(err)
	}
	soon("a name removed through a", "[b c]")
}
