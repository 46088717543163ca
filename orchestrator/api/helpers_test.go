package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/protocol"
)

// testEnv is a real server on 127.0.0.1:0 over a real SQLite store.
type testEnv struct {
	t        testing.TB
	srv      *api.Server
	st       *store.Store
	users    *identity.Store
	sessions *sessions.Store
	collab   *collab.Store
	secrets  *secrets.Store
	audit    *audit.Store
	hub      *hub.Hub[protocol.Record]
	files    *vfs.VFS
	base     string
	stdout   *testkit.Buffer
	login    string // the first-start login URL
	runErr   chan error
	dbPath   string // the store's database file
}

// publisherFunc adapts a function to store.Publisher.
type publisherFunc func(string, protocol.Record)

func (f publisherFunc) Publish(sessionID string, r protocol.Record) { f(sessionID, r) }

type envOpts struct {
	cfg       func(*api.Config)
	buffer    int
	publisher func(h *hub.Hub[protocol.Record]) store.Publisher
	now       func() time.Time // the store's clock
	files     vfs.Config       // the session filesystem's limits
	secrets   []byte           // the store's secrets key
	busy      time.Duration    // the store's busy timeout (0: its default)
}

func newEnv(t testing.TB, o envOpts) *testEnv {
	t.Helper()
	dir := t.TempDir()
	h := hub.New[protocol.Record](hub.Config{Buffer: o.buffer})
	var pub store.Publisher = h
	if o.publisher != nil {
		pub = o.publisher(h)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(dir, "filepath.db"), Publisher: pub, Now: o.now, BusyTimeout: o.busy})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	users, ss, aud := identity.New(st), sessions.New(st, sessions.Config{}), audit.New(st)
	cs := collab.New(st, ss, collab.Config{})
	sec := secrets.New(st, secrets.Config{Key: o.secrets})
	out := &testkit.Buffer{}
	level := slog.LevelWarn
	if os.Getenv("API_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	readDB, err := st.ReadDB().DB()
	if err != nil {
		t.Fatal(err)
	}
	o.files.ReadDB, o.files.Logger = readDB, logger
	files := vfs.New(st.SQL(), o.files)
	cfg := api.Config{
		Addr:     "127.0.0.1:0",
		Store:    st,
		Users:    users,
		Sessions: ss,
		Collab:   cs,
		Secrets:  sec,
		Audit:    aud,
		Hub:      h,
		Files:    files,
		Stdout:   out,
		Logger:   logger,
		// Tests send no DNS queries: names resolve to nothing (a session's
		// git host that does not resolve is accepted at creation); an
		// address is checked as it is.
		Resolver: noDNS{},
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	srv, err := api.New(cfg)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	e := &testEnv{t: t, srv: srv, st: st, users: users, sessions: ss, collab: cs, secrets: sec, audit: aud, hub: h, files: files, base: srv.URL(), stdout: out, runErr: make(chan error, 1), dbPath: filepath.Join(dir, "filepath.db")}
	go func() { e.runErr <- srv.Run(ctx) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-e.runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
		h.Close()
		files.Close()
		st.Close()
	})
	// Wait for the first-start login line (the bootstrap ran).
	re := regexp.MustCompile(`(?m)^login: (http://\S+)$`)
	testkit.Eventually(t, 10*time.Second, "login line on stdout", func() bool { return re.MatchString(out.String()) })
	e.login = re.FindStringSubmatch(out.String())[1]
	return e
}

// account is a user with an API key.
type account struct {
	user identity.User
	key  string
}

// newAlice is a server with default options and alice's account.
func newAlice(t testing.TB) (*testEnv, account) {
	t.Helper()
	e := newEnv(t, envOpts{})
	return e, e.account("alice")
}

func (e *testEnv) account(name string) account {
	e.t.Helper()
	ctx := context.Background()
	u, err := e.users.CreateUser(ctx, name, false)
	if err != nil {
		e.t.Fatalf("create user %s: %v", name, err)
	}
	key, _, err := e.users.CreateAPIKey(ctx, u.ID, "test")
	if err != nil {
		e.t.Fatalf("create api key: %v", err)
	}
	return account{user: u, key: key}
}

