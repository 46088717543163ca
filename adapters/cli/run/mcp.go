package run

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/filepath-dev/filepath/adapters/internal/approval"
)

// filepath's agent tools (docs/protocol.md, "The agent API") are an MCP
// server at $FILEPATH_API_URL/mcp (Streamable HTTP, the node's token as a
// bearer token). Each CLI is given it in its own configuration format,
// written by the adapter at every start from the container's environment.

// MCPServerName is the name the CLIs know filepath's MCP server by: its
// tools are mcp__filepath__list_children and so on in Claude Code.
const MCPServerName = "filepath"

// MCPToolTimeoutMS is the tool call timeout the CLIs are given for
// filepath's tools, in milliseconds: wait_for_children waits up to 10
// minutes, request_approval until a person answers or its timeout (10
// minutes by default) denies.
const MCPToolTimeoutMS = "660000"

// MCPURL is filepath's MCP endpoint, "" without FILEPATH_API_URL or
// FILEPATH_API_KEY (then the CLI gets no filepath MCP server).
func (c Config) MCPURL() string {
	if c.APIURL == "" || c.APIKey == "" {
		return ""
	}
	return strings.TrimSuffix(c.APIURL, "/") + "/mcp"
}

// ClaudeMCPConfig is Claude Code's --mcp-config file: {"mcpServers":
// {"filepath": {"type": "http", "url", "headers"}}}.
func ClaudeMCPConfig(c Config) ([]byte, error) {
	return json.MarshalIndent(map[string]any{"mcpServers": map[string]any{MCPServerName: map[string]any{
		"type": "http", "url": c.MCPURL(), "headers": map[string]string{"Authorization": "Bearer " + c.APIKey},
	}}}, "", "  ")
}

// AmpMCPConfig is Amp's --mcp-config: the servers by name, a remote one
// with its url and headers (the shape of Amp's amp.mcpServers setting).
func AmpMCPConfig(c Config) ([]byte, error) {
	return json.MarshalIndent(map[string]any{MCPServerName: map[string]any{
		"url": c.MCPURL(), "headers": map[string]string{"Authorization": "Bearer " + c.APIKey},
	}}, "", "  ")
}

// CursorMCPConfig is Cursor's ~/.cursor/mcp.json: {"mcpServers":
// {"filepath": {"url", "headers"}}}.
func CursorMCPConfig(c Config) ([]byte, error) {
	return json.MarshalIndent(map[string]any{"mcpServers": map[string]any{MCPServerName: map[string]any{
		"url": c.MCPURL(), "headers": map[string]string{"Authorization": "Bearer " + c.APIKey},
	}}}, "", "  ")
}

// WriteMCPConfig writes the MCP configuration make builds to path (mode
// 0600: it holds the node's token) and returns path, or "" (and writes
// nothing) when the container has no agent API.
func WriteMCPConfig(c Config, path string, make func(Config) ([]byte, error)) (string, error) {
	if c.MCPURL() == "" {
		return "", nil
	}
	b, err := make(c)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("MCP config: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("MCP config: %w", err)
	}
	return path, nil
}

// ApprovalClient asks the agent API's approvals inbox for the permissions
// a CLI asks for (nil without FILEPATH_API_URL: every such request is
// refused, nobody being there to ask).
func ApprovalClient(c Config) *approval.Client {
	if c.APIURL == "" {
		return nil
	}
	return &approval.Client{URL: c.APIURL, Token: c.APIKey}
}
