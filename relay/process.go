package relay

import (
	"context"
	"io"
	"iter"
	"time"
)

// Stream names of a LogLine.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// LogLine is one line of a container's log.
type LogLine struct {
	Stream    string
	Time      time.Time
	Line      []byte
	Truncated bool
}

// Process is what a relay needs from the container runtime: the subset of
// containers.Runtime that touches one running container.
type Process interface {
	// Logs yields the container's log lines stamped at or after since, in
	// log order; with follow it keeps yielding until the container exits.
	Logs(ctx context.Context, id string, since time.Time, follow bool) iter.Seq2[LogLine, error]
	// AttachStdin opens the container's stdin.
	AttachStdin(ctx context.Context, id string) (io.WriteCloser, error)
	// Wait blocks until the container exits and returns its exit code.
	Wait(ctx context.Context, id string) (int, error)
	// Stop sends SIGTERM, waits up to grace, then SIGKILL.
	Stop(ctx context.Context, id string, grace time.Duration) error
	Pause(ctx context.Context, id string) error
	Unpause(ctx context.Context, id string) error
}
