package agenttools

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
	"github.com/filepath-dev/filepath/protocol"
)

// MCPPath is where MCP is mounted on the agent-facing API.
const MCPPath = "/mcp"

// mcpHandler is the MCP endpoint, built once.
type mcpHandler = http.Handler

const mcpInstructions = `filepath runs you as one agent of a tree of agents that share /workspace.
These tools reach your own node, your descendants and your parent: list_children, read_child_messages,
send_message (to a descendant, or "parent" for a report), spawn, wait_for_children; memory_store,
memory_search and memory_list keep learnings for this user and repository across sessions;
request_approval asks the person supervising the tree for permission and waits for the answer.`

// MCP returns the tools as an MCP server (Streamable HTTP, stateless: every
// POST stands alone, so an orchestrator restart loses no session). The
// node is the one whose token the agent-facing API authenticated; the tool
// handlers read it from the request's token info.
func (s *Server) MCP() http.Handler {
	s.mcpOnce.Do(func() { s.mcp = s.newMCP() })
	return s.mcp
}

func (s *Server) newMCP() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "filepath", Title: "filepath agent tools", Version: "1"},
		&mcp.ServerOptions{Instructions: mcpInstructions + s.fileInstructions(), Logger: s.log})
	s.addTools(srv)
	s.addFileTools(srv)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: s.cfg.MaxBody, Logger: s.log})
	// The agent-facing API has authenticated the token and removed it; the
	// SDK learns the node from a token info made from that caller (and
	// ties any session to the node).
	verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		c, ok := orchestrator.CallerFrom(r.Context())
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: c.NodeID, Extra: map[string]any{callerKey: c}}, nil
	}
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := callerOf(r.Context()); err != nil {
			writeError(w, err)
			return
		}
		r.Header.Set("Authorization", "Bearer node") // a stand-in: the caller is in the context
		authed.ServeHTTP(w, r)
	})
}

const callerKey = "filepath.caller"

// mcpCaller is the node of a tool call.
func mcpCaller(req *mcp.CallToolRequest) (orchestrator.Caller, error) {
	if req == nil || req.Extra == nil || req.Extra.TokenInfo == nil {
		return orchestrator.Caller{}, errNoCaller
	}
	c, ok := req.Extra.TokenInfo.Extra[callerKey].(orchestrator.Caller)
	if !ok || c.NodeID == "" {
		return orchestrator.Caller{}, errNoCaller
	}
	return c, nil
}

// tool adapts an operation to a typed MCP tool handler.
func tool[In any](s *Server, srv *mcp.Server, name, desc string, op func(ctx context.Context, c orchestrator.Caller, in In) (any, error)) {
	mcp.AddTool(srv, &mcp.Tool{Name: name, Description: desc}, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		c, err := mcpCaller(req)
		if err != nil {
			return nil, nil, err
		}
		out, err := op(ctx, c, in)
		if err != nil {
			return nil, nil, toolError{err}
		}
		if page, ok := out.(RecordPage); ok {
			// A page of records is the one large answer: sent once, as
			// the JSON text the model reads, not also as structured
			// content (that doubled its bytes and its time).
			b, err := json.Marshal(page)
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
		}
		return nil, out, nil
	})
}

// toolError is an operation's error as the model reads it: its message,
// not an internal detail.
type toolError struct{ err error }

func (e toolError) Error() string {
	if orchestrator.ErrorCode(e.err) == orchestrator.EInternal {
		return "internal error; try again"
	}
	msg := orchestrator.ErrorMessage(e.err)
	if f := orchestrator.ErrorField(e.err); f != "" {
		msg += " (" + f + ")"
	}
	return msg
}

type (
	noArgs   struct{}
	readArgs struct {
		Child string `json:"child" jsonschema:"the id or name of a child or any descendant (list_children shows them)"`
		After int64  `json:"after,omitempty" jsonschema:"return records after this seq (next_after of the previous page); 0 from the start"`
		Limit int    `json:"limit,omitempty" jsonschema:"records per page, 1 to 1000 (default 100)"`
	}
	sendArgs struct {
		To      string `json:"to" jsonschema:"a descendant's id or name, or \"parent\" to report to your parent"`
		Content string `json:"content" jsonschema:"the message"`
	}
	spawnArgs struct {
		Name      string `json:"name" jsonschema:"a short name for the child"`
		Agent     string `json:"agent,omitempty" jsonschema:"the child's agent type: shelley, pi, claude-code, codex, amp, cursor or custom (default: your own)"`
		Model     string `json:"model,omitempty" jsonschema:"the child's model (default: the agent type's)"`
		Task      string `json:"task" jsonschema:"what the child is to do, self-contained: it does not see your conversation"`
		Workspace string `json:"workspace,omitempty" jsonschema:"shared (default): the child works on your /workspace; fork: on a copy-on-write copy of it, whose changes reach your /workspace only when the user merges them (the child's Changes tab)"`
	}
	waitArgs struct {
		TimeoutSeconds int `json:"timeout_seconds,omitempty" jsonschema:"how long to wait at most, in seconds (default 300, at most 600)"`
	}
	memoryStoreArgs struct {
		Key  string `json:"key" jsonschema:"a short name for the learning; storing the same key again replaces it"`
		Text string `json:"text" jsonschema:"the learning, one fact or practice"`
	}
	memorySearchArgs struct {
		Query string `json:"query" jsonschema:"words to look for in the keys and texts"`
		Limit int    `json:"limit,omitempty" jsonschema:"at most this many (default 20)"`
	}
	memoryListArgs struct {
		Limit int `json:"limit,omitempty" jsonschema:"at most this many, newest first (default 20)"`
	}
	approvalArgs struct {
		Action string `json:"action" jsonschema:"what you want to do, e.g. \"bash: git push origin main\""`
		Detail string `json:"detail,omitempty" jsonschema:"why, and what it touches, for the person who answers"`
		Kind   string `json:"kind,omitempty" jsonschema:"the class of action (bash, network, edit, ...): the person may always allow this kind for you"`
	}
)

