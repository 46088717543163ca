package agenttools_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator"
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

// fakeRunner stands in for the lifecycle runner: nodes it "starts" run,
// inputs are appended to the log, spawned children are created and run.
type fakeRunner struct {
	st       *store.Store
	sessions *sessions.Store
	mu       sync.Mutex
	running  map[string]bool
	starts   []string
}

func (r *fakeRunner) StartNode(_ context.Context, _, _, nodeID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running[nodeID] {
		r.starts = append(r.starts, nodeID)
	}
	r.running[nodeID] = true
	return nil
}

func (r *fakeRunner) Deliver(ctx context.Context, sessionID, nodeID string, in protocol.Input) (protocol.Record, error) {
	if !r.Running(nodeID) {
		return protocol.Record{}, orchestrator.Errorf(orchestrator.EConflict, "node %s is not running", nodeID)
	}
	b, _ := json.Marshal(in)
	recs, err := r.st.Append(ctx, sessionID, protocol.Record{NodeID: nodeID, Kind: protocol.KindInput, Data: b})
	if err != nil {
		return protocol.Record{}, err
	}
	return recs[0], nil
}

func (r *fakeRunner) Running(nodeID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[nodeID]
}

func (r *fakeRunner) SpawnChild(ctx context.Context, sessionID, parentID string, ev protocol.SpawnEvent) (sessions.Node, error) {
	sess, err := r.sessions.SessionByID(ctx, sessionID)
	if err != nil {
		return sessions.Node{}, err
	}
	in := sessions.NewNode{Name: ev.Name, AgentType: ev.Agent, Model: ev.Model, ParentID: &parentID}
	if ev.Task != nil {
		in.Task = *ev.Task
	}
	n, err := r.sessions.CreateNode(ctx, sess.UserID, sessionID, in)
	if err != nil {
		return sessions.Node{}, err
	}
	return n, r.StartNode(ctx, sess.UserID, sessionID, n.ID)
}

func (r *fakeRunner) stop(nodeID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, nodeID)
}

// fixture is a store with two users; alice's session holds the tree
// root → parent → child, root → sibling; her other session one node;
// bob's session one node. Each node has a container token. The agent
// tools are served on a real agent-facing listener (the shared one).
type fixture struct {
	t        *testing.T
	ctx      context.Context
	st       *store.Store
	users    *identity.Store
	sessions *sessions.Store
	collab   *collab.Store
	audit    *audit.Store
	hub      *hub.Hub[protocol.Record]
	run      *fakeRunner
	clock    *testkit.Clock
	tools    *agenttools.Server
	api      *agentapi.Server
	url      string
	alice    identity.User
	bob      identity.User
	sid      string
	nodes    map[string]sessions.Node // root, parent, child, sibling, other, bobs
	keys     map[string]string        // the same names, plus "ended" (revoked) and "user"
	cancel   context.CancelFunc
}

