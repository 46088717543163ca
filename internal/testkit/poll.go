package testkit

import (
	"testing"
	"time"
)

// pollEvery is the longest pause between two polls: a first poll is
// retried after a millisecond, and the pause doubles up to this.
const pollEvery = 50 * time.Millisecond

// Eventually polls cond until it returns true. When within has passed
// first it fails the test: "timed out after <within> waiting for <what>".
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	EventuallyNil(t, within, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

type notYet struct{}

func (notYet) Error() string { return "not yet" }

var errNotYet error = notYet{}

// EventuallyNil polls f until it returns nil. When within has passed first
// it fails the test with what and f's last error, which says what was seen.
func EventuallyNil(t testing.TB, within time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if err == errNotYet {
				t.Fatalf("timed out after %v waiting for %s", within, what)
			}
			t.Fatalf("timed out after %v waiting for %s: %v", within, what, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, pollEvery)
	}
}

// Recv receives from ch (the zero value once ch is closed), failing the
// test when nothing comes within the deadline.
func Recv[T any](t testing.TB, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
	var zero T
	return zero
}
