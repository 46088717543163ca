package gitindex

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

// TestRestat: a worktree copied elsewhere (new inode numbers and change
// times) is clean for git without a refresh once its index has the copy's
// stat data, in every index version and both object formats; and not
// before. Entries the stat function does not know stay as they were.
func TestRestat(t *testing.T) {
	for _, tt := range []struct {
		name    string
		init    []string
		version string
		extra   func(t *testing.T, dir string)
	}{
		{name: "v2 sha1", init: []string{"init", "-q"}, version: "2"},
		{name: "v3 with extended flags", init: []string{"init", "-q"}, version: "3", extra: func(t *testing.T, dir string) {
			testkit.Git(t, dir, "update-index", "--skip-worktree", "dir/b.go")
		}},
		{name: "v4 prefix-compressed", init: []string{"init", "-q"}, version: "4"},
		{name: "sha256", init: []string{"init", "-q", "--object-format=sha256"}, version: "2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := t.TempDir()
			testkit.Git(t, src, tt.init...)
			old := time.Now().Add(-time.Hour)
			for _, f := range []string{"a.txt", "dir/b.go", "dir/deeper/with a long name to make the padding vary.md", "x"} {
				p := filepath.Join(src, f)
				os.MkdirAll(filepath.Dir(p), 0o755)
				os.WriteFile(p, []byte("content of "+f+"\n"), 0o644)
				os.Chtimes(p, old, old)
			}
			os.Symlink("a.txt", filepath.Join(src, "link"))
			testkit.Git(t, src, "add", "-A")
			testkit.Git(t, src, "commit", "-qm", "one")
			if tt.extra != nil {
				tt.extra(t, src)
			}
			testkit.Git(t, src, "update-index", "--index-version", tt.version)
			dst := filepath.Join(t.TempDir(), "copy")
			if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
			diffFiles := func() string {
				cmd := exec.Command("git", "diff-files", "--name-only")
				cmd.Dir = dst
				cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
				out, _ := cmd.CombinedOutput()
				return strings.TrimSpace(string(out))
			}
			if got := diffFiles(); got == "" {
				t.Fatal("the copy is clean before the restat: the test shows nothing")
			}
			idx := filepath.Join(dst, ".git", "index")
			b, err := os.ReadFile(idx)
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			nb, n, err := Restat(b, func(p string) (Stat, bool) {
				seen++
				if p == "x" {
					return Stat{}, false
				}
				var st syscall.Stat_t
				if err := syscall.Lstat(filepath.Join(dst, p), &st); err != nil {
					return Stat{}, false
				}
				return Stat{Ctime: time.Unix(st.Ctim.Unix()), Mtime: time.Unix(st.Mtim.Unix()), Dev: uint32(st.Dev), Ino: uint32(st.Ino),
					UID: st.Uid, GID: st.Gid, Size: uint32(st.Size)}, true
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := seen - 1; n != want || len(nb) != len(b) {
				t.Fatalf("changed %d entries of %d; %d bytes, was %d", n, seen, len(nb), len(b))
			}
			if err := os.WriteFile(idx, nb, 0o644); err != nil {
				t.Fatal(err)
			}
			if got := diffFiles(); got != "x" {
				t.Fatalf("git diff-files after the restat lists %q, want only x (left as it was)", got)
			}
			testkit.Git(t, dst, "fsck", "--no-dangling", "--no-progress")
			broken := bytes.Clone(nb)
			broken[len(broken)-1] ^= 1
			if _, _, err := Restat(broken, func(string) (Stat, bool) { return Stat{}, false }); err == nil {
				t.Fatal("an index with a broken checksum was read")
			}
		})
	}
}
