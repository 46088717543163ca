package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	approvals "github.com/filepath-dev/filepath/adapters/internal/approval"
	"github.com/filepath-dev/filepath/protocol"
)

// The orchestrator's tools (GET /api/v1/tools on the agent API: the file
// tiers file_*, the session's key-value store kv_*, and whatever the
// orchestrator adds, such as format tools), offered to the model as they
// are listed, with their own schemas, and run by POST /api/v1/tools/{name}.
// A read-only persona (pi) gets only the read-only ones.

// Bounds of the server's tools.
const (
	maxServerTools  = 128
	maxServerResult = 512 << 10 // what the model reads of one answer
	toolsListWait   = 10 * time.Second
)

// serverToolInfo is a tool as GET /api/v1/tools lists it.
type serverToolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	ReadOnly    bool            `json:"read_only"`
	InputSchema json.RawMessage `json:"input_schema"`
}

var serverToolName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// addServerTools offers the orchestrator's tools (the read-only ones when
// readOnly) after the agent's own, skipping a name the agent has. Without
// an agent API, or one that lists none, the agent works with its own.
func (t *toolbox) addServerTools(ctx context.Context, readOnly bool) {
	if t.api == nil || t.api.key == "" || strings.HasPrefix(t.api.base, "/") {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, toolsListWait)
	defer cancel()
	var page struct {
		Data []serverToolInfo `json:"data"`
	}
	if err := t.api.get(ctx, "/tools", nil, &page); err != nil {
		if !errors.Is(err, approvals.ErrNotServed) {
			t.log.Warn("the orchestrator's tools are not available", "err", err)
		}
		return
	}
	added := 0
	for _, info := range page.Data {
		var schema struct {
			Type string `json:"type"`
		}
		switch {
		case added == maxServerTools:
			t.log.Warn("the orchestrator lists more tools than an agent takes", "max", maxServerTools)
			return
		case readOnly && !info.ReadOnly, !serverToolName.MatchString(info.Name):
			continue
		case json.Unmarshal(info.InputSchema, &schema) != nil || schema.Type != "object":
			t.log.Warn("an orchestrator tool without an object schema", "tool", info.Name)
			continue
		}
		if _, mine := t.tools[info.Name]; mine {
			continue
		}
		t.tools[info.Name] = serverTool(info)
		t.names = append(t.names, info.Name)
		added++
	}
}

// serverTool runs info's tool through the agent API, between tool start
// and done (or error) events; the event shows the file or key it is about.
func serverTool(info serverToolInfo) tool {
	name := info.Name
	return tool{
		spec: functionSpec{Name: name, Description: info.Description, Parameters: info.InputSchema},
		run: func(ctx context.Context, t *toolbox, args json.RawMessage) string {
			subject := subjectOf(args)
			t.out.tool(name, subject, protocol.StepStart, "")
			var out json.RawMessage
			if err := t.api.call(ctx, http.MethodPost, "/tools/"+name, args, &out); err != nil {
				msg := "error: " + apiMessage(err)
				t.out.tool(name, subject, protocol.StepError, msg)
				return msg
			}
			if !info.ReadOnly && subject != "" && strings.HasPrefix(name, "file_") && !slices.Contains(t.changed, subject) {
				t.changed = append(t.changed, subject)
			}
			t.out.tool(name, subject, protocol.StepDone, cut(string(out), maxToolOutput))
			return cut(string(out), maxServerResult)
		},
	}
}

// subjectOf is what a call is about, for its event: the file (id, name) or
// the key or URL its arguments name.
func subjectOf(args json.RawMessage) string {
	var a map[string]any
	if json.Unmarshal(args, &a) != nil {
		return ""
	}
	for _, k := range []string{"id", "name", "key", "url"} {
		if s, ok := a[k].(string); ok && s != "" {
			return strings.TrimPrefix(strings.TrimPrefix(s, "/workspace"), "/")
		}
	}
	return ""
}
