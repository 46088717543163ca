package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/agentapi"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

const byoEchoImage = "filepath/byo-echo:latest"

// The agent-facing server fits the runner's seam.
var _ AgentAPI = (*agentapi.Server)(nil)

// whoami answers the node the agent-facing API saw.
var whoami = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	c, _ := orchestrator.CallerFrom(r.Context())
	fmt.Fprint(w, c.NodeID)
})

// run sends "/cmd CMD" to a byo-echo node and returns the stdout of the
// command event it answers with.
func (e *env) run(nodeID, cmd string) string {
	e.t.Helper()
	done := func() []protocol.CommandEvent {
		var out []protocol.CommandEvent
		for _, ev := range commandEvents(e.records(nodeID)) {
			if ev.Cmd == cmd && ev.Status != "start" {
				out = append(out, ev)
			}
		}
		return out
	}
	before := len(done())
	if _, err := e.r.Deliver(e.ctx, e.sid, nodeID, msg("/cmd "+cmd)); err != nil {
		e.t.Fatal(err)
	}
	var evs []protocol.CommandEvent
	e.waitFor("command "+cmd, func() bool { evs = done(); return len(evs) > before })
	ev := evs[len(evs)-1]
	if ev.Stderr != nil && *ev.Stderr != "" {
		e.t.Logf("%s: stderr %s", cmd, *ev.Stderr)
	}
	if ev.Stdout == nil {
		return ""
	}
	return *ev.Stdout
}

// TestAgentAPIInContainer: a node's container (no network) finds
// FILEPATH_API_URL in its environment and reaches the agent-facing API there
// with its own token; nothing listens on the host; an orchestrator restart
// (runner Close, new runner, Reconcile) opens the listener again for the
// still running container; when the container exits the listener closes.
func TestAgentAPIInContainer(t *testing.T) {
	testkit.RequireImage(t, byoEchoImage)
	var api *agentapi.Server
	e := newEnv(t, func(c *Config) {
		rt := c.Runtime.(*containers.Docker)
		var err error
		api, err = agentapi.New(agentapi.Config{Auth: c.Users, Netns: rt})
		if err != nil {
			t.Fatal(err)
		}
		api.Mount("/whoami", whoami)
		c.AgentAPI = api
	})
	t.Cleanup(api.Shutdown)
	root, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, sessions.NewNode{Name: "root", AgentType: AgentCustom, Image: byoEchoImage})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if err := e.r.StartSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	// The start goes on after StartSession (health checks, then the
	// container, its listener and its relay).
	e.waitFor("the listener of the running container", func() bool { return api.Serving(root.ID) })
	t.Logf("StartSession until the listener serves (create, checks, start, listener, relay) took %v", time.Since(started))
	testkit.WriteProbe(t, filepath.Join(e.dir, "nodes", root.ID))
	if got := e.run(root.ID, "echo $FILEPATH_API_URL"); got != "http://127.0.0.1:7428" {
		t.Fatalf("FILEPATH_API_URL in the container: %q", got)
	}
	const whoamiCmd = `bash probe.sh /whoami "$FILEPATH_API_KEY"`
	if got := e.run(root.ID, whoamiCmd); got != "200 "+root.ID {
		t.Fatalf("the agent's own call: %q, want 200 %s", got, root.ID)
	}
	testkit.NoHostListener(t, 7428)

	e.r.Close()
	if api.Serving(root.ID) {
		t.Fatal("the listener outlived the runner that opened it")
	}
	e.r = e.newRunner()
	if !api.Serving(root.ID) {
		t.Fatal("no listener after the restart for the container that still runs")
	}
	if got := e.run(root.ID, whoamiCmd); got != "200 "+root.ID {
		t.Fatalf("after the restart, the agent's call: %q", got)
	}

	if _, err := e.r.Deliver(e.ctx, e.sid, root.ID, msg("/done")); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, protocol.StateDone)
	if api.Serving(root.ID) {
		t.Fatal("the listener outlived its container")
	}
}

// TestAgentAPIProcessRuntime: with the process runtime, every agent shares
// one listener on the host's loopback and its token tells who it is.
func TestAgentAPIProcessRuntime(t *testing.T) {
	// The agent calls the API, keeps the answer in its workspace, and ends.
	probe := `bash probe.sh /whoami "$FILEPATH_API_KEY" > answer.txt; echo '{"type":"done"}'`
	e := newProcessEnv(t, store.Config{}, sessions.NewSession{Name: "process"}, func(c *Config) {
		api, err := agentapi.New(agentapi.Config{Auth: c.Users})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(api.Shutdown)
		api.Mount("/whoami", whoami)
		c.AgentAPI = api
		c.Cmd = func(sessions.Node) []string { return []string{"bash", "-c", probe} }
	})
	root := e.processRoot("")
	testkit.WriteProbe(t, e.workspace(root.ID))
	if err := e.r.StartSession(e.ctx, e.uid, e.sid); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(root.ID, protocol.StateDone)
	got, err := os.ReadFile(filepath.Join(e.dir, "nodes", root.ID, "answer.txt"))
	if err != nil || strings.TrimSpace(string(got)) != "200 "+root.ID {
		t.Fatalf("the agent's answer: %q (%v), want 200 %s", got, err, root.ID)
	}
}

