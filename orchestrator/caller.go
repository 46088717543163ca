package orchestrator

import "context"

// Caller is the agent behind a request on the agent-facing API: the node
// whose token (FILEPATH_API_KEY) authenticated it. The agent-facing server
// (orchestrator/agentapi) sets it; the LLM gateway and the agent tools read it.
type Caller struct {
	UserID    string
	SessionID string
	NodeID    string
}

type callerKey struct{}

// WithCaller returns a context carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller of ctx and whether one was set.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok && c.NodeID != ""
}
