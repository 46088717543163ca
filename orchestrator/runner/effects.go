package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
	"github.com/filepath-dev/filepath/relay"
)

// Spawn implements relay.Effects: it creates the child node (with the task
// as its first input, from "parent") and starts its container. A child of a
// custom agent runs its parent's image.
func (r *Runner) Spawn(ctx context.Context, parent relay.Node, ev protocol.SpawnEvent) error {
	_, err := r.SpawnChild(ctx, parent.SessionID, parent.ID, ev)
	return err
}

// SpawnChild is Spawn for the agent API, which appends the spawn event
// itself: it returns the child, also when only its start failed (the child
// then has status error and an error record saying why, and err is set).
func (r *Runner) SpawnChild(ctx context.Context, sessionID, parentID string, ev protocol.SpawnEvent) (sessions.Node, error) {
	sess, err := r.sessions.SessionByID(ctx, sessionID)
	if err != nil {
		return sessions.Node{}, err
	}
	pnode, err := r.sessions.NodeByID(ctx, parentID)
	if err != nil {
		return sessions.Node{}, err
	}
	if pnode.SessionID != sessionID {
		return sessions.Node{}, orchestrator.Errorf(orchestrator.ENotFound, "node %s not found in session %s", parentID, sessionID)
	}
	in := sessions.NewNode{Name: ev.Name, AgentType: ev.Agent, Model: ev.Model, ParentID: &pnode.ID}
	if ev.Task != nil {
		in.Task = *ev.Task
	}
	fork := ev.Workspace != nil && *ev.Workspace == protocol.WorkspaceFork
	if fork && r.cfg.Forks == nil {
		return sessions.Node{}, orchestrator.FieldErrorf("workspace", "this orchestrator cannot fork workspaces (it runs without the session filesystem); spawn with workspace \"shared\"")
	}
	if fork {
		in.Workspace = protocol.WorkspaceFork
	}
	// A child of a custom agent runs its parent's image unless the spawn
	// names another catalog agent; a name the catalog does not know (a BYO
	// agent's own name for its workers) is the parent's image too.
	if _, known := orchestrator.AgentByType(ev.Agent); pnode.AgentType == AgentCustom && (!known || ev.Agent == AgentCustom) {
		in.AgentType, in.Image = AgentCustom, pnode.Image
	} else if ev.Agent == AgentCustom {
		in.Image = pnode.Image
	}
	child, err := r.sessions.CreateNode(ctx, sess.UserID, sess.ID, in)
	if err != nil {
		return sessions.Node{}, err
	}
	if fork {
		if err := r.cfg.Forks.ForkForNode(ctx, sess.ID, pnode.ID, child.ID); err != nil {
			// no child without the workspace it was promised
			if _, derr := r.sessions.DeleteNode(context.WithoutCancel(ctx), sess.UserID, sess.ID, child.ID); derr != nil {
				r.log.Warn("delete a child whose workspace fork failed", "node", child.ID, "err", derr)
			}
			return sessions.Node{}, fmt.Errorf("fork the workspace: %w", err)
		}
	}
	return child, r.startNode(ctx, sess, child)
}

// Handoff implements relay.Effects: the node stays running (its relay
// stops the agent; its exit starts the continuation), whatever the agent
// said last, so that a restart in between finds it live and continues it.
func (r *Runner) Handoff(ctx context.Context, node relay.Node, _ protocol.HandoffEvent) error {
	running := protocol.StateRunning
	_, err := r.sessions.PatchNode(ctx, node.SessionID, node.ID, sessions.NodePatch{Status: &running})
	return err
}

// continueNode starts the next generation of a node whose agent handed
// off: the continuation record, then a fresh agent in the same node and
// workspace whose FILEPATH_TASK is the handoff summary and whose first
// message is the summary, the health checks and the memories.
func (r *Runner) continueNode(sessionID, nodeID string) {
	ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
	defer cancel()
	c, err := r.sessions.ContinueNode(ctx, sessionID, nodeID)
	if err != nil {
		if !permanent(err) && r.ctx.Err() == nil {
			r.log.Warn("continue after a handoff", "node", nodeID, "err", err)
		}
		return
	}
	sess, err := r.sessions.SessionByID(ctx, sessionID)
	if err != nil {
		return
	}
	if err := r.start(ctx, sess, c.Node, &startPlan{kind: startContinuation, summary: c.Summary}); err != nil {
		r.log.Warn("start the continuation", "node", nodeID, "err", err)
	}
}