// session creates a session with one root node for a.
func (e *testEnv) session(a account) (protocol.Session, sessions.Node) {
	e.t.Helper()
	ctx := context.Background()
	s, err := e.sessions.CreateSession(ctx, a.user.ID, sessions.NewSession{Name: "s"})
	if err != nil {
		e.t.Fatalf("create session: %v", err)
	}
	n, err := e.sessions.CreateNode(ctx, a.user.ID, s.ID, sessions.NewNode{AgentType: "shelley"})
	if err != nil {
		e.t.Fatalf("create node: %v", err)
	}
	return s, n
}

// nodeKey makes a container token of node nid in a's session sid.
func (e *testEnv) nodeKey(a account, sid, nid string) string {
	e.t.Helper()
	key, _, err := e.users.CreateNodeAPIKey(context.Background(), a.user.ID, sid, nid)
	if err != nil {
		e.t.Fatalf("create node key: %v", err)
	}
	return key
}

// child creates a node under parent in a's session sid (in's other fields
// as given).
func (e *testEnv) child(a account, sid, parent string, in sessions.NewNode) sessions.Node {
	e.t.Helper()
	in.ParentID = &parent
	n, err := e.sessions.CreateNode(context.Background(), a.user.ID, sid, in)
	if err != nil {
		e.t.Fatalf("create node: %v", err)
	}
	return n
}

// forkedChild spawns through the API, as a, a shelley child of parent
// (named name unless "") that works on a fork of its parent's workspace,
// and returns it with its fork.
func (e *testEnv) forkedChild(a account, sid, parent, name string) (sessions.Node, vfs.ForkInfo) {
	e.t.Helper()
	body := `{"agent_type":"shelley","parent_id":"` + parent + `","workspace":"fork"`
	if name != "" {
		body += `,"name":"` + name + `"`
	}
	r := e.do(http.MethodPost, "/api/v1/sessions/"+sid+"/nodes", a.key, body+"}")
	if r.status != http.StatusCreated {
		e.t.Fatalf("create forked child %s: %d %s", name, r.status, r.body)
	}
	var n sessions.Node
	if err := json.Unmarshal(r.body, &n); err != nil {
		e.t.Fatal(err)
	}
	fk, err := e.files.ForkOfNode(context.Background(), n.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return n, fk
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

// errorOf decodes an error answer.
func (r reply) errorOf(t testing.TB) (code, message, field string) {
	t.Helper()
	var b struct {
		Error struct{ Code, Message, Field string }
	}
	if err := json.Unmarshal(r.body, &b); err != nil || b.Error.Code == "" {
		t.Fatalf("answer %d is not a JSON error: %q", r.status, r.body)
	}
	return b.Error.Code, b.Error.Message, b.Error.Field
}

var noRedirect = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       30 * time.Second,
}

// do sends a request with an optional Bearer key and raw body.
func (e *testEnv) do(method, path, key string, body string, hdr ...string) reply {
	e.t.Helper()
	return e.doT(e.t, method, path, key, body, hdr...)
}

// doT is do reporting to t (fuzz targets must not use the F).
func (e *testEnv) doT(t testing.TB, method, path, key string, body string, hdr ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	rep := reply{status: resp.StatusCode, header: resp.Header, body: b}
	checkAnswer(t, req, body, rep)
	return rep
}

// appendEvents appends n text events to the session log.
func appendEvents(t testing.TB, st *store.Store, sid, nid string, n int) {
	t.Helper()
	for range n {
		if _, err := st.Append(context.Background(), sid, protocol.Record{NodeID: nid, Kind: protocol.KindEvent, Data: json.RawMessage(`{"type":"text","content":"x"}`)}); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
}

func storeNewNode(parent string) sessions.NewNode {
	return sessions.NewNode{AgentType: "pi", ParentID: &parent}
}

// noDNS resolves no name.
type noDNS struct{}

func (noDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return nil, &net.DNSError{Err: "no DNS in tests", Name: host, IsNotFound: true}
}
