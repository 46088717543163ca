package containers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Defaults of RunOptions.
const (
	DefaultRunOutput    = 16 << 10
	DefaultRunStopGrace = 2 * time.Second
	// removeTimeout bounds removing a finished run's container.
	removeTimeout = 30 * time.Second
)

// RunOptions bound one run to completion.
type RunOptions struct {
	// Timeout is the time limit from the start (0: only ctx bounds it). At
	// the limit the container is stopped (SIGTERM, then SIGKILL after
	// StopGrace) and the result says TimedOut.
	Timeout time.Duration
	// MaxOutput is how many bytes of output are kept: the last ones
	// (DefaultRunOutput).
	MaxOutput int
	// StopGrace is the wait between SIGTERM and SIGKILL at the time limit
	// (DefaultRunStopGrace).
	StopGrace time.Duration
}

// RunResult is how a run ended.
type RunResult struct {
	// ExitCode is the process's exit code (after a timeout: the one the
	// stop left, e.g. 137 or 143).
	ExitCode int
	TimedOut bool
	// Output is the tail of stdout and stderr, each line in the order the
	// runtime stamped it, at most MaxOutput bytes.
	Output string
	// Truncated: earlier output was dropped to keep the bound.
	Truncated bool
	Duration  time.Duration
}

// Run creates a container from spec, starts it, waits for it to exit
// (stopping it at opts.Timeout), reads the tail of its output and removes
// it: a short-lived container, hardened like any other Spec, for work that
// must finish before something else starts. An error means the container
// could not be run or waited for; a command that fails is a result with its
// exit code.
func Run(ctx context.Context, rt Runtime, spec Spec, opts RunOptions) (RunResult, error) {
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultRunOutput
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultRunStopGrace
	}
	id, err := rt.Create(ctx, spec)
	if err != nil {
		return RunResult{}, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		defer cancel()
		rt.Remove(rctx, id) //nolint:errcheck // best effort: it is labeled, and Remove of a gone container is no error
	}()
	start := time.Now()
	if err := rt.Start(ctx, id); err != nil {
		return RunResult{}, err
	}
	var res RunResult
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if opts.Timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, opts.Timeout)
	}
	code, err := rt.Wait(wctx, id)
	timedOut := err != nil && ctx.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded)
	cancel()
	switch {
	case timedOut:
		res.TimedOut = true
		if err := rt.Stop(ctx, id, opts.StopGrace); err != nil {
			return RunResult{}, fmt.Errorf("stop after %s: %w", opts.Timeout, err)
		}
		if code, err = rt.Wait(ctx, id); err != nil {
			return RunResult{}, err
		}
	case err != nil:
		return RunResult{}, err
	}
	res.ExitCode, res.Duration = code, time.Since(start)
	res.Output, res.Truncated, err = tailOutput(ctx, rt, id, opts.MaxOutput)
	if err != nil {
		return RunResult{}, fmt.Errorf("read the output: %w", err)
	}
	return res, nil
}

// tailOutput reads the whole log of an exited container and keeps its last
// max bytes, starting at a line when earlier output was dropped.
func tailOutput(ctx context.Context, rt Runtime, id string, max int) (string, bool, error) {
	rd, err := rt.Logs(ctx, id, LogOptions{MaxLine: max})
	if err != nil {
		return "", false, err
	}
	defer rd.Close()
	var buf bytes.Buffer
	cut := false
	for {
		ln, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", false, err
		}
		cut = cut || ln.Truncated
		buf.Write(ln.Line)
		buf.WriteByte('\n')
		if over := buf.Len() - 1 - max; over > 0 { // the last newline is not kept
			// Drop whole lines from the front (all but the end of a line
			// longer than max).
			drop := over
			if i := bytes.IndexByte(buf.Bytes()[over:], '\n'); i >= 0 && i < buf.Len()-over-1 {
				drop = over + i + 1
			}
			buf.Next(drop)
			cut = true
		}
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})), cut, nil
}
