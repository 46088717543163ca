package workspace

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// env is a real store + VFS session in a temp dir.
type env struct {
	st  *store.Store
	v   *vfs.VFS
	sid string
	fs  *vfs.FS
	dir string // data dir
	// fanout is the VFS's Invalidator; mount attaches every mount to it
	fanout *Fanout
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

// newEnv opens the SQLite database the way the orchestrator does (store.Open
// with every migration) and returns one session's VFS.
func newEnv(tb testing.TB, cfg vfs.Config) *env {
	tb.Helper()
	ctx := ctxT(tb)
	dir := tb.TempDir()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(dir, "filepath.db")})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	e := storetest.On(st)
	s := e.Session(tb, e.User(tb, "alice").ID, "workspace test")
	return openEnv(tb, st, s.ID, dir, cfg)
}

func openEnv(tb testing.TB, st *store.Store, sid, dir string, cfg vfs.Config) *env {
	tb.Helper()
	rdb, err := st.ReadDB().DB()
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ReadDB = rdb
	v := vfs.New(st.SQL(), cfg)
	f := &Fanout{}
	v.SetInvalidator(f)
	return &env{st: st, v: v, sid: sid, fs: v.Session(sid), dir: dir, fanout: f}
}

// mount mounts the session at a fresh directory, told of other mounts' and
// the REST API's changes as the Manager's mounts are, and unmounts it at
// cleanup.
func (e *env) mount(tb testing.TB, opts Options) *MountPoint {
	tb.Helper()
	opts.Fanout = e.fanout
	return e.mountUnshared(tb, opts)
}

// mountUnshared mounts the session without a Fanout unless opts has one.
func (e *env) mountUnshared(tb testing.TB, opts Options) *MountPoint {
	tb.Helper()
	testkit.RequireFUSE(tb)
	dir := tb.TempDir()
	m, err := Mount(ctxT(tb), dir, e.fs, opts)
	if err != nil {
		tb.Fatalf("mount: %v", err)
	}
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Errorf("unmount: %v", err)
		}
	})
	return m
}

// check runs the VFS consistency check on the session.
func (e *env) check(tb testing.TB) {
	tb.Helper()
	if err := e.v.Check(context.Background(), e.sid); err != nil {
		tb.Errorf("vfs consistency: %v", err)
	}
}
