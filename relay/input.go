package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/containers"
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

// handle appends an input and queues it for the stdin writer. While the
// agent is paused a message is appended and held (its reply does not wait
// for the write); a resume or a stop thaws the container, writes the held
// messages in order, then its own line.
func (r *Relay) handle(ctx context.Context, req request) {
	if r.exit != nil {
		req.reply <- result{err: ErrExited}
		return
	}
	_, isMsg := req.in.(protocol.MessageInput)
	if isMsg && r.cur.Stopping {
		req.reply <- result{err: ErrStopping}
		return
	}
	sig, isSignal := req.in.(protocol.SignalInput)
	thaw := isSignal && r.cur.Paused && (sig.Action == protocol.ActionResume || sig.Action == protocol.ActionStop)
	need := 1 // writes this input queues (the sends below cannot block: only this goroutine sends)
	switch {
	case thaw:
		need += len(r.held)
	case isMsg && r.cur.Paused:
		// held, not queued: bounded like the queue, leaving room for the resume
		need = len(r.held) + 2
	}
	if cap(r.writes)-len(r.writes) < need {
		req.reply <- result{err: fmt.Errorf("deliver to node %s: %w (%d inputs not yet written to stdin)", r.cfg.Node.ID, ErrMailboxFull, len(r.writes)+len(r.held))}
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
	// The cursor remembers, with the record, what a restart must know: a
	// stop (to keep escalating; a stop asked for while the agent hands off
	// ends the node: no continuation follows), a pause (to keep holding
	// messages), and that a done was followed by a message (the agent
	// works again: its exit is no longer a finished one).
	cur := r.cur
	switch {
	case isSignal && sig.Action == protocol.ActionStop:
		if !cur.Stopping || cur.Handoff {
			cur.Stopping, cur.Handoff = true, false
		}
		cur.Paused = false
	case isSignal && sig.Action == protocol.ActionPause:
		cur.Paused = true
	case isSignal && sig.Action == protocol.ActionResume:
		cur.Paused = false
	case isMsg && req.in.(protocol.MessageInput).From != protocol.FromSystem:
		// A person's or the parent's message asks for more work. A system
		// notice (a child finished) does not undo a done: an agent that
		// exits after its done, with the notice still unread, finished.
		cur.SawDone = false
	}
	var stored []protocol.Record
	if cur != r.cur {
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
	if isMsg && r.cur.Paused {
		job.reply = nil
		r.held = append(r.held, job)
		req.reply <- result{rec: rec}
		return
	}
	if isSignal {
		id := r.cfg.Node.ContainerID
		switch sig.Action {
		case protocol.ActionStop:
			r.armStop()
		case protocol.ActionPause:
			job.after = func(ctx context.Context) error { return r.cfg.Process.Pause(ctx, id) }
		case protocol.ActionResume:
			job.before = r.unpause
		}
	}
	if thaw {
		job.before = nil // the first job written thaws the container
		jobs := append(r.held, job)
		r.held = nil
		jobs[0].before = r.unpause
		for _, j := range jobs[:len(jobs)-1] {
			r.writes <- &j
		}
		job = jobs[len(jobs)-1]
	}
	r.writes <- &job
}

// unpause thaws the container; one that is not paused (a pause that failed)
// is left as it is.
func (r *Relay) unpause(ctx context.Context) error {
	err := r.cfg.Process.Unpause(ctx, r.cfg.Node.ContainerID)
	if containers.CodeOf(err) == containers.CodeConflict {
		return nil
	}
	return err
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
