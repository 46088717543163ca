// Command seed fills a filepath data directory with a large session for the
// web UI benchmarks (docs/benchmarks/web.md). It writes through the store
// package, so the server must not be running on the same session while it
// appends, and nodes created here are never started (no containers).
//
//	go run ./internal/cmd/seed --data DIR [--nodes 500] [--records 10000] [--root-records 2000] [--name NAME]
//	    creates a user (admin, unless it exists), a session with a tree of
//	    --nodes nodes (a root, ~20 children, the rest grandchildren) and
//	    --records event/input records spread over them (the root gets
//	    --root-records; its last record is the text "seed: last record").
//	    Prints one JSON line: {"session","root","nodes","records","login"}
//	    where login is a path (/login?token=...) to append to the server's URL.
//	    --nodes 0 creates an empty session (no nodes, no records).
//
//	go run ./internal/cmd/seed --data DIR --session ID [--node ID] --stream 100 --for 10s
//	    appends text/tool/command/commit records at RATE per second for the
//	    duration and prints {"appended": N, "seconds": S}. The records go to
//	    the store only: a running server publishes to browsers only what it
//	    appends itself (its hub is in-process), so use this with the server
//	    stopped (e.g. to grow a session between runs).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// LastText is the content of the root's last seeded record; the benchmark
// waits until it is visible.
const LastText = "seed: last record"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	data        string
	user        string
	name        string
	image       string
	nodes       int
	children    int
	records     int
	rootRecords int
	session     string
	node        string
	rate        float64
	dur         time.Duration
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.data, "data", "", "data directory of the server (required)")
	fs.StringVar(&o.user, "user", "admin", "user that owns the session (created when missing)")
	fs.StringVar(&o.name, "name", "bench-500", "session name")
	fs.StringVar(&o.image, "image", "filepath/testagent:latest", "image of the root node (agent type custom)")
	fs.IntVar(&o.nodes, "nodes", 500, "number of nodes in the tree")
	fs.IntVar(&o.children, "children", 20, "children of the root; the other nodes are grandchildren")
	fs.IntVar(&o.records, "records", 10000, "event and input records in total")
	fs.IntVar(&o.rootRecords, "root-records", 2000, "of --records, how many belong to the root")
	fs.StringVar(&o.session, "session", "", "with --stream: the session to append to")
	fs.StringVar(&o.node, "node", "", "with --stream: the node to append to (default: the session's root)")
	fs.Float64Var(&o.rate, "stream", 0, "append records at this rate per second to --session (0: seed a new session)")
	fs.DurationVar(&o.dur, "for", 10*time.Second, "with --stream: for how long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.data == "" {
		fmt.Fprintln(stderr, "seed: --data is required")
		return 2
	}
	if err := os.MkdirAll(o.data, 0o700); err != nil {
		fmt.Fprintf(stderr, "seed: create data directory: %v\n", err)
		return 1
	}
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(o.data, "filepath.db")})
	if err != nil {
		fmt.Fprintf(stderr, "seed: open store: %v\n", err)
		return 1
	}
	defer st.Close()
	var out any
	if o.rate > 0 {
		out, err = stream(ctx, st, o)
	} else {
		out, err = seed(ctx, st, o)
	}
	if err != nil {
		fmt.Fprintf(stderr, "seed: %v\n", err)
		return 1
	}
	b, _ := json.Marshal(out)
	fmt.Fprintln(stdout, string(b))
	return 0
}

type seeded struct {
	Session string `json:"session"`
	Root    string `json:"root"`
	Nodes   int    `json:"nodes"`
	Records int    `json:"records"`
	Login   string `json:"login"`
}

