package codex

import (
	"encoding/json"
	"testing"

	"github.com/filepath-dev/filepath/adapters/cli/run"
)

func TestClassifyCodexRequests(t *testing.T) {
	c := &conn{d: &Driver{cfg: run.Config{Workspace: "/workspace"}}, changes: map[string][]string{
		"in":  {"/workspace/a.go", "/tmp/x"},
		"out": {"/workspace/a.go", "/etc/motd"},
	}}
	for _, tt := range []struct {
		method, params string
		kind           string // "" : accepted at once
	}{
		{"item/commandExecution/requestApproval", `{"itemId":"1","command":"/bin/bash -lc 'go test ./...'","cwd":"/workspace"}`, ""},
		{"item/commandExecution/requestApproval", `{"itemId":"2","command":"/bin/bash -lc 'npm install left-pad'","cwd":"/workspace"}`, "bash"},
		{"item/commandExecution/requestApproval", `{"itemId":"3","command":"ls","cwd":"/etc"}`, "bash"},
		{"item/commandExecution/requestApproval", `{"itemId":"4","reason":"network access"}`, "bash"},
		{"execCommandApproval", `{"callId":"5","command":["bash","-lc","git push"],"cwd":"/workspace"}`, "bash"},
		{"execCommandApproval", `{"callId":"6","command":["ls","-la"],"cwd":"/workspace"}`, ""},
		{"item/fileChange/requestApproval", `{"itemId":"in"}`, ""},
		{"item/fileChange/requestApproval", `{"itemId":"out"}`, "edit"},
		{"item/fileChange/requestApproval", `{"itemId":"in","grantRoot":"/"}`, "edit"},
		{"item/fileChange/requestApproval", `{"itemId":"unknown"}`, "edit"},
		{"applyPatchApproval", `{"callId":"7","fileChanges":{"/workspace/b.go":{}}}`, ""},
	} {
		ask, ok := c.classify(tt.method, json.RawMessage(tt.params))
		switch {
		case !ok:
			t.Errorf("%s %s: not an approval request", tt.method, tt.params)
		case tt.kind == "" && ask.Request.Action != "":
			t.Errorf("%s %s asks (%+v), want accepted at once", tt.method, tt.params, ask.Request)
		case tt.kind != "" && (ask.Request.Kind != tt.kind || ask.Request.RequestID == "" || ask.Reason == ""):
			t.Errorf("%s %s: %+v, want asked as %s with a request id and a reason", tt.method, tt.params, ask, tt.kind)
		}
	}
	if _, ok := c.classify("item/tool/requestUserInput", nil); ok {
		t.Error("a request that is not an approval was classified")
	}
	if d := decision("execCommandApproval", true); d["decision"] != "approved" {
		t.Errorf("v1 approval: %v", d)
	}
	if d := decision("item/fileChange/requestApproval", false); d["decision"] != "decline" {
		t.Errorf("v2 refusal: %v", d)
	}
}
