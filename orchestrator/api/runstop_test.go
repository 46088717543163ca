package api_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/protocol"
)

// A stop that arrives while the server is still starting (creating the
// first user) is a graceful stop, not a failure: Run returns nil, and the
// next start creates the first user.
func TestRunStoppedDuringStartIsGraceful(t *testing.T) {
	dir := t.TempDir()
	h := hub.New[protocol.Record](hub.Config{})
	defer h.Close()
	st, err := store.Open(context.Background(), store.Config{Path: filepath.Join(dir, "filepath.db"), Publisher: h})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	users, ss := identity.New(st), sessions.New(st, sessions.Config{})
	files := vfs.New(st.SQL(), vfs.Config{Logger: slog.New(slog.DiscardHandler)})
	defer files.Close()
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0", Store: st, Users: users, Sessions: ss, Collab: collab.New(st, ss, collab.Config{}),
		Audit: audit.New(st), Hub: h, Files: files, Stdout: &testkit.Buffer{},
		Logger: slog.New(slog.DiscardHandler), Resolver: noDNS{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // SIGTERM before the first user exists
	if err := srv.Run(ctx); err != nil {
		t.Fatalf("Run stopped during its start returned %v, want nil", err)
	}
	if n, err := users.CountUsers(context.Background()); err != nil || n != 0 {
		t.Fatalf("after a stop during the start: %d users (%v), want 0 (nothing half-made)", n, err)
	}
}