// memoriesOut and childrenOut wrap lists: structured content is an object.
type (
	memoriesOut struct {
		Memories []collab.Memory `json:"memories"`
	}
	childrenOut struct {
		Children []Child `json:"children"`
	}
)

func (s *Server) addTools(srv *mcp.Server) {
	tool(s, srv, "list_children", "List your direct child agents: id, name, agent, model, status (idle, thinking, running, done, error), running, finished, done/total leaves of their subtrees, tokens.",
		func(ctx context.Context, c orchestrator.Caller, _ noArgs) (any, error) {
			v, err := s.listChildren(ctx, c)
			if v == nil {
				v = []Child{}
			}
			return childrenOut{v}, err
		})
	tool(s, srv, "read_child_messages", "Read a page of the log of a child or any descendant (its messages, tool calls, commands, commits, status), oldest first. Page with after = next_after.",
		func(ctx context.Context, c orchestrator.Caller, in readArgs) (any, error) {
			return s.readMessages(ctx, c, in.Child, in.After, in.Limit)
		})
	tool(s, srv, "send_message", "Send a message to a descendant (it reads it as from its parent; a stopped one is started again) or to your parent with to=\"parent\" (it reads it as your report).",
		func(ctx context.Context, c orchestrator.Caller, in sendArgs) (any, error) {
			return s.sendMessage(ctx, c, in.To, in.Content)
		})
	tool(s, srv, "spawn", "Start a child agent in its own container on the same /workspace (or, with workspace fork, a copy of it) with a task. Returns its id at once; it works in parallel.",
		func(ctx context.Context, c orchestrator.Caller, in spawnArgs) (any, error) {
			return s.spawn(ctx, c, SpawnRequest(in))
		})
	tool(s, srv, "wait_for_children", "Wait until every direct child is finished (done, error, or exited) or the timeout passes; returns their states.",
		func(ctx context.Context, c orchestrator.Caller, in waitArgs) (any, error) {
			return s.waitForChildren(ctx, c, time.Duration(in.TimeoutSeconds)*time.Second)
		})
	tool(s, srv, "memory_store", "Keep a learning about this repository for later agents of this user (build steps, conventions, pitfalls).",
		func(ctx context.Context, c orchestrator.Caller, in memoryStoreArgs) (any, error) {
			return s.storeMemory(ctx, c, in.Key, in.Text)
		})
	tool(s, srv, "memory_search", "Find kept learnings about this repository by words, best matches first.",
		func(ctx context.Context, c orchestrator.Caller, in memorySearchArgs) (any, error) {
			v, err := s.searchMemories(ctx, c, in.Query, in.Limit)
			return memoriesOut{nonNil(v)}, err
		})
	tool(s, srv, "memory_list", "List the kept learnings about this repository, newest first.",
		func(ctx context.Context, c orchestrator.Caller, in memoryListArgs) (any, error) {
			v, err := s.searchMemories(ctx, c, "", in.Limit)
			return memoriesOut{nonNil(v)}, err
		})
	tool(s, srv, "request_approval", "Ask the person supervising the agents for permission before an action with effects outside your task (network, installs, pushes, files outside /workspace). Waits for the answer: approved or denied.",
		func(ctx context.Context, c orchestrator.Caller, in approvalArgs) (any, error) {
			a, _, err := s.requestApproval(ctx, c, ApprovalRequest{Action: in.Action, Detail: in.Detail, Kind: in.Kind})
			if err != nil {
				return nil, err
			}
			// Bounded by the request's own timeout, which denies it.
			for a.Status == protocol.ApprovalPending {
				if a, err = s.approval(ctx, c, a.ID, s.cfg.MaxPoll); err != nil {
					return nil, err
				}
			}
			return a, nil
		})
	tool(s, srv, "request_push", "Ask the person supervising the agents to push your commits (HEAD of /workspace, as it is now) to a branch of the session's git remote. They see the branch, the commits and your reason; approved, filepath pushes from outside your container (you never hold the credential) and answers the result: the branch, the commit, the remote's message. Waits for the answer.",
		func(ctx context.Context, c orchestrator.Caller, in PushRequest) (any, error) {
			a, err := s.requestPush(ctx, c, in)
			if err != nil {
				return nil, err
			}
			return s.waitShipped(ctx, c, a.ID)
		})
	tool(s, srv, "request_pull_request", "Ask the person supervising the agents to open a pull request (GitHub) or merge request (GitLab) of your pushed branch, with your title and body (say what changed, why, and how you tested it). Approved, filepath opens it with the user's token (or updates the one open for the branch) and answers its URL. Waits for the answer.",
		func(ctx context.Context, c orchestrator.Caller, in PullRequestAsk) (any, error) {
			a, err := s.requestPullRequest(ctx, c, in)
			if err != nil {
				return nil, err
			}
			return s.waitShipped(ctx, c, a.ID)
		})
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// waitShipped waits for the answer to a push or pull-request request id,
// and what filepath did once it was approved. Bounded by the request's own
// timeout, which denies it.
func (s *Server) waitShipped(ctx context.Context, c orchestrator.Caller, id string) (any, error) {
	for {
		p, err := s.pushApproved(ctx, c, id, s.cfg.MaxPoll)
		if err != nil || p.Approval.Status != protocol.ApprovalPending {
			return p, err
		}
	}
}
