package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/protocol"
)

// process appends one batch of log lines with the cursor after its last
// line, then runs the side effects of its events in order.
func (r *Relay) process(ctx context.Context, batch []logItem) {
	recs, effects, stderr := r.recs[:0], r.effects[:0], r.stderrLines[:0]
	cur := r.cur
	// The step a commit links to: r.step (appended before), or the record
	// at index stepAt of recs (its seq comes with the append).
	step, stepAt := r.step, -1
	var stop *writeJob
	for i := range batch {
		it := &batch[i]
		cur.Stdout, cur.Stderr = it.pos.Stdout, it.pos.Stderr
		if it.Stream == containers.Stderr {
			stderr = append(stderr, it.Line)
			r.pushTail(it.Line)
			continue
		}
		line := bytes.TrimSuffix(it.Line, []byte{'\r'})
		if len(bytes.TrimSpace(line)) == 0 && !it.Truncated {
			continue
		}
		at := it.Time // zero (a runtime without times): the Log's append time
		if it.Truncated {
			msg := fmt.Sprintf("line of %d bytes is longer than the %d-byte line limit; cut", it.Size, r.cfg.MaxLine)
			recs = append(recs, r.errorRecord(at, protocol.ErrorData{Message: msg, Raw: r.raw(line), Source: protocol.SourceStdout}))
			continue
		}
		ev, err := protocol.DecodeEvent(line)
		if err != nil {
			recs = append(recs, r.errorRecord(at, protocol.ErrorData{Message: err.Error(), Raw: r.raw(line), Source: protocol.SourceStdout}))
			continue
		}
		data, err := json.Marshal(ev)
		if err != nil { // cannot happen for the protocol's structs
			recs = append(recs, r.errorRecord(at, protocol.ErrorData{Message: "encode event: " + err.Error(), Raw: r.raw(line), Source: protocol.SourceStdout}))
			continue
		}
		rec := protocol.Record{Kind: protocol.KindEvent, NodeID: r.cfg.Node.ID, At: at, Data: data}
		switch e := ev.(type) {
		case protocol.ToolEvent, protocol.CommandEvent:
			step, stepAt = 0, len(recs)
		case protocol.CommitEvent:
			if stepAt >= 0 {
				rec.Ref = -int64(len(recs) - stepAt)
			} else {
				rec.Ref = step
			}
		case protocol.StatusEvent:
			if e.State == protocol.StateIdle || e.State == protocol.StateDone {
				step, stepAt = 0, -1
			}
		case protocol.DoneEvent:
			step, stepAt = 0, -1
		}
		recs = append(recs, rec)
		switch e := ev.(type) {
		case protocol.SpawnEvent:
			effects = append(effects, ev)
		case protocol.StatusEvent:
			if !cur.Handoff {
				effects = append(effects, ev)
			}
		case protocol.DoneEvent:
			if cur.Stopping && !cur.Handoff {
				// The agent's answer to a stop: it was stopped, it did
				// not finish (its exit says Stopped without Done).
				break
			}
			cur.SawDone = true
			if !cur.Handoff {
				effects = append(effects, ev)
			}
		case protocol.HandoffEvent:
			if cur.Handoff || cur.Stopping {
				// One handoff per agent; and a stop asked for already wins.
				break
			}
			// The stop that ends this agent goes with the event, in the
			// same transaction as the cursor that remembers both: a restart
			// in between still stops it and continues the node.
			cur.Handoff, cur.Stopping = true, true
			sig, _ := json.Marshal(protocol.SignalInput{Type: protocol.TypeSignal, Action: protocol.ActionStop})
			recs = append(recs, protocol.Record{Kind: protocol.KindInput, NodeID: r.cfg.Node.ID, Data: sig})
			stop = &writeJob{line: append(sig, '\n')}
			effects = append(effects, e)
		}
	}
	r.recs, r.effects, r.stderrLines = recs, effects, stderr
	if len(stderr) > 0 && r.cfg.LogDir != nil {
		// Written before the cursor moves: after a crash in between, these
		// lines appear twice in the node's log, never zero times.
		if err := r.cfg.LogDir.Write(r.cfg.Node.ID, stderr...); err != nil {
			r.log.Warn("write node log", "err", err)
		}
	}
	stored, err := r.appendRetry(ctx, cur, recs)
	if err != nil {
		return
	}
	r.cur = cur
	if stepAt >= 0 && stepAt < len(stored) {
		step = stored[stepAt].Seq
	}
	r.step = step
	if stop != nil {
		for _, rec := range stored {
			if rec.Kind == protocol.KindInput {
				stop.rec = rec
			}
		}
		r.armStop()
		if len(r.writes) < cap(r.writes) { // only this goroutine sends: cannot block
			r.writes <- stop
		} else {
			r.log.Warn("handoff: stdin queue full; the agent is stopped after the grace period without the stop line")
		}
	}
	for _, ev := range effects {
		r.apply(ctx, ev)
	}
	clear(recs)
	clear(stderr)
}

