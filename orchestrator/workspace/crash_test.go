package workspace

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// TestCrashDuringCreates: the server (a separate process, TestHelperServe) is
// killed with SIGKILL in the middle of a burst of creates through its
// mount, while the VFS groups the creates into batched commits. Every file
// whose fsync returned is there, whole; no file holds anything but its
// whole content or nothing (a file whose create committed and whose write
// did not); the store is consistent.
func TestCrashDuringCreates(t *testing.T) {
	testkit.RequireFUSE(t)
	e := newEnv(t, vfs.Config{})
	dir := sharedDir(t)
	os.MkdirAll(dir, 0o755)
	kill := startHelper(t, e, dir, "node-1")
	mgr := newManager(t, dir, e) // for Path only
	ws := mgr.Path("node-1")
	content := func(i int) string { return strings.Repeat(fmt.Sprintf("file %d;", i), 50) }

	var mu sync.Mutex
	synced := map[int]bool{}
	var stopped error // why a writer stopped before the kill
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for i := w; ; i += 4 {
				f, err := os.Create(filepath.Join(ws, fmt.Sprintf("f%05d", i)))
				if err == nil {
					_, err = f.WriteString(content(i))
					if err == nil && i%10 == 0 {
						if err = f.Sync(); err == nil {
							mu.Lock()
							synced[i] = true
							mu.Unlock()
						}
					}
					f.Close()
				}
				if err != nil {
					mu.Lock()
					if stopped == nil {
						stopped = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	// Kill it mid-burst, once the burst has fsynced files: how long that
	// takes depends on the machine's load (a fixed 700 ms once passed
	// before any), what the burst does before the kill does not. A writer
	// that stops on its own fails the test at once, with its error.
	testkit.EventuallyNil(t, 5*time.Minute, "the burst to fsync files", func() error {
		mu.Lock()
		defer mu.Unlock()
		if stopped != nil {
			t.Fatalf("a writer stopped before the kill, after %d fsynced files: %v", len(synced), stopped)
		}
		if len(synced) < 20 {
			return fmt.Errorf("%d files fsynced", len(synced))
		}
		return nil
	})
	kill()
	ClearMounts(ws)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(synced) < 5 {
		t.Fatalf("only %d files were fsynced before the kill: the burst did not run", len(synced))
	}
	ctx := ctxT(t)
	if _, err := e.v.PurgeOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := e.fs.List(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	present := map[int]bool{}
	empty := 0
	for _, fi := range list {
		var i int
		if _, err := fmt.Sscanf(fi.Name, "f%05d", &i); err != nil {
			t.Fatalf("unexpected entry %q", fi.Name)
		}
		present[i] = true
		_, r, err := e.fs.ReadFile(ctx, "/"+fi.Name)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		switch string(data) {
		case content(i):
		case "":
			empty++
		default:
			t.Errorf("%s holds %d bytes that are neither its content nor nothing", fi.Name, len(data))
		}
	}
	for i := range synced {
		if !present[i] {
			t.Errorf("f%05d was fsynced but is lost", i)
		}
	}
	t.Logf("%d files after the crash (%d empty), %d fsynced", len(list), empty, len(synced))
	e.check(t)
}
