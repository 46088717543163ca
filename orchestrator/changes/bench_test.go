package changes

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkChanges measures the Changes view of a 2,000-file repository
// (100 directories of 20 files) with 200 files changed in the working
// tree, made with git in the FUSE-mounted workspace as an agent would:
//
//   - list: the full file list (text=false);
//   - first-diff: one file's diff alone (what the UI shows first);
//   - full: the list with every patch (the Changes tab's one request);
//   - cold-full: the same with the blob-id cache emptied first (a new
//     server process; the index's stat data still answers for the 1,800
//     files git has seen);
//   - baseline: `git diff --stat` of the same repository on ext4, in the
//     same run.
//
// Each reports the median of its runs (ms-median).
//
//	go test -run '^$' -bench Changes -benchtime 15x -count 1 ./orchestrator/changes/
func BenchmarkChanges(b *testing.B) {
	e := newEnv(b)
	ext4 := b.TempDir()
	for _, dir := range []string{e.dir, ext4} {
		for d := 0; d < 100; d++ {
			for f := 0; f < 20; f++ {
				p := filepath.Join(dir, fmt.Sprintf("pkg%03d/file%02d.go", d, f))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(source(8, func(int) string { return "\tx++\n" })), 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	ext := &env{t: b, dir: ext4}
	for _, g := range []*env{e, ext} {
		g.git("init", "-q")
		g.git("add", "-A")
		g.git("commit", "-q", "-m", "base")
	}
	// 200 changed files: one line in the middle of each
	changed := source(8, func(i int) string {
		if i == 4 {
			return "\tx += 2\n"
		}
		return "\tx++\n"
	})
	for _, dir := range []string{e.dir, ext4} {
		for d := 0; d < 100; d++ {
			for f := 0; f < 2; f++ {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("pkg%03d/file%02d.go", d, f)), []byte(changed), 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	if out := ext.git("diff", "--stat"); !strings.Contains(out, "200 files changed") {
		b.Fatalf("baseline: %s", out[max(0, len(out)-200):])
	}
	check := func(c Changes) {
		if len(c.Uncommitted) != 200 {
			b.Fatalf("%d uncommitted files, want 200", len(c.Uncommitted))
		}
	}
	// warm up the session filesystem's page cache and the blob-id cache
	c, err := e.svc.Changes(e.ctx, e.target(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	check(c)

	run := func(name string, f func()) {
		b.Run(name, func(b *testing.B) {
			var ds []time.Duration
			for b.Loop() {
				t0 := time.Now()
				f()
				ds = append(ds, time.Since(t0))
			}
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "ms-median")
		})
	}
	run("list", func() {
		c, err := e.svc.Changes(e.ctx, e.target(), Options{NoText: true})
		if err != nil {
			b.Fatal(err)
		}
		check(c)
	})
	run("first-diff", func() {
		f, err := e.svc.File(e.ctx, e.target(), Options{}, SectionUncommitted, "pkg050/file01.go")
		if err != nil || f.Patch == "" {
			b.Fatal(f, err)
		}
	})
	run("full", func() {
		c, err := e.svc.Changes(e.ctx, e.target(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		check(c)
	})
	run("cold-full", func() {
		e.svc.blobs = newBlobCache(200_000)
		e.svc.objects.Clear()
		c, err := e.svc.Changes(e.ctx, e.target(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		check(c)
	})
	run("baseline-git-diff-stat-ext4", func() {
		cmd := exec.Command("git", "-c", "safe.directory=*", "diff", "--stat")
		cmd.Dir = ext4
		if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "200 files changed") {
			b.Fatal(err)
		}
	})
}
