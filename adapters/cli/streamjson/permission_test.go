package streamjson

import (
	"encoding/json"
	"testing"
)

func TestClassifyClaude(t *testing.T) {
	for _, tt := range []struct {
		tool  string
		input string
		kind  string // "" : allowed without asking
	}{
		{"Bash", `{"command":"go test ./..."}`, ""},
		{"Bash", `{"command":"git push origin main"}`, "bash"},
		{"Bash", `{"command":"curl https://example.com"}`, "bash"},
		{"Edit", `{"file_path":"/workspace/a.go"}`, ""},
		{"Write", `{"file_path":"notes/x.md"}`, ""},
		{"Write", `{"file_path":"/tmp/x"}`, ""},
		{"Write", `{"file_path":"/etc/motd"}`, "edit"},
		{"Edit", `{"file_path":"/workspace/../etc/passwd"}`, "edit"},
		{"MultiEdit", `{"file_path":"/usr/bin/x"}`, "edit"},
		{"NotebookEdit", `{"notebook_path":"/home/agent/n.ipynb"}`, "edit"},
		{"WebFetch", `{"url":"https://example.com","prompt":"summarise"}`, "network"},
		{"WebSearch", `{"query":"go 1.23"}`, "network"},
		{"Read", `{"file_path":"/etc/hosts"}`, ""},
		{"mcp__filepath__list_children", `{}`, ""},
		{"mcp__other__deploy", `{"env":"prod"}`, "mcp__other__deploy"},
	} {
		var in map[string]any
		if err := json.Unmarshal([]byte(tt.input), &in); err != nil {
			t.Fatal(err)
		}
		ask := ClassifyClaude(tt.tool, in, "/workspace")
		switch {
		case tt.kind == "" && ask != nil:
			t.Errorf("%s %s asks (%+v), want allowed at once", tt.tool, tt.input, ask.Request)
		case tt.kind != "" && ask == nil:
			t.Errorf("%s %s allowed at once, want asked as %s", tt.tool, tt.input, tt.kind)
		case ask != nil && (ask.Request.Kind != tt.kind || ask.Reason == "" || ask.Request.Action == ""):
			t.Errorf("%s %s: %+v, want kind %s with an action and a reason", tt.tool, tt.input, ask, tt.kind)
		}
	}
}

func TestPermissionAnswerShape(t *testing.T) {
	var allow, deny map[string]any
	json.Unmarshal(permissionAnswer("r1", true, map[string]any{"command": "ls"}, ""), &allow)
	json.Unmarshal(permissionAnswer("r2", false, nil, "no"), &deny)
	ar := allow["response"].(map[string]any)
	if allow["type"] != "control_response" || ar["subtype"] != "success" || ar["request_id"] != "r1" {
		t.Fatalf("allow: %v", allow)
	}
	if r := ar["response"].(map[string]any); r["behavior"] != "allow" || r["updatedInput"].(map[string]any)["command"] != "ls" {
		t.Errorf("allow: %v", r)
	}
	if r := deny["response"].(map[string]any)["response"].(map[string]any); r["behavior"] != "deny" || r["message"] != "no" {
		t.Errorf("deny: %v", r)
	}
}
