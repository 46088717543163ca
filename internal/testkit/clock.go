package testkit

import (
	"sync"
	"time"
)

// Clock is a fake clock whose time moves only with Advance. The channels
// After returns fire when Advance reaches their time. Its methods are safe
// for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []timer
}

type timer struct {
	at time.Time
	c  chan time.Time
}

// NewClock returns a Clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the clock's time once Advance has
// moved it d past now; at once when d <= 0.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, timer{c.now.Add(d), ch})
	return ch
}

// Advance moves the clock d forward and fires the timers it reaches.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.now) {
			kept = append(kept, tm)
		} else {
			tm.c <- c.now
		}
	}
	c.timers = kept
}

// Timers is how many channels of After wait to fire: a test waits for a
// goroutine to arm its timer before it advances the clock past it.
func (c *Clock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Armed reports whether a timer waits to fire exactly d from now.
func (c *Clock) Armed(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tm := range c.timers {
		if tm.at.Equal(c.now.Add(d)) {
			return true
		}
	}
	return false
}
