package relay

import (
	"context"
	"io"
	"time"

	"github.com/filepath-dev/filepath/containers"
)

// Process is what a relay needs from the container runtime: the subset of
// containers.Runtime that touches one existing container.
type Process interface {
	Logs(ctx context.Context, id string, opts containers.LogOptions) (*containers.LogReader, error)
	AttachStdin(ctx context.Context, id string) (io.WriteCloser, error)
	Wait(ctx context.Context, id string) (int, error)
	Stop(ctx context.Context, id string, grace time.Duration) error
	Pause(ctx context.Context, id string) error
	Unpause(ctx context.Context, id string) error
}

var _ Process = containers.Runtime(nil)
