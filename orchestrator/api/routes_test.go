package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// ownerCall says how to call a route as its owner and what to expect.
type ownerCall struct {
	body   string // ROOT is replaced by the root node id; :node is a child of it
	star   string // what the path's * becomes (default src/a.txt, a file every session has)
	status int
}

// ownerCalls lists every /api route. A route registered without an entry
// here fails TestAuthorizationEveryRoute.
var ownerCalls = map[string]ownerCall{
	"GET /api/v1/me":                                 {status: 200},
	"POST /api/v1/logout":                            {status: 400}, // an API key is not a browser session
	"GET /api/v1/agents":                             {status: 200},
	"GET /api/v1/models":                             {status: 200},
	"GET /api/v1/openapi.json":                       {status: 200},
	"POST /api/v1/sessions":                          {body: `{"name":"n"}`, status: 201},
	"GET /api/v1/sessions":                           {status: 200},
	"GET /api/v1/sessions/:id":                       {status: 200},
	"PATCH /api/v1/sessions/:id":                     {body: `{"checks":[{"command":"make"}],"budget_tokens":1000}`, status: 200},
	"DELETE /api/v1/sessions/:id":                    {status: 204},
	"POST /api/v1/sessions/:id/start":                {status: 503}, // no runner configured
	"POST /api/v1/sessions/:id/stop":                 {status: 503},
	"GET /api/v1/sessions/:id/tree":                  {status: 200},
	"GET /api/v1/sessions/:id/stream":                {status: 400}, // not an upgrade request
	"POST /api/v1/sessions/:id/nodes":                {body: `{"agent_type":"shelley","parent_id":"ROOT"}`, status: 201},
	"PATCH /api/v1/sessions/:id/nodes/:node":         {body: `{"name":"renamed"}`, status: 200},
	"DELETE /api/v1/sessions/:id/nodes/:node":        {status: 204},
	"POST /api/v1/sessions/:id/nodes/:node/move":     {body: `{"parent_id":"ROOT","sort_order":1}`, status: 200},
	"GET /api/v1/sessions/:id/nodes/:node/messages":  {status: 200},
	"POST /api/v1/sessions/:id/nodes/:node/messages": {body: `{"content":"hi"}`, status: 202},
	"POST /api/v1/sessions/:id/nodes/:node/signal":   {body: `{"action":"pause"}`, status: 202},
	"GET /api/v1/sessions/:id/nodes/:node/logs":      {status: 200},

	"GET /api/v1/sessions/:id/fs":         {status: 200},
	"GET /api/v1/sessions/:id/fs/":        {status: 200},
	"GET /api/v1/sessions/:id/fs/*":       {status: 200},
	"HEAD /api/v1/sessions/:id/fs":        {status: 200},
	"HEAD /api/v1/sessions/:id/fs/":       {status: 200},
	"HEAD /api/v1/sessions/:id/fs/*":      {status: 200},
	"POST /api/v1/sessions/:id/fs":        {body: `{"content":"x"}`, status: 422}, // a path below / is required
	"POST /api/v1/sessions/:id/fs/":       {body: `{"content":"x"}`, status: 422},
	"POST /api/v1/sessions/:id/fs/*":      {body: `{"content":"x"}`, star: "src/new.txt", status: 201},
	"PUT /api/v1/sessions/:id/fs":         {body: `{"content":"x"}`, status: 422},
	"PUT /api/v1/sessions/:id/fs/":        {body: `{"content":"x"}`, status: 422},
	"PUT /api/v1/sessions/:id/fs/*":       {body: `{"content":"y"}`, status: 200},
	"DELETE /api/v1/sessions/:id/fs":      {status: 403}, // the root cannot be deleted
	"DELETE /api/v1/sessions/:id/fs/":     {status: 403},
	"DELETE /api/v1/sessions/:id/fs/*":    {status: 204},
	"POST /api/v1/sessions/:id/fs/_/stat": {body: `{"path":"/src/a.txt"}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/move": {body: `{"src_path":"/src/a.txt","dst_path":"/src/b.txt"}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/copy": {body: `{"src_path":"/src/a.txt","dst_path":"/src/b.txt"}`, status: 201},
	"POST /api/v1/sessions/:id/fs/_/grep": {body: `{"pattern":"hello"}`, status: 200},
	"GET /api/v1/sessions/:id/fs/_/audit": {status: 200},

	// orchestrator/files: the tiers, uploads, the key-value store, the audit, the cache
	"POST /api/v1/sessions/:id/fs/_/upload":        {body: `{}`, status: 400}, // not multipart (TestUpload* upload real files)
	"POST /api/v1/sessions/:id/fs/_/list":          {body: `{"pattern":"**/*.txt"}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/info":          {body: `{"id":"/src/a.txt"}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/read_text":     {body: `{"id":"/src/a.txt","start_line":1}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/write_text":    {body: `{"id":"/src/a.txt","content":"x\n"}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/replace_lines": {body: `{"id":"/src/a.txt","start_line":1,"end_line":1,"content":"hi"}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/insert_lines":  {body: `{"id":"/src/a.txt","after_line":1,"content":"more"}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/delete_lines":  {body: `{"id":"/src/a.txt","start_line":1,"end_line":1}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/search_text":   {body: `{"id":"/src/a.txt","pattern":"hel+"}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/line_count":    {body: `{"id":"/src/a.txt"}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/read_bytes":    {body: `{"id":"/src/a.txt","offset":0,"length":3}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/write_bytes":   {body: `{"id":"/src/a.txt","offset":0,"data":"SA=="}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/append_bytes":  {body: `{"id":"/src/a.txt","data":"IQ=="}`, status: 200},
	// the format tier on a text file (TestFormatRoutes and orchestrator/files/format use real ones)
	"POST /api/v1/sessions/:id/fs/_/spreadsheet_list_sheets":       {body: `{"id":"/src/a.txt"}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/spreadsheet_get_sheet_summary": {body: `{"id":"/src/a.txt"}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/spreadsheet_read_range":        {body: `{"id":"/src/a.txt","range":"A1:B2"}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/spreadsheet_read_cell":         {body: `{"id":"/src/a.txt","cell":"A1"}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/spreadsheet_write_range":       {body: `{"id":"/src/t.csv","start_cell":"A1","data":[["a",1]]}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/spreadsheet_write_cell":        {body: `{"id":"/src/t.csv","cell":"B2","value":"x"}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/spreadsheet_add_sheet":         {body: `{"id":"/src/t.xlsx","name":"Two"}`, status: 200},
	"POST /api/v1/sessions/:id/fs/_/spreadsheet_delete_sheet":      {body: `{"id":"/src/a.txt","name":"Two"}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/spreadsheet_insert_rows":       {body: `{"id":"/src/a.txt","after_row":1,"count":1}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/spreadsheet_delete_rows":       {body: `{"id":"/src/a.txt","start_row":1,"count":1}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/spreadsheet_set_format":        {body: `{"id":"/src/a.txt","range":"A1","format":{"bold":true}}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/spreadsheet_auto_filter":       {body: `{"id":"/src/a.txt","range":"A1:B2"}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/pdf_info":                      {body: `{"id":"/src/a.txt"}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/pdf_extract_text":              {body: `{"id":"/src/a.txt"}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/pdf_add_page":                  {body: `{"id":"/src/a.txt"}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/pdf_delete_page":               {body: `{"id":"/src/a.txt","page":1}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/pdf_merge":                     {body: `{"ids":["/src/a.txt","/src/a.txt"],"output":"/m.pdf"}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/pdf_split_pages":               {body: `{"id":"/src/a.txt","ranges":["1"]}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/pdf_get_form_fields":           {body: `{"id":"/src/a.txt"}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/pdf_fill_form":                 {body: `{"id":"/src/a.txt","fields":{"a":"b"}}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/pdf_add_text":                  {body: `{"id":"/src/a.txt","page":1,"text":"x"}`, status: 422},
	"POST /api/v1/sessions/:id/fs/_/pdf_add_image":                 {body: `{"id":"/src/a.txt","page":1,"image":"/src/a.txt"}`, status: 415},
	"POST /api/v1/sessions/:id/fs/_/image_composite":               {body: `{"id":"/src/a.txt","overlay":"/src/a.txt"}`, status: 415},
	"POST /api/v1/sessions/:id/fs/_/image_info":                    {body: `{"id":"/src/a.txt"}`, status: 415},
	"POST /api/v1/sessions/:id/fs/_/image_resize":                  {body: `{"id":"/src/a.txt","width":10,"height":10}`, status: 415},
	"POST /api/v1/sessions/:id/fs/_/image_crop":                    {body: `{"id":"/src/a.txt","left":0,"top":0,"width":1,"height":1}`, status: 415},
	"POST /api/v1/sessions/:id/fs/_/image_rotate":                  {body: `{"id":"/src/a.txt","degrees":90}`, status: 415},
	"POST /api/v1/sessions/:id/fs/_/image_convert":                 {body: `{"id":"/src/a.txt","format":"png"}`, status: 415},
	"GET /api/v1/sessions/:id/fs/_/thumbnail":                      {status: 422}, // no path (TestFormatRoutes asks for real ones)
	"GET /api/v1/sessions/:id/kv":                                  {status: 200},
	"GET /api/v1/sessions/:id/kv/*":                                {star: "k", status: 404}, // no such key (TestKVUserAPI sets real ones)
	"PUT /api/v1/sessions/:id/kv/*":                                {star: "k", body: `{"value":{"n":1}}`, status: 200},
	"DELETE /api/v1/sessions/:id/kv/*":                             {star: "k", status: 200},
	"GET /api/v1/sessions/:id/audit":                               {status: 200},
	"GET /api/v1/admin/files/cache":                                {status: 403}, // admins only (TestFileCacheStats is one)

	"GET /api/v1/sessions/:id/approvals":            {status: 200},
	"POST /api/v1/sessions/:id/approvals/:approval": {body: `{"decision":"approve"}`, status: 404}, // no such approval (TestApprovalsInbox answers real ones)
	"GET /api/v1/sessions/:id/nodes/:node/audit":    {status: 200},
	"GET /api/v1/sessions/:id/nodes/:node/diff":     {status: 404}, // not a forked node (TestForkDiffMergeAPI has one)
	"POST /api/v1/sessions/:id/nodes/:node/merge":   {status: 404},
	"GET /api/v1/memories":                          {status: 200},
	"GET /api/v1/sessions/:id/secrets":              {status: 200},
	"PUT /api/v1/sessions/:id/secrets/:name":        {body: `{"value":"k"}`, status: 422}, // ":name" is no vendor key (TestSessionSecrets sets real ones)
	"DELETE /api/v1/sessions/:id/secrets/:name":     {status: 404},
	"DELETE /api/v1/memories/:memory":               {status: 404}, // no such memory (TestMemoriesAPI deletes real ones)

	// no repository in these sessions: empty changes (TestChangesAPI has one)
	"GET /api/v1/sessions/:id/changes":                      {status: 200},
	"GET /api/v1/sessions/:id/changes/file":                 {status: 400}, // no path
	"GET /api/v1/sessions/:id/changes/download":             {status: 200},
	"GET /api/v1/sessions/:id/download":                     {status: 200},
	"GET /api/v1/sessions/:id/nodes/:node/changes":          {status: 200},
	"GET /api/v1/sessions/:id/nodes/:node/changes/file":     {status: 400},
	"GET /api/v1/sessions/:id/nodes/:node/changes/download": {status: 200},
	"GET /api/v1/sessions/:id/nodes/:node/download":         {status: 200},
	"POST /api/v1/sessions/:id/nodes/:node/comments":        {body: `{"path":"src/a.txt","start_line":1,"end_line":1,"side":"new","lines":["+x"],"body":"why?"}`, status: 202},
	"GET /api/v1/secrets":                                   {status: 200},
	"PUT /api/v1/secrets/:name":                             {body: `{"value":"k"}`, status: 422}, // no kind, and ":name" is no name
	"DELETE /api/v1/secrets/:name":                          {status: 404},
	"GET /api/v1/known-hosts":                               {status: 200},
	"DELETE /api/v1/known-hosts/:host":                      {status: 404},
	"POST /api/v1/sessions/:id/nodes/:node/push":            {body: `{}`, status: 503}, // no Ship in this server (TestPushRoute pushes)
	"POST /api/v1/sessions/:id/nodes/:node/pull-request":    {body: `{}`, status: 503},
	"GET /api/v1/sessions/:id/remote-host-key":              {status: 503},
}

// The node-scoped file routes (/sessions/:id/nodes/:node/fs, a node's own
// workspace) answer as the session's do: the node in the path works on the
// shared workspace.
func init() {
	for key, call := range ownerCalls {
		method, path, _ := strings.Cut(key, " ")
		if rest, ok := strings.CutPrefix(path, "/api/v1/sessions/:id/fs"); ok && rest != "/_/audit" {
			ownerCalls[method+" /api/v1/sessions/:id/nodes/:node/fs"+rest] = call
		}
	}
}

var nodeKeyOpenRoutes = map[string]bool{
	"GET /api/v1/me": true, "GET /api/v1/agents": true, "GET /api/v1/models": true, "GET /api/v1/openapi.json": true,
}

var nodeKeyDeniedRoutes = map[string]bool{
	"DELETE /api/v1/sessions/:id": true, "PATCH /api/v1/sessions/:id": true, "POST /api/v1/sessions/:id/start": true,
	"POST /api/v1/sessions/:id/stop": true, "POST /api/v1/sessions/:id/nodes": true,
	// Its own node: deleting or moving it is the user's (the path's :node is the key's node).
	"DELETE /api/v1/sessions/:id/nodes/:node": true, "POST /api/v1/sessions/:id/nodes/:node/move": true,
	// Messages here are from the user; an agent's go through the agent API.
	"POST /api/v1/sessions/:id/nodes/:node/messages": true,
	"GET /api/v1/sessions/:id/fs/_/audit":            true,
	"GET /api/v1/sessions/:id/audit":                 true,
	"GET /api/v1/sessions/:id/approvals":             true, "POST /api/v1/sessions/:id/approvals/:approval": true,
	"GET /api/v1/sessions/:id/secrets": true, "PUT /api/v1/sessions/:id/secrets/:name": true, "DELETE /api/v1/sessions/:id/secrets/:name": true,
	// Review reads past allowed_paths; a comment is the user's message.
	"GET /api/v1/sessions/:id/changes": true, "GET /api/v1/sessions/:id/changes/file": true, "GET /api/v1/sessions/:id/changes/download": true,
	"GET /api/v1/sessions/:id/download": true, "GET /api/v1/sessions/:id/nodes/:node/changes": true,
	"GET /api/v1/sessions/:id/nodes/:node/changes/file": true, "GET /api/v1/sessions/:id/nodes/:node/changes/download": true,
	"GET /api/v1/sessions/:id/nodes/:node/download": true, "POST /api/v1/sessions/:id/nodes/:node/comments": true,
	// Pushes and pull requests are the user's; an agent asks with request_push.
	"POST /api/v1/sessions/:id/nodes/:node/push": true, "POST /api/v1/sessions/:id/nodes/:node/pull-request": true,
	"GET /api/v1/sessions/:id/remote-host-key": true,
}

// apiRouteKeys returns "METHOD path" of every registered /api route.
func apiRouteKeys(e *testEnv) []string {
	var keys []string
	seen := map[string]bool{}
	for _, r := range e.srv.Echo().Routes() {
		if !strings.HasPrefix(r.Path, "/api/") || strings.HasPrefix(r.Method, "echo_") || seen[r.Method+" "+r.Path] {
			continue
		}
		seen[r.Method+" "+r.Path] = true
		keys = append(keys, r.Method+" "+r.Path)
	}
	sort.Strings(keys)
	return keys
}

func TestAuthorizationEveryRoute(t *testing.T) {
	e := newEnv(t, envOpts{})
	owner := e.account("owner")
	other := e.account("other")
	keys := apiRouteKeys(e)
	if len(keys) < len(ownerCalls) {
		t.Fatalf("only %d routes registered, %d expected", len(keys), len(ownerCalls))
	}
	for _, key := range keys {
		call, ok := ownerCalls[key]
		if !ok {
			t.Errorf("route %s has no entry in ownerCalls: add it", key)
			continue
		}
		method, pattern, _ := strings.Cut(key, " ")
		scoped := strings.Contains(pattern, ":id")
		// A node key reaches its own session (minus whole-session actions)
		// and its own node; elsewhere 403, other sessions 404.
		nodeKeyStatus := call.status
		switch {
		case nodeKeyOpenRoutes[key]:
		case !scoped, nodeKeyDeniedRoutes[key]:
			nodeKeyStatus = http.StatusForbidden
		}
		tests := []struct {
			name   string
			key    string // "NODEKEY": a key of the node in the path; "OTHERNODEKEY": of a node in another session
			status int
		}{
			{name: "owner", key: owner.key, status: call.status},
			{name: "other user", key: other.key, status: call.status},
			{name: "anonymous", key: "", status: http.StatusUnauthorized},
			{name: "node key", key: "NODEKEY", status: nodeKeyStatus},
			{name: "node key of another session", key: "OTHERNODEKEY", status: nodeKeyStatus},
		}
		if scoped {
			tests[1].status = http.StatusNotFound
			tests[4].status = http.StatusNotFound
		}
		for _, tt := range tests {
			t.Run(key+"/"+tt.name, func(t *testing.T) {
				ctx := context.Background()
				s, root := e.session(owner) // fresh each call: some calls delete
				n, err := e.sessions.CreateNode(ctx, owner.user.ID, s.ID, sessions.NewNode{AgentType: "pi", ParentID: &root.ID})
				if err != nil {
					t.Fatal(err)
				}
				switch tt.key {
				case "NODEKEY":
					tt.key, _, err = e.users.CreateNodeAPIKey(ctx, owner.user.ID, s.ID, n.ID)
				case "OTHERNODEKEY":
					s2, n2 := e.session(owner)
					tt.key, _, err = e.users.CreateNodeAPIKey(ctx, owner.user.ID, s2.ID, n2.ID)
				}
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := e.files.Session(s.ID).WriteFile(ctx, "/src/a.txt", []byte("hello\n"), vfs.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
				star := call.star
				if star == "" {
					star = "src/a.txt"
				}
				path := strings.NewReplacer(":id", s.ID, ":node", n.ID, "*", star).Replace(pattern)
				body := strings.ReplaceAll(call.body, "ROOT", root.ID)
				r := e.do(method, path, tt.key, body)
				if r.status != tt.status {
					t.Fatalf("%s %s as %s: %d %s, want %d", method, path, tt.name, r.status, r.body, tt.status)
				}
				if r.status >= 400 && method != http.MethodHead {
					r.errorOf(t) // every error is JSON (HEAD answers have no body)
				}
			})
		}
	}
	for key := range ownerCalls {
		found := false
		for _, k := range keys {
			found = found || k == key
		}
		if !found {
			t.Errorf("ownerCalls has %s but no such route is registered", key)
		}
	}
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	e, a := newAlice(t)
	s, _ := e.session(a)
	tests := []struct {
		name   string
		method string
		path   string
		status int
		code   string
	}{
		{name: "unknown api route", method: "GET", path: "/api/v1/nope", status: 404, code: "not_found"},
		{name: "unknown api version", method: "GET", path: "/api/v2/sessions", status: 404, code: "not_found"},
		{name: "wrong method", method: "PUT", path: "/api/v1/sessions", status: 405, code: "method_not_allowed"},
		{name: "wrong method on id route", method: "POST", path: "/api/v1/sessions/" + s.ID, status: 405, code: "method_not_allowed"},
		{name: "unknown session", method: "GET", path: "/api/v1/sessions/nope", status: 404, code: "not_found"},
		{name: "unknown node", method: "GET", path: "/api/v1/sessions/" + s.ID + "/nodes/nope/messages", status: 404, code: "not_found"},
		{name: "post to ui path", method: "POST", path: "/session/x", status: 404, code: "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, a.key, "")
			if r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
			if code, _, _ := r.errorOf(t); code != tt.code {
				t.Fatalf("code %q, want %q", code, tt.code)
			}
		})
	}
}

func TestHealthz(t *testing.T) {
	e := newEnv(t, envOpts{})
	r := e.do("GET", "/healthz", "", "")
	var b map[string]bool
	if r.status != 200 || json.Unmarshal(r.body, &b) != nil || !b["ok"] {
		t.Fatalf("healthz: %d %s", r.status, r.body)
	}
}

func TestMessagesAppendInputRecords(t *testing.T) {
	e, a := newAlice(t)
	s, n := e.session(a)
	base := "/api/v1/sessions/" + s.ID + "/nodes/" + n.ID
	r := e.do("POST", base+"/messages", a.key, `{"content":"hello"}`)
	if r.status != 202 {
		t.Fatalf("post message: %d %s", r.status, r.body)
	}
	var rec wireRecord
	if err := json.Unmarshal(r.body, &rec); err != nil || rec.Kind != "input" || rec.NodeID != n.ID {
		t.Fatalf("record: %s", r.body)
	}
	if string(rec.Data) != `{"type":"message","from":"user","content":"hello"}` {
		t.Fatalf("data %s", rec.Data)
	}
	r = e.do("POST", base+"/signal", a.key, `{"action":"stop"}`)
	if r.status != 202 {
		t.Fatalf("post signal: %d %s", r.status, r.body)
	}
	r = e.do("GET", base+"/messages?after=0&limit=1", a.key, "")
	var page struct {
		Data      []wireRecord `json:"data"`
		NextAfter int64        `json:"next_after"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil || len(page.Data) != 1 || page.NextAfter != page.Data[0].Seq {
		t.Fatalf("page 1: %s", r.body)
	}
	var all []wireRecord
	after := int64(0)
	for {
		r = e.do("GET", base+"/messages?limit=1&after="+itoa64(after), a.key, "")
		page.Data = nil
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Data) == 0 {
			break
		}
		all = append(all, page.Data...)
		after = page.NextAfter
	}
	var kinds []string
	for _, r := range all {
		kinds = append(kinds, r.Kind)
	}
	if got := strings.Join(kinds, ","); !strings.HasSuffix(got, "input,input") {
		t.Fatalf("node records %s, want ...input,input", got)
	}
	last, _ := e.st.LastSeq(context.Background(), s.ID)
	if after != last {
		t.Fatalf("paged to %d, log ends at %d", after, last)
	}
}

func itoa64(n int64) string { b, _ := json.Marshal(n); return string(b) }
