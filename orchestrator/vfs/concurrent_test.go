package vfs

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// TestConcurrent runs both APIs from several goroutines over the store's
// connection layout (one writer, a read pool): no deadlock, no lost write.
func TestConcurrent(t *testing.T) {
	f := newFixture(t, Config{ChunkSize: 256})
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("g", g)
			a, err := f.fs.Create(ctx, RootIno, name, 0o644, true)
			if err != nil {
				errs <- err
				return
			}
			want := bytes.Repeat([]byte{byte('a' + g)}, 1000)
			for off := 0; off < len(want); off += 100 {
				if _, err := f.fs.WriteAt(ctx, a.Ino, want[off:off+100], int64(off)); err != nil {
					errs <- err
					return
				}
				if _, err := f.fs.Stat(ctx, "/"+name); err != nil {
					errs <- err
					return
				}
			}
			if _, _, err := f.fs.WriteFile(ctx, "/dir/"+name, want, WriteOptions{}); err != nil {
				errs <- err
				return
			}
			_, got, err := f.fs.ReadAll(ctx, "/"+name)
			if err != nil || !bytes.Equal(got, want) {
				errs <- fmt.Errorf("%s: content differs: %v", name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	f.check(t)
}