func newFixture(t *testing.T, opts ...func(*agenttools.Config)) *fixture {
	t.Helper()
	ctx := context.Background()
	h := hub.New[protocol.Record](hub.Config{})
	clock := testkit.NewClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	// One clock for the store (the approvals' deadlines) and the tools.
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(t.TempDir(), "db"), Publisher: h, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ident, ss := identity.New(st), sessions.New(st, sessions.Config{})
	t.Cleanup(func() { st.Close(); h.Close() })
	f := &fixture{t: t, ctx: ctx, st: st, users: ident, sessions: ss, collab: collab.New(st, ss, collab.Config{}), audit: audit.New(st),
		hub: h, run: &fakeRunner{st: st, sessions: ss, running: map[string]bool{}},
		clock: clock, nodes: map[string]sessions.Node{}, keys: map[string]string{}}
	f.alice = must(ident.CreateUser(ctx, "alice", false))
	f.bob = must(ident.CreateUser(ctx, "bob", false))
	repo := "https://github.com/o/r.git"
	s := must(ss.CreateSession(ctx, f.alice.ID, sessions.NewSession{Name: "s", GitRepoURL: &repo}))
	f.sid = s.ID
	node := func(name, uid, sid string, parent string) {
		in := sessions.NewNode{Name: name, AgentType: "shelley"}
		if parent != "" {
			p := f.nodes[parent].ID
			in.ParentID = &p
		}
		n := must(ss.CreateNode(ctx, uid, sid, in))
		f.nodes[name] = n
		key, _, err := ident.CreateNodeAPIKey(ctx, uid, sid, n.ID)
		if err != nil {
			t.Fatal(err)
		}
		f.keys[name] = key
		f.run.running[n.ID] = true
	}
	node("root", f.alice.ID, s.ID, "")
	node("parent", f.alice.ID, s.ID, "root")
	node("child", f.alice.ID, s.ID, "parent")
	node("sibling", f.alice.ID, s.ID, "root")
	other := must(ss.CreateSession(ctx, f.alice.ID, sessions.NewSession{Name: "other", GitRepoURL: &repo}))
	node("other", f.alice.ID, other.ID, "")
	bobs := must(ss.CreateSession(ctx, f.bob.ID, sessions.NewSession{Name: "bob's", GitRepoURL: &repo}))
	node("bobs", f.bob.ID, bobs.ID, "")
	// A container that ended: its token was revoked.
	ended, _, err := ident.CreateNodeAPIKey(ctx, f.alice.ID, s.ID, f.nodes["parent"].ID)
	if err != nil {
		t.Fatal(err)
	}
	f.keys["ended"] = ended
	if _, err := ident.DeleteNodeAPIKeys(ctx, f.nodes["parent"].ID); err != nil {
		t.Fatal(err)
	}
	// ... and the parent's current container got a new one.
	f.keys["parent"], _, err = ident.CreateNodeAPIKey(ctx, f.alice.ID, s.ID, f.nodes["parent"].ID)
	if err != nil {
		t.Fatal(err)
	}
	f.keys["user"], _, err = ident.CreateAPIKey(ctx, f.alice.ID, "script")
	if err != nil {
		t.Fatal(err)
	}

	cfg := agenttools.Config{Store: st, Sessions: f.sessions, Collab: f.collab, Audit: f.audit, Hub: h, Runner: f.run, Clock: f.clock, ApprovalTimeout: time.Minute}
	for _, o := range opts {
		o(&cfg)
	}
	f.tools, err = agenttools.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.api, err = agentapi.New(agentapi.Config{Auth: ident})
	if err != nil {
		t.Fatal(err)
	}
	f.api.Mount(agenttools.RESTPrefix, f.tools.REST())
	f.api.Mount(agenttools.MCPPath, f.tools.MCP())
	t.Cleanup(f.api.Shutdown)
	f.url = f.api.URL()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.tools.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// answer is an HTTP answer with its JSON body.
type answer struct {
	status int
	body   map[string]any
	raw    []byte
}

func (a answer) errMessage() string {
	e, _ := a.body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

// call makes one REST call with the token of who ("" : none).
func (f *fixture) call(who, method, path string, body any) answer {
	f.t.Helper()
	r := testkit.Request(f.t, nil, method, f.url+path, f.keys[who], body)
	a := answer{status: r.Status, raw: r.Body}
	_ = json.Unmarshal(r.Body, &a.body)
	return a
}

// spawn has who spawn a child named name (task "t") through the REST tool.
func (f *fixture) spawn(who, name string) answer {
	f.t.Helper()
	a := f.call(who, "POST", "/api/v1/children", map[string]any{"name": name, "task": "t"})
	if a.status != 201 {
		f.t.Fatalf("spawn %s: %d %s", name, a.status, a.raw)
	}
	return a
}

// tokenTransport adds a node's token to every request (an MCP client).
type tokenTransport struct{ key string }

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.key)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects an MCP client with who's token.
func (f *fixture) mcpSession(who string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: f.url + agenttools.MCPPath,
		HTTPClient: &http.Client{Transport: tokenTransport{f.keys[who]}}, MaxRetries: -1}
	return c.Connect(f.ctx, tr, nil)
}

// mcpCall calls one tool and returns its structured result, or the tool's
// error text.
func (f *fixture) mcpCall(cs *mcp.ClientSession, name string, args any) (map[string]any, string) {
	f.t.Helper()
	res, err := cs.CallTool(f.ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, "protocol error: " + err.Error()
	}
	if res.IsError {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return nil, b.String()
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	return out, ""
}

// records returns the node's records.
func (f *fixture) records(nodeID string) []protocol.Record {
	f.t.Helper()
	recs, err := f.st.Records(f.ctx, f.sid, 0, 1000, nodeID)
	if err != nil {
		f.t.Fatal(err)
	}
	return recs
}