// armStop starts the escalation to the runtime's stop (once).
func (r *Relay) armStop() {
	if r.stopTimer == nil && !r.stopArmed {
		r.stopArmed = true
		r.stopTimer = r.cfg.Clock.After(r.cfg.StopGrace)
	}
}

// appendRetry appends recs with cur until it succeeds or ctx ends: the lines
// stay in the container's log, so a failed append is retried, never dropped.
func (r *Relay) appendRetry(ctx context.Context, cur Cursor, recs []protocol.Record) ([]protocol.Record, error) {
	backoff := 50 * time.Millisecond
	cs := cur.String()
	for {
		stored, err := r.cfg.Log.AppendWithCursor(ctx, r.cfg.Node.SessionID, r.cfg.Node.ID, cs, recs...)
		if err == nil {
			return stored, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if r.cfg.Permanent != nil && r.cfg.Permanent(err) {
			r.log.Warn("append to session log failed; ending the relay", "err", err)
			r.err = fmt.Errorf("append to session log: %w", err)
			r.once.Do(r.cancel)
			return nil, err
		}
		r.log.Warn("append to session log failed; retrying", "records", len(recs), "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.cfg.Clock.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (r *Relay) apply(ctx context.Context, ev protocol.Event) {
	var err error
	var what string
	switch e := ev.(type) {
	case protocol.SpawnEvent:
		what = "spawn " + strconv.Quote(e.Name)
		err = r.cfg.Effects.Spawn(ctx, r.cfg.Node, e)
	case protocol.StatusEvent:
		what = "status " + e.State
		err = r.cfg.Effects.StatusChanged(ctx, r.cfg.Node, e)
	case protocol.DoneEvent:
		what = "done"
		err = r.cfg.Effects.Done(ctx, r.cfg.Node, e)
	case protocol.HandoffEvent:
		what = "handoff"
		err = r.cfg.Effects.Handoff(ctx, r.cfg.Node, e)
	}
	if err == nil || ctx.Err() != nil {
		return
	}
	r.log.Warn("side effect failed", "effect", what, "err", err)
	rec := r.errorRecord(time.Time{}, protocol.ErrorData{Message: what + ": " + err.Error(), Source: protocol.SourceRuntime})
	if _, err := r.cfg.Log.Append(ctx, r.cfg.Node.SessionID, rec); err != nil {
		r.log.Warn("append side effect error", "err", err)
	}
}

// finish appends the exit (once: the cursor remembers it) and runs
// Effects.Exited.
func (r *Relay) finish(ctx context.Context) {
	ex := Exit{Code: r.exit.code, Err: r.exit.err, Done: r.cur.SawDone, Stopped: r.cur.Stopping, Handoff: r.cur.Handoff, StderrTail: r.tailText()}
	if ex.Err != nil {
		ex.Code = -1
	}
	var recs []protocol.Record
	if !ex.Clean() && !ex.Stopped {
		d := protocol.ErrorData{Source: protocol.SourceExit, StderrTail: ex.StderrTail}
		if ex.Err != nil {
			d.Message = "lost the agent's container: " + ex.Err.Error()
		} else {
			code := ex.Code
			d.ExitCode = &code
			d.Message = fmt.Sprintf("agent exited with code %d", code)
			if code == 0 {
				d.Message += " without a done event"
			}
		}
		recs = append(recs, r.errorRecord(time.Time{}, d))
	}
	cur := r.cur
	cur.Exited, cur.ExitCode = true, ex.Code
	if _, err := r.appendRetry(ctx, cur, recs); err != nil {
		return
	}
	r.cur = cur
	r.callExited(ctx, ex)
}

func (r *Relay) callExited(ctx context.Context, ex Exit) {
	if err := r.cfg.Effects.Exited(ctx, r.cfg.Node, ex); err != nil && ctx.Err() == nil {
		r.log.Warn("record exit", "err", err)
	}
}

func (r *Relay) errorRecord(at time.Time, d protocol.ErrorData) protocol.Record {
	data, _ := json.Marshal(d) // strings and an int: cannot fail
	return protocol.Record{Kind: protocol.KindError, NodeID: r.cfg.Node.ID, At: at, Data: data}
}

// raw cuts a bad line to MaxRaw bytes for its error record. Invalid UTF-8 is
// replaced by U+FFFD when the record is encoded as JSON.
func (r *Relay) raw(line []byte) string {
	if len(line) > r.cfg.MaxRaw {
		line = line[:r.cfg.MaxRaw]
	}
	return string(line)
}

func (r *Relay) pushTail(line []byte) {
	if len(line) > maxTailLine {
		line = line[:maxTailLine]
	}
	if len(r.tail) == r.cfg.TailLines {
		copy(r.tail, r.tail[1:])
		r.tail = r.tail[:len(r.tail)-1]
	}
	r.tail = append(r.tail, string(line))
}

func (r *Relay) tailText() string {
	var b bytes.Buffer
	for _, l := range r.tail {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}
