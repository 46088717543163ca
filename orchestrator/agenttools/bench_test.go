package agenttools_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/agentapi"
	"github.com/filepath-dev/filepath/orchestrator/agenttools"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// BenchmarkAgentToolsInContainer times, from inside a real container
// (--network none; the agent-facing listener in its network namespace), a
// round trip of list_children and of read_child_messages of 1,000 records
// as an MCP tool call and as the plain REST call for the same data, with
// GET /healthz on the same listener as the floor of an HTTP round trip.
// Medians and p90 of 300 calls each (internal/cmd/agentbench).
//
//	go test -run '^$' -bench AgentToolsInContainer -benchtime 1x ./orchestrator/agenttools/
func BenchmarkAgentToolsInContainer(b *testing.B) {
	const image = "filepath/base:bookworm"
	testkit.RequireDocker(b)
	testkit.RequireImage(b, image)
	ctx := context.Background()
	bench := testkit.Program(b, "../../internal/cmd/agentbench")
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(b.TempDir(), "db")})
	if err != nil {
		b.Fatal(err)
	}
	ident, ss := identity.New(st), sessions.New(st, sessions.Config{})
	defer st.Close()
	u := must(ident.CreateUser(ctx, "bench", false))
	s := must(ss.CreateSession(ctx, u.ID, sessions.NewSession{Name: "bench"}))
	parent := must(ss.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{Name: "lead", AgentType: "shelley"}))
	for i := range 3 {
		must(ss.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{Name: fmt.Sprintf("worker-%d", i), AgentType: "shelley", ParentID: &parent.ID}))
	}
	child := must(ss.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{Name: "reader", AgentType: "shelley", ParentID: &parent.ID}))
	recs := make([]protocol.Record, 1000)
	for i := range recs {
		data, _ := json.Marshal(map[string]string{"type": "text", "content": fmt.Sprintf("line %d of what the child said, long enough to look like a sentence an agent writes", i)})
		recs[i] = protocol.Record{NodeID: child.ID, Kind: protocol.KindEvent, Data: data}
	}
	if _, err := st.Append(ctx, s.ID, recs...); err != nil {
		b.Fatal(err)
	}
	key, _, err := ident.CreateNodeAPIKey(ctx, u.ID, s.ID, parent.ID)
	if err != nil {
		b.Fatal(err)
	}
	rt, err := containers.NewDocker(ctx, containers.DockerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	api, err := agentapi.New(agentapi.Config{Auth: ident, Netns: rt})
	if err != nil {
		b.Fatal(err)
	}
	defer api.Shutdown()
	h := hub.New[protocol.Record](hub.Config{})
	defer h.Close()
	tools, err := agenttools.New(agenttools.Config{Store: st, Sessions: ss, Collab: collab.New(st, ss, collab.Config{}), Audit: audit.New(st), Hub: h,
		Runner: &fakeRunner{st: st, sessions: ss, running: map[string]bool{}}})
	if err != nil {
		b.Fatal(err)
	}
	api.Mount(agenttools.RESTPrefix, tools.REST())
	api.Mount(agenttools.MCPPath, tools.MCP())

	out, err := exec.Command("docker", "run", "-d", "--network", "none", "--cap-drop", "ALL", "-v", bench+":/bench/agentbench:ro", image, "sleep", "600").Output()
	if err != nil {
		b.Fatalf("docker run: %v", err)
	}
	cid := strings.TrimSpace(string(out))
	defer exec.Command("docker", "rm", "-f", cid).Run()
	if err := api.Open(ctx, parent.ID, cid); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		res, err := exec.Command("docker", "exec", cid, "/bench/agentbench", "--url", api.URL(), "--key", key, "--child", child.Name, "--n", "300").CombinedOutput()
		if err != nil {
			b.Fatalf("agentbench: %v\n%s", err, res)
		}
		sc := bufio.NewScanner(strings.NewReader(string(res)))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 4 {
				continue
			}
			med, _ := strconv.ParseFloat(f[1], 64)
			p90, _ := strconv.ParseFloat(f[2], 64)
			size, _ := strconv.ParseFloat(f[3], 64)
			b.ReportMetric(med, f[0]+"_median_us")
			b.ReportMetric(p90, f[0]+"_p90_us")
			b.ReportMetric(size, f[0]+"_bytes")
		}
	}
}
