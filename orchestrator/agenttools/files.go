package agenttools

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/files"
)

// The file tools (orchestrator/files: files.md's file_* tools, raw bytes,
// file_download, the session's kv_*) for the caller's node, within its
// workspace (its fork, if it has one) and its allowed paths: REST (the
// registry by name, and plain routes for a file's bytes and the key-value
// store) and one MCP tool each. The service audits every call in the
// node's audit.

// fileCaller is the caller's node as the file tools see it.
func (s *Server) fileCaller(ctx context.Context, c orchestrator.Caller) (files.Caller, error) {
	if s.cfg.Files == nil {
		return files.Caller{}, orchestrator.Errorf(orchestrator.EUnavailable, "this server has no file tools")
	}
	n, err := s.sessions.NodeByID(ctx, c.NodeID)
	if err != nil {
		return files.Caller{}, err
	}
	fs, err := s.cfg.Files.NodeFS(ctx, c.SessionID, c.NodeID, n.Config)
	if err != nil {
		return files.Caller{}, err
	}
	return files.Caller{SessionID: c.SessionID, NodeID: c.NodeID, FS: fs}, nil
}

// callFileTool runs file tool name with args for c.
func (s *Server) callFileTool(ctx context.Context, c orchestrator.Caller, name string, args json.RawMessage) (any, error) {
	fc, err := s.fileCaller(ctx, c)
	if err != nil {
		return nil, err
	}
	return s.cfg.Files.Call(ctx, fc, name, args)
}

// fileRoutes adds the file tools' REST routes to handle's mux.
func (s *Server) fileRoutes(handle func(pattern string, h func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error))) {
	if s.cfg.Files == nil {
		return
	}
	handle("GET /api/v1/tools", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		return http.StatusOK, list(s.cfg.Files.ToolInfos()), nil
	})
	handle("POST /api/v1/tools/{name}", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		args, err := io.ReadAll(r.Body)
		if err != nil {
			return 0, nil, err
		}
		out, err := s.callFileTool(r.Context(), c, r.PathValue("name"), args)
		if h := files.CurrentHash(err); h != "" {
			w.Header().Set("ETag", `"`+h+`"`)
		}
		return http.StatusOK, out, err
	})
	// A file's bytes, raw: Range, If-Range, ?download=inline.
	handle("GET /api/v1/files/{path...}", func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		fc, err := s.fileCaller(r.Context(), c)
		if err != nil {
			return 0, nil, err
		}
		p, err := files.CleanID("path", r.PathValue("path"))
		if err != nil {
			return 0, nil, err
		}
		disp := "attachment"
		if r.URL.Query().Get("download") == "inline" {
			disp = "inline"
		}
		if err := s.cfg.Files.Serve(w, r, fc, p, disp); err != nil {
			return 0, nil, err
		}
		return 0, nil, nil // answered
	})
	kv := func(name string, args func(r *http.Request) (any, error)) func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
		return func(w http.ResponseWriter, r *http.Request, c orchestrator.Caller) (int, any, error) {
			a, err := args(r)
			if err != nil {
				return 0, nil, err
			}
			raw, _ := json.Marshal(a)
			out, err := s.cfg.Files.Call(r.Context(), files.Caller{SessionID: c.SessionID, NodeID: c.NodeID}, name, raw)
			return http.StatusOK, out, err
		}
	}
	key := func(r *http.Request) files.KVKeyArgs { return files.KVKeyArgs{Key: r.PathValue("key")} }
	handle("GET /api/v1/kv", kv("kv_list", func(r *http.Request) (any, error) {
		return files.KVListArgs{Prefix: r.URL.Query().Get("prefix")}, nil
	}))
	handle("GET /api/v1/kv/{key...}", kv("kv_get", func(r *http.Request) (any, error) { return key(r), nil }))
	handle("DELETE /api/v1/kv/{key...}", kv("kv_delete", func(r *http.Request) (any, error) { return key(r), nil }))
	handle("PUT /api/v1/kv/{key...}", kv("kv_set", func(r *http.Request) (any, error) {
		var in struct {
			Value json.RawMessage `json:"value"`
		}
		if err := decode(r.Body, &in); err != nil {
			return nil, err
		}
		return files.KVSetArgs{Key: r.PathValue("key"), Value: in.Value}, nil
	}))
}

// addFileTools adds every file tool to the MCP server: its schema is the
// registry's, its answer the tool's JSON.
func (s *Server) addFileTools(srv *mcp.Server) {
	if s.cfg.Files == nil {
		return
	}
	for _, t := range s.cfg.Files.Tools() {
		name := t.Name
		tool := &mcp.Tool{Name: name, Description: t.Description, InputSchema: t.Schema(),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: t.ReadOnly}}
		srv.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			c, err := mcpCaller(req)
			if err != nil {
				return nil, err
			}
			out, err := s.callFileTool(ctx, c, name, req.Params.Arguments)
			res := &mcp.CallToolResult{}
			if err != nil {
				res.SetError(toolError{err})
				return res, nil
			}
			b, err := json.Marshal(out)
			if err != nil {
				return nil, err
			}
			res.Content = []mcp.Content{&mcp.TextContent{Text: string(b)}}
			res.StructuredContent = json.RawMessage(b)
			return res, nil
		})
	}
}

// fileInstructions adds the file tools to the MCP server's instructions.
func (s *Server) fileInstructions() string {
	if s.cfg.Files == nil {
		return ""
	}
	var names []string
	for _, t := range s.cfg.Files.Tools() {
		names = append(names, t.Name)
	}
	return "\nFile tools work on /workspace by path (id: the path, e.g. /notes/a.md) within your allowed paths: " +
		strings.Join(names, ", ") + ". Read a text file with file_read_text, then edit it with file_replace_lines, " +
		"file_insert_lines or file_delete_lines passing the hash it gave as if_match: an edit never overwrites a change you did not see. " +
		"kv_* keep JSON values shared by the session's agents."
}
