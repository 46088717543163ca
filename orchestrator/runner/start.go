package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
	"github.com/filepath-dev/filepath/relay"
)

// startJob is an agent start in progress (Runner.starting).
type startJob struct {
	sessionID string
	cancel    context.CancelFunc
	done      chan struct{}
	stopped   bool // canceled by a stop or a delete; guarded by Runner.mu
}

// waitStarting waits until nodeID's agent start in progress (if any) has
// ended, so that what is delivered to it follows its first message.
func (r *Runner) waitStarting(ctx context.Context, nodeID string) error {
	r.mu.Lock()
	job := r.starting[nodeID]
	r.mu.Unlock()
	if job == nil {
		return nil
	}
	select {
	case <-job.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cancelStart stops nodeID's agent start in progress (a stop or delete)
// and waits for it to end (bounded by ctx).
func (r *Runner) cancelStart(ctx context.Context, nodeID string) {
	r.mu.Lock()
	job := r.starting[nodeID]
	if job != nil {
		job.stopped = true
		job.cancel()
	}
	r.mu.Unlock()
	if job != nil {
		select {
		case <-job.done:
		case <-ctx.Done():
		}
	}
}

// startNode starts a fresh agent for node: its first (with its task) or a
// restart (with the resume message).
func (r *Runner) startNode(ctx context.Context, sess protocol.Session, node sessions.Node) error {
	p := &startPlan{kind: startRestart}
	if node.StartedAt == nil {
		p.kind = startFirst
	}
	return r.start(ctx, sess, node, p)
}

// start creates a fresh container for node and hands it to a goroutine
// that runs the health checks in the workspace, appends the first system
// message and starts the container with its relay (prepare). The container
// id is saved before anything starts, so that a crash in between leaves
// something Reconcile finds. What fails here is returned (and recorded on
// the node); what fails later is recorded on the node.
func (r *Runner) start(ctx context.Context, sess protocol.Session, node sessions.Node, p *startPlan) (err error) {
	defer func() {
		msg := ""
		if err != nil {
			msg = "start agent: " + err.Error()
		}
		r.mu.Lock()
		again := msg != "" && r.startErr[node.ID] == msg
		if msg == "" {
			delete(r.startErr, node.ID)
		} else {
			r.startErr[node.ID] = msg
		}
		r.mu.Unlock()
		if err != nil {
			ctx := context.WithoutCancel(ctx)
			r.releaseWorkspace(node.ID) // no container of this start runs
			if !again {
				r.recordError(ctx, node, msg)
			}
			st := protocol.StateError
			if _, perr := r.sessions.PatchNode(ctx, node.SessionID, node.ID, sessions.NodePatch{Status: &st}); perr != nil {
				r.log.Warn("mark node error", "node", node.ID, "err", perr)
			}
		}
	}()
	if err := r.plan(ctx, sess, node, p); err != nil {
		return err
	}
	key, err := r.newToken(ctx, sess, node)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if rerr := r.revokeTokens(context.WithoutCancel(ctx), node.ID); rerr != nil {
				r.log.Warn("revoke the token of a node that did not start", "node", node.ID, "err", rerr)
			}
		}
	}()
	if err := r.prepareWorkspace(ctx, p); err != nil {
		return err
	}
	p.memories = r.memories(ctx, p)
	p.startMessage = p.kind != startFirst || len(p.memories) > 0 || len(checksOf(p)) > 0
	id, err := r.createContainer(ctx, p, key)
	if err != nil {
		return err
	}
	if err := r.saveContainer(ctx, p, id); err != nil {
		r.rt.Remove(context.WithoutCancel(ctx), id)
		return err
	}
	return r.launch(p)
}