// StatusChanged implements relay.Effects.
func (r *Runner) StatusChanged(ctx context.Context, node relay.Node, ev protocol.StatusEvent) error {
	p := sessions.NodePatch{Status: &ev.State, ContextPct: ev.ContextPct}
	_, err := r.sessions.PatchNode(ctx, node.SessionID, node.ID, p)
	return err
}

// Done implements relay.Effects: the node is done and its parent, if it
// runs, gets a system message "<name> finished: <summary>".
func (r *Runner) Done(ctx context.Context, node relay.Node, ev protocol.DoneEvent) error {
	done := protocol.StateDone
	if _, err := r.sessions.PatchNode(ctx, node.SessionID, node.ID, sessions.NodePatch{Status: &done}); err != nil {
		return err
	}
	if node.ParentID == "" {
		return nil
	}
	summary := ""
	if ev.Summary != nil {
		summary = *ev.Summary
	}
	content := node.Name + " finished."
	if summary != "" {
		content = fmt.Sprintf("%s finished: %s", node.Name, summary)
	}
	msg := protocol.MessageInput{Type: protocol.TypeMessage, From: protocol.FromSystem, Content: content}
	// Asynchronous: the parent's stdin may be slow, or the parent is being
	// started (its health checks run); this relay must not wait.
	r.goTracked(func() {
		ctx, cancel := context.WithTimeout(r.ctx, r.cfg.NotifyTimeout)
		defer cancel()
		if err := r.waitStarting(ctx, node.ParentID); err != nil {
			r.log.Warn("tell parent a child finished: the parent is still starting", "node", node.ID, "parent", node.ParentID)
			return
		}
		prel := r.relayOf(node.ParentID)
		if prel == nil {
			r.log.Info("parent not running; finish not delivered", "node", node.ID, "parent", node.ParentID)
			return
		}
		if _, err := prel.Deliver(ctx, msg); err != nil && r.ctx.Err() == nil {
			r.log.Warn("tell parent a child finished", "node", node.ID, "parent", node.ParentID, "err", err)
		}
	})
	return nil
}

// Exited implements relay.Effects: the container's token is revoked, the
// node gets its real end state, and its workspace is unmounted until it
// starts again. (The relay's end then settles the session.)
func (r *Runner) Exited(ctx context.Context, node relay.Node, ex relay.Exit) error {
	r.releaseWorkspace(node.ID)
	if err := r.revokeTokens(ctx, node.ID); err != nil {
		return err
	}
	if ex.Handoff {
		// The node goes on: it stays running (for Reconcile, should the
		// orchestrator stop before the continuation starts), and the end
		// of this relay starts its next generation.
		if ex.Err == nil {
			if _, err := r.sessions.PatchNode(ctx, node.SessionID, node.ID, sessions.NodePatch{ExitCode: &ex.Code}); err != nil {
				return err
			}
		}
		r.mu.Lock()
		r.continuing[node.ID] = true
		r.mu.Unlock()
		return nil
	}
	status := exitStatus(ex)
	unpaused := false
	p := sessions.NodePatch{Status: &status, Paused: &unpaused}
	if ex.Err == nil {
		p.ExitCode = &ex.Code
	}
	_, err := r.sessions.PatchNode(ctx, node.SessionID, node.ID, p)
	return err
}

// exitStatus is a node's status after its container exited: done when the
// agent said done (and had not been given more work since), stopped when
// it was stopped before that, lost when its container vanished, error
// otherwise (it exited without a done, or with a failure code).
func exitStatus(ex relay.Exit) string {
	switch {
	case ex.Err != nil:
		return protocol.NodeLost
	case ex.Clean(), ex.Stopped && ex.Done:
		return protocol.StateDone
	case ex.Stopped:
		return protocol.NodeStopped
	}
	return protocol.StateError
}

// recordError appends a runtime error record for the node.
func (r *Runner) recordError(ctx context.Context, node sessions.Node, msg string) {
	data, _ := json.Marshal(protocol.ErrorData{Message: msg, Source: protocol.SourceRuntime})
	if _, err := r.st.Append(context.WithoutCancel(ctx), node.SessionID, protocol.Record{NodeID: node.ID, Kind: protocol.KindError, Data: data}); err != nil {
		r.log.Warn("append runtime error", "node", node.ID, "err", err)
	}
}
