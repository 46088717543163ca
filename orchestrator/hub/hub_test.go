package hub_test

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/hub"
)

type rec struct {
	session string
	seq     int
}

func newHub(buf int) *hub.Hub[rec] {
	return hub.New[rec](hub.Config{Buffer: buf})
}

func TestPublishDelivers(t *testing.T) {
	tests := []struct {
		name    string
		publish []rec
		want    []int // seqs seen by the subscriber of "a"
	}{
		{name: "in order", publish: []rec{{"a", 1}, {"a", 2}, {"a", 3}}, want: []int{1, 2, 3}},
		{name: "other sessions ignored", publish: []rec{{"b", 1}, {"a", 1}, {"b", 2}}, want: []int{1}},
		{name: "nothing", publish: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHub(8)
			s := h.Subscribe("a")
			for _, r := range tt.publish {
				h.Publish(r.session, r)
			}
			s.Close()
			var got []int
			for r := range s.C() {
				got = append(got, r.seq)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			if err := s.Err(); err != nil {
				t.Fatalf("Err after Close = %v, want nil", err)
			}
		})
	}
}

func TestSlowSubscriberDroppedWithoutBlocking(t *testing.T) {
	h := newHub(4)
	slow := h.Subscribe("a")
	fast := h.Subscribe("a")
	var wg sync.WaitGroup
	wg.Add(1)
	var fastGot int
	go func() {
		defer wg.Done()
		for range fast.C() {
			fastGot++
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= 1000; i++ {
			h.Publish("a", rec{"a", i})
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Publish blocked on a slow subscriber")
	}
	n := 0
	for range slow.C() {
		n++
	}
	if n != 4 {
		t.Fatalf("slow subscriber got %d records before the drop, want its buffer (4)", n)
	}
	if !errors.Is(slow.Err(), hub.ErrTooSlow) {
		t.Fatalf("slow.Err() = %v, want ErrTooSlow", slow.Err())
	}
	if h.Dropped() < 1 {
		t.Fatalf("Dropped() = %d, want >= 1", h.Dropped())
	}
	fast.Close()
	wg.Wait()
	if h.Subscribers("a") != 0 {
		t.Fatalf("Subscribers = %d after all ended", h.Subscribers("a"))
	}
}

func TestCloseEndsSubscriptions(t *testing.T) {
	h := newHub(1)
	s := h.Subscribe("a")
	h.Close()
	h.Close()
	if _, ok := <-s.C(); ok {
		t.Fatal("channel open after hub Close")
	}
	if !errors.Is(s.Err(), hub.ErrClosed) {
		t.Fatalf("Err = %v, want ErrClosed", s.Err())
	}
	s.Close() // no panic after the drop
	late := h.Subscribe("a")
	if _, ok := <-late.C(); ok || !errors.Is(late.Err(), hub.ErrClosed) {
		t.Fatal("subscribe after Close should return an ended subscription")
	}
	h.Publish("a", rec{"a", 1})
}

// TestEndKey: End closes the subscriptions of one key with the given reason
// and leaves other keys and later subscribers alone.
func TestEndKey(t *testing.T) {
	h := newHub(4)
	gone := errors.New("session deleted")
	a1, a2, b := h.Subscribe("a"), h.Subscribe("a"), h.Subscribe("b")
	h.End("a", gone)
	for _, s := range []*hub.Subscription[rec]{a1, a2} {
		if _, ok := <-s.C(); ok || !errors.Is(s.Err(), gone) {
			t.Fatalf("subscription of a: open or Err = %v, want %v", s.Err(), gone)
		}
	}
	late := h.Subscribe("a")
	h.Publish("a", rec{"a", 1})
	h.Publish("b", rec{"b", 1})
	if r := <-late.C(); r.seq != 1 {
		t.Fatalf("later subscriber of a got %v", r)
	}
	if r := <-b.C(); r.seq != 1 {
		t.Fatalf("subscriber of b got %v", r)
	}
	if n := h.Subscribers("a"); n != 1 {
		t.Fatalf("%d subscribers of a, want the later one", n)
	}
}

func BenchmarkPublish(b *testing.B) {
	for _, subs := range []int{1, 10, 100} {
		b.Run(strconv.Itoa(subs)+"subs", func(b *testing.B) {
			h := newHub(4096)
			var wg sync.WaitGroup
			for range subs {
				s := h.Subscribe("a")
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range s.C() {
					}
				}()
			}
			b.ResetTimer()
			for i := range b.N {
				h.Publish("a", rec{"a", i})
			}
			b.StopTimer()
			b.ReportMetric(float64(h.Dropped()), "drops")
			h.Close()
			wg.Wait()
		})
	}
}
