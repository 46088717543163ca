package runner

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
	"github.com/filepath-dev/filepath/relay"
)

// StartSession starts the container of each top-level node of the session
// that does not run (a fresh container if it ran before), and marks the
// session running.
func (r *Runner) StartSession(ctx context.Context, userID, sessionID string) error {
	sess, err := r.sessions.GetSession(ctx, userID, sessionID)
	if err != nil {
		return err
	}
	if sess.RootNodeID == nil {
		return orchestrator.Errorf(orchestrator.EConflict, "session %s has no root node: add an agent first", sessionID)
	}
	nodes, err := r.sessions.Tree(ctx, userID, sessionID)
	if err != nil {
		return err
	}
	for _, node := range nodes {
		if node.ParentID != nil || r.Running(node.ID) {
			continue
		}
		if err := r.startNode(ctx, sess, node); err != nil {
			if serr := r.sessions.UpdateSessionStatus(context.WithoutCancel(ctx), sessionID, protocol.SessionError); serr != nil {
				r.log.Warn("mark session error", "session", sessionID, "err", serr)
			}
			return err
		}
	}
	return r.markRunning(ctx, sessionID)
}

// markRunning marks a session running after one of its agents started.
func (r *Runner) markRunning(ctx context.Context, sessionID string) error {
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	return r.sessions.UpdateSessionStatus(ctx, sessionID, protocol.SessionRunning)
}

// StartNode starts nodeID's container when it is not running (a node just
// spawned through the API, or one that exited and gets a new message) and
// marks the session running. A node that fails to start is marked error with
// an error record naming the reason, and the error is returned.
func (r *Runner) StartNode(ctx context.Context, userID, sessionID, nodeID string) error {
	sess, err := r.sessions.GetSession(ctx, userID, sessionID)
	if err != nil {
		return err
	}
	node, err := r.sessions.GetNode(ctx, userID, sessionID, nodeID)
	if err != nil {
		return err
	}
	if r.Running(nodeID) {
		return nil
	}
	if err := r.startNode(ctx, sess, node); err != nil {
		if sess.RootNodeID != nil && *sess.RootNodeID == nodeID && sess.Status != protocol.SessionRunning {
			// Nothing runs: the session shows that its agent failed.
			if serr := r.sessions.UpdateSessionStatus(context.WithoutCancel(ctx), sessionID, protocol.SessionError); serr != nil {
				r.log.Warn("mark session error", "session", sessionID, "err", serr)
			}
		}
		return err
	}
	// Even when sess said running: a settle of the session may have read the
	// relay map before this start and may be about to write stopped.
	return r.markRunning(ctx, sessionID)
}

// StopSession delivers signal{stop} to every running node of the session,
// concurrently; each relay escalates to SIGTERM and SIGKILL after its grace
// period. A node whose relay cannot take the signal (mailbox full) is
// stopped through the runtime at once. It marks the session stopped.
func (r *Runner) StopSession(ctx context.Context, userID, sessionID string) error {
	nodes, err := r.sessions.Tree(ctx, userID, sessionID)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { r.cancelStart(ctx, n.ID) })
		rel := r.relayOf(n.ID)
		if rel == nil {
			continue
		}
		wg.Go(func() {
			// The relay arms its escalation when it appends the signal; the
			// wait is only for the write, which a stuck agent may block.
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			stop := protocol.SignalInput{Type: protocol.TypeSignal, Action: protocol.ActionStop}
			_, err := rel.Deliver(dctx, stop)
			if err == nil {
				r.notePause(ctx, sessionID, n.ID, stop)
			}
			if errors.Is(err, relay.ErrMailboxFull) {
				r.log.Warn("stop: mailbox full; stopping the container directly", "node", n.ID)
				r.goTracked(func() {
					if err := r.rt.Stop(r.ctx, rel.Node().ContainerID, r.killGrace()); err != nil && r.ctx.Err() == nil {
						r.log.Warn("stop container", "node", n.ID, "err", err)
					}
				})
			} else if err != nil && !errors.Is(err, relay.ErrExited) && !errors.Is(err, relay.ErrClosed) {
				r.log.Warn("stop: deliver signal", "node", n.ID, "err", err)
			}
		})
	}
	wg.Wait()
	return r.sessions.UpdateSessionStatus(ctx, sessionID, protocol.SessionStopped)
}

// goTracked runs f in a goroutine Close waits for, unless Close has begun.
func (r *Runner) goTracked(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.wg.Go(f)
	}
}

