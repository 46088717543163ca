package workspace

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit"
)

// Release keeps the shared mount while a workspace is mounted below it (a
// running container follows it to the next start) and removes it after.
func TestReleaseKeepsTheDirUnderALiveMount(t *testing.T) {
	testkit.RequireFUSE(t) // root, for mount(2)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ClearMounts(filepath.Join(dir, "n1")); ClearMounts(dir) })
	if err := MakeShared(dir); err != nil {
		t.Fatal(err)
	}
	node, src := filepath.Join(dir, "n1"), t.TempDir()
	if err := os.Mkdir(node, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(src, node, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	m := &Manager{cfg: ManagerConfig{Dir: dir}}
	if err := m.Release(); err != nil {
		t.Fatal(err)
	}
	if mp, _, _ := mountInfo(dir); !mp {
		t.Fatal("Release unmounted the directory under a live workspace")
	}
	if err := ClearMounts(node); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(); err != nil {
		t.Fatal(err)
	}
	if mp, _, _ := mountInfo(dir); mp {
		t.Fatal("Release left the directory mounted with nothing below it")
	}
}
