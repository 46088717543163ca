package main

import (
	"context"
	"sync"

	"github.com/filepath-dev/filepath/protocol"
)

// maxInbox bounds the messages waiting for the agent; the orchestrator's
// own mailbox bounds them before that, so this only guards a runaway writer.
const maxInbox = 1024

// inbox holds the messages that arrived and are not yet in the
// conversation. The stdin reader puts, the loop takes.
type inbox struct {
	mu      sync.Mutex
	msgs    []protocol.MessageInput
	closed  bool          // stdin ended: no more messages
	changed chan struct{} // closed and replaced on every change
}

func newInbox() *inbox { return &inbox{changed: make(chan struct{})} }

// put adds a message; false when the inbox is full and it was dropped.
func (b *inbox) put(m protocol.MessageInput) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.msgs) >= maxInbox {
		return false
	}
	b.msgs = append(b.msgs, m)
	b.signal()
	return true
}

func (b *inbox) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.signal()
}

func (b *inbox) signal() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// take returns the waiting messages (nil when none) and empties the inbox.
func (b *inbox) take() []protocol.MessageInput {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.msgs
	b.msgs = nil
	return m
}

func (b *inbox) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.msgs)
}

// wait blocks until there are messages (and takes them), or the inbox is
// closed and empty (ok false), or ctx ends (ok false).
func (b *inbox) wait(ctx context.Context) (msgs []protocol.MessageInput, ok bool) {
	for {
		b.mu.Lock()
		if len(b.msgs) > 0 {
			m := b.msgs
			b.msgs = nil
			b.mu.Unlock()
			return m, true
		}
		if b.closed {
			b.mu.Unlock()
			return nil, false
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, false
		case <-ch:
		}
	}
}

// waitLen blocks until n messages wait, the inbox is closed, or ctx ends.
func (b *inbox) waitLen(ctx context.Context, n int) {
	for {
		b.mu.Lock()
		if len(b.msgs) >= n || b.closed {
			b.mu.Unlock()
			return
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}
