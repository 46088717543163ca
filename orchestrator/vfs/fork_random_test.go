package vfs

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"
)

// TestForkRandom runs random writes, partial writes, truncates, deletes
// and forks (of the session and of forks) against a model where every fork
// is a deep copy, and checks every file of every workspace after each step:
// copy-up through chains of any depth keeps each workspace's view its own.
func TestForkRandom(t *testing.T) {
	const cs = 64
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			f := newFixture(t, Config{ChunkSize: cs})
			ctx := context.Background()
			rng := rand.New(rand.NewSource(seed))
			model := map[string]map[string][]byte{f.sid: {}}
			ids := []string{f.sid}
			names := []string{"/a", "/b", "/c", "/d"}
			for step := range 300 {
				ws := ids[rng.Intn(len(ids))]
				fs := f.v.Session(ws)
				m := model[ws]
				p := names[rng.Intn(len(names))]
				cur, exists := m[p]
				switch op := rng.Intn(10); {
				case op == 0 && len(ids) < 8:
					fk, err := f.v.Fork(ctx, ws, "")
					if err != nil {
						t.Fatal(err)
					}
					cp := map[string][]byte{}
					for k, v := range m {
						cp[k] = bytes.Clone(v)
					}
					model[fk.ID] = cp
					ids = append(ids, fk.ID)
				case op <= 2 || !exists:
					data := pattern(byte(step), rng.Intn(5*cs))
					mustWrite(t, fs, p, data)
					m[p] = data
				case op <= 5:
					off := rng.Intn(len(cur) + cs)
					data := pattern(byte(step+7), 1+rng.Intn(2*cs))
					writeAt(t, fs, p, data, int64(off))
					n := max(len(cur), off+len(data))
					nb := make([]byte, n)
					copy(nb, cur)
					copy(nb[off:], data)
					m[p] = nb
				case op <= 7:
					size := rng.Intn(len(cur) + cs)
					if _, err := fs.SetAttr(ctx, mustStat(t, fs, p).Ino, AttrChange{Size: ptr(int64(size))}); err != nil {
						t.Fatal(err)
					}
					nb := make([]byte, size)
					copy(nb, cur)
					m[p] = nb
				default:
					if err := fs.Delete(ctx, p, false); err != nil {
						t.Fatal(err)
					}
					delete(m, p)
				}
				for _, id := range ids {
					for _, q := range names {
						want, ok := model[id][q]
						if !ok {
							wantMissing(t, f.v.Session(id), q)
							continue
						}
						if got := mustRead(t, f.v.Session(id), q); !bytes.Equal(got, want) {
							t.Fatalf("step %d: %s in workspace %d: got %d bytes, want %d", step, q, indexOf(ids, id), len(got), len(want))
						}
					}
				}
			}
			for _, id := range ids {
				checkAll(t, f.v, id)
			}
		})
	}
}

func indexOf(ids []string, id string) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}
