package relay

import (
	"context"
	"sync"
)

// lineQueue hands log lines from the reader goroutine to the run goroutine,
// at most max at a time (a batch). Unlike a channel of that capacity, it
// holds memory only while lines wait: an idle relay (an agent printing
// nothing, the common case in a wide tree) costs none, and a queue that
// grew for a burst is let go once drained (issue 23: ≤ 32 KiB per idle relay).
type lineQueue struct {
	mu     sync.Mutex // guards items, closed; leaf
	items  []logItem
	max    int
	closed bool
	// ready has a token while items or closed may be new to the taker;
	// space has one while the putter may find room. Each has one waiter.
	ready chan struct{}
	space chan struct{}
}

// keepCap is the capacity a drained queue keeps (a few lines: a steady
// trickle allocates nothing).
const keepCap = 8

func newLineQueue(max int) *lineQueue {
	return &lineQueue{max: max, ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// put queues it, waiting while max lines are queued; false when ctx ended.
func (q *lineQueue) put(ctx context.Context, it logItem) bool {
	for {
		q.mu.Lock()
		if len(q.items) < q.max {
			if q.items == nil {
				q.items = make([]logItem, 0, keepCap)
			}
			q.items = append(q.items, it)
			q.mu.Unlock()
			signal(q.ready)
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.space:
		case <-ctx.Done():
			return false
		}
	}
}

// close tells the taker that no more lines come.
func (q *lineQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.ready)
}

// take returns the queued lines (at most max) and whether the queue is
// closed and drained; spare (a batch taken before, its items cleared) is
// the queue's next buffer, so that a steady stream allocates nothing. It
// does not wait: call it when Ready has a token.
func (q *lineQueue) take(spare []logItem) (batch []logItem, done bool) {
	q.mu.Lock()
	batch, q.items = q.items, spare[:0]
	done = q.closed
	q.mu.Unlock()
	signal(q.space)
	return batch, done
}

// shrink lets an empty queue's buffer go when a burst made it large.
func (q *lineQueue) shrink() {
	q.mu.Lock()
	if len(q.items) == 0 && cap(q.items) > keepCap {
		q.items = nil
	}
	q.mu.Unlock()
}

// Ready has a token when take may find lines or the end.
func (q *lineQueue) Ready() <-chan struct{} { return q.ready }

// shrink drops the run goroutine's batch buffers when a burst made them
// large: kept, a relay idle after a burst would hold its biggest batch.
func (r *Relay) shrink() {
	if cap(r.batch) > keepCap {
		r.batch = nil
	}
	if cap(r.recs) > keepCap {
		r.recs = nil
	}
	if cap(r.effects) > keepCap {
		r.effects = nil
	}
	if cap(r.stderrLines) > keepCap {
		r.stderrLines = nil
	}
	r.lines.shrink()
}
