package sessions_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/store/storetest"
)

func allowedOf(t *testing.T, n sessions.Node) []string {
	t.Helper()
	var c struct {
		AllowedPaths []string `json:"allowed_paths"`
	}
	if err := json.Unmarshal(n.Config, &c); err != nil {
		t.Fatalf("config %s: %v", n.Config, err)
	}
	return c.AllowedPaths
}

// TestChildInheritsAllowedPaths: a node never reaches more of the workspace
// than its parent. A child created under a node with allowed_paths gets
// them when it names none, keeps its own when they lie within the parent's,
// and is refused (nothing stored) when one does not, the error naming the
// path; moving a node under a restricted parent needs the same.
func TestChildInheritsAllowedPaths(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	root, err := e.Sessions.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{Name: "root", AgentType: "pi"})
	if err != nil {
		t.Fatal(err)
	}
	create := func(name string, parent sessions.Node, config string) (sessions.Node, error) {
		return e.Sessions.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{Name: name, AgentType: "pi", ParentID: &parent.ID, Config: json.RawMessage(config)})
	}
	lead, err := create("lead", root, `{"allowed_paths":["/src","/docs"],"approvals":{"bash":"ask"}}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, config string }{{"no-config", ``}, {"empty-config", `{}`}, {"null-paths", `{"allowed_paths":null,"x":1}`}} {
		kid, err := create(tt.name, lead, tt.config)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := allowedOf(t, kid); strings.Join(got, ",") != "/src,/docs" {
			t.Errorf("%s: child's allowed_paths %v (config %s), want the parent's [/src /docs]", tt.name, got, kid.Config)
		}
		// The grandchild inherits too.
		gk, err := create(tt.name+"-kid", kid, `{}`)
		if err != nil || strings.Join(allowedOf(t, gk), ",") != "/src,/docs" {
			t.Errorf("grandchild of %s: %s %v", tt.name, gk.Config, err)
		}
	}
	narrow, err := create("narrow", lead, `{"allowed_paths":["/src/pkg","/docs"]}`)
	if err != nil || strings.Join(allowedOf(t, narrow), ",") != "/src/pkg,/docs" {
		t.Fatalf("a child within its parent's paths: %s %v", narrow.Config, err)
	}
	before, _ := e.Sessions.Tree(ctx, u.ID, s.ID)
	for _, tt := range []struct{ config, path string }{
		{`{"allowed_paths":["/secret"]}`, `"/secret"`},
		{`{"allowed_paths":["/src","/secret/key.txt"]}`, `"/secret/key.txt"`},
		{`{"allowed_paths":["/srcx"]}`, `"/srcx"`},
		{`{"allowed_paths":["/"]}`, `"/"`},
		{`{"allowed_paths":["/src/../secret"]}`, `"/src/../secret"`},
		{`{"allowed_paths":[]}`, `[]`},
	} {
		_, err := create("wide", lead, tt.config)
		if orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(orchestrator.ErrorMessage(err), tt.path) {
			t.Errorf("child with %s under [/src /docs]: %v, want invalid naming %s", tt.config, err, tt.path)
		}
	}
	if after, _ := e.Sessions.Tree(ctx, u.ID, s.ID); len(after) != len(before) {
		t.Fatalf("a refused child was stored: %d nodes, want %d", len(after), len(before))
	}
	// An unrestricted parent lets a child name anything.
	if _, err := create("free", root, `{"allowed_paths":["/secret"]}`); err != nil {
		t.Fatal(err)
	}

	// Moving: an unrestricted node, or one reaching outside, cannot go
	// under lead; one within it can.
	free, err := create("loose", root, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sessions.MoveNode(ctx, u.ID, s.ID, free.ID, &lead.ID, 0); orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(orchestrator.ErrorMessage(err), "allowed_paths") {
		t.Fatalf("moving an unrestricted node under lead: %v", err)
	}
	outside, err := create("outside", root, `{"allowed_paths":["/src"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := create("outside-kid", outside, `{"allowed_paths":["/src"]}`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sessions.MoveNode(ctx, u.ID, s.ID, outside.ID, &narrow.ID, 0); orchestrator.ErrorCode(err) != orchestrator.EInvalid || !strings.Contains(orchestrator.ErrorMessage(err), `"/src"`) {
		t.Fatalf("moving a node reaching /src under one limited to /src/pkg: %v", err)
	}
	if n, err := e.Sessions.MoveNode(ctx, u.ID, s.ID, outside.ID, &lead.ID, 0); err != nil || *n.ParentID != lead.ID {
		t.Fatalf("moving a node within lead's paths under it: %v", err)
	}
}

// TestSiblingNamesUnique: names are unique among a node's children, so a
// child can be named by name: creating, renaming or moving a node onto a
// sibling's name is a 409 naming the clash, and nothing changes; the same
// name under another parent is fine.
func TestSiblingNamesUnique(t *testing.T) {
	ctx := context.Background()
	e, u, s := storetest.NewSession(t)
	root := e.Node(t, u.ID, s.ID, nil, "root")
	a := e.Node(t, u.ID, s.ID, &root, "a")
	b := e.Node(t, u.ID, s.ID, &root, "b")
	aw := e.Node(t, u.ID, s.ID, &a, "worker") // the same name under two parents
	e.Node(t, u.ID, s.ID, &b, "worker")
	unchanged := storetest.Snapshot(t, e.St)

	_, err := e.Sessions.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{Name: " a ", AgentType: "pi", ParentID: &root.ID})
	storetest.WantCode(t, err, orchestrator.EConflict, "name")
	if !strings.Contains(orchestrator.ErrorMessage(err), `"a"`) || !strings.Contains(orchestrator.ErrorMessage(err), a.ID) {
		t.Fatalf("create clash message: %v", err)
	}
	_, err = e.Sessions.UpdateNode(ctx, u.ID, s.ID, b.ID, sessions.NodePatch{Name: storetest.Ptr("a")})
	storetest.WantCode(t, err, orchestrator.EConflict, "name")
	_, err = e.Sessions.MoveNode(ctx, u.ID, s.ID, aw.ID, &b.ID, 0)
	storetest.WantCode(t, err, orchestrator.EConflict, "parent_id")
	if !strings.Contains(orchestrator.ErrorMessage(err), `"worker"`) {
		t.Fatalf("move clash message: %v", err)
	}
	unchanged("a refused change")
	// Renaming a node to its own name, moving within its parent, and
	// automatic names all work.
	if _, err := e.Sessions.UpdateNode(ctx, u.ID, s.ID, a.ID, sessions.NodePatch{Name: storetest.Ptr("a")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sessions.MoveNode(ctx, u.ID, s.ID, b.ID, nil, 0); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := 0; i < 30; i++ {
		n, err := e.Sessions.CreateNode(ctx, u.ID, s.ID, sessions.NewNode{AgentType: "pi", ParentID: &a.ID})
		if err != nil {
			t.Fatal(err)
		}
		if seen[n.Name] {
			t.Fatalf("automatic name %q given twice under one parent", n.Name)
		}
		seen[n.Name] = true
	}
}
