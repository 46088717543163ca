package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
	"github.com/filepath-dev/filepath/relay"
)

// Reconcile matches every node with the real containers, once at start-up
// before serving (DESIGN invariants 6 and 7):
//
//   - a node whose container exists gets a relay from its saved log cursor:
//     it appends what the container printed while nobody listened, exactly
//     once, and if the container has exited, records the real exit;
//   - a node marked running whose container is gone (or was never created)
//     becomes lost, with an error record saying why;
//   - a node whose container was created but never started (the
//     orchestrator stopped during its health checks) is started again;
//   - a container of this instance whose node no longer exists is removed,
//     and so is any health check's; then so is a state volume of this
//     instance whose node no longer exists (removeOrphanVolumes);
//   - a session marked running in which nothing runs any more is settled
//     (error when its root is error, stopped otherwise).
func (r *Runner) Reconcile(ctx context.Context) error {
	// Relays that end while siblings are still being attached leave their
	// session to the settling below.
	r.mu.Lock()
	r.reconciling = true
	r.mu.Unlock()
	err := r.reconcile(ctx)
	r.mu.Lock()
	r.reconciling = false
	r.mu.Unlock()
	return errors.Join(err, r.settleSessions(ctx))
}

// settleSessions settles every session marked running (settleSession).
func (r *Runner) settleSessions(ctx context.Context) error {
	running, err := r.sessions.SessionsByStatus(ctx, protocol.SessionRunning)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range running {
		if err := r.settleSession(ctx, s.ID); err != nil && !permanent(err) {
			errs = append(errs, fmt.Errorf("settle session %s: %w", s.ID, err))
		}
	}
	return errors.Join(errs...)
}

func (r *Runner) reconcile(ctx context.Context) error {
	nodes, err := r.sessions.ActiveNodes(ctx)
	if err != nil {
		return err
	}
	infos, err := r.rt.List(ctx, map[string]string{LabelInstance: r.instance})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	byContainer := make(map[string]containers.Info, len(infos))
	for _, in := range infos {
		byContainer[in.ID] = in
	}
	var errs []error
	claimed := map[string]bool{}
	for _, n := range nodes {
		if err := r.reconcileNode(ctx, n, byContainer, claimed); err != nil {
			errs = append(errs, fmt.Errorf("reconcile node %s: %w", n.ID, err))
		}
	}
	for _, in := range infos {
		if claimed[in.ID] {
			continue
		}
		if in.Labels[LabelRole] == RoleCheck {
			r.log.Info("removing a health check's container", "container", in.ID, "node", in.NodeID)
			if err := r.rt.Remove(ctx, in.ID); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if in.NodeID != "" {
			if _, err := r.sessions.NodeByID(ctx, in.NodeID); err == nil || orchestrator.ErrorCode(err) != orchestrator.ENotFound {
				continue // an older container of a live node (kept for its log), or the store failed
			}
		}
		r.log.Info("removing orphan container", "container", in.ID, "node", in.NodeID)
		if err := r.rt.Remove(ctx, in.ID); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, r.removeOrphanVolumes(ctx))
	return errors.Join(errs...)
}

// removeOrphanVolumes removes the state volumes (StateVolume) of this
// instance whose node is not in the store: their node was deleted but the
// orchestrator stopped (or failed) before removing them. A volume of a node
// that exists, whatever its status, stays; so does one of another instance
// or without labels (not listed), and one a container still uses (Docker
// refuses; logged). Run after the orphan containers are removed.
func (r *Runner) removeOrphanVolumes(ctx context.Context) error {
	vols, err := r.rt.ListVolumes(ctx, map[string]string{LabelInstance: r.instance})
	if err != nil {
		return fmt.Errorf("list state volumes: %w", err)
	}
	var errs []error
	for _, v := range vols {
		nodeID, ok := strings.CutPrefix(v.Name, StateVolume(""))
		if !ok || nodeID == "" || v.NodeID != nodeID {
			continue // not a state volume as the runner names them
		}
		if _, err := r.sessions.NodeByID(ctx, nodeID); err == nil {
			continue
		} else if orchestrator.ErrorCode(err) != orchestrator.ENotFound {
			errs = append(errs, fmt.Errorf("state volume %s: %w", v.Name, err))
			continue
		}
		err := r.rt.RemoveVolume(ctx, v.Name)
		if containers.CodeOf(err) == containers.CodeConflict {
			r.log.Warn("keeping the state volume of a deleted node: a container uses it", "volume", v.Name, "node", nodeID, "session", v.SessionID, "err", err)
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.log.Info("removed the state volume of a deleted node", "volume", v.Name, "node", nodeID, "session", v.SessionID)
	}
	return errors.Join(errs...)
}

func (r *Runner) reconcileNode(ctx context.Context, n sessions.Node, byContainer map[string]containers.Info, claimed map[string]bool) error {
	live := n.Status == protocol.StateRunning || n.Status == protocol.StateThinking
	if n.ContainerID == "" {
		if !live {
			return nil
		}
		return r.markLost(ctx, n, "the agent's container was never created (the orchestrator stopped while starting it)")
	}
	claimed[n.ContainerID] = true
	cur, err := relay.ParseCursor(n.LogCursor)
	if err != nil {
		return err
	}
	info, ok := byContainer[n.ContainerID]
	if !ok {
		if cur.Exited && !live {
			return nil
		}
		return r.markLost(ctx, n, fmt.Sprintf("the agent's container %.12s is gone", n.ContainerID))
	}
	if info.State == containers.StateCreated && !cur.Exited && live {
		return r.restartInterrupted(ctx, n)
	}
	if cur.Exited && !live {
		return nil // ended and recorded; the container is kept for its log
	}
	if paused := n.Status == protocol.NodePaused; cur.Paused != paused && !cur.Exited {
		// The pause (or resume) was appended, and the orchestrator stopped
		// before the node showed it: the cursor is the truth.
		if _, err := r.sessions.PatchNode(ctx, n.SessionID, n.ID, sessions.NodePatch{Paused: &cur.Paused}); err != nil {
			return err
		}
	}
	return r.attach(n, n.LogCursor)
}

// restartInterrupted starts again a node whose start the orchestrator did
// not finish: its container was created, never started.
func (r *Runner) restartInterrupted(ctx context.Context, n sessions.Node) error {
	r.log.Info("starting again an agent whose start was interrupted", "node", n.ID)
	if err := r.rt.Remove(ctx, n.ContainerID); err != nil {
		return err
	}
	empty := ""
	n, err := r.sessions.PatchNode(ctx, n.SessionID, n.ID, sessions.NodePatch{ContainerID: &empty})
	if err != nil {
		return err
	}
	sess, err := r.sessions.SessionByID(ctx, n.SessionID)
	if err != nil {
		return err
	}
	return r.startNode(ctx, sess, n)
}

// markLost records that the node's container is gone: its token is revoked
// and the node becomes lost.
func (r *Runner) markLost(ctx context.Context, n sessions.Node, msg string) error {
	if err := r.revokeTokens(ctx, n.ID); err != nil {
		return err
	}
	r.recordError(ctx, n, msg)
	status, empty, paused := protocol.NodeLost, "", false
	_, err := r.sessions.PatchNode(ctx, n.SessionID, n.ID, sessions.NodePatch{Status: &status, ContainerID: &empty, Paused: &paused})
	return err
}
