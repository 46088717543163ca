package api

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/protocol"
)

// opDoc documents one route for the OpenAPI document.
type opDoc struct {
	summary string
	status  int      // success status
	req     string   // request body schema name ("" none)
	reqRaw  bool     // the body may also be raw bytes (application/octet-stream)
	resp    string   // response schema name ("" none, "text" plain text, "object" any object)
	respRaw bool     // the answer may also be raw bytes (application/octet-stream)
	query   []string // query parameters
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
	"after":     {"name": "after", "in": "query", "description": "return records with seq greater than this", "schema": map[string]any{"type": "integer", "minimum": 0}},
	"limit":     {"name": "limit", "in": "query", "description": "page size (1..1000, default 100)", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": 1000}},
	"tail":      {"name": "tail", "in": "query", "description": "number of last lines (default 200)", "schema": map[string]any{"type": "integer", "minimum": 1}},
	"recursive": {"name": "recursive", "in": "query", "description": "delete a directory with everything in it", "schema": map[string]any{"type": "boolean"}},
	"all":       {"name": "all", "in": "query", "description": "true: end every browser session of the user", "schema": map[string]any{"type": "boolean"}},
	"status":    {"name": "status", "in": "query", "description": "pending, approved or denied (default: all)", "schema": map[string]any{"enum": []any{"pending", "approved", "denied"}}},
	"before":    {"name": "before", "in": "query", "description": "return rows with an id below this (next_before of the previous page)", "schema": map[string]any{"type": "integer", "minimum": 0}},
	"repo":      {"name": "repo", "in": "query", "description": "a repository's git URL (any form; normalised), or empty for sessions without one", "schema": map[string]any{"type": "string"}},
	"q":         {"name": "q", "in": "query", "description": "words to search for in keys and texts", "schema": map[string]any{"type": "string"}},
	"download":  {"name": "download", "in": "query", "description": "true: answer the raw bytes as an attachment", "schema": map[string]any{"type": "boolean"}},
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
	for _, r := range s.routeList() {
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
			content := map[string]any{"application/json": map[string]any{"schema": ref(r.doc.req)}}
			if r.doc.reqRaw {
				content[echo.MIMEOctetStream] = map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}
			}
			op["requestBody"] = map[string]any{"required": true, "content": content}
		}
		ok := map[string]any{"description": http.StatusText(r.doc.status)}
		switch r.doc.resp {
		case "":
		case "text":
			ok["content"] = map[string]any{"text/plain": map[string]any{"schema": map[string]any{"type": "string"}}}
		case "object":
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}
		default:
			content := map[string]any{"application/json": map[string]any{"schema": ref(r.doc.resp)}}
			if r.doc.respRaw {
				content[echo.MIMEOctetStream] = map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}
			}
			ok["content"] = content
		}
		op["responses"] = map[string]any{itoa(r.doc.status): ok, "default": errResp}
		add(r.method, p, op)
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

// schemas returns the component schemas. Records, nodes and sessions (with
// the events and inputs a record carries) come from protocol's generated JSON
// Schema, the one definition the UI's types are generated from too.
func schemas() map[string]any {
	m, err := protocol.SchemaComponents("#/components/schemas/")
	if err != nil { // the committed schemas are broken: protocol's tests fail too
		panic("openapi: protocol schemas: " + err.Error())
	}
	for name, sch := range handSchemas() {
		if m[name] != nil {
			panic("openapi: schema " + name + " is defined twice")
		}
		m[name] = sch
	}
	return m
}

