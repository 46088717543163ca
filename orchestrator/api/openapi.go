package api

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"
)

// opDoc documents one route for the OpenAPI document.
type opDoc struct {
	summary string
	status  int      // success status
	req     string   // request body schema name ("" none)
	resp    string   // response schema name ("" none, "text" plain text, "object" any object)
	query   []string // query parameters
}

// RouteDoc documents a route registered through Config.Routes; every such
// route needs one (Config.RouteDocs) or the OpenAPI test fails.
type RouteDoc struct {
	Method  string // e.g. "GET"
	Path    string // below /api/v1, OpenAPI syntax: /sessions/{id}/fs/{path}
	Summary string
	Status  int
}

var paramRE = regexp.MustCompile(`:([a-zA-Z_]+)|\*`)

// openAPIPath turns an Echo path (/sessions/:id, /fs/*) into OpenAPI syntax.
func openAPIPath(p string) string {
	return paramRE.ReplaceAllStringFunc(p, func(m string) string {
		if m == "*" {
			return "{path}"
		}
		return "{" + m[1:] + "}"
	})
}

var queryDocs = map[string]map[string]any{
	"after": {"name": "after", "in": "query", "description": "return records with seq greater than this", "schema": map[string]any{"type": "integer", "minimum": 0}},
	"limit": {"name": "limit", "in": "query", "description": "page size (1..1000, default 100)", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": 1000}},
	"tail":  {"name": "tail", "in": "query", "description": "number of last lines (default 200)", "schema": map[string]any{"type": "integer", "minimum": 1}},
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// openAPI builds the OpenAPI 3.1 document of every /api/v1 route.
func (s *Server) openAPI() map[string]any {
	paths := map[string]any{}
	add := func(method, p string, op map[string]any) {
		item, _ := paths[p].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[p] = item
		}
		item[strings.ToLower(method)] = op
	}
	errResp := map[string]any{"description": "error", "content": map[string]any{"application/json": map[string]any{"schema": ref("Error")}}}
	for _, r := range apiRoutes() {
		p := apiPrefix + openAPIPath(r.path)
		op := map[string]any{"summary": r.doc.summary, "operationId": strings.ToLower(r.method) + strings.NewReplacer("/", "_", "{", "", "}", "", ".", "_").Replace(openAPIPath(r.path))}
		var params []any
		for _, m := range paramRE.FindAllStringSubmatch(r.path, -1) {
			name := m[1]
			if name == "" {
				name = "path"
			}
			params = append(params, map[string]any{"name": name, "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range r.doc.query {
			params = append(params, queryDocs[q])
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if r.doc.req != "" {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": ref(r.doc.req)}}}
		}
		ok := map[string]any{"description": http.StatusText(r.doc.status)}
		switch r.doc.resp {
		case "":
		case "text":
			ok["content"] = map[string]any{"text/plain": map[string]any{"schema": map[string]any{"type": "string"}}}
		case "object":
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}
		default:
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": ref(r.doc.resp)}}
		}
		op["responses"] = map[string]any{itoa(r.doc.status): ok, "default": errResp}
		add(r.method, p, op)
	}
	for _, d := range s.cfg.RouteDocs {
		add(d.Method, apiPrefix+d.Path, map[string]any{
			"summary":   d.Summary,
			"responses": map[string]any{itoa(d.Status): map[string]any{"description": http.StatusText(d.Status)}, "default": errResp},
		})
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "filepath API", "version": "1"},
		"components": map[string]any{
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer"},
				"cookie": map[string]any{"type": "apiKey", "in": "cookie", "name": CookieName},
			},
			"schemas": schemas(),
		},
		"security": []any{map[string]any{"bearer": []any{}}, map[string]any{"cookie": []any{}}},
		"paths":    paths,
	}
}

func (s *Server) getOpenAPI(c echo.Context) error {
	return c.JSON(http.StatusOK, s.openAPI())
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

func obj(required []string, props map[string]any) map[string]any {
	m := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		m["required"] = required
	}
	return m
}

var (
	tStr     = map[string]any{"type": "string"}
	tInt     = map[string]any{"type": "integer"}
	tObj     = map[string]any{"type": "object"}
	tTime    = map[string]any{"type": "string", "format": "date-time"}
	tStrNull = map[string]any{"type": []any{"string", "null"}}
	tNum     = map[string]any{"type": "number"}
	tNumNull = map[string]any{"type": []any{"number", "null"}}
	tIntNull = map[string]any{"type": []any{"integer", "null"}}
	tBool    = map[string]any{"type": "boolean"}
)

func arrayOf(s any) map[string]any { return map[string]any{"type": "array", "items": s} }

func schemas() map[string]any {
	session := obj(nil, map[string]any{
		"id": tStr, "user_id": tStr, "name": tStr, "git_repo_url": tStrNull,
		"status":       map[string]any{"enum": []any{"draft", "running", "paused", "stopped", "error"}},
		"root_node_id": tStrNull, "started_at": map[string]any{"type": []any{"string", "null"}, "format": "date-time"},
		"created_at": tTime, "updated_at": tTime, "node_count": tInt, "last_activity": tTime,
		"budget_tokens": tIntNull, "budget_usd": tNumNull, "tokens_used": tInt, "cost_usd": tNum,
	})
	node := obj(nil, map[string]any{
		"id": tStr, "session_id": tStr, "parent_id": tStrNull, "name": tStr, "agent_type": tStr, "model": tStr, "image": tStr,
		"status":      map[string]any{"enum": []any{"idle", "thinking", "running", "done", "error"}},
		"context_pct": map[string]any{"type": []any{"number", "null"}}, "config": tObj, "container_id": tStr,
		"sort_order": tInt, "tokens": tInt, "cost_usd": tNum, "exit_code": map[string]any{"type": []any{"integer", "null"}},
		"created_at": tTime, "updated_at": tTime, "done": tInt, "total": tInt,
	})
	record := obj([]string{"seq", "kind", "node_id", "at", "data"}, map[string]any{
		"seq": tInt, "kind": map[string]any{"enum": []any{"event", "input", "node", "file", "error"}},
		"node_id": tStr, "at": tTime, "data": tObj,
	})
	out := map[string]any{
		"Error": obj([]string{"error"}, map[string]any{"error": obj([]string{"code", "message"}, map[string]any{"code": tStr, "message": tStr, "field": tStr})}),
		"User":  obj([]string{"id", "name"}, map[string]any{"id": tStr, "name": tStr, "session_id": tStr, "node_id": tStr}),
		"AgentList": arrayOf(obj(nil, map[string]any{
			"type": tStr, "name": tStr, "description": tStr, "icon": tStr, "default_model": tStr, "image": tStr,
		})),
		"ModelList": obj([]string{"providers", "offline"}, map[string]any{
			"providers": arrayOf(obj(nil, map[string]any{
				"name": tStr, "models": arrayOf(obj(nil, map[string]any{
					"id": tStr, "name": tStr, "context_length": tInt, "prompt_price": tNumNull, "completion_price": tNumNull, "tools": tBool,
				})),
			})),
			"offline": tBool, "note": tStr, "fetched_at": map[string]any{"type": []any{"string", "null"}, "format": "date-time"},
		}),
		"Session":     session,
		"SessionList": obj([]string{"data"}, map[string]any{"data": arrayOf(ref("Session"))}),
		"NewSession":  obj([]string{"name"}, map[string]any{"name": tStr, "git_repo_url": tStrNull}),
		"Node":        node,
		"NodeList":    obj([]string{"data"}, map[string]any{"data": arrayOf(ref("Node"))}),
		"NewNode": obj([]string{"agent_type"}, map[string]any{
			"name": tStr, "agent_type": tStr, "model": tStr, "parent_id": tStrNull, "image": tStr, "task": tStr, "config": tObj,
		}),
		"NodePatch":  obj(nil, map[string]any{"name": tStr, "status": tStr, "config": tObj}),
		"NodeMove":   obj([]string{"sort_order"}, map[string]any{"parent_id": tStrNull, "sort_order": tInt}),
		"Record":     record,
		"RecordPage": obj([]string{"data", "next_after"}, map[string]any{"data": arrayOf(ref("Record")), "next_after": tInt}),
		"NewMessage": obj([]string{"content"}, map[string]any{"content": tStr}),
		"NewSignal":  obj([]string{"action"}, map[string]any{"action": map[string]any{"enum": []any{"stop", "pause", "resume"}}}),
	}
	out["SessionPatch"] = obj(nil, map[string]any{"budget_tokens": tIntNull, "budget_usd": tNumNull})
	return out
}