func seed(ctx context.Context, st *store.Store, o options) (seeded, error) {
	if o.nodes < 0 || o.children < 0 || (o.nodes > 0 && (o.records < o.rootRecords || o.rootRecords < 1)) {
		return seeded{}, errors.New("want --nodes >= 0, --children >= 0 and 1 <= --root-records <= --records")
	}
	ident, ss := identity.New(st), sessions.New(st, sessions.Config{})
	u, err := ident.UserByName(ctx, o.user)
	if orchestrator.ErrorCode(err) == orchestrator.ENotFound {
		u, err = ident.CreateUser(ctx, o.user, true)
	}
	if err != nil {
		return seeded{}, fmt.Errorf("user %s: %w", o.user, err)
	}
	sess, err := ss.CreateSession(ctx, u.ID, sessions.NewSession{Name: o.name})
	if err != nil {
		return seeded{}, fmt.Errorf("create session: %w", err)
	}
	tok, err := ident.CreateLoginToken(ctx, u.ID, 24*time.Hour)
	if err != nil {
		return seeded{}, fmt.Errorf("login token: %w", err)
	}
	if o.nodes == 0 { // an empty session: the benchmark's baseline
		return seeded{Session: sess.ID, Login: "/login?token=" + tok}, nil
	}
	root, err := ss.CreateNode(ctx, u.ID, sess.ID, sessions.NewNode{Name: "lead", AgentType: orchestrator.AgentCustom, Model: "claude-sonnet-4", Image: o.image})
	if err != nil {
		return seeded{}, fmt.Errorf("create root: %w", err)
	}
	// The tree: the root, o.children children, the rest grandchildren spread evenly.
	agents := []string{"claude-code", "codex", "shelley", "pi", "cursor", "amp"}
	nodes := []sessions.Node{root}
	var kids []sessions.Node
	for i := 0; i < o.children && len(nodes) < o.nodes; i++ {
		n, err := ss.CreateNode(ctx, u.ID, sess.ID, sessions.NewNode{Name: fmt.Sprintf("worker-%02d", i+1), AgentType: agents[i%len(agents)], ParentID: &root.ID})
		if err != nil {
			return seeded{}, fmt.Errorf("create child: %w", err)
		}
		nodes = append(nodes, n)
		kids = append(kids, n)
	}
	for i := 0; len(nodes) < o.nodes && len(kids) > 0; i++ {
		p := kids[i%len(kids)]
		n, err := ss.CreateNode(ctx, u.ID, sess.ID, sessions.NewNode{Name: fmt.Sprintf("%s-task-%02d", p.Name, i/len(kids)+1), AgentType: agents[(i+3)%len(agents)], ParentID: &p.ID})
		if err != nil {
			return seeded{}, fmt.Errorf("create grandchild: %w", err)
		}
		nodes = append(nodes, n)
	}
	// Statuses: only idle/done/error (a running node without a container would be
	// marked lost by the runner's reconcile at start-up).
	for i, n := range nodes[1:] {
		s := protocol.StateDone
		switch {
		case i%7 == 3:
			s = protocol.StateIdle
		case i%29 == 5:
			s = protocol.StateError
		}
		if _, err := ss.PatchNode(ctx, sess.ID, n.ID, sessions.NodePatch{Status: &s}); err != nil {
			return seeded{}, fmt.Errorf("node status: %w", err)
		}
	}

	// Records: the root gets rootRecords, the others share the rest; they are
	// interleaved round-robin like agents working at the same time.
	per := make([][]protocol.Record, len(nodes))
	per[0] = script(root.ID, o.rootRecords, workerNames(kids), true)
	rest := o.records - o.rootRecords
	if len(nodes) == 1 {
		per[0] = script(root.ID, o.records, nil, true)
		rest = 0
	}
	for i := 1; i < len(nodes) && rest > 0; i++ {
		n := rest / (len(nodes) - i)
		per[i] = script(nodes[i].ID, n, nil, false)
		rest -= n
	}
	var batch []protocol.Record
	total := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := st.Append(ctx, sess.ID, batch...); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		total += len(batch)
		batch = batch[:0]
		return nil
	}
	for more := true; more; {
		more = false
		for i := range per {
			if len(per[i]) == 0 {
				continue
			}
			more = true
			batch = append(batch, per[i][0])
			per[i] = per[i][1:]
			if len(batch) == 1000 {
				if err := flush(); err != nil {
					return seeded{}, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return seeded{}, err
	}
	return seeded{Session: sess.ID, Root: root.ID, Nodes: len(nodes), Records: total, Login: "/login?token=" + tok}, nil
}

func workerNames(kids []sessions.Node) []string {
	var names []string
	for _, k := range kids {
		names = append(names, k.Name)
	}
	return names
}

// script returns n records of one node: a realistic cycle of a user message,
// text, a tool call, a command, commits and (for a parent) a workers strip.
// With last, the final record is the text LastText.
func script(nodeID string, n int, workers []string, last bool) []protocol.Record {
	out := make([]protocol.Record, 0, n)
	add := func(kind string, v any) {
		if len(out) < n {
			b, _ := json.Marshal(v)
			out = append(out, protocol.Record{NodeID: nodeID, Kind: kind, Data: b})
		}
	}
	for i := 1; len(out) < n; i++ {
		add(protocol.KindInput, map[string]any{"type": "message", "from": "user", "content": fmt.Sprintf("step %d: look at pkg%d and fix the failing test", i, i%17)})
		add(protocol.KindEvent, map[string]any{"type": "text", "content": fmt.Sprintf("Reading `pkg%d/handler.go` first. The failure in **step %d** looks like a missing nil check.", i%17, i)})
		path := fmt.Sprintf("/workspace/pkg%d/handler.go", i%17)
		add(protocol.KindEvent, map[string]any{"type": "tool", "name": "read", "path": path, "status": "start"})
		add(protocol.KindEvent, map[string]any{"type": "tool", "name": "read", "path": path, "status": "done", "output": fmt.Sprintf("package pkg%d\n\nfunc Handle(r *Request) error {\n\treturn r.Body.Close()\n}\n", i%17)})
		add(protocol.KindEvent, map[string]any{"type": "command", "cmd": "go test ./...", "status": "start"})
		add(protocol.KindEvent, map[string]any{"type": "command", "cmd": "go test ./...", "status": "done", "exit": i % 5 / 4, "stdout": fmt.Sprintf("ok  \tpkg%d\t0.%03ds\n", i%17, i%1000)})
		add(protocol.KindEvent, map[string]any{"type": "commit", "hash": fmt.Sprintf("%040x", i*7919), "message": fmt.Sprintf("pkg%d: nil check in Handle (step %d)", i%17, i)})
		if len(workers) > 0 && i%4 == 0 {
			ws := make([]map[string]string, 0, 6)
			for j := 0; j < 6 && j < len(workers); j++ {
				ws = append(ws, map[string]string{"name": workers[(i+j)%len(workers)], "status": []string{"done", "running", "thinking"}[j%3]})
			}
			add(protocol.KindEvent, map[string]any{"type": "workers", "workers": ws})
		}
		add(protocol.KindEvent, map[string]any{"type": "text", "content": fmt.Sprintf("Step %d done: the test passes now.", i)})
	}
	if last && n > 0 {
		b, _ := json.Marshal(map[string]any{"type": "text", "content": LastText})
		out[n-1] = protocol.Record{NodeID: nodeID, Kind: protocol.KindEvent, Data: b}
	}
	return out
}

type streamed struct {
	Appended int     `json:"appended"`
	Seconds  float64 `json:"seconds"`
}

func stream(ctx context.Context, st *store.Store, o options) (streamed, error) {
	if o.session == "" {
		return streamed{}, errors.New("--stream needs --session")
	}
	ss := sessions.New(st, sessions.Config{})
	sess, err := ss.SessionByID(ctx, o.session)
	if err != nil {
		return streamed{}, fmt.Errorf("session %s: %w", o.session, err)
	}
	node := o.node
	if node == "" {
		if sess.RootNodeID == nil {
			return streamed{}, errors.New("the session has no root node; pass --node")
		}
		node = *sess.RootNodeID
	}
	recs := script(node, int(o.rate*o.dur.Seconds())+1, nil, false)
	start := time.Now()
	t := time.NewTicker(time.Duration(float64(time.Second) / o.rate))
	defer t.Stop()
	n := 0
	for n < len(recs) && time.Since(start) < o.dur {
		select {
		case <-ctx.Done():
			return streamed{Appended: n, Seconds: time.Since(start).Seconds()}, ctx.Err()
		case <-t.C:
		}
		if _, err := st.Append(ctx, sess.ID, recs[n]); err != nil {
			return streamed{Appended: n, Seconds: time.Since(start).Seconds()}, fmt.Errorf("append: %w", err)
		}
		n++
	}
	return streamed{Appended: n, Seconds: time.Since(start).Seconds()}, nil
}
