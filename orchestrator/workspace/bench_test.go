package workspace

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/events"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Benchmarks run every workload twice in the same run: on native ext4 in
// b.TempDir() ("ext4") and through a FUSE mount of a real VFS session
// ("fuse"). See docs/benchmarks/workspace.md.

func benchTargets(b *testing.B) []struct {
	name string
	dir  func(b *testing.B) string
} {
	return []struct {
		name string
		dir  func(b *testing.B) string
	}{
		{"ext4", func(b *testing.B) string { return b.TempDir() }},
		{"fuse", func(b *testing.B) string {
			e := newEnv(b, vfs.Config{MaxFileSize: 1 << 30, SessionQuota: 4 << 30})
			var opts Options
			// FILEPATH_WS_BENCH_TIMEOUT overrides the entry/attr/negative
			// timeouts (a Go duration) to show what kernel caching buys.
			if d, err := time.ParseDuration(os.Getenv("FILEPATH_WS_BENCH_TIMEOUT")); err == nil {
				opts.EntryTimeout, opts.AttrTimeout, opts.NegativeTimeout = d, d, d
			}
			return e.mount(b, opts).Dir()
		}},
		// go-fuse's loopback filesystem over ext4 in b.TempDir(), with the
		// mount's default kernel timeouts: what FUSE itself costs, with no
		// database behind it. No filesystem served through FUSE by go-fuse
		// can be faster than this on the same machine.
		{"loopback", func(b *testing.B) string { return loopbackMount(b, false) }},
		// The same loopback answering OPEN and FLUSH with ENOSYS (no_open,
		// no_flush, as the mount does), reading and writing the backing
		// file by path: the FUSE floor for a filesystem that keeps no
		// per-open state.
		{"loopback-noopen", func(b *testing.B) string { return loopbackMount(b, true) }},
	}
}

// noOpenNode is a loopback node that asks the kernel for no_open and
// no_flush and serves READ and WRITE by path.
type noOpenNode struct{ fs.LoopbackNode }

func (n *noOpenNode) backing() string {
	return filepath.Join(n.RootData.Path, n.Path(n.RootData.RootNode.EmbeddedInode()))
}

func (n *noOpenNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, syscall.ENOSYS
}

