package agenttools

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/store/collab"
)

// auditText bounds a text parameter (a message, a memory) in the audit.
const auditText = 500

// audited runs op for c and writes its row to the node's audit (source api):
// the tool's name, its parameters, and summary(result) or the error.
func audited[T any](s *Server, ctx context.Context, c orchestrator.Caller, name string, params any, op func() (T, error), summary func(T) any) (T, error) {
	start := s.clock.Now()
	out, err := op()
	row := audit.NewToolCall{SessionID: c.SessionID, NodeID: c.NodeID, Source: audit.SourceAPI, Name: name,
		StartedAt: start, CompletedAt: s.clock.Now()}
	if params != nil {
		row.Parameters, _ = json.Marshal(params)
	}
	switch {
	case errors.Is(err, context.Canceled):
		row.Error = "canceled: the agent went away"
	case err != nil:
		row.Error = orchestrator.ErrorMessage(err)
	case summary != nil:
		row.Result, _ = json.Marshal(summary(out))
	default:
		row.Result = json.RawMessage(`{"ok":true}`)
	}
	// Written whatever happened to the request: the audit outlives it.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if rerr := s.audit.RecordToolCall(wctx, row); rerr != nil {
		s.log.Warn("write the audit of an agent-API call", "node", c.NodeID, "tool", name, "err", rerr)
	}
	return out, err
}

func (s *Server) listChildren(ctx context.Context, c orchestrator.Caller) ([]Child, error) {
	return audited(s, ctx, c, "list_children", nil, func() ([]Child, error) { return s.ListChildren(ctx, c) },
		func(v []Child) any { return map[string]int{"children": len(v)} })
}

func (s *Server) readMessages(ctx context.Context, c orchestrator.Caller, ref string, after int64, limit int) (RecordPage, error) {
	return audited(s, ctx, c, "read_child_messages", map[string]any{"child": ref, "after": after, "limit": limit},
		func() (RecordPage, error) { return s.ReadMessages(ctx, c, ref, after, limit) },
		func(p RecordPage) any { return map[string]any{"records": len(p.Data), "next_after": p.NextAfter} })
}

func (s *Server) sendMessage(ctx context.Context, c orchestrator.Caller, to, content string) (Sent, error) {
	return audited(s, ctx, c, "send_message", map[string]any{"to": to, "content": cutText(content, auditText)},
		func() (Sent, error) { return s.SendMessage(ctx, c, to, content) },
		func(v Sent) any { return v })
}

func (s *Server) spawn(ctx context.Context, c orchestrator.Caller, in SpawnRequest) (Child, error) {
	p := in
	p.Task = cutText(p.Task, auditText)
	return audited(s, ctx, c, "spawn", p, func() (Child, error) { return s.Spawn(ctx, c, in) },
		func(v Child) any { return map[string]string{"id": v.ID, "name": v.Name, "status": v.Status} })
}

func (s *Server) waitForChildren(ctx context.Context, c orchestrator.Caller, timeout time.Duration) (Waited, error) {
	return audited(s, ctx, c, "wait_for_children", map[string]any{"timeout_seconds": timeout.Seconds()},
		func() (Waited, error) { return s.WaitForChildren(ctx, c, timeout) },
		func(v Waited) any {
			finished := 0
			for _, k := range v.Children {
				if k.Finished {
					finished++
				}
			}
			return map[string]any{"children": len(v.Children), "finished": finished, "timed_out": v.TimedOut}
		})
}

func (s *Server) storeMemory(ctx context.Context, c orchestrator.Caller, key, text string) (collab.Memory, error) {
	return audited(s, ctx, c, "memory_store", map[string]string{"key": key, "text": cutText(text, auditText)},
		func() (collab.Memory, error) { return s.StoreMemory(ctx, c, key, text) },
		func(m collab.Memory) any { return map[string]string{"id": m.ID, "repo": m.Repo} })
}

func (s *Server) searchMemories(ctx context.Context, c orchestrator.Caller, query string, limit int) ([]collab.Memory, error) {
	name := "memory_search"
	if query == "" {
		name = "memory_list"
	}
	return audited(s, ctx, c, name, map[string]any{"query": query, "limit": limit},
		func() ([]collab.Memory, error) { return s.SearchMemories(ctx, c, query, limit) },
		func(v []collab.Memory) any {
			keys := make([]string, len(v))
			for i, m := range v {
				keys[i] = m.Key
			}
			return map[string]any{"memories": len(v), "keys": keys}
		})
}

// created pairs an approval with whether the request made it.
type created struct {
	a   collab.Approval
	new bool
}

func (s *Server) requestApproval(ctx context.Context, c orchestrator.Caller, in ApprovalRequest) (collab.Approval, bool, error) {
	p := in
	p.Detail = cutText(p.Detail, auditText)
	v, err := audited(s, ctx, c, "request_approval", p, func() (created, error) {
		a, isNew, err := s.RequestApproval(ctx, c, in)
		return created{a, isNew}, err
	}, func(v created) any { return map[string]any{"id": v.a.ID, "status": v.a.Status, "created": v.new} })
	return v.a, v.new, err
}

func (s *Server) approval(ctx context.Context, c orchestrator.Caller, id string, wait time.Duration) (collab.Approval, error) {
	return audited(s, ctx, c, "get_approval", map[string]any{"id": id, "wait_seconds": wait.Seconds()},
		func() (collab.Approval, error) { return s.Approval(ctx, c, id, wait) },
		func(a collab.Approval) any { return map[string]string{"status": a.Status, "answered_by": a.AnsweredBy} })
}

func (s *Server) approvalWithdraw(ctx context.Context, c orchestrator.Caller, id string) (collab.Approval, error) {
	return audited(s, ctx, c, "withdraw_approval", map[string]string{"id": id},
		func() (collab.Approval, error) { return s.WithdrawApproval(ctx, c, id) },
		func(a collab.Approval) any { return map[string]string{"status": a.Status, "answered_by": a.AnsweredBy} })
}
