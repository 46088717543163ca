package files

import (
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// Reads of one file hit the cache until the file changes, through any
// API: a write through the mount invalidates it.
func TestCacheOfHotReads(t *testing.T) {
	f := newFixture(t, Config{CacheBytes: 1 << 20}, vfs.Config{})
	f.write(t, "/a.txt", "one\ntwo\n")
	read := func(want string) {
		t.Helper()
		r, err := f.s.ReadText(f.ctx, f.fs, "/a.txt", 0, 0)
		if err != nil || r.Content != want {
			t.Fatalf("read %q %v, want %q", r.Content, err, want)
		}
	}
	read("one\ntwo\n")
	s0 := f.s.Cache().Stats()
	read("one\ntwo\n")
	read("one\ntwo\n")
	s1 := f.s.Cache().Stats()
	if s1.Hits-s0.Hits < 2 || s1.Misses != s0.Misses || s1.Entries != 1 {
		t.Fatalf("two reads of an unchanged file: %+v then %+v", s0, s1)
	}
	mount, _ := f.fs.ForNode("n1", nil)
	info, _ := f.fs.Stat(f.ctx, "/a.txt")
	if _, err := mount.WriteAt(f.ctx, info.Ino, []byte("ONE"), 0); err != nil {
		t.Fatal(err)
	}
	read("ONE\ntwo\n")
	s2 := f.s.Cache().Stats()
	if s2.Invalidations != s1.Invalidations+1 {
		t.Fatalf("a write through the mount: %+v", s2)
	}
	// an edit through the tier keeps its result cached
	if _, err := f.s.ReplaceLines(f.ctx, f.fs, "/a.txt", 2, 2, "TWO", ""); err != nil {
		t.Fatal(err)
	}
	s3 := f.s.Cache().Stats()
	read("ONE\nTWO\n")
	if s4 := f.s.Cache().Stats(); s4.Hits <= s3.Hits || s4.Misses != s3.Misses {
		t.Fatalf("the read after an edit: %+v then %+v", s3, s4)
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := NewCache(1000)
	k := func(i int64) CacheKey { return CacheKey{"w", i} }
	for i := range int64(4) {
		c.PutBytes(k(i), 1, "h", make([]byte, 240))
	}
	if _, _, ok := c.Bytes(k(0), 1); !ok { // 0 is now the most recent
		t.Fatal("0 missing")
	}
	c.PutBytes(k(4), 1, "h", make([]byte, 240)) // evicts 1
	if _, _, ok := c.Bytes(k(1), 1); ok {
		t.Fatal("the least recently used stayed")
	}
	for _, i := range []int64{0, 2, 3, 4} {
		if _, _, ok := c.Bytes(k(i), 1); !ok {
			t.Fatalf("%d evicted", i)
		}
	}
	if _, _, ok := c.Bytes(k(2), 2); ok {
		t.Fatal("another generation hit")
	}
	c.PutBytes(k(9), 1, "h", make([]byte, 251)) // over a quarter: not kept
	st := c.Stats()
	if st.Evictions != 1 || st.Invalidations != 1 || st.Entries != 3 || st.Bytes != 720 || st.Capacity != 1000 {
		t.Fatalf("stats %+v", st)
	}
	// a parsed value shares its file's entry and generation
	calls := 0
	load := func() (any, int64, error) { calls++; return strings.Repeat("p", 10), 10, nil }
	c.Parsed(k(3), 1, "lines", load)
	c.Parsed(k(3), 1, "lines", load)
	if calls != 1 {
		t.Fatalf("parsed twice: %d", calls)
	}
	c.Parsed(k(3), 2, "lines", load)
	if _, _, ok := c.Bytes(k(3), 1); ok || calls != 2 {
		t.Fatalf("a new generation kept the old bytes (calls %d)", calls)
	}
}