func (n *noOpenNode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno { return syscall.ENOSYS }

func (n *noOpenNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	fd, err := syscall.Open(n.backing(), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	defer syscall.Close(fd)
	c, err := syscall.Pread(fd, dest, off)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return fuse.ReadResultData(dest[:c]), 0
}

func (n *noOpenNode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	fd, err := syscall.Open(n.backing(), syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, fs.ToErrno(err)
	}
	defer syscall.Close(fd)
	c, err := syscall.Pwrite(fd, data, off)
	if err != nil {
		return 0, fs.ToErrno(err)
	}
	return uint32(c), 0
}

var (
	_ fs.NodeOpener  = (*noOpenNode)(nil)
	_ fs.NodeFlusher = (*noOpenNode)(nil)
	_ fs.NodeReader  = (*noOpenNode)(nil)
	_ fs.NodeWriter  = (*noOpenNode)(nil)
)

func loopbackMount(b *testing.B, noOpen bool) string {
	testkit.RequireFUSE(b)
	under, dir := b.TempDir(), b.TempDir()
	root, err := fs.NewLoopbackRoot(under)
	if err != nil {
		b.Fatal(err)
	}
	if noOpen {
		var st syscall.Stat_t
		if err := syscall.Stat(under, &st); err != nil {
			b.Fatal(err)
		}
		lr := &fs.LoopbackRoot{Path: under, Dev: uint64(st.Dev)}
		lr.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
			return &noOpenNode{fs.LoopbackNode{RootData: r}}
		}
		rn := &noOpenNode{fs.LoopbackNode{RootData: lr}}
		lr.RootNode = rn
		root = rn
	}
	entry, attr, neg := DefaultEntryTimeout, DefaultAttrTimeout, DefaultNegativeTimeout
	if d, err := time.ParseDuration(os.Getenv("FILEPATH_WS_BENCH_TIMEOUT")); err == nil {
		entry, attr, neg = d, d, d
	}
	server, err := fs.Mount(dir, root, &fs.Options{
		MountOptions:    fuse.MountOptions{DirectMount: true, AllowOther: true, DisableXAttrs: true, MaxWrite: DefaultMaxWrite},
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &neg,
	})
	if err != nil {
		b.Fatalf("loopback mount: %v", err)
	}
	b.Cleanup(func() {
		// The kernel may still hold the mount busy for a moment after the
		// last file closes: retry, and say so if it stays (a leaked mount).
		testkit.EventuallyNil(b, 2*time.Second, "unmount the loopback at "+dir, server.Unmount)
	})
	return dir
}

const smallFiles = 10000

func writeSmall(b *testing.B, dir string) {
	data := []byte("small file content, about sixty bytes long, like a config\n")
	for i := 0; i < smallFiles; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSmallFiles reports, per run, the time to create+write 10,000
// small files (create-ms), open+read+close them (read-ms), do it again
// (warm-read-ms) and lstat them (stat-ms), in a fresh directory.
func BenchmarkSmallFiles(b *testing.B) {
	for _, tg := range benchTargets(b) {
		b.Run(tg.name, func(b *testing.B) {
			root := tg.dir(b)
			buf := make([]byte, 4096)
			var create, read, warm, stat time.Duration
			for i := 0; i < b.N; i++ {
				dir := filepath.Join(root, fmt.Sprint(i))
				os.Mkdir(dir, 0o755)
				t0 := time.Now()
				writeSmall(b, dir)
				t1 := time.Now()
				readAll := func() {
					for j := 0; j < smallFiles; j++ {
						f, err := os.Open(filepath.Join(dir, fmt.Sprintf("f%05d", j)))
						if err != nil {
							b.Fatal(err)
						}
						f.Read(buf)
						f.Close()
					}
				}
				readAll()
				t1w := time.Now()
				readAll() // warm: the second read of each
				t2 := time.Now()
				for j := 0; j < smallFiles; j++ {
					if _, err := os.Lstat(filepath.Join(dir, fmt.Sprintf("f%05d", j))); err != nil {
						b.Fatal(err)
					}
				}
				t3 := time.Now()
				create += t1.Sub(t0)
				read += t1w.Sub(t1)
				warm += t2.Sub(t1w)
				stat += t3.Sub(t2)
			}
			reportMs(b, map[string]time.Duration{"create-ms": create, "read-ms": read, "warm-read-ms": warm, "stat-ms": stat})
		})
	}
}

func BenchmarkReaddir1000(b *testing.B) {
	for _, tg := range benchTargets(b) {
		b.Run(tg.name, func(b *testing.B) {
			dir := tg.dir(b)
			for i := 0; i < 1000; i++ {
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("entry-%04d", i)), nil, 0o644)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ents, err := os.ReadDir(dir)
				if err != nil || len(ents) != 1000 {
					b.Fatalf("readdir: %d, %v", len(ents), err)
				}
			}
		})
	}
}

func BenchmarkSequential100MiB(b *testing.B) {
	const size = 100 << 20
	for _, tg := range benchTargets(b) {
		b.Run(tg.name+"/write", func(b *testing.B) {
			dir := tg.dir(b)
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				p := filepath.Join(dir, "seq")
				f, err := os.Create(p)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(f, &patternReader{n: size}, make([]byte, 1<<20)); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				os.Remove(p)
				b.StartTimer()
			}
		})
		b.Run(tg.name+"/read", func(b *testing.B) {
			dir := tg.dir(b)
			p := filepath.Join(dir, "seq")
			f, _ := os.Create(p)
			io.CopyBuffer(f, &patternReader{n: size}, make([]byte, 1<<20))
			f.Close()
			b.SetBytes(size)
			buf := make([]byte, 1<<20)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				f, err := os.Open(p)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				evict(b, f)
				b.StartTimer()
				if n, err := io.CopyBuffer(io.Discard, f, buf); err != nil || n != size {
					b.Fatal(n, err)
				}
				f.Close()
			}
		})
	}
}

