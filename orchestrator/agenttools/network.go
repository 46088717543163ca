package agenttools

import (
	"context"
	"fmt"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/egress"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// KindNetwork is the kind of the egress proxy's requests: a connection
// to a host the node's policy does not allow yet.
const KindNetwork = "network"

// AskNetwork asks the person supervising c's node whether it may connect
// to host:port (an approval of kind network, scope host: "Always" allows
// the host for the node), and waits for the answer. The node's policy
// (approvals["network:<host>"]) answers at once.
func (s *Server) AskNetwork(ctx context.Context, c orchestrator.Caller, host string, port int, detail string) (collab.Approval, error) {
	a, created, err := s.collab.RequestApproval(ctx, c.SessionID, c.NodeID, collab.NewApproval{
		Action: fmt.Sprintf("connect to %s port %d", host, port), Detail: detail,
		Kind: KindNetwork, Scope: host, Timeout: s.cfg.ApprovalTimeout})
	if err != nil {
		return collab.Approval{}, err
	}
	if created {
		s.nudge()
	}
	id := a.ID
	for a.Status == protocol.ApprovalPending {
		if a, err = s.Approval(ctx, c, id, s.cfg.MaxPoll); err != nil {
			if ctx.Err() != nil {
				// The connection went away: nobody needs the answer.
				s.collab.WithdrawApproval(context.WithoutCancel(ctx), c.SessionID, c.NodeID, id) //nolint:errcheck // answered meanwhile is fine
			}
			return a, err
		}
	}
	return a, nil
}

// Network is the egress proxy's policy (egress.Policy) over the nodes'
// approvals: their config's approvals["network:<host>"] and the inbox.
func (s *Server) Network() egress.Policy { return networkPolicy{s} }

type networkPolicy struct{ s *Server }

var _ egress.Policy = networkPolicy{}

// Node implements egress.Policy.
func (p networkPolicy) Node(ctx context.Context, c orchestrator.Caller, host string) (string, error) {
	n, err := p.s.sessions.NodeByID(ctx, c.NodeID)
	if err != nil {
		return "", err
	}
	pol, err := sessions.ApprovalPolicies(n.Config)
	if err != nil {
		return "", nil // a broken policy asks
	}
	switch v := pol[collab.ScopedKind(KindNetwork, host)]; v {
	case sessions.PolicyAllow, sessions.PolicyDeny:
		return v, nil
	}
	return "", nil
}

// Ask implements egress.Policy.
func (p networkPolicy) Ask(ctx context.Context, c orchestrator.Caller, host string, port int) (egress.Decision, error) {
	a, err := p.s.AskNetwork(ctx, c, host, port, fmt.Sprintf("The agent's program opened a connection to %s port %d through filepath's egress proxy. \"Always\" allows %s for this agent from now on.", host, port, host))
	if err != nil {
		return egress.Decision{}, err
	}
	return egress.Decision{Allowed: a.Status == protocol.ApprovalApproved, By: a.AnsweredBy}, nil
}
