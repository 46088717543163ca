package relay

import (
	"testing"
	"time"
)

func TestCursorRoundTrip(t *testing.T) {
	t1 := time.Date(2026, 11, 22, 2, 0, 0, 123456789, time.UTC)
	tests := []struct {
		name string
		c    Cursor
		text string
	}{
		{name: "zero", c: Cursor{}, text: "o=0:0,e=0:0"},
		{name: "stdout only", c: Cursor{Stdout: Position{Time: t1, N: 3}}, text: "o=1795312800123456789:3,e=0:0"},
		{name: "done and exit", c: Cursor{Stdout: Position{Time: t1, N: 1}, Stderr: Position{Time: t1.Add(1), N: 2}, SawDone: true, Exited: true, ExitCode: 137},
			text: "o=1795312800123456789:1,e=1795312800123456790:2,d,x=137"},
		{name: "input", c: Cursor{Input: 42}, text: "o=0:0,e=0:0,i=42"},
		{name: "handoff", c: Cursor{Input: 7, Stopping: true, Handoff: true}, text: "o=0:0,e=0:0,i=7,s,h"},
		{name: "paused", c: Cursor{Input: 3, Paused: true}, text: "o=0:0,e=0:0,i=3,p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.String(); got != tt.text {
				t.Fatalf("String() = %q, want %q", got, tt.text)
			}
			back, err := ParseCursor(tt.text)
			if err != nil || back != tt.c {
				t.Fatalf("ParseCursor(%q) = %+v, %v", tt.text, back, err)
			}
		})
	}
	if c, err := ParseCursor(""); err != nil || c != (Cursor{}) {
		t.Fatalf(`ParseCursor("") = %+v, %v`, c, err)
	}
	for _, bad := range []string{"o=1", "o=x:1", "o=1:-1", "q=1:1", "x=abc"} {
		if _, err := ParseCursor(bad); err == nil {
			t.Errorf("ParseCursor(%q) accepted", bad)
		}
	}
}

func TestSkipper(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC)
	sk := skipper{from: Cursor{Stdout: Position{Time: t0.Add(5), N: 2}}}
	tests := []struct {
		name   string
		stream int
		t      time.Time
		skip   bool
	}{
		{name: "before", stream: 0, t: t0.Add(4), skip: true},
		{name: "same time 1st", stream: 0, t: t0.Add(5), skip: true},
		{name: "stderr, nothing consumed", stream: 1, t: t0.Add(5), skip: false},
		{name: "same time 2nd", stream: 0, t: t0.Add(5), skip: true},
		{name: "same time 3rd", stream: 0, t: t0.Add(5), skip: false},
		{name: "after", stream: 0, t: t0.Add(6), skip: false},
	}
	for _, tt := range tests {
		if got := sk.skip(tt.stream, tt.t); got != tt.skip {
			t.Fatalf("%s: skip = %v, want %v", tt.name, got, tt.skip)
		}
	}
}
