package relay

import "time"

// Clock is the time source of a relay; tests inject a fake one to drive the
// stop escalation and the retry back-off without sleeping.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