func (r *Runner) killGrace() time.Duration {
	if r.cfg.KillGrace > 0 {
		return r.cfg.KillGrace
	}
	return relay.DefaultKillGrace
}

// Deliver appends an input for a running node and writes it to its stdin.
// To a node whose agent is being started it is delivered once the agent
// runs, after its first message.
func (r *Runner) Deliver(ctx context.Context, sessionID, nodeID string, in protocol.Input) (protocol.Record, error) {
	if err := r.waitStarting(ctx, nodeID); err != nil {
		return protocol.Record{}, orchestrator.Errorf(orchestrator.EUnavailable, "node %s is still starting (its health checks run): %v; retry later", nodeID, err)
	}
	rel := r.relayOf(nodeID)
	if rel == nil || rel.Node().SessionID != sessionID {
		return protocol.Record{}, orchestrator.Errorf(orchestrator.EConflict, "node %s is not running: start the session first", nodeID)
	}
	rec, err := rel.Deliver(ctx, in)
	if errors.Is(err, relay.ErrStopping) {
		// The agent is on its way out (a stop, a handoff): the message
		// goes to the node's next container instead of being lost.
		if rel, err = r.nextRelay(ctx, sessionID, nodeID, rel); err == nil {
			rec, err = rel.Deliver(ctx, in)
		}
	}
	switch {
	case err == nil:
		r.notePause(ctx, sessionID, nodeID, in)
		// rec is the record as stored (the relay's Log returns it).
		return rec, nil
	case errors.Is(err, relay.ErrMailboxFull):
		return protocol.Record{}, orchestrator.Errorf(orchestrator.EUnavailable, "node %s: %v; retry later", nodeID, err)
	case errors.Is(err, relay.ErrExited), errors.Is(err, relay.ErrClosed):
		return protocol.Record{}, orchestrator.Errorf(orchestrator.EConflict, "node %s is not running", nodeID)
	case isInvalidInput(err):
		return protocol.Record{}, orchestrator.Errorf(orchestrator.EInvalid, "%v", err)
	default:
		return protocol.Record{}, err
	}
}

// notePause shows a delivered pause or resume on the node (its status reads
// paused until the resume); a stop shows the node running again until its
// exit says how it ended.
func (r *Runner) notePause(ctx context.Context, sessionID, nodeID string, in protocol.Input) {
	sig, ok := in.(protocol.SignalInput)
	if !ok {
		return
	}
	paused := sig.Action == protocol.ActionPause
	if !paused && sig.Action != protocol.ActionResume && sig.Action != protocol.ActionStop {
		return
	}
	if _, err := r.sessions.PatchNode(context.WithoutCancel(ctx), sessionID, nodeID, sessions.NodePatch{Paused: &paused}); err != nil && !permanent(err) {
		r.log.Warn("record the node's pause", "node", nodeID, "paused", paused, "err", err)
	}
}