func handSchemas() map[string]any {
	fileProps := func(content bool) map[string]any {
		m := map[string]any{
			"session_id": tStr, "path": tStr, "name": tStr, "is_directory": tBool, "is_symlink": tBool,
			"type": map[string]any{"enum": []any{"file", "directory", "symlink", "fifo", "socket", "char-device", "block-device"},
				"description": "what the entry is; only a file has content (a special file, made through a mount, is refused with 409 when read or written)"},
			"device":      map[string]any{"type": "string", "description": "a device's number, major:minor"},
			"target":      map[string]any{"type": "string", "description": "a symlink's target"},
			"is_readonly": tBool, "size_bytes": tInt, "mode": tInt,
			"hash":       map[string]any{"type": "string", "description": "sha256 of a file's content, also its ETag"},
			"created_at": tTime, "updated_at": tTime,
		}
		if content {
			m["content"] = tStr
			m["encoding"] = map[string]any{"enum": []any{"text", "base64"}}
		}
		return m
	}
	fileInfo := []string{"path", "name", "is_directory", "type", "is_readonly", "size_bytes", "mode", "created_at", "updated_at"}
	grepMatch := obj([]string{"path", "line_number", "line"}, map[string]any{"path": tStr, "line_number": tInt, "line": tStr})
	audit := obj([]string{"id", "name", "started_at", "completed_at", "duration_ms"}, map[string]any{
		"id": tInt, "name": tStr, "parameters": tObj, "result": tObj, "error": tStr,
		"started_at": tTime, "completed_at": tTime, "duration_ms": tInt,
	})
	changeOp := map[string]any{"enum": []any{"added", "changed", "deleted"}}
	forkInfo := obj([]string{"id", "base", "origin", "session_id", "created_at"}, map[string]any{
		"id": tStr, "base": tStr, "origin": tStr, "session_id": tStr, "node_id": tStr, "created_at": tTime,
	})
	fileChange := obj([]string{"path", "op", "kind", "old_size", "new_size"}, map[string]any{
		"path": tStr, "op": changeOp, "kind": map[string]any{"enum": []any{"file", "dir", "symlink", "fifo", "socket", "char-device", "block-device"}},
		"old_size": tInt, "new_size": tInt, "binary": tBool,
		"diff":         map[string]any{"type": "string", "description": "unified diff of a text file"},
		"text_omitted": map[string]any{"type": "boolean", "description": "a text file listed without its diff: the answer's diffs reached 4 MiB"},
		"links":        map[string]any{"type": "array", "items": tStr, "description": "the other paths of the same file (hard links), when this added or changed path is one of several names; merged, they stay one file"},
	})
	return map[string]any{
		"FileInfo":    obj(fileInfo, fileProps(false)),
		"FileContent": obj(fileInfo, fileProps(true)),
		"FileList":    obj([]string{"data"}, map[string]any{"data": arrayOf(obj(fileInfo, fileProps(false)))}),
		"FileOrList":  map[string]any{"oneOf": []any{ref("FileContent"), ref("FileList")}},
		"FileWrite": obj(nil, map[string]any{
			"content":      map[string]any{"type": "string", "description": "the file's content; absent in a PUT that only sets is_readonly"},
			"encoding":     map[string]any{"enum": []any{"text", "base64"}, "description": "of content (default text)"},
			"is_readonly":  tBool,
			"is_directory": map[string]any{"type": "boolean", "description": "POST only: create a directory"},
		}),
		"FilePath":     obj([]string{"path"}, map[string]any{"path": tStr}),
		"FileTransfer": obj([]string{"src_path", "dst_path"}, map[string]any{"src_path": tStr, "dst_path": tStr}),
		"GrepRequest": obj([]string{"pattern"}, map[string]any{
			"pattern":      map[string]any{"type": "string", "description": "a regular expression (RE2)"},
			"path_pattern": map[string]any{"type": "string", "description": "a glob matched against the base name and the full path"},
		}),
		"GrepResult": obj([]string{"data", "truncated"}, map[string]any{
			"data":      arrayOf(obj([]string{"path", "matches"}, map[string]any{"path": tStr, "matches": arrayOf(grepMatch)})),
			"truncated": tBool,
		}),
		"AuditList": obj([]string{"data"}, map[string]any{"data": arrayOf(audit)}),
		"Error":     obj([]string{"error"}, map[string]any{"error": obj([]string{"code", "message"}, map[string]any{"code": tStr, "message": tStr, "field": tStr})}),
		"User":      obj([]string{"id", "name"}, map[string]any{"id": tStr, "name": tStr, "session_id": tStr, "node_id": tStr}),
		"AgentList": arrayOf(obj(nil, map[string]any{
			"type": tStr, "name": tStr, "description": tStr, "icon": tStr, "default_model": tStr, "image": tStr, "provider": tStr,
			"vendor_key": map[string]any{"type": "string", "description": "the session secret this agent needs (its usage is not metered by filepath)"},
		})),
		"ModelList": obj([]string{"providers", "offline"}, map[string]any{
			"providers": arrayOf(obj(nil, map[string]any{
				"name": tStr, "models": arrayOf(obj(nil, map[string]any{
					"id": tStr, "name": tStr, "context_length": tInt, "prompt_price": tNumNull, "completion_price": tNumNull, "tools": tBool,
				})),
			})),
			"offline": tBool, "note": tStr, "fetched_at": map[string]any{"type": []any{"string", "null"}, "format": "date-time"},
		}),
		"Secret":      obj([]string{"name", "created_at", "updated_at"}, map[string]any{"name": tStr, "created_at": tTime, "updated_at": tTime}),
		"SecretList":  obj([]string{"data"}, map[string]any{"data": arrayOf(ref("Secret"))}),
		"SecretValue": obj([]string{"value"}, map[string]any{"value": map[string]any{"type": "string", "description": "the key; write-only: never answered"}}),
		"SessionList": obj([]string{"data"}, map[string]any{"data": arrayOf(ref("Session"))}),
		"NewSession":  obj([]string{"name"}, map[string]any{"name": tStr, "git_repo_url": tStrNull, "checks": arrayOf(ref("Check"))}),
		"SessionPatch": obj(nil, map[string]any{"checks": map[string]any{"type": []any{"array", "null"}, "items": ref("Check"),
			"description": "replaces the session's health checks; [] or null: detect them from the repository"},
			"budget_tokens": tIntNull, "budget_usd": tNumNull}),
		"NodeList": obj([]string{"data"}, map[string]any{"data": arrayOf(ref("Node"))}),
		"NewNode": obj([]string{"agent_type"}, map[string]any{
			"name": tStr, "agent_type": tStr, "model": tStr, "parent_id": tStrNull, "image": tStr, "task": tStr, "config": tObj,
			"workspace": map[string]any{"enum": []any{"shared", "fork"}, "description": "fork: the child works on a copy-on-write fork of its parent's workspace (needs parent_id)"},
		}),
		"ForkDiff": obj([]string{"fork", "changes"}, map[string]any{"fork": forkInfo, "changes": arrayOf(fileChange)}),
		"MergeResult": obj([]string{"fork", "applied", "conflicts"}, map[string]any{
			"fork": forkInfo, "applied": arrayOf(fileChange),
			"conflicts": arrayOf(obj([]string{"path", "fork", "parent"}, map[string]any{"path": tStr, "fork": changeOp, "parent": changeOp})),
		}),
		"NodePatch":  obj(nil, map[string]any{"name": tStr, "status": tStr, "config": tObj}),
		"NodeMove":   obj([]string{"sort_order"}, map[string]any{"parent_id": tStrNull, "sort_order": tInt}),
		"RecordPage": obj([]string{"data", "next_after"}, map[string]any{"data": arrayOf(ref("Record")), "next_after": tInt}),
		"NewMessage": obj([]string{"content"}, map[string]any{"content": tStr}),
		"NewSignal":  obj([]string{"action"}, map[string]any{"action": map[string]any{"enum": []any{"stop", "pause", "resume"}}}),
		"ApprovalRequest": obj([]string{"id", "session_id", "node_id", "node_name", "action", "detail", "kind", "status", "created_at", "expires_at", "answered_at"}, map[string]any{
			"id": tStr, "session_id": tStr, "node_id": tStr, "node_name": tStr, "request_id": tStr,
			"action": tStr, "detail": tStr, "kind": tStr, "status": map[string]any{"enum": []any{"pending", "approved", "denied"}},
			"answered_by": map[string]any{"type": "string", "description": "the user's name, timeout or policy"},
			"always":      tBool, "created_at": tTime, "expires_at": tTime, "answered_at": map[string]any{"type": []any{"string", "null"}, "format": "date-time"},
		}),
		"ApprovalList":   obj([]string{"data"}, map[string]any{"data": arrayOf(ref("ApprovalRequest"))}),
		"ApprovalAnswer": obj([]string{"decision"}, map[string]any{"decision": map[string]any{"enum": []any{"approve", "deny", "always"}}}),
		"StoredMemory": obj([]string{"id", "repo", "key", "text", "created_at", "updated_at"}, map[string]any{
			"id": tStr, "repo": tStr, "key": tStr, "text": tStr, "session_id": tStr, "node_id": tStr,
			"created_at": tTime, "updated_at": tTime, "score": tInt,
		}),
		"MemoryList": obj([]string{"data"}, map[string]any{"data": arrayOf(ref("StoredMemory"))}),
		"AuditPage": obj([]string{"data", "next_before"}, map[string]any{"next_before": tInt, "data": arrayOf(obj(
			[]string{"id", "node_id", "source", "name", "started_at", "completed_at", "duration_ms"}, map[string]any{
				"id": tInt, "node_id": tStr, "source": map[string]any{"enum": []any{"tool", "command", "api"}}, "name": tStr,
				"parameters": tObj, "result": tObj, "error": tStr, "started_at": tTime, "completed_at": tTime, "duration_ms": tInt, "seq": tInt,
			}))}),
	}
}
