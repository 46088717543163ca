package runner

import (
	"context"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/relay"
)

func (r *Runner) relayOf(nodeID string) *relay.Relay {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.relays[nodeID]
}

// attach starts the relay of a node whose container exists, after opening
// the container's agent-facing API listener.
func (r *Runner) attach(node sessions.Node, cursor string) error {
	parent := ""
	if node.ParentID != nil {
		parent = *node.ParentID
	}
	r.openAPI(node)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.closeAPI(node.ID)
		return orchestrator.Errorf(orchestrator.EUnavailable, "the orchestrator is shutting down")
	}
	if r.relays[node.ID] != nil {
		return nil
	}
	rel, err := relay.Start(r.ctx, relay.Config{
		Node:   relay.Node{SessionID: node.SessionID, ID: node.ID, ParentID: parent, Name: node.Name, ContainerID: node.ContainerID},
		Cursor: cursor, Log: storeLog{r.st, r.sessions}, Process: r.rt, Effects: r, LogDir: r.logs,
		Clock: r.cfg.Clock, Logger: r.log, Permanent: permanent,
		MaxBatch: r.cfg.MaxBatch, MailboxLen: r.cfg.MailboxLen, MaxLine: r.cfg.MaxLine,
		StopGrace: r.cfg.StopGrace, KillGrace: r.cfg.KillGrace,
	})
	if err != nil {
		r.closeAPI(node.ID)
		return err
	}
	r.relays[node.ID] = rel
	r.wg.Go(func() {
		<-rel.Done()
		// The container exited, was removed, or the runner closes: its
		// listener goes (a new runner opens it again). Before the relay
		// leaves the map, so a new start of the node keeps its own.
		r.closeAPI(node.ID)
		r.mu.Lock()
		if r.relays[node.ID] == rel {
			delete(r.relays, node.ID)
		}
		// Settled here, after the relay left the map, not in Exited: of
		// two relays of a session ending at once, the later one to leave
		// sees no other and settles the session.
		settle := !r.closed && !r.reconciling
		cont := r.continuing[node.ID] && !r.closed
		delete(r.continuing, node.ID)
		r.mu.Unlock()
		if cont {
			// Before settling: the continuation's start counts as running.
			r.continueNode(node.SessionID, node.ID)
		}
		if settle {
			ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
			if err := r.settleSession(ctx, node.SessionID); err != nil && r.ctx.Err() == nil && !permanent(err) {
				r.log.Warn("settle session", "session", node.SessionID, "err", err)
			}
			cancel()
		}
		if err := rel.Err(); err != nil {
			r.log.Warn("relay ended", "node", node.ID, "err", err)
			if permanent(err) && r.ctx.Err() == nil {
				// The node or session was deleted under a running relay
				// (without DeleteNode/DeleteSession): do their cleanup.
				ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
				defer cancel()
				if err := r.removeNodes(ctx, []sessions.Node{node}); err != nil {
					r.log.Warn("clean up a deleted node", "node", node.ID, "err", err)
				}
			}
		}
	})
	return nil
}

// permanent: the session or node is gone; retrying an append cannot help.
func permanent(err error) bool {
	return orchestrator.ErrorCode(err) == orchestrator.ENotFound
}

// openAPI opens the agent-facing API listener of node's container. A
// container that already exited gets none (its relay records the exit);
// any other failure is an error record: the agent runs, but cannot reach
// FILEPATH_API_URL.
func (r *Runner) openAPI(node sessions.Node) {
	if r.cfg.AgentAPI == nil || node.ContainerID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	err := r.cfg.AgentAPI.Open(ctx, node.ID, node.ContainerID)
	switch {
	case err == nil:
	case containers.CodeOf(err) == containers.CodeConflict || r.ctx.Err() != nil:
		r.log.Debug("no agent-facing API listener", "node", node.ID, "err", err)
	default:
		r.log.Warn("open the agent-facing API listener", "node", node.ID, "err", err)
		r.recordError(ctx, node, "the agent cannot reach "+EnvAPIURL+": "+err.Error())
	}
}

// proxyURL is the egress proxy of the container whose token is key ("":
// none).
func (r *Runner) proxyURL(key string) string {
	if r.cfg.AgentAPI == nil {
		return ""
	}
	return r.cfg.AgentAPI.ProxyURL(key)
}

// apiURL is FILEPATH_API_URL ("" without an agent-facing API).
func (r *Runner) apiURL() string {
	if r.cfg.AgentAPI == nil {
		return ""
	}
	return r.cfg.AgentAPI.URL()
}

func (r *Runner) closeAPI(nodeID string) {
	if r.cfg.AgentAPI != nil {
		r.cfg.AgentAPI.Close(nodeID)
	}
}