// evict drops f's pages from the page cache (fadvise DONTNEED, not the
// global drop_caches) so that the read goes to the filesystem: for the mount,
// through FUSE to the VFS.
func evict(b *testing.B, f *os.File) {
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkGit(b *testing.B) {
	// A fixture repository on ext4: 500 files in 20 directories, 3 commits.
	fixture := b.TempDir()
	git(b, fixture, "init", "-q", "-b", "main")
	for c := 0; c < 3; c++ {
		for i := 0; i < 500; i++ {
			d := filepath.Join(fixture, fmt.Sprintf("dir%02d", i%20))
			os.MkdirAll(d, 0o755)
			os.WriteFile(filepath.Join(d, fmt.Sprintf("file%03d.go", i)), []byte(fmt.Sprintf("package p // %d %d\n%s", c, i, make([]byte, 0))), 0o644)
		}
		git(b, fixture, "add", "-A")
		git(b, fixture, "commit", "-q", "-m", fmt.Sprint("commit ", c))
	}
	for _, tg := range benchTargets(b) {
		b.Run(tg.name+"/clone", func(b *testing.B) {
			root := tg.dir(b)
			for i := 0; i < b.N; i++ {
				git(b, root, "clone", "-q", "--no-hardlinks", fixture, fmt.Sprint("c", i))
			}
		})
		b.Run(tg.name+"/status", func(b *testing.B) {
			root := tg.dir(b)
			git(b, root, "clone", "-q", "--no-hardlinks", fixture, "c")
			dir := filepath.Join(root, "c")
			// A second later, the first status rewrites the index with
			// a timestamp after every file's mtime: no entry is then
			// "racily clean", which git would re-read at every status
			// (how many depends on where the clone's second boundary
			// fell). The status measured is the usual one: an lstat
			// per file and a listing per directory.
			time.Sleep(1100 * time.Millisecond)
			git(b, dir, "status", "--porcelain")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				git(b, dir, "status", "--porcelain")
			}
		})
	}
}

// BenchmarkGrep times grep -r (no match: every file is read) over a tree
// of 2,000 files of about 2 KiB in 40 directories, warm (after one run).
func BenchmarkGrep(b *testing.B) {
	for _, tg := range benchTargets(b) {
		b.Run(tg.name, func(b *testing.B) {
			dir := tg.dir(b)
			line := []byte("func handler(w http.ResponseWriter, r *http.Request) { return }\n")
			content := bytes.Repeat(line, 2048/len(line))
			for i := 0; i < 2000; i++ {
				d := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%40))
				os.MkdirAll(d, 0o755)
				if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("file%04d.go", i)), content, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			grep := func() {
				out, err := exec.Command("grep", "-r", "-l", "no-such-needle", dir).CombinedOutput()
				if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
					b.Fatalf("grep: %v: %s", err, out)
				}
			}
			grep()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				grep()
			}
		})
	}
}

// BenchmarkVFSDirect makes, through the VFS inode API without FUSE, the calls
// the mount makes for the create, read and stat phases of BenchmarkSmallFiles
// (lookup miss, create, write, batched as a mount's are; lookup, read;
// lookup): the floor the mount cannot go below.
func BenchmarkVFSDirect(b *testing.B) {
	e := newEnv(b, vfs.Config{MaxFileSize: 1 << 30, SessionQuota: 4 << 30})
	ctx := events.WithOrigin(ctxT(b), "bench")
	data := []byte("small file content, about sixty bytes long, like a config\n")
	buf := make([]byte, 4096)
	var create, read, stat time.Duration
	for i := 0; i < b.N; i++ {
		d, err := e.fs.Mkdir(ctx, 1, fmt.Sprint(i), 0o755)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		for j := 0; j < smallFiles; j++ {
			name := fmt.Sprintf("f%05d", j)
			e.fs.Lookup(ctx, d.Ino, name) // the kernel's LOOKUP
			a, err := e.fs.Create(ctx, d.Ino, name, 0o644, false)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.fs.WriteAt(ctx, a.Ino, data, 0); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		for j := 0; j < smallFiles; j++ {
			a, err := e.fs.Lookup(ctx, d.Ino, fmt.Sprintf("f%05d", j))
			if err != nil {
				b.Fatal(err)
			}
			e.fs.ReadAt(ctx, a.Ino, buf, 0)
		}
		t2 := time.Now()
		for j := 0; j < smallFiles; j++ {
			if _, err := e.fs.Lookup(ctx, d.Ino, fmt.Sprintf("f%05d", j)); err != nil {
				b.Fatal(err)
			}
		}
		t3 := time.Now()
		create += t1.Sub(t0)
		read += t2.Sub(t1)
		stat += t3.Sub(t2)
	}
	reportMs(b, map[string]time.Duration{"create-ms": create, "read-ms": read, "stat-ms": stat})
}

// reportMs reports each total time as milliseconds per iteration, under
// its unit.
func reportMs(b *testing.B, totals map[string]time.Duration) {
	for unit, d := range totals {
		b.ReportMetric(float64(d)/float64(time.Millisecond)/float64(b.N), unit)
	}
}
