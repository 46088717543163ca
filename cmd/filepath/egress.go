package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/agenttools"
	"github.com/filepath-dev/filepath/orchestrator/egress"
	"github.com/filepath-dev/filepath/orchestrator/store/audit"
)

// lazyPolicy is the agent tools' network policy, read when a connection
// needs it: the proxy is built before the tools (which need the runner,
// which needs the agent-facing API that serves the proxy), and no agent
// connects before both exist.
type lazyPolicy struct{ tools **agenttools.Server }

func (p lazyPolicy) Node(ctx context.Context, c orchestrator.Caller, host string) (string, error) {
	return (*p.tools).Network().Node(ctx, c, host)
}

func (p lazyPolicy) Ask(ctx context.Context, c orchestrator.Caller, host string, port int) (egress.Decision, error) {
	return (*p.tools).Network().Ask(ctx, c, host, port)
}

// auditEgress records each connection of the egress proxy in its node's
// audit (source network), shown in the Audit tab.
func auditEgress(a *audit.Store, log *slog.Logger) func(context.Context, egress.Connection) {
	return func(ctx context.Context, c egress.Connection) {
		params, _ := json.Marshal(map[string]any{"method": c.Method, "host": c.Host, "port": c.Port})
		var result json.RawMessage
		if c.Error == "" {
			result, _ = json.Marshal(map[string]any{"address": c.Addr, "allowed_by": c.By, "bytes_out": c.BytesOut, "bytes_in": c.BytesIn})
		}
		err := a.RecordToolCall(ctx, audit.NewToolCall{SessionID: c.Caller.SessionID, NodeID: c.Caller.NodeID, Source: audit.SourceNetwork,
			Name: c.Host + ":" + strconv.Itoa(c.Port), Parameters: params, Result: result, Error: c.Error, StartedAt: c.Start, CompletedAt: c.End})
		if err != nil {
			log.Warn("audit an egress connection", "node", c.Caller.NodeID, "host", c.Host, "err", err)
		}
	}
}
