package agenttools_test

import (
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/egress"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/protocol"
)

// TestNetworkPolicy: the egress proxy's question waits in the approvals
// inbox (kind network, the host and port); approved it is let through,
// denied it is refused; "Always" allows that host, and only it, for the
// node from then on; an agent cannot ask for a network:<host> kind itself.
func TestNetworkPolicy(t *testing.T) {
	f := newFixture(t)
	pol := f.tools.Network()
	c := orchestrator.Caller{UserID: f.alice.ID, SessionID: f.sid, NodeID: f.nodes["child"].ID}
	type result struct {
		d   egress.Decision
		err error
	}
	ask := func(host string, answer collab.Decision) egress.Decision {
		t.Helper()
		got := make(chan result, 1)
		go func() {
			d, err := pol.Ask(f.ctx, c, host, 443)
			got <- result{d, err}
		}()
		var pending []collab.Approval
		testkit.Eventually(t, 10*time.Second, "the request in the inbox", func() bool {
			pending, _ = f.collab.Approvals(f.ctx, f.alice.ID, f.sid, protocol.ApprovalPending, 0)
			return len(pending) == 1
		})
		p := pending[0]
		if p.Kind != "network" || p.Scope != host || p.Action != "connect to "+host+" port 443" || p.NodeID != c.NodeID {
			t.Fatalf("the inbox shows %+v", p)
		}
		if _, err := f.collab.AnswerApproval(f.ctx, f.alice.ID, f.sid, p.ID, answer, "alice"); err != nil {
			t.Fatal(err)
		}
		r := testkit.Recv(t, got, 10*time.Second, "the answer")
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.d
	}
	if d := ask("example.org", collab.Decision{Approve: true}); !d.Allowed || d.By != "alice" {
		t.Fatalf("approved: %+v", d)
	}
	if d := ask("example.org", collab.Decision{}); d.Allowed || d.By != "alice" {
		t.Fatalf("denied (an approval once is not for always): %+v", d)
	}
	if v, err := pol.Node(f.ctx, c, "example.org"); err != nil || v != "" {
		t.Fatalf("the node's policy before Always: %q %v", v, err)
	}
	if d := ask("example.org", collab.Decision{Always: true}); !d.Allowed {
		t.Fatalf("always: %+v", d)
	}
	if v, err := pol.Node(f.ctx, c, "example.org"); err != nil || v != "allow" {
		t.Fatalf("the node's policy after Always: %q %v", v, err)
	}
	for _, other := range []orchestrator.Caller{{UserID: c.UserID, SessionID: c.SessionID, NodeID: f.nodes["sibling"].ID}} {
		if v, _ := pol.Node(f.ctx, other, "example.org"); v != "" {
			t.Fatalf("Always for one node allowed another: %q", v)
		}
	}
	if v, _ := pol.Node(f.ctx, c, "example.com"); v != "" {
		t.Fatalf("Always for one host allowed another: %q", v)
	}
	a := f.call("child", "POST", "/api/v1/approvals", map[string]any{"action": "fetch", "kind": "network:evil.example"})
	if a.status != 422 || !strings.Contains(string(a.raw), "egress proxy") {
		t.Fatalf("an agent's own network:<host> request: %d %s", a.status, a.raw)
	}
}