// nextRelay waits for old, the relay of a stopping agent, to end, and
// returns the relay of the node's next container: the continuation after a
// handoff, or a fresh start (as a message to a stopped node makes).
func (r *Runner) nextRelay(ctx context.Context, sessionID, nodeID string, old *relay.Relay) (*relay.Relay, error) {
	bound := r.cfg.StopGrace + r.cfg.KillGrace + 30*time.Second
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-old.Done():
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, orchestrator.Errorf(orchestrator.EUnavailable, "node %s is stopping and did not end within %s; retry later", nodeID, bound)
	}
	// The old relay leaves the map just after it ends, and a continuation
	// starts right after that: give them a moment before starting anew.
	deadline := time.Now().Add(2 * time.Second)
	for {
		if err := r.waitStarting(ctx, nodeID); err != nil {
			return nil, err
		}
		r.mu.Lock()
		cur, starting := r.relays[nodeID], r.starting[nodeID] != nil
		r.mu.Unlock()
		switch {
		case starting:
			continue
		case cur != nil && cur != old:
			return cur, nil
		case cur == nil && time.Now().After(deadline):
			sess, err := r.sessions.SessionByID(ctx, sessionID)
			if err != nil {
				return nil, err
			}
			if err := r.StartNode(ctx, sess.UserID, sessionID, nodeID); err != nil {
				return nil, err
			}
			if err := r.waitStarting(ctx, nodeID); err != nil {
				return nil, err
			}
			if cur := r.relayOf(nodeID); cur != nil && cur != old {
				return cur, nil
			}
			return nil, orchestrator.Errorf(orchestrator.EConflict, "node %s stopped and did not start again", nodeID)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func isInvalidInput(err error) bool {
	var de *protocol.DecodeError
	return errors.As(err, &de)
}

// DeleteNode removes the containers, workspaces and logs of nodeID's
// subtree; call it before sessions.Store.DeleteNode.
func (r *Runner) DeleteNode(ctx context.Context, userID, sessionID, nodeID string) error {
	nodes, err := r.sessions.Tree(ctx, userID, sessionID)
	if err != nil {
		return err
	}
	kids := map[string][]sessions.Node{}
	byID := map[string]sessions.Node{}
	for _, n := range nodes {
		byID[n.ID] = n
		if n.ParentID != nil {
			kids[*n.ParentID] = append(kids[*n.ParentID], n)
		}
	}
	root, ok := byID[nodeID]
	if !ok {
		return orchestrator.Errorf(orchestrator.ENotFound, "node %s not found", nodeID)
	}
	var subtree []sessions.Node
	var walk func(n sessions.Node)
	walk = func(n sessions.Node) {
		subtree = append(subtree, n)
		for _, k := range kids[n.ID] {
			walk(k)
		}
	}
	walk(root)
	return r.removeNodes(ctx, subtree)
}

// DeleteSession removes every container, workspace and log of the session
// (also containers whose node is unknown); call it before
// sessions.Store.DeleteSession.
func (r *Runner) DeleteSession(ctx context.Context, userID, sessionID string) error {
	nodes, err := r.sessions.Tree(ctx, userID, sessionID)
	if err != nil {
		return err
	}
	// From here on no container starts in this session; one created just
	// before is in the list below (startNode checks again after creating).
	r.mu.Lock()
	if r.deleting == nil {
		r.deleting = map[string]bool{}
	}
	r.deleting[sessionID] = true
	r.mu.Unlock()
	errs := []error{r.removeNodes(ctx, nodes)}
	infos, err := r.rt.List(ctx, map[string]string{containers.LabelSession: sessionID, LabelInstance: r.instance})
	if err != nil {
		errs = append(errs, err)
	}
	for _, in := range infos {
		if err := r.rt.Remove(ctx, in.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (r *Runner) removeNodes(ctx context.Context, nodes []sessions.Node) error {
	var errs []error
	for _, n := range nodes {
		r.cancelStart(ctx, n.ID)
		r.mu.Lock()
		rel := r.relays[n.ID]
		delete(r.relays, n.ID)
		delete(r.startErr, n.ID)
		r.mu.Unlock()
		if rel != nil {
			rel.Close()
		}
		r.closeAPI(n.ID)
		if n.ContainerID != "" {
			if err := r.rt.Remove(ctx, n.ContainerID); err != nil {
				errs = append(errs, err)
			}
		}
		if err := r.ws.Unmount(n.ID); err != nil {
			errs = append(errs, err)
		}
		if err := r.rt.RemoveVolume(ctx, StateVolume(n.ID)); err != nil {
			errs = append(errs, err)
		}
		if err := r.logs.Remove(n.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// settleSession gives a running session in which no relay runs the status
// that tells what happened: error when a top-level node ended in error (or
// was lost), stopped otherwise (invariant 6: no session shows running with
// nothing running).
func (r *Runner) settleSession(ctx context.Context, sessionID string) error {
	if r.settledHook != nil {
		defer r.settledHook()
	}
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	r.mu.Lock()
	for _, rel := range r.relays {
		if rel.Node().SessionID == sessionID {
			r.mu.Unlock()
			return nil
		}
	}
	for _, job := range r.starting {
		if job.sessionID == sessionID {
			r.mu.Unlock()
			return nil
		}
	}
	r.mu.Unlock()
	if r.settleHook != nil {
		r.settleHook()
	}
	sess, err := r.sessions.SessionByID(ctx, sessionID)
	if err != nil || sess.Status != protocol.SessionRunning {
		return err
	}
	status := protocol.SessionStopped
	if nodes, err := r.sessions.Tree(ctx, sess.UserID, sessionID); err == nil {
		for _, n := range nodes {
			if n.ParentID == nil && (n.Status == protocol.StateError || n.Status == protocol.NodeLost) {
				status = protocol.SessionError
			}
		}
	}
	return r.sessions.UpdateSessionStatus(ctx, sessionID, status)
}
