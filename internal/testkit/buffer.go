package testkit

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use: a server's or a
// process's output that the test reads while it is written.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Recorder keeps, in order, every value published to it: a fake of a
// publisher or notifier interface with a Publish(T) method. Its methods are
// safe for concurrent use.
type Recorder[T any] struct {
	mu   sync.Mutex
	vals []T
}

// Publish appends v.
func (r *Recorder[T]) Publish(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vals = append(r.vals, v)
}

// All returns a copy of what was published so far.
func (r *Recorder[T]) All() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.vals...)
}
