package testkit

import (
	"bufio"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// Decoded holds, in order, what decode made of each line read from a
// process's output (an agent's NDJSON stdout), as it comes. Its methods are
// safe for concurrent use.
type Decoded[T any] struct {
	mu    sync.Mutex
	vals  []T
	lines []string
	done  chan struct{}
}

// Decode reads r line by line (lines up to 4 MiB) in a goroutine until it
// ends; a line decode refuses fails the test (without stopping the read).
func Decode[T any](t testing.TB, r io.Reader, decode func([]byte) (T, error)) *Decoded[T] {
	d := &Decoded[T]{done: make(chan struct{})}
	go func() {
		defer close(d.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			v, err := decode(sc.Bytes())
			if err != nil {
				t.Errorf("invalid line %s: %v", sc.Text(), err)
				continue
			}
			d.mu.Lock()
			d.vals = append(d.vals, v)
			d.lines = append(d.lines, sc.Text())
			d.mu.Unlock()
		}
	}()
	return d
}

// All returns what was decoded so far.
func (d *Decoded[T]) All() []T {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]T(nil), d.vals...)
}

// Lines returns the lines decoded so far, as read.
func (d *Decoded[T]) Lines() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.lines...)
}

// Done is closed once the reader has ended and every line is decoded.
func (d *Decoded[T]) Done() <-chan struct{} { return d.done }

// Wait polls until cond holds for what was decoded, and returns that; when
// within passes first it fails the test, showing the lines read.
func (d *Decoded[T]) Wait(t testing.TB, within time.Duration, what string, cond func([]T) bool) []T {
	t.Helper()
	var vals []T
	EventuallyNil(t, within, what, func() error {
		if vals = d.All(); cond(vals) {
			return nil
		}
		return linesSoFar[T]{d}
	})
	return vals
}

type linesSoFar[T any] struct{ d *Decoded[T] }

func (l linesSoFar[T]) Error() string {
	return "the lines so far:\n" + strings.Join(l.d.Lines(), "\n")
}
