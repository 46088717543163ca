package main

import (
	"context"
	"sync"
	"time"
)

// clock is the time source of the agent's timeouts (tests inject their own).
type clock struct {
	now    func() time.Time
	ticker func(d time.Duration) (<-chan time.Time, func())
}

func realClock() clock {
	return clock{
		now: time.Now,
		ticker: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		},
	}
}

// maxGap is the most running time one gap between two ticks counts for. A
// longer gap means the process did not run: the orchestrator froze the
// container (signal pause), and a frozen hour must not time out a request
// or a command the moment the container thaws.
const maxGap = time.Second

// watchdog calls fire once when it has not been kicked for d of running
// time. It counts time by ticks, each gap capped at maxGap, so a frozen
// container does not count.
type watchdog struct {
	mu   sync.Mutex
	idle time.Duration
	stop context.CancelFunc
	done chan struct{}
}

// startWatchdog starts a watchdog; it ends when ctx ends, when it fires or
// on Stop.
func startWatchdog(ctx context.Context, c clock, d time.Duration, fire func()) *watchdog {
	ctx, cancel := context.WithCancel(ctx)
	w := &watchdog{stop: cancel, done: make(chan struct{})}
	step := min(max(d/20, time.Millisecond), 250*time.Millisecond)
	tick, stopTick := c.ticker(step)
	last := c.now()
	go func() {
		defer close(w.done)
		defer stopTick()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick:
			}
			now := c.now()
			gap := min(now.Sub(last), max(maxGap, 2*step))
			last = now
			w.mu.Lock()
			w.idle += max(gap, 0)
			fired := w.idle >= d
			w.mu.Unlock()
			if fired {
				fire()
				return
			}
		}
	}()
	return w
}

// Kick restarts the count.
func (w *watchdog) Kick() {
	w.mu.Lock()
	w.idle = 0
	w.mu.Unlock()
}

// Stop ends the watchdog and waits for its goroutine; safe to call twice.
func (w *watchdog) Stop() {
	w.stop()
	<-w.done
}
