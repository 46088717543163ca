package relay

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cursor is how far a relay has consumed a container's log. Docker stamps
// every line with a nanosecond time; several lines may share one, so a
// position is the time of the last consumed line plus how many lines with
// exactly that time were consumed (its ordinal). stdout and stderr are copied
// into the log by two goroutines of the engine, so their times are monotonic
// only within one stream: each stream has its own position.
//
// SawDone records that a done event was appended (and no message since:
// a message makes the agent work again); Exited and ExitCode that
// the container's exit was appended, so that a restart does not append it
// twice. Input is the seq of the last input record written to stdin: a
// relay started later writes the node's messages appended after it (ones a
// crash caught between their append and their write).
type Cursor struct {
	Stdout   Position
	Stderr   Position
	SawDone  bool
	Exited   bool
	ExitCode int
	Input    int64
	// Stopping: a stop signal was appended; a relay started later still
	// escalates (runtime stop after the grace period).
	Stopping bool
	// Handoff: the agent handed off (a handoff event was appended, and the
	// stop that ends it with it); its exit starts the node's continuation.
	Handoff bool
	// Paused: a pause signal was appended and no resume or stop since: the
	// container is frozen, and messages wait for the resume.
	Paused bool
}

// Position is the time of the last consumed line of one stream and its
// ordinal (1-based) among the lines of that stream with exactly that time.
// The zero Position means nothing consumed.
type Position struct {
	Time time.Time
	N    int
}

// String encodes the cursor as "o=<unix ns>:<n>,e=<unix ns>:<n>[,d][,x=<exit
// code>][,i=<seq>][,s][,h][,p]". The store keeps it as opaque text.
func (c Cursor) String() string {
	s := "o=" + c.Stdout.String() + ",e=" + c.Stderr.String()
	if c.SawDone {
		s += ",d"
	}
	if c.Exited {
		s += ",x=" + strconv.Itoa(c.ExitCode)
	}
	if c.Input > 0 {
		s += ",i=" + strconv.FormatInt(c.Input, 10)
	}
	if c.Stopping {
		s += ",s"
	}
	if c.Handoff {
		s += ",h"
	}
	if c.Paused {
		s += ",p"
	}
	return s
}

func (p Position) String() string {
	if p.Time.IsZero() {
		return "0:0"
	}
	return strconv.FormatInt(p.Time.UnixNano(), 10) + ":" + strconv.Itoa(p.N)
}

// ParseCursor decodes a cursor written by Cursor.String. "" is the zero
// cursor (read the log from its start).
func ParseCursor(s string) (Cursor, error) {
	var c Cursor
	if s == "" {
		return c, nil
	}
	for _, part := range strings.Split(s, ",") {
		key, val, _ := strings.Cut(part, "=")
		var err error
		switch key {
		case "o":
			c.Stdout, err = parsePosition(val)
		case "e":
			c.Stderr, err = parsePosition(val)
		case "d":
			c.SawDone = true
		case "x":
			c.Exited = true
			c.ExitCode, err = strconv.Atoi(val)
		case "i":
			c.Input, err = strconv.ParseInt(val, 10, 64)
		case "s":
			c.Stopping = true
		case "h":
			c.Handoff = true
		case "p":
			c.Paused = true
		default:
			err = fmt.Errorf("unknown key %q", key)
		}
		if err != nil {
			return Cursor{}, fmt.Errorf("parse log cursor %q: %w", s, err)
		}
	}
	return c, nil
}

func parsePosition(s string) (Position, error) {
	ts, n, ok := strings.Cut(s, ":")
	if !ok {
		return Position{}, fmt.Errorf("position %q is not <unix ns>:<n>", s)
	}
	ns, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("position time %q: %w", ts, err)
	}
	k, err := strconv.Atoi(n)
	if err != nil || k < 0 {
		return Position{}, fmt.Errorf("position ordinal %q is not a count", n)
	}
	if ns == 0 {
		return Position{}, nil
	}
	return Position{Time: time.Unix(0, ns).UTC(), N: k}, nil
}

// since is the time to ask the runtime for logs from: the earlier of the two
// stream positions (the runtime's filter is inclusive, skip drops the rest).
func (c Cursor) since() time.Time {
	a, b := c.Stdout.Time, c.Stderr.Time
	switch {
	case a.IsZero() || b.IsZero():
		return time.Time{}
	case a.Before(b):
		return a
	default:
		return b
	}
}

// skipper drops the lines a stream of logs, opened at Cursor.since(), repeats
// from before the cursor. One skipper serves one opened stream.
type skipper struct {
	from Cursor
	seen [2]int // lines of each stream seen with exactly the cursor's time
}

// skip reports whether a line of stream (0 stdout, 1 stderr) stamped t was
// consumed before the cursor.
func (s *skipper) skip(stream int, t time.Time) bool {
	p := s.from.Stdout
	if stream == 1 {
		p = s.from.Stderr
	}
	if p.Time.IsZero() {
		return false
	}
	switch {
	case t.Before(p.Time):
		return true
	case t.Equal(p.Time):
		s.seen[stream]++
		return s.seen[stream] <= p.N
	default:
		return false
	}
}

// advance returns p moved past a line stamped t.
func (p Position) advance(t time.Time) Position {
	if !p.Time.IsZero() && t.Equal(p.Time) {
		return Position{Time: p.Time, N: p.N + 1}
	}
	return Position{Time: t, N: 1}
}
