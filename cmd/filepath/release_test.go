package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

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
			data := testkit.DataDir(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errOut := &testkit.Buffer{}
			done := make(chan int, 1)
			go func() {
				done <- Main(ctx, []string{"serve", "--addr", tt.addr, "--data", data, "--runtime", "process", "--agent-cmd", "/bin/true", "--log-level", "warn"}, nil, &testkit.Buffer{}, errOut)
			}()
			if tt.code == 0 {
				testkit.EventuallyNil(t, 20*time.Second, "serve to start", func() error {
					if _, err := os.Stat(filepath.Join(data, urlFile)); err != nil || len(testkit.Mounts(t, data)) == 0 {
						return fmt.Errorf("%s", errOut.String())
					}
					return nil
				})
				cancel()
			}
			if code := testkit.Recv(t, done, 30*time.Second, "serve to return"); code != tt.code {
				t.Fatalf("exit %d, want %d: %s", code, tt.code, errOut.String())
			}
			if m := testkit.Mounts(t, data); len(m) != 0 {
				t.Fatalf("still mounted after serve returned: %v", m)
			}
			if err := os.RemoveAll(data); err != nil {
				t.Fatalf("remove the data directory: %v", err)
			}
		})
	}
}
