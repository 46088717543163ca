package vfs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Benchmarks of the inode API (what the FUSE mount calls) against native
// ext4 through the os package in the same run. Run with:
//
//	go test -run '^$' -bench . -benchtime 1x -count 5 ./orchestrator/vfs/
//
// Each iteration does the whole workload once; the metrics are per workload.
const (
	benchFiles     = 10000
	benchFileSize  = 8 << 10
	benchDirSize   = 1000
	benchSeqSize   = 100 << 20
	benchSeqWrite  = 128 << 10 // the FUSE max_write
	benchSeqReadSz = 128 << 10
)

var benchChunkSizes = []int{4 << 10, 16 << 10, 64 << 10, 256 << 10}

func benchVFS(b *testing.B, cs int) (*FS, context.Context) {
	f := newFixture(b, Config{ChunkSize: cs, MaxFileSize: 1 << 30, SessionQuota: 1 << 40})
	return f.fs, context.Background()
}

func content(n int) []byte { return bytes.Repeat([]byte("0123456789abcdef"), n/16) }

// createRun makes run i's tree in fs: benchFiles files, benchDirSize to a
// directory, each file made by create.
func createRun(b *testing.B, fs *FS, ctx context.Context, i int, create func(dir int64, name string) error) {
	top, err := fs.Mkdir(ctx, RootIno, fmt.Sprint("run", i), 0o755)
	if err != nil {
		b.Fatal(err)
	}
	var dir Attr
	for n := 0; n < benchFiles; n++ {
		if n%benchDirSize == 0 {
			if dir, err = fs.Mkdir(ctx, top.Ino, fmt.Sprint("d", n/benchDirSize), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := create(dir.Ino, fmt.Sprintf("f%05d.txt", n)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSmallCreateWrite(b *testing.B) {
	data := content(benchFileSize)
	for _, cs := range benchChunkSizes {
		b.Run(fmt.Sprintf("vfs/chunk=%dKiB", cs>>10), func(b *testing.B) {
			fs, ctx := benchVFS(b, cs)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				createRun(b, fs, ctx, i, func(dir int64, name string) error {
					a, err := fs.Create(ctx, dir, name, 0o644, true)
					if err != nil {
						return err
					}
					_, err = fs.WriteAt(ctx, a.Ino, data, 0)
					return err
				})
			}
			b.ReportMetric(float64(benchFiles*b.N)/b.Elapsed().Seconds(), "files/s")
		})
	}
	// What the FUSE mount does for a new file since the lazy create: one
	// transaction with the file's data (inode numbers reserved in blocks).
	b.Run("vfs-createfile/chunk=64KiB", func(b *testing.B) {
		fs, ctx := benchVFS(b, 64<<10)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			createRun(b, fs, ctx, i, func(dir int64, name string) error {
				ino, err := fs.ReserveIno(ctx)
				if err != nil {
					return err
				}
				_, _, err = fs.CreateFile(ctx, dir, name, 0o644, 0, 0, ino, data, 0, time.Time{})
				return err
			})
		}
		b.ReportMetric(float64(benchFiles*b.N)/b.Elapsed().Seconds(), "files/s")
	})
	b.Run("ext4", func(b *testing.B) {
		root := b.TempDir()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			top := filepath.Join(root, fmt.Sprint("run", i))
			for n := 0; n < benchFiles; n++ {
				dir := filepath.Join(top, fmt.Sprint("d", n/benchDirSize))
				if n%benchDirSize == 0 {
					if err := os.MkdirAll(dir, 0o755); err != nil {
						b.Fatal(err)
					}
				}
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.txt", n)), data, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(benchFiles*b.N)/b.Elapsed().Seconds(), "files/s")
	})
}

// smallTree creates the 10,000-file tree once and returns the directory inodes.
func smallTree(b *testing.B, fs *FS, ctx context.Context) []int64 {
	data := content(benchFileSize)
	var dirs []int64
	for d := 0; d < benchFiles/benchDirSize; d++ {
		dir, err := fs.Mkdir(ctx, RootIno, fmt.Sprint("d", d), 0o755)
		if err != nil {
			b.Fatal(err)
		}
		dirs = append(dirs, dir.Ino)
		for n := 0; n < benchDirSize; n++ {
			a, err := fs.Create(ctx, dir.Ino, fmt.Sprintf("f%05d.txt", n), 0o644, true)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := fs.WriteAt(ctx, a.Ino, data, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	return dirs
}

func osTree(b *testing.B) string {
	root := b.TempDir()
	data := content(benchFileSize)
	for d := 0; d < benchFiles/benchDirSize; d++ {
		dir := filepath.Join(root, fmt.Sprint("d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for n := 0; n < benchDirSize; n++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.txt", n)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return root
}

// BenchmarkSmallFiles builds the 10,000-file tree (10 directories of 1,000
// files of 8 KiB) once per variant and times reading every file back, stat-ing
// every file, and listing one 1,000-entry directory.
func BenchmarkSmallFiles(b *testing.B) {
	for _, cs := range benchChunkSizes {
		b.Run(fmt.Sprintf("vfs/chunk=%dKiB", cs>>10), func(b *testing.B) {
			fs, ctx := benchVFS(b, cs)
			dirs := smallTree(b, fs, ctx)
			buf := make([]byte, 128<<10)
			b.Run("read", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					for _, d := range dirs {
						for n := 0; n < benchDirSize; n++ {
							a, err := fs.Lookup(ctx, d, fmt.Sprintf("f%05d.txt", n))
							if err != nil {
								b.Fatal(err)
							}
							if k, err := fs.ReadAt(ctx, a.Ino, buf, 0); err != nil || k != benchFileSize {
								b.Fatal(k, err)
							}
						}
					}
				}
				b.ReportMetric(float64(benchFiles*b.N)/b.Elapsed().Seconds(), "files/s")
			})
			b.Run("stat", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					for _, d := range dirs {
						for n := 0; n < benchDirSize; n++ {
							if _, err := fs.Lookup(ctx, d, fmt.Sprintf("f%05d.txt", n)); err != nil {
								b.Fatal(err)
							}
						}
					}
				}
				b.ReportMetric(float64(benchFiles*b.N)/b.Elapsed().Seconds(), "stats/s")
			})
			b.Run("readdir1000", func(b *testing.B) {
				for i := 0; i < b.N*100; i++ {
					ents, err := fs.ReadDir(ctx, dirs[0])
					if err != nil || len(ents) != benchDirSize {
						b.Fatal(len(ents), err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*100), "µs/readdir")
			})
		})
	}
	b.Run("ext4", func(b *testing.B) {
		root := osTree(b)
		name := func(d, n int) string { return filepath.Join(root, fmt.Sprint("d", d), fmt.Sprintf("f%05d.txt", n)) }
		b.Run("read", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				for d := 0; d < benchFiles/benchDirSize; d++ {
					for n := 0; n < benchDirSize; n++ {
						if data, err := os.ReadFile(name(d, n)); err != nil || len(data) != benchFileSize {
							b.Fatal(err)
						}
					}
				}
			}
			b.ReportMetric(float64(benchFiles*b.N)/b.Elapsed().Seconds(), "files/s")
		})
		b.Run("stat", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				for d := 0; d < benchFiles/benchDirSize; d++ {
					for n := 0; n < benchDirSize; n++ {
						if _, err := os.Lstat(name(d, n)); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			b.ReportMetric(float64(benchFiles*b.N)/b.Elapsed().Seconds(), "stats/s")
		})
		b.Run("readdir1000", func(b *testing.B) {
			for i := 0; i < b.N*100; i++ {
				ents, err := os.ReadDir(filepath.Join(root, "d0"))
				if err != nil || len(ents) != benchDirSize {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*100), "µs/readdir")
		})
	})
}

func BenchmarkSeq100MiB(b *testing.B) {
	data := content(benchSeqWrite)
	for _, cs := range benchChunkSizes {
		b.Run(fmt.Sprintf("write/vfs/chunk=%dKiB", cs>>10), func(b *testing.B) {
			fs, ctx := benchVFS(b, cs)
			b.SetBytes(benchSeqSize)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				a, err := fs.Create(ctx, RootIno, fmt.Sprint("big", i), 0o644, true)
				if err != nil {
					b.Fatal(err)
				}
				for off := int64(0); off < benchSeqSize; off += benchSeqWrite {
					if _, err := fs.WriteAt(ctx, a.Ino, data, off); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if err := fs.Unlink(ctx, RootIno, fmt.Sprint("big", i)); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
		b.Run(fmt.Sprintf("read/vfs/chunk=%dKiB", cs>>10), func(b *testing.B) {
			fs, ctx := benchVFS(b, cs)
			a, err := fs.Create(ctx, RootIno, "big", 0o644, true)
			if err != nil {
				b.Fatal(err)
			}
			for off := int64(0); off < benchSeqSize; off += benchSeqWrite {
				if _, err := fs.WriteAt(ctx, a.Ino, data, off); err != nil {
					b.Fatal(err)
				}
			}
			buf := make([]byte, benchSeqReadSz)
			b.SetBytes(benchSeqSize)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for off := int64(0); off < benchSeqSize; off += benchSeqReadSz {
					if n, err := fs.ReadAt(ctx, a.Ino, buf, off); err != nil || n != benchSeqReadSz {
						b.Fatal(n, err)
					}
				}
			}
		})
	}
	b.Run("write/ext4", func(b *testing.B) {
		root := b.TempDir()
		b.SetBytes(benchSeqSize)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			f, err := os.Create(filepath.Join(root, fmt.Sprint("big", i)))
			if err != nil {
				b.Fatal(err)
			}
			for off := int64(0); off < benchSeqSize; off += benchSeqWrite {
				if _, err := f.WriteAt(data, off); err != nil {
					b.Fatal(err)
				}
			}
			f.Close()
			b.StopTimer()
			os.Remove(f.Name())
			b.StartTimer()
		}
	})
	b.Run("read/ext4", func(b *testing.B) {
		root := b.TempDir()
		name := filepath.Join(root, "big")
		f, err := os.Create(name)
		if err != nil {
			b.Fatal(err)
		}
		for off := int64(0); off < benchSeqSize; off += benchSeqWrite {
			f.WriteAt(data, off)
		}
		f.Close()
		buf := make([]byte, benchSeqReadSz)
		b.SetBytes(benchSeqSize)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			f, err := os.Open(name)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
}

// BenchmarkRawSQLiteTx is the floor for one committed write transaction on
// the same connection settings: one INSERT of 8 KiB per transaction.
func BenchmarkRawSQLiteTx(b *testing.B) {
	w, _ := openTestDB(b, b.TempDir())
	if _, err := w.Exec(`CREATE TABLE raw(id INTEGER PRIMARY KEY, data BLOB)`); err != nil {
		b.Fatal(err)
	}
	data := content(benchFileSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for n := 0; n < benchFiles; n++ {
			tx, err := w.Begin()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Exec(`INSERT INTO raw(data) VALUES(?)`, data); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(benchFiles*b.N)/b.Elapsed().Seconds(), "tx/s")
}

// BenchmarkRawSQLiteBlobs100MiB is SQLite's floor for file data stored as
// the VFS stores it: 100 MiB as 64 KiB blobs upserted 16 per transaction (a
// 1 MiB write), on the same connection settings, with SQLite's default 4 KiB
// pages and with 64 KiB pages. See docs/benchmarks.md (item 3 of issue 15).
func BenchmarkRawSQLiteBlobs100MiB(b *testing.B) {
	for _, page := range []int{4096, 65536} {
		b.Run(fmt.Sprintf("page=%d", page), func(b *testing.B) {
			w, _ := openTestDB(b, b.TempDir())
			for _, q := range []string{fmt.Sprintf(`PRAGMA page_size=%d`, page), `VACUUM`,
				`CREATE TABLE raw(id INTEGER PRIMARY KEY, ino INTEGER, off INTEGER, data BLOB, UNIQUE(ino, off))`} {
				if _, err := w.Exec(q); err != nil {
					b.Fatal(err)
				}
			}
			chunk := content(64 << 10)
			b.SetBytes(benchSeqSize)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for off := int64(0); off < benchSeqSize; off += 1 << 20 {
					tx, err := w.Begin()
					if err != nil {
						b.Fatal(err)
					}
					for c := off; c < off+1<<20; c += 64 << 10 {
						if _, err := tx.Exec(`INSERT INTO raw(ino, off, data) VALUES(?,?,?) ON CONFLICT(ino, off) DO UPDATE SET data=excluded.data`, i, c, chunk); err != nil {
							b.Fatal(err)
						}
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if _, err := w.Exec(`DELETE FROM raw`); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