// TestMissingProviderKey: a catalog agent whose provider key the
// orchestrator lacks fails before anything is created, with an error record
// naming the variable to set; the others are not held back.
func TestMissingProviderKey(t *testing.T) {
	has := map[string]bool{orchestrator.ProviderAnthropic: true}
	keys := func(p string) bool { return has[p] }
	tests := []struct{ agent, want string }{
		{"shelley", "FILEPATH_OPENROUTER_API_KEY"},
		{"pi", "FILEPATH_OPENROUTER_API_KEY"},
		{"codex", "FILEPATH_OPENAI_API_KEY"},
		{"claude-code", ""},
		{"amp", ""},
		{"cursor", ""},
		{AgentCustom, ""},
	}
	for _, tt := range tests {
		t.Run(tt.agent, func(t *testing.T) {
			r := &Runner{cfg: Config{ProviderKeys: keys}}
			err := r.checkProviderKey(sessions.Node{Node: protocol.Node{AgentType: tt.agent}})
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("err %v, want one naming %q", err, tt.want)
			}
		})
	}

	// Through StartNode: noRuntime fails the test if anything reaches it.
	ctx := context.Background()
	dir := t.TempDir()
	e, u, n := rootNode(t, sessions.NewNode{Name: "root", AgentType: "shelley"})
	r, err := New(withNouns(Config{Store: e.St, Runtime: noRuntime{}, DataDir: dir, ProviderKeys: keys}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.StartNode(ctx, u.ID, n.SessionID, n.ID); err == nil || !strings.Contains(err.Error(), "set FILEPATH_OPENROUTER_API_KEY") {
		t.Fatalf("start shelley without an OpenRouter key: %v", err)
	}
	got, _ := e.Sessions.NodeByID(ctx, n.ID)
	if got.Status != protocol.StateError || got.ContainerID != "" {
		t.Fatalf("node after the refused start: status %s, container %q", got.Status, got.ContainerID)
	}
	recs, _ := e.St.Records(ctx, n.SessionID, 0, 100, n.ID)
	var msgs []string
	for _, rec := range recs {
		if rec.Kind == protocol.KindError {
			var ev struct{ Message string }
			json.Unmarshal(rec.Data, &ev)
			msgs = append(msgs, ev.Message)
		}
	}
	if len(msgs) != 1 || !strings.Contains(msgs[0], "FILEPATH_OPENROUTER_API_KEY") {
		t.Fatalf("error records %q, want one naming FILEPATH_OPENROUTER_API_KEY", msgs)
	}
	keysLeft, _ := e.Users.ListAPIKeys(ctx, u.ID)
	if len(keysLeft) != 0 {
		t.Fatalf("a refused start created %d node keys", len(keysLeft))
	}
}

// openOrder is the agent-facing API, recording the state of each container
// when its listener opens.
type openOrder struct {
	*agentapi.Server
	rt     containers.Runtime
	mu     sync.Mutex
	states []containers.State
}

func (o *openOrder) Open(ctx context.Context, nodeID, containerID string) error {
	if !o.Serving(nodeID) {
		info, err := o.rt.Inspect(ctx, containerID)
		o.mu.Lock()
		if err != nil {
			info.State = containers.State("inspect: " + err.Error())
		}
		o.states = append(o.states, info.State)
		o.mu.Unlock()
	}
	return o.Server.Open(ctx, nodeID, containerID)
}

// TestAgentAPIBeforeTheAgent: the runner opens a node's listener before it
// starts the container, on every start: agents whose task is one call of
// FILEPATH_API_URL, a single try made as they start, reach it (five in a
// row); a restart opens it before the start too.
func TestAgentAPIBeforeTheAgent(t *testing.T) {
	testkit.RequireImage(t, byoEchoImage)
	var api *openOrder
	e := newEnv(t, func(c *Config) {
		rt := c.Runtime.(*containers.Docker)
		s, err := agentapi.New(agentapi.Config{Auth: c.Users, Netns: rt})
		if err != nil {
			t.Fatal(err)
		}
		s.Mount("/whoami", whoami)
		api = &openOrder{Server: s, rt: rt}
		c.AgentAPI = api
	})
	t.Cleanup(api.Shutdown)
	finish := func(id string) {
		t.Helper()
		if _, err := e.r.Deliver(e.ctx, e.sid, id, msg("/done")); err != nil {
			t.Fatal(err)
		}
		e.waitStatus(id, protocol.StateDone)
		e.waitFor("the listener to close", func() bool { return !api.Serving(id) })
	}
	const starts = 5
	var first string
	for i := range starts {
		in := sessions.NewNode{Name: fmt.Sprintf("n%d", i), AgentType: AgentCustom, Image: byoEchoImage,
			Task: `/cmd bash probe.sh /whoami "$FILEPATH_API_KEY" once > answer.txt`}
		if first != "" {
			in.ParentID = &first
		}
		n, err := e.sessions.CreateNode(e.ctx, e.uid, e.sid, in)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = n.ID
		}
		ws := filepath.Join(e.dir, "nodes", n.ID)
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		testkit.WriteProbe(t, ws)
		if err := e.r.StartNode(e.ctx, e.uid, e.sid, n.ID); err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		var answer []byte
		e.waitFor("the agent's answer", func() bool {
			answer, _ = os.ReadFile(filepath.Join(ws, "answer.txt"))
			return len(answer) > 0
		})
		if got := strings.TrimSpace(string(answer)); got != "200 "+n.ID {
			t.Fatalf("agent %d: its first call: %q, want 200 %s", i, got, n.ID)
		}
		finish(n.ID)
	}
	if err := e.r.StartNode(e.ctx, e.uid, e.sid, first); err != nil {
		t.Fatalf("restart: %v", err)
	}
	e.waitFor("the restarted agent's listener", func() bool { return api.Serving(first) })
	finish(first)
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.states) != starts+1 {
		t.Fatalf("opened %d listeners for %d starts: %v", len(api.states), starts+1, api.states)
	}
	for i, s := range api.states {
		if s != containers.StateCreated {
			t.Errorf("start %d: the listener opened when the container was %s, not before it started", i, s)
		}
	}
}
