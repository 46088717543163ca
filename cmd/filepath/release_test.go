package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

// mountsUnder lists what /proc/self/mountinfo shows mounted at or below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 && (fs[4] == dir || strings.HasPrefix(fs[4], dir+"/")) {
			out = append(out, fs[4])
		}
	}
	return out
}

// `filepath serve` leaves nothing mounted in its data directory when it
// stops (SIGTERM cancels Main's ctx) or fails to start, so the directory
// can be removed at once.
func TestServeLeavesNoMount(t *testing.T) {
	testkit.RequireFUSE(t)
	for _, tt := range []struct {
		name string
		addr string
		code int
	}{
		{"graceful stop", "127.0.0.1:0", 0},
		{"failed start", "nonsense", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Unmount(filepath.Join(data, "mnt"), syscall.MNT_DETACH) })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errOut := &lockedBuffer{}
			done := make(chan int, 1)
			go func() {
				done <- Main(ctx, []string{"serve", "--addr", tt.addr, "--data", data, "--runtime", "process", "--agent-cmd", "/bin/true", "--log-level", "warn"}, nil, &lockedBuffer{}, errOut)
			}()
			if tt.code == 0 {
				deadline := time.Now().Add(20 * time.Second)
				for len(mountsUnder(t, data)) == 0 || !fileExists(filepath.Join(data, urlFile)) {
					if time.Now().After(deadline) {
						t.Fatalf("serve did not start: %s", errOut.String())
					}
					time.Sleep(20 * time.Millisecond)
				}
				cancel()
			}
			select {
			case code := <-done:
				if code != tt.code {
					t.Fatalf("exit %d, want %d: %s", code, tt.code, errOut.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatal("serve did not return")
			}
			if m := mountsUnder(t, data); len(m) != 0 {
				t.Fatalf("still mounted after serve returned: %v", m)
			}
			if err := os.RemoveAll(data); err != nil {
				t.Fatalf("remove the data directory: %v", err)
			}
		})
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
