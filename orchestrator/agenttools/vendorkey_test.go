package agenttools_test

import (
	"context"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/agenttools"
)

// TestVendorKeyForItsNodeOnly: GET /api/v1/vendor-key answers a node's
// token the key of its own node (as the runner reads it), a node whose
// agent needs none a 404 naming why, no token a 401; the audit names the
// key, never its value.
func TestVendorKeyForItsNodeOnly(t *testing.T) {
	const secret = "sgamp_agenttools-KEY-5"
	var asked []string
	var amp string // the node whose agent runs on Amp (known once the fixture made it)
	f := newFixture(t, func(c *agenttools.Config) {
		c.VendorKey = func(_ context.Context, sid, nid string) (string, string, error) {
			asked = append(asked, sid+"/"+nid)
			if nid != amp {
				return "", "", orchestrator.Errorf(orchestrator.ENotFound, "the shelley agent of node %s runs on no vendor's service: it needs no vendor key", nid)
			}
			return "AMP_API_KEY", secret, nil
		}
	})
	amp = f.nodes["child"].ID
	a := f.call("child", "GET", "/api/v1/vendor-key", nil)
	if a.status != 200 || a.body["name"] != "AMP_API_KEY" || a.body["value"] != secret {
		t.Fatalf("child: %d %s", a.status, a.raw)
	}
	if asked[0] != f.sid+"/"+f.nodes["child"].ID {
		t.Fatalf("asked for %q, want the caller's own node", asked[0])
	}
	if a := f.call("sibling", "GET", "/api/v1/vendor-key", nil); a.status != 404 || !strings.Contains(string(a.raw), "needs no vendor key") {
		t.Fatalf("sibling: %d %s", a.status, a.raw)
	}
	if a := f.call("", "GET", "/api/v1/vendor-key", nil); a.status != 401 {
		t.Fatalf("no token: %d %s", a.status, a.raw)
	}
	calls, err := f.audit.ToolCalls(f.ctx, f.sid, f.nodes["child"].ID, 0, 20)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range calls {
		if strings.Contains(string(c.Parameters)+string(c.Result), secret) {
			t.Fatalf("the audit holds the key: %+v", c)
		}
		found = found || c.Name == "vendor_key" && strings.Contains(string(c.Result), "AMP_API_KEY")
	}
	if !found {
		t.Fatalf("no vendor_key row naming the key in the audit: %+v", calls)
	}
}