// plan fills p for a start of node: its image, the vendor key it needs,
// and its task (first start), summary (continuation) or neither (restart),
// with what its memories are looked up for. It refuses a node whose session
// is being deleted, or whose agent lacks its provider's or vendor's key.
func (r *Runner) plan(ctx context.Context, sess protocol.Session, node sessions.Node, p *startPlan) error {
	if r.isDeleting(sess.ID) {
		return orchestrator.Errorf(orchestrator.ENotFound, "session %s is being deleted", sess.ID)
	}
	image := node.Image
	if image == "" {
		agent, ok := orchestrator.AgentByType(node.AgentType)
		if !ok || agent.Image == "" {
			return orchestrator.FieldErrorf("image", "node %s (%s) has no image", node.ID, node.AgentType)
		}
		image = agent.Image
	}
	if err := r.checkProviderKey(node); err != nil {
		return err
	}
	vendorEnv, err := r.vendorKey(ctx, node)
	if err != nil {
		return err
	}
	p.sess, p.node, p.image, p.vendorEnv = sess, node, image, vendorEnv
	switch p.kind {
	case startFirst:
		// The task is the first start's: a restart gets ResumeMessage.
		if p.task, err = r.firstTask(ctx, node); err != nil {
			return err
		}
		p.query = p.task
	case startContinuation:
		p.task, p.query = p.summary, p.summary
	case startRestart:
		if node.Generation > 1 {
			if rec, err := r.st.LastRecordOf(ctx, node.SessionID, node.ID, protocol.KindSystem, protocol.SystemContinuation); err == nil {
				var d protocol.SystemData
				if json.Unmarshal(rec.Data, &d) == nil {
					p.summary, p.query = d.Summary, d.Summary
				}
			}
		}
		if p.query == "" {
			// The memories of a restart are the task's.
			if p.query, err = r.firstTask(ctx, node); err != nil {
				return err
			}
		}
	}
	return nil
}

// newToken returns the container's token (its FILEPATH_API_KEY). One token
// per container: whatever an earlier container of the node held is revoked
// before the new one is made (and start revokes the new one if it fails).
func (r *Runner) newToken(ctx context.Context, sess protocol.Session, node sessions.Node) (string, error) {
	if err := r.revokeTokens(ctx, node.ID); err != nil {
		return "", err
	}
	key, _, err := r.users.CreateNodeAPIKey(ctx, sess.UserID, sess.ID, node.ID)
	if err != nil {
		return "", fmt.Errorf("create node api key: %w", err)
	}
	return key, nil
}

// prepareWorkspace mounts the node's workspace and, before a session's
// first agent, clones its repository into it.
func (r *Runner) prepareWorkspace(ctx context.Context, p *startPlan) error {
	dir, err := r.ws.Mount(ctx, p.node.ID)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	p.dir = dir
	p.cloned, err = r.cloneRepo(ctx, p.sess, p.node, dir)
	return err
}

// createContainer removes the node's previous container and creates its
// new one (not started), with the contract's environment and key.
func (r *Runner) createContainer(ctx context.Context, p *startPlan, key string) (string, error) {
	sess, node := p.sess, p.node
	parent := ""
	if node.ParentID != nil {
		parent = *node.ParentID
	}
	var cmd []string
	if r.cfg.Cmd != nil {
		cmd = r.cfg.Cmd(node)
	}
	if node.ContainerID != "" {
		if err := r.rt.Remove(ctx, node.ContainerID); err != nil {
			return "", fmt.Errorf("remove the previous container: %w", err)
		}
	}
	env := map[string]string{
		EnvTask: p.task, EnvAPIKey: key, EnvAgentID: node.ID, EnvSessionID: sess.ID,
		EnvModel: node.Model, EnvAgentType: node.AgentType, EnvParentID: parent,
		EnvAPIURL: r.apiURL(),
	}
	if p.startMessage {
		env[EnvStartMessage] = "1"
	}
	if proxy := r.proxyURL(key); proxy != "" {
		// The egress proxy: what git, curl, npm, pip and Go use to reach
		// the network; the agent-facing API itself is reached directly.
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env[k] = proxy
		}
		env["NO_PROXY"], env["no_proxy"] = "127.0.0.1,localhost,::1", "127.0.0.1,localhost,::1"
	}
	// A vendor key never goes in the container's configuration (docker
	// inspect shows it): the container is told its name, and its adapter
	// asks the agent API for the value (VendorKey) with its own token.
	for name := range p.vendorEnv {
		env[EnvVendorKey] = name
	}
	id, err := r.rt.Create(ctx, containers.Spec{
		SessionID:            sess.ID,
		NodeID:               node.ID,
		Image:                p.image,
		Env:                  env,
		Labels:               map[string]string{LabelInstance: r.instance},
		StateVolume:          StateVolume(node.ID),
		WorkspaceDir:         p.dir,
		WorkspacePropagation: r.cfg.WorkspacePropagation,
		Network:              r.cfg.Network,
		Limits:               r.cfg.Limits,
		Cmd:                  cmd,
	})
	if err != nil {
		if node.AgentType != AgentCustom && orchestrator.ErrorField(err) == "image" {
			// A built-in agent's image is built by images/build.sh.
			return "", orchestrator.Errorf(orchestrator.EUnavailable, "the %s agent's image %s is not on this machine: build it with `make images` (images/build.sh %s), or spawn a custom agent with an image you have", node.AgentType, p.image, node.AgentType)
		}
		return "", err
	}
	if r.isDeleting(sess.ID) {
		r.rt.Remove(context.WithoutCancel(ctx), id)
		return "", orchestrator.Errorf(orchestrator.ENotFound, "session %s is being deleted", sess.ID)
	}
	return id, nil
}

