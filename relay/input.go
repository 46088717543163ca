package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/protocol"
)

// pendingInputs returns write jobs for the node's messages appended after
// the last input the cursor says was written: a crash between an input's
// append and its write would otherwise lose it, and a message appended
// before the relay started (the runner's resume message for a restarted
// node) is written before anything delivered to the relay. Such a message
// may reach the agent twice (written, then a crash before the cursor
// moved); signals are not repeated (a stale pause or stop could do harm),
// and at most MailboxLen messages are.
func (r *Relay) pendingInputs(ctx context.Context) []writeJob {
	recs, err := r.cfg.Log.Inputs(ctx, r.cfg.Node.SessionID, r.cfg.Node.ID, r.cur.Input)
	if err != nil {
		r.log.Warn("read inputs not yet written", "err", err)
		return nil
	}
	var jobs []writeJob
	for _, rec := range recs {
		in, err := protocol.DecodeInput(rec.Data)
		if _, ok := in.(protocol.MessageInput); err != nil || !ok {
			continue
		}
		if len(jobs) == cap(r.writes) {
			r.log.Warn("too many inputs not yet written; repeating only the last ones", "max", cap(r.writes))
			jobs = jobs[1:]
		}
		jobs = append(jobs, writeJob{line: append(bytes.Clone(rec.Data), '\n'), rec: rec})
		r.log.Debug("writing an input appended before the relay started", "seq", rec.Seq)
	}
	return jobs
}

// handle appends an input and queues it for the stdin writer.
func (r *Relay) handle(ctx context.Context, req request) {
	if r.exit != nil {
		req.reply <- result{err: ErrExited}
		return
	}
	if _, isMsg := req.in.(protocol.MessageInput); isMsg && r.cur.Stopping {
		req.reply <- result{err: ErrStopping}
		return
	}
	if len(r.writes) == cap(r.writes) { // only this goroutine sends: the send below cannot block
		req.reply <- result{err: fmt.Errorf("deliver to node %s: %w (%d inputs not yet written to stdin)", r.cfg.Node.ID, ErrMailboxFull, cap(r.writes))}
		return
	}
	data, err := json.Marshal(req.in)
	if err == nil {
		_, err = protocol.DecodeInput(data)
	}
	if err != nil {
		req.reply <- result{err: fmt.Errorf("invalid input: %w", err)}
		return
	}
	rec := protocol.Record{Kind: protocol.KindInput, NodeID: r.cfg.Node.ID, Data: data}
	sig, isSignal := req.in.(protocol.SignalInput)
	var stored []protocol.Record
	if isSignal && sig.Action == protocol.ActionStop && (!r.cur.Stopping || r.cur.Handoff) {
		// Remembered with the record, so that a restart keeps escalating.
		// A stop asked for while the agent hands off ends the node: no
		// continuation follows.
		cur := r.cur
		cur.Stopping, cur.Handoff = true, false
		stored, err = r.cfg.Log.AppendWithCursor(ctx, r.cfg.Node.SessionID, r.cfg.Node.ID, cur.String(), rec)
		if err == nil {
			r.cur = cur
		}
	} else {
		stored, err = r.cfg.Log.Append(ctx, r.cfg.Node.SessionID, rec)
	}
	if err == nil && len(stored) != 1 {
		err = fmt.Errorf("the log stored %d records for one", len(stored))
	}
	if err != nil {
		req.reply <- result{err: fmt.Errorf("append input: %w", err)}
		return
	}
	rec = stored[0]
	if !isSignal {
		r.step = 0 // a message starts a turn
	}
	job := writeJob{line: append(data, '\n'), rec: rec, reply: req.reply}
	if isSignal {
		id := r.cfg.Node.ContainerID
		switch sig.Action {
		case protocol.ActionStop:
			r.armStop()
		case protocol.ActionPause:
			job.after = func(ctx context.Context) error { return r.cfg.Process.Pause(ctx, id) }
		case protocol.ActionResume:
			job.before = func(ctx context.Context) error { return r.cfg.Process.Unpause(ctx, id) }
		}
	}
	r.writes <- &job
}

type writeJob struct {
	line          []byte
	rec           protocol.Record
	before, after func(context.Context) error
	reply         chan result
}

// writeLoop owns the container's stdin: it writes queued inputs in order,
// attaching (again) when there is no working attachment.
func (r *Relay) writeLoop(ctx context.Context) {
	var mu sync.Mutex // guards w against the close on cancel
	var w io.WriteCloser
	stop := context.AfterFunc(ctx, func() {
		// A write to an agent that does not read its stdin blocks; closing
		// the attachment ends it.
		mu.Lock()
		defer mu.Unlock()
		if w != nil {
			w.Close()
			w = nil
		}
	})
	defer func() {
		stop()
		mu.Lock()
		defer mu.Unlock()
		if w != nil {
			w.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-r.writes:
			err := r.write(ctx, &mu, &w, j)
			if err == nil {
				select {
				case r.written <- j.rec.Seq:
				case <-ctx.Done():
				}
			}
			if err != nil && ctx.Err() == nil {
				r.log.Warn("write input", "seq", j.rec.Seq, "err", err)
				rec := r.errorRecord(time.Time{}, protocol.ErrorData{Message: fmt.Sprintf("input seq %d not delivered: %v", j.rec.Seq, err), Source: protocol.SourceRuntime})
				if _, aerr := r.cfg.Log.Append(ctx, r.cfg.Node.SessionID, rec); aerr != nil {
					r.log.Warn("append write error", "err", aerr)
				}
			}
			if j.reply != nil {
				j.reply <- result{rec: j.rec, err: err}
			}
		}
	}
}

func (r *Relay) write(ctx context.Context, mu *sync.Mutex, w *io.WriteCloser, j *writeJob) error {
	if j.before != nil {
		if err := j.before(ctx); err != nil {
			return err
		}
	}
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		mu.Lock()
		cur := *w
		mu.Unlock()
		if cur == nil {
			cur, err = r.cfg.Process.AttachStdin(ctx, r.cfg.Node.ContainerID)
			if err != nil {
				err = fmt.Errorf("attach stdin: %w", err)
				continue
			}
			mu.Lock()
			if ctx.Err() != nil {
				mu.Unlock()
				cur.Close()
				return ctx.Err()
			}
			*w = cur
			mu.Unlock()
		}
		if _, err = cur.Write(j.line); err == nil {
			break
		}
		err = fmt.Errorf("write stdin: %w", err)
		mu.Lock()
		if *w == cur {
			cur.Close()
			*w = nil
		}
		mu.Unlock()
	}
	if err != nil {
		return err
	}
	if j.after != nil {
		return j.after(ctx)
	}
	return nil
}
