package agenttools_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tokens are the callers of the authorization matrix: the node (parent),
// its child, its sibling, a node of another session of the same user, a
// node of another user, an ended container (revoked token), a user key.
var tokens = []string{"parent", "child", "sibling", "other", "bobs", "ended", "user"}

// TestTokenScope is the authorization matrix of every agent-API route and
// MCP tool (DESIGN invariant 9): a node token reaches its own node, its
// descendants (read, message), its parent (message), the memory of its user
// and repository, its own approvals, and nothing else; a revoked token is
// 401 and a user key 403 before any tool runs.
func TestTokenScope(t *testing.T) {
	f := newFixture(t)
	n := f.nodes
	// The policy answers the matrix's approvals at once (request_approval
	// over MCP waits for an answer).
	for _, who := range []string{"parent", "child", "sibling", "other", "bobs"} {
		owner := f.alice.ID
		if who == "bobs" {
			owner = f.bob.ID
		}
		cfg := json.RawMessage(`{"approvals":{"matrix":"allow"}}`)
		if _, err := f.sessions.UpdateNode(f.ctx, owner, n[who].SessionID, n[who].ID, sessions.NodePatch{Config: &cfg}); err != nil {
			t.Fatal(err)
		}
	}
	parentApproval := f.call("parent", "POST", "/api/v1/approvals", map[string]any{"action": "x", "kind": "matrix"})
	if parentApproval.status != 201 {
		t.Fatalf("the parent's approval: %d %s", parentApproval.status, parentApproval.raw)
	}
	approvalID := parentApproval.body["id"].(string)
	mem := f.call("parent", "POST", "/api/v1/memories", map[string]any{"key": "matrix secret", "text": "the parent's learning"})
	if mem.status != 200 {
		t.Fatalf("store a memory: %d %s", mem.status, mem.raw)
	}

	// want: the REST status per token; 2xx means the MCP tool succeeds,
	// 4xx that it answers a tool error (ended and user cannot connect).
	type tc struct {
		name  string
		rest  func(who string) answer
		tool  string
		args  func(who string) map[string]any
		want  map[string]int
		check func(t *testing.T, who string, body map[string]any)
	}
	own := map[string]int{"parent": 200, "child": 200, "sibling": 200, "other": 200, "bobs": 200, "ended": 401, "user": 403}
	with := func(m map[string]int, status int) map[string]int {
		out := map[string]int{}
		for k, v := range m {
			out[k] = v
			if v == 200 {
				out[k] = status
			}
		}
		return out
	}
	cases := []tc{
		{name: "self", rest: func(who string) answer { return f.call(who, "GET", "/api/v1/self", nil) }, want: own,
			check: func(t *testing.T, who string, body map[string]any) {
				if body["id"] != n[who].ID || body["repo"] != "github.com/o/r" {
					t.Errorf("%s's self: %v", who, body)
				}
			}},
		{name: "list children", rest: func(who string) answer { return f.call(who, "GET", "/api/v1/children", nil) },
			tool: "list_children", args: func(string) map[string]any { return map[string]any{} }, want: own,
			check: func(t *testing.T, who string, body map[string]any) {
				s := fmt.Sprint(body)
				if strings.Contains(s, n["child"].ID) != (who == "parent") {
					t.Errorf("%s's children: %v", who, body)
				}
			}},
		{name: "read a child's messages", rest: func(who string) answer {
			return f.call(who, "GET", "/api/v1/nodes/"+n["child"].ID+"/messages", nil)
		}, tool: "read_child_messages", args: func(string) map[string]any { return map[string]any{"child": n["child"].ID} },
			want: map[string]int{"parent": 200, "child": 200, "sibling": 404, "other": 404, "bobs": 404, "ended": 401, "user": 403}},
		{name: "read the parent's messages", rest: func(who string) answer {
			return f.call(who, "GET", "/api/v1/nodes/"+n["root"].ID+"/messages", nil)
		}, tool: "read_child_messages", args: func(string) map[string]any { return map[string]any{"child": n["root"].ID} },
			want: map[string]int{"parent": 404, "child": 404, "sibling": 404, "other": 404, "bobs": 404, "ended": 401, "user": 403}},
		{name: "message a child", rest: func(who string) answer {
			return f.call(who, "POST", "/api/v1/nodes/"+n["child"].ID+"/messages", map[string]any{"content": "hi from " + who})
		}, tool: "send_message", args: func(who string) map[string]any {
			return map[string]any{"to": n["child"].ID, "content": "hi from " + who}
		},
			want: map[string]int{"parent": 202, "child": 404, "sibling": 404, "other": 404, "bobs": 404, "ended": 401, "user": 403}},
		{name: "message root (the parent of parent and sibling)", rest: func(who string) answer {
			return f.call(who, "POST", "/api/v1/nodes/"+n["root"].ID+"/messages", map[string]any{"content": "report from " + who})
		}, tool: "send_message", args: func(who string) map[string]any {
			return map[string]any{"to": n["root"].ID, "content": "report from " + who}
		},
			want: map[string]int{"parent": 202, "child": 404, "sibling": 202, "other": 404, "bobs": 404, "ended": 401, "user": 403}},
		{name: "wait for children (none unfinished)", rest: func(who string) answer {
			return f.call(who, "GET", "/api/v1/children/wait?timeout=1", nil)
		}, want: map[string]int{"child": 200, "ended": 401, "user": 403}},
		{name: "spawn", rest: func(who string) answer {
			return f.call(who, "POST", "/api/v1/children", map[string]any{"name": "kid-" + who, "task": "t"})
		}, tool: "spawn", args: func(who string) map[string]any { return map[string]any{"name": "mcp-kid-" + who, "task": "t"} },
			want: with(own, 201)},
		{name: "store a memory", rest: func(who string) answer {
			return f.call(who, "POST", "/api/v1/memories", map[string]any{"key": "k " + who, "text": "learned by " + who})
		}, tool: "memory_store", args: func(who string) map[string]any { return map[string]any{"key": "m " + who, "text": "learned by " + who} }, want: own},
		{name: "search memories", rest: func(who string) answer { return f.call(who, "GET", "/api/v1/memories?q=matrix+secret", nil) },
			tool: "memory_search", args: func(string) map[string]any { return map[string]any{"query": "matrix secret"} }, want: own,
			check: func(t *testing.T, who string, body map[string]any) {
				// Alice's nodes share her repository's memory; bob's see none of it.
				if found := strings.Contains(fmt.Sprint(body), "the parent's learning"); found != (who != "bobs") {
					t.Errorf("%s found the parent's memory: %v", who, found)
				}
			}},
		{name: "list memories", rest: func(who string) answer { return f.call(who, "GET", "/api/v1/memories", nil) },
			tool: "memory_list", args: func(string) map[string]any { return map[string]any{} }, want: own,
			check: func(t *testing.T, who string, body map[string]any) {
				if found := strings.Contains(fmt.Sprint(body), "the parent's learning"); found != (who != "bobs") {
					t.Errorf("%s listed the parent's memory: %v", who, found)
				}
			}},
		{name: "request approval", rest: func(who string) answer {
			return f.call(who, "POST", "/api/v1/approvals", map[string]any{"action": "act " + who, "kind": "matrix"})
		}, tool: "request_approval", args: func(who string) map[string]any { return map[string]any{"action": "mcp " + who, "kind": "matrix"} },
			want: with(own, 201)},
		{name: "read the parent's approval", rest: func(who string) answer {
			return f.call(who, "GET", "/api/v1/approvals/"+approvalID, nil)
		}, want: map[string]int{"parent": 200, "child": 404, "sibling": 404, "other": 404, "bobs": 404, "ended": 401, "user": 403}},
		{name: "withdraw the parent's approval", rest: func(who string) answer {
			return f.call(who, "DELETE", "/api/v1/approvals/"+approvalID, nil)
		}, want: map[string]int{"parent": 409, "child": 404, "sibling": 404, "other": 404, "bobs": 404, "ended": 401, "user": 403}},
	}
	sessions := map[string]*mcp.ClientSession{}
	for _, who := range tokens {
		cs, err := f.mcpSession(who)
		if who == "ended" || who == "user" {
			if err == nil {
				cs.Close()
				t.Fatalf("an MCP client with the %s token connected", who)
			}
			continue
		}
		if err != nil {
			t.Fatalf("MCP client of %s: %v", who, err)
		}
		defer cs.Close()
		sessions[who] = cs
	}
	for _, c := range cases {
		for _, who := range tokens {
			want, ok := c.want[who]
			if !ok {
				continue
			}
			t.Run(c.name+"/"+who+"/rest", func(t *testing.T) {
				a := c.rest(who)
				if a.status != want {
					t.Fatalf("status %d, want %d: %s", a.status, want, a.raw)
				}
				if want < 300 && c.check != nil {
					c.check(t, who, a.body)
				}
			})
			cs := sessions[who]
			if c.tool == "" || cs == nil {
				continue
			}
			t.Run(c.name+"/"+who+"/mcp", func(t *testing.T) {
				out, errText := f.mcpCall(cs, c.tool, c.args(who))
				if (errText == "") != (want < 300) {
					t.Fatalf("tool %s: result %v, error %q; want status %d", c.tool, out, errText, want)
				}
				if want == 404 && !strings.Contains(errText, "no node") {
					t.Fatalf("tool %s: error %q does not say the node is out of reach", c.tool, errText)
				}
				if want < 300 && c.check != nil {
					c.check(t, who, out)
				}
			})
		}
	}
}