// saveContainer records container id on the node (running), with a log
// cursor past every input so far: they are history (the task goes in
// FILEPATH_TASK), and the relay must not write any of them to the new
// container's stdin.
func (r *Runner) saveContainer(ctx context.Context, p *startPlan, id string) error {
	node := p.node
	last, err := r.st.LastSeq(ctx, node.SessionID)
	if err != nil {
		return err
	}
	running, cursor := protocol.StateRunning, relay.Cursor{Input: last}.String()
	node, err = r.sessions.PatchNode(ctx, node.SessionID, node.ID, sessions.NodePatch{
		ContainerID: &id, LogCursor: &cursor, Status: &running, ClearExitCode: true, ClearContextPct: true,
	})
	if err != nil {
		return err
	}
	p.node, p.id, p.cursor = node, id, cursor
	return nil
}

// launch runs prepare in a goroutine of its own, as the node's start in
// progress. A start that fails there is recorded on the node (error) and
// its container removed; one canceled by a stop or delete leaves the node
// stopped; one cut short by Close is left for Reconcile to start again.
func (r *Runner) launch(p *startPlan) error {
	ctx, cancel := context.WithCancel(r.ctx)
	job := &startJob{sessionID: p.node.SessionID, cancel: cancel, done: make(chan struct{})}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		cancel()
		r.rt.Remove(context.Background(), p.id)
		return orchestrator.Errorf(orchestrator.EUnavailable, "the orchestrator is shutting down")
	}
	r.starting[p.node.ID] = job
	r.wg.Go(func() {
		defer cancel()
		err := r.prepare(ctx, p)
		r.mu.Lock()
		delete(r.starting, p.node.ID)
		stopped, closing := job.stopped, r.closed || r.ctx.Err() != nil
		r.mu.Unlock()
		defer close(job.done)
		if err == nil || (closing && !stopped) {
			return
		}
		wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer wcancel()
		node := p.node
		if rerr := r.rt.Remove(wctx, p.id); rerr != nil {
			r.log.Warn("remove the container of a start that did not finish", "node", node.ID, "err", rerr)
		}
		r.releaseWorkspace(node.ID) // mounted again at its next start
		if rerr := r.revokeTokens(wctx, node.ID); rerr != nil {
			r.log.Warn("revoke the token of a node that did not start", "node", node.ID, "err", rerr)
		}
		status, empty := protocol.NodeStopped, ""
		if !stopped {
			status = protocol.StateError
			r.recordError(wctx, node, "start agent: "+err.Error())
		}
		if _, perr := r.sessions.PatchNode(wctx, node.SessionID, node.ID, sessions.NodePatch{Status: &status, ContainerID: &empty}); perr != nil && !permanent(perr) {
			r.log.Warn("mark a node that did not start", "node", node.ID, "err", perr)
		}
		if serr := r.settleSession(wctx, node.SessionID); serr != nil && !permanent(serr) {
			r.log.Warn("settle session", "session", node.SessionID, "err", serr)
		}
	})
	r.mu.Unlock()
	return nil
}

// revokeTokens deletes the node's container tokens (DESIGN invariant 9: a
// token dies with its container).
func (r *Runner) revokeTokens(ctx context.Context, nodeID string) error {
	if _, err := r.users.DeleteNodeAPIKeys(ctx, nodeID); err != nil {
		return fmt.Errorf("revoke the node's token: %w", err)
	}
	// Nobody is left to receive an answer to the requests it was waiting
	// on: withdraw them, so the inbox does not ask a person about them.
	if _, err := r.collab.WithdrawNodeApprovals(ctx, nodeID); err != nil {
		return fmt.Errorf("withdraw the node's pending approvals: %w", err)
	}
	return nil
}

// firstTask is the content of the node's first input message (its task).
func (r *Runner) firstTask(ctx context.Context, node sessions.Node) (string, error) {
	recs, err := r.st.Records(ctx, node.SessionID, 0, 4, node.ID)
	if err != nil {
		return "", err
	}
	for _, rec := range recs {
		if rec.Kind != protocol.KindInput {
			continue
		}
		in, err := protocol.DecodeInput(rec.Data)
		if m, ok := in.(protocol.MessageInput); err == nil && ok {
			return m.Content, nil
		}
	}
	return "", nil
}

