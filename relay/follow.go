package relay

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/filepath-dev/filepath/containers"
)

// readLoop follows the container's log from the cursor and feeds lines to
// the run goroutine. When a follow ends before the container has exited, it
// re-opens the log from where it stopped; once the container has exited it
// reads the log one last time (without follow) and closes r.lines.
func (r *Relay) readLoop(ctx context.Context, from Cursor) {
	defer r.lines.close()
	pos := from
	backoff := 100 * time.Millisecond
	for {
		final := false
		select {
		case <-r.exited:
			final = true
		default:
		}
		sk := skipper{from: pos}
		got := false
		streamErr := r.readOnce(ctx, containers.LogOptions{Since: pos.since(), Follow: !final, MaxLine: r.cfg.MaxLine},
			func(ln containers.LogLine) bool {
				s := 0
				if ln.Stream == containers.Stderr {
					s = 1
				}
				if sk.skip(s, ln.Time) {
					return true
				}
				if ln.Unterminated && !final {
					// Its rest may still come: read it again once the
					// container has exited (or the follow is re-opened).
					return false
				}
				if s == 0 {
					pos.Stdout = pos.Stdout.advance(ln.Time)
				} else {
					pos.Stderr = pos.Stderr.advance(ln.Time)
				}
				got = true
				k := min(max(len(ln.Line)/bufferToken, 1), cap(r.budget))
				for range k {
					select {
					case <-r.budget:
					case <-ctx.Done():
						return false
					}
				}
				return r.lines.put(ctx, logItem{LogLine: ln, pos: pos, tokens: k})
			})
		if ctx.Err() != nil {
			return
		}
		if final {
			if streamErr != nil {
				r.log.Warn("read the exited container's log", "err", streamErr)
			}
			return
		}
		if streamErr != nil {
			r.log.Warn("follow container log; re-opening", "err", streamErr, "backoff", backoff)
		}
		if got {
			backoff = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-r.exited:
		case <-r.cfg.Clock.After(backoff):
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// readOnce opens the log once and hands each line to fn until fn returns
// false or the log ends (nil) or breaks (the error).
func (r *Relay) readOnce(ctx context.Context, opts containers.LogOptions, fn func(containers.LogLine) bool) error {
	rd, err := r.cfg.Process.Logs(ctx, r.cfg.Node.ContainerID, opts)
	if err != nil {
		return err
	}
	defer rd.Close()
	stop := context.AfterFunc(ctx, func() { rd.Close() })
	defer stop()
	for {
		ln, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !fn(ln) {
			return nil
		}
	}
}

func (r *Relay) waitLoop(ctx context.Context) {
	code, err := r.cfg.Process.Wait(ctx, r.cfg.Node.ContainerID)
	if ctx.Err() != nil {
		return
	}
	r.exitCh <- exitResult{code: code, err: err}
	close(r.exited)
}
