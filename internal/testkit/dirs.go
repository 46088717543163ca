package testkit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// DataDir returns a new temporary directory for a server's data, named as
// /proc/self/mountinfo names it (symlinks resolved). When the test ends,
// everything still mounted at or below it (the FUSE workspaces, the shared
// mount point serve leaves for its next start) is detached, then the
// directory is removed.
func DataDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unmount(t, dir) }) // runs before TempDir's removal
	return dir
}

// Mounts lists the mount points at or below dir in /proc/self/mountinfo, in
// the order they were mounted; a path mounted over twice is listed twice.
func Mounts(t testing.TB, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// Unmount lazily detaches every mount at or below dir, the latest first.
func Unmount(t testing.TB, dir string) {
	t.Helper()
	m := Mounts(t, dir)
	for i := len(m) - 1; i >= 0; i-- {
		syscall.Unmount(m[i], syscall.MNT_DETACH) // gone already with its parent: fine
	}
}
