// Package hub fans session log records out to live subscribers without ever
// blocking the producer: each subscriber has a bounded buffer and is dropped
// when it is full (DESIGN invariant 5).
package hub

import (
	"errors"
	"sync"
)

// DefaultBuffer is the per-subscriber channel capacity when Config.Buffer is 0.
const DefaultBuffer = 1024

// ErrTooSlow is the reason a subscription ends when its buffer was full at a
// publish: the subscriber must resume from the store.
var ErrTooSlow = errors.New("subscriber too slow: buffer full")

// ErrClosed is the reason a subscription ends when the hub is closed.
var ErrClosed = errors.New("hub closed")

// Config sizes a Hub.
type Config struct {
	// Buffer is the capacity of each subscriber's channel (default DefaultBuffer).
	Buffer int
}

// Hub delivers published values to the subscribers of their key (a session id).
// R is the record type; the publisher names the key beside each record. All
// methods are safe for concurrent use. Publish never blocks on a subscriber.
type Hub[R any] struct {
	buffer int

	mu      sync.Mutex // guards subs, closed, dropped
	subs    map[string]map[*Subscription[R]]struct{}
	closed  bool
	dropped uint64
}

// New returns a Hub of records of type R.
func New[R any](cfg Config) *Hub[R] {
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	return &Hub[R]{buffer: cfg.Buffer, subs: make(map[string]map[*Subscription[R]]struct{})}
}

// Subscription receives the records published under one key after it was made.
type Subscription[R any] struct {
	h   *Hub[R]
	key string
	c   chan R

	// err is written once, under h.mu, before c is closed; reading it after
	// C() is closed is race-free because of the channel close.
	err error
}

// C is the channel of records. It is closed when the subscription ends; Err
// then tells why.
func (s *Subscription[R]) C() <-chan R { return s.c }

// Err returns why the channel was closed: ErrTooSlow, ErrClosed, or nil after
// Close. Only meaningful once C() is closed.
func (s *Subscription[R]) Err() error {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return s.err
}

// Close ends the subscription. Safe to call more than once and after a drop.
func (s *Subscription[R]) Close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	s.h.removeLocked(s, nil)
}

// Subscribe registers a subscriber for key. On a closed hub the returned
// subscription is already ended with ErrClosed.
func (h *Hub[R]) Subscribe(key string) *Subscription[R] {
	s := &Subscription[R]{h: h, key: key, c: make(chan R, h.buffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		s.err = ErrClosed
		close(s.c)
		return s
	}
	m := h.subs[key]
	if m == nil {
		m = make(map[*Subscription[R]]struct{})
		h.subs[key] = m
	}
	m[s] = struct{}{}
	return s
}

// Publish hands rec to every subscriber of key without blocking: a
// subscriber whose buffer is full is dropped with ErrTooSlow.
func (h *Hub[R]) Publish(key string, rec R) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[key] {
		select {
		case s.c <- rec:
		default:
			h.dropped++
			h.removeLocked(s, ErrTooSlow)
		}
	}
}

// removeLocked unregisters s and closes its channel with reason err. It is a
// no-op when s is already removed. h.mu must be held.
func (h *Hub[R]) removeLocked(s *Subscription[R], err error) {
	m := h.subs[s.key]
	if _, ok := m[s]; !ok {
		return
	}
	delete(m, s)
	if len(m) == 0 {
		delete(h.subs, s.key)
	}
	s.err = err
	close(s.c)
}

// End ends every subscription of key with reason err (a session that was
// deleted); later subscribers of key are not affected.
func (h *Hub[R]) End(key string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[key] {
		h.removeLocked(s, err)
	}
}

// Subscribers returns the number of live subscribers of key.
func (h *Hub[R]) Subscribers(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[key])
}

// Dropped returns how many subscribers were dropped for being too slow.
func (h *Hub[R]) Dropped() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dropped
}

// Close ends every subscription with ErrClosed; later Subscribe calls get an
// ended subscription and Publish does nothing. Safe to call twice.
func (h *Hub[R]) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, m := range h.subs {
		for s := range m {
			h.removeLocked(s, ErrClosed)
		}
	}
}