// checkProviderKey refuses a catalog agent whose LLM provider's key the
// orchestrator does not have: it could start, but never think.
func (r *Runner) checkProviderKey(node sessions.Node) error {
	if r.cfg.ProviderKeys == nil || node.AgentType == AgentCustom {
		return nil
	}
	agent, ok := orchestrator.AgentByType(node.AgentType)
	if !ok || agent.Provider == "" || r.cfg.ProviderKeys(agent.Provider) {
		return nil
	}
	return orchestrator.Errorf(orchestrator.EUnavailable,
		"the %s agent reaches its model through %s, and this orchestrator has no %s key: set %s where filepath serve runs and restart it",
		node.AgentType, agent.Provider, agent.Provider, orchestrator.ProviderKeyEnv(agent.Provider))
}

// imageChecker is what a runtime offers when it can tell whether an image
// is on the machine (Docker); the process runtime cannot, and runs every
// agent with its one command.
type imageChecker interface {
	HasImage(ctx context.Context, image string) (bool, error)
}

// AgentStatus says whether a catalog agent can run here: "" when it can,
// else why not (its provider's key is missing, its image is not on the
// machine) and how to fix it. A custom agent names its image per node, so
// it can always be offered.
func (r *Runner) AgentStatus(ctx context.Context, a orchestrator.Agent) (reason, fix string) {
	if a.Type == AgentCustom {
		return "", ""
	}
	if a.Provider != "" && r.cfg.ProviderKeys != nil && !r.cfg.ProviderKeys(a.Provider) {
		env := orchestrator.ProviderKeyEnv(a.Provider)
		return fmt.Sprintf("this server has no %s key (its model is reached through %s)", a.Provider, a.Provider),
			fmt.Sprintf("set %s where filepath serve runs, and restart it", env)
	}
	if ic, ok := r.rt.(imageChecker); ok && a.Image != "" {
		has, err := ic.HasImage(ctx, a.Image)
		if err != nil {
			return "cannot tell whether its image is on this machine: " + err.Error(), "check that the Docker engine runs"
		}
		if !has {
			return fmt.Sprintf("its image %s is not on this machine", a.Image),
				fmt.Sprintf("build it with `make images` (images/build.sh %s)", a.Type)
		}
	}
	return "", ""
}

// VendorKey is the key of the vendor whose service node's agent runs on
// (its name, e.g. AMP_API_KEY, and value), for the node's own adapter: a
// secret of the session's owner, read when asked. ENotFound when the
// node's agent needs none.
func (r *Runner) VendorKey(ctx context.Context, sessionID, nodeID string) (name, value string, err error) {
	node, err := r.sessions.NodeByID(ctx, nodeID)
	if err != nil {
		return "", "", err
	}
	if node.SessionID != sessionID {
		return "", "", orchestrator.Errorf(orchestrator.ENotFound, "node %s not found", nodeID)
	}
	env, err := r.vendorKey(ctx, node)
	if err != nil {
		return "", "", err
	}
	for k, v := range env {
		return k, v, nil
	}
	return "", "", orchestrator.Errorf(orchestrator.ENotFound, "the %s agent of node %s runs on no vendor's service: it needs no vendor key", node.AgentType, node.Name)
}

// vendorKey is the environment giving a catalog agent that runs on its
// vendor's service (Agent.VendorKey) its key, a secret of the session's
// owner (the session's own, else the user's); an error naming the key when
// there is none. Only an agent of that type gets it.
func (r *Runner) vendorKey(ctx context.Context, node sessions.Node) (map[string]string, error) {
	agent, ok := orchestrator.AgentByType(node.AgentType)
	if node.AgentType == AgentCustom || !ok || agent.VendorKey == "" {
		return nil, nil
	}
	missing := orchestrator.FieldErrorf("agent_type", "the %s agent runs on %s's own service and needs %s: add it in Settings (or on the session: PUT /api/v1/sessions/%s/secrets/%s, or in the spawn dialog) and send the node a message",
		agent.Type, agent.Name, agent.VendorKey, node.SessionID, agent.VendorKey)
	if r.cfg.VendorKeys == nil {
		return nil, missing
	}
	v, err := r.cfg.VendorKeys.OpenForSession(ctx, node.SessionID, agent.VendorKey)
	if orchestrator.ErrorCode(err) == orchestrator.ENotFound {
		return nil, missing
	}
	if err != nil {
		return nil, err
	}
	if v.Kind != secrets.KindVendor {
		return nil, orchestrator.FieldErrorf("agent_type", "the secret %s is a %s, not a vendor key: set %s again as the %s key", agent.VendorKey, v.Kind, agent.VendorKey, agent.Name)
	}
	return map[string]string{agent.VendorKey: v.Value}, nil
}
