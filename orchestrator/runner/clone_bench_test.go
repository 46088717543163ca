package runner

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/gitnet"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/workspace"
)

// BenchmarkSessionClone times a session's clone of a 5,000-file
// repository until its agent can start (docs/benchmarks/workspace.md):
// the node's workspace mounted, the repository cloned into it, in three
// ways in the same run:
//
//   - ext4: the runner's git clone command into a directory of the host
//     (the baseline);
//   - import: the runner's clone with the session filesystem (cloned on
//     the host, imported in bulk, the index restat'ed);
//   - mount: git clone through the node's mount, file by file (the runner
//     before issue 22).
func BenchmarkSessionClone(b *testing.B) {
	testkit.RequireFUSE(b)
	url := benchRepo(b, 5000)
	ctx := context.Background()
	b.Run("ext4", func(b *testing.B) {
		for range b.N {
			dir := b.TempDir()
			target, err := gitnet.Parse(url)
			if err != nil {
				b.Fatal(err)
			}
			home := b.TempDir()
			gc := gitnet.CloneCommand(url, target, nil, home)
			cmd := exec.CommandContext(ctx, "git", gc.Args...)
			cmd.Dir, cmd.Env = dir, gc.Env
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("git clone: %v\n%s", err, out)
			}
		}
	})
	for _, imp := range []bool{true, false} {
		name := map[bool]string{true: "import", false: "mount"}[imp]
		b.Run(name, func(b *testing.B) {
			ss, r, mgr, uid := cloneRunner(b, imp)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				s, err := ss.CreateSession(ctx, uid, sessions.NewSession{Name: "clone", GitRepoURL: &url})
				if err != nil {
					b.Fatal(err)
				}
				n, err := ss.CreateNode(ctx, uid, s.ID, sessions.NewNode{Name: "root", AgentType: AgentCustom, Image: "x"})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				dir, err := mgr.Mount(ctx, n.ID)
				if err != nil {
					b.Fatal(err)
				}
				if cloned, err := r.cloneRepo(ctx, s, n, dir); err != nil || !cloned {
					b.Fatalf("clone: %v, %v", cloned, err)
				}
				b.StopTimer()
				if err := mgr.Unmount(n.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// cloneRunner is a runner whose nodes mount their session's filesystem;
// with imp, it clones on the host and imports.
func cloneRunner(b *testing.B, imp bool) (*sessions.Store, *Runner, *workspace.Manager, string) {
	ctx := context.Background()
	dir := b.TempDir()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(dir, "filepath.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	rdb, err := st.ReadDB().DB()
	if err != nil {
		b.Fatal(err)
	}
	v := vfs.New(st.SQL(), vfs.Config{ReadDB: rdb, MaxFileSize: 1 << 30, SessionQuota: 4 << 30})
	cfg := withNouns(Config{Store: st})
	sessionOf := func(ctx context.Context, nodeID string) (*vfs.FS, error) {
		n, err := cfg.Sessions.NodeByID(ctx, nodeID)
		if err != nil {
			return nil, err
		}
		return v.Session(n.SessionID), nil
	}
	os.Chmod(dir, 0o755)
	mnt := filepath.Join(dir, "mnt")
	mgr, err := workspace.NewManager(workspace.ManagerConfig{Dir: mnt, Open: func(ctx context.Context, nodeID string) (workspace.FS, error) {
		return sessionOf(ctx, nodeID)
	}})
	if err != nil {
		b.Fatal(err)
	}
	v.SetInvalidator(mgr.Fanout())
	b.Cleanup(func() { mgr.Close(); workspace.ClearMounts(mnt) })
	rt, err := containers.NewProcess(containers.ProcessConfig{Dir: filepath.Join(dir, "proc")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	cfg.Runtime, cfg.DataDir, cfg.GitAllowPrivate, cfg.Workspaces = rt, dir, true, mgr
	if imp {
		cfg.Import = nodeImporter{open: sessionOf}
	}
	r, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	u, err := cfg.Users.CreateUser(ctx, "bench", false)
	if err != nil {
		b.Fatal(err)
	}
	return cfg.Sessions, r, mgr, u.ID
}

// nodeImporter imports into the filesystem open gives a node.
type nodeImporter struct {
	open func(ctx context.Context, nodeID string) (*vfs.FS, error)
}

func (n nodeImporter) ImportTree(ctx context.Context, nodeID, hostDir string) (map[string]vfs.Attr, error) {
	fs, err := n.open(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	return fs.ImportTree(ctx, "/", hostDir)
}

func (n nodeImporter) WriteFile(ctx context.Context, nodeID, p string, data []byte, mtime time.Time) error {
	fs, err := n.open(ctx, nodeID)
	if err != nil {
		return err
	}
	_, _, err = fs.WriteFile(ctx, p, data, vfs.WriteOptions{Mode: vfs.WriteUpdate, Mtime: mtime})
	return err
}

// benchRepo serves over git's dumb HTTP protocol a one-commit repository
// of files source files of 0.5 to 4 KiB in 100 directories, packed.
func benchRepo(b *testing.B, files int) string {
	work, served := b.TempDir(), b.TempDir()
	git := func(dir string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	for i := range files {
		p := filepath.Join(work, fmt.Sprintf("pkg%02d/sub%d/file%04d.go", i%100, i%3, i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		body := fmt.Sprintf("package sub%d\n\n// File %d.\nfunc F%d() int { return %d }\n", i%3, i, i, i) + strings.Repeat(fmt.Sprintf("// line of file %d\n", i), 20+i%200)
		os.WriteFile(p, []byte(body), 0o644)
	}
	git(work, "init", "-q", "-b", "main")
	git(work, "add", "-A")
	git(work, "commit", "-q", "-m", "the files")
	git(served, "clone", "-q", "--bare", "--no-local", work, "repo.git")
	git(filepath.Join(served, "repo.git"), "repack", "-a", "-d", "-q")
	git(filepath.Join(served, "repo.git"), "update-server-info")
	srv := httptest.NewServer(http.FileServer(http.Dir(served)))
	b.Cleanup(srv.Close)
	return srv.URL + "/repo.git"
}
