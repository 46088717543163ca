package vfs

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
)

// testStatus is a local copy of the API's code → status mapping, for these tests only.
func testStatus(err error) int {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return he.Code
	}
	switch orchestrator.ErrorCode(err) {
	case orchestrator.EInvalid:
		return 422
	case orchestrator.ENotFound:
		return 404
	case orchestrator.EConflict:
		return 409
	case orchestrator.ETooLarge:
		return 413
	case orchestrator.EForbidden:
		return 403
	case orchestrator.EPreconditionFailed:
		return 412
	case orchestrator.EInsufficientStorage:
		return 507
	}
	return 500
}

func newServer(t *testing.T, cfg Config) (*httptest.Server, *fixture) {
	f := newFixture(t, cfg)
	e := echo.New()
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		c.JSON(testStatus(err), map[string]any{"error": map[string]string{
			"code": orchestrator.ErrorCode(err), "message": orchestrator.ErrorMessage(err), "field": orchestrator.ErrorField(err)}})
	}
	NewHandler(f.v).Register(e.Group("/api/v1/sessions/:id/fs"))
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv, f
}

type call struct {
	method, path, body string
	header             map[string]string
}

func do(t *testing.T, srv *httptest.Server, sid string, c call) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(c.method, srv.URL+"/api/v1/sessions/"+sid+"/fs"+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func errCode(b []byte) (string, string) {
	var e struct {
		Error struct{ Code, Message, Field string }
	}
	json.Unmarshal(b, &e)
	return e.Error.Code, e.Error.Field
}

func TestHTTP(t *testing.T) {
	srv, f := newServer(t, Config{MaxFileSize: 1000, SessionQuota: 2500})
	sid := f.sid
	bin := base64.StdEncoding.EncodeToString([]byte("a\x00b"))
	tests := []struct {
		name   string
		call   call
		status int
		code   string
		field  string
		check  func(t *testing.T, h http.Header, b []byte)
	}{
		{name: "list empty root", call: call{method: "GET", path: ""}, status: 200, check: func(t *testing.T, h http.Header, b []byte) {
			if strings.TrimSpace(string(b)) != `{"data":[]}` {
				t.Fatalf("body %s", b)
			}
		}},
		{name: "create file with parents", call: call{method: "POST", path: "/src/main.go", body: `{"content":"package main\n","encoding":"text"}`}, status: 201, check: func(t *testing.T, h http.Header, b []byte) {
			var fj fileJSON
			json.Unmarshal(b, &fj)
			if fj.Path != "/src/main.go" || fj.Name != "main.go" || fj.Size != 13 || fj.Hash == "" || fj.Encoding != "text" || *fj.Content != "package main\n" {
				t.Fatalf("body %s", b)
			}
		}},
		{name: "create exists", call: call{method: "POST", path: "/src/main.go", body: `{"content":"x"}`}, status: 409, code: "conflict"},
		{name: "create dir", call: call{method: "POST", path: "/docs", body: `{"is_directory":true}`}, status: 201},
		{name: "create dir exists", call: call{method: "POST", path: "/docs", body: `{"is_directory":true}`}, status: 409, code: "conflict"},
		{name: "dunder init is fine", call: call{method: "POST", path: "/src/__init__.py", body: `{"content":""}`}, status: 201},
		{name: "reserved first segment", call: call{method: "POST", path: "/_x", body: `{"content":""}`}, status: 422, code: "invalid", field: "path"},
		{name: "unknown field", call: call{method: "POST", path: "/a.txt", body: `{"content":"x","colour":"red"}`}, status: 400, code: "invalid", field: "colour"},
		{name: "bad encoding", call: call{method: "POST", path: "/a.txt", body: `{"content":"x","encoding":"rot13"}`}, status: 400, field: "encoding"},
		{name: "traversal", call: call{method: "GET", path: "/a/%2e%2e/b"}, status: 422, code: "invalid"},
		{name: "double slash", call: call{method: "GET", path: "/a//b"}, status: 422, code: "invalid"},
		{name: "binary create", call: call{method: "POST", path: "/bin.dat", body: `{"content":"` + bin + `","encoding":"base64"}`}, status: 201},
		{name: "binary read is base64", call: call{method: "GET", path: "/bin.dat"}, status: 200, check: func(t *testing.T, h http.Header, b []byte) {
			var fj fileJSON
			json.Unmarshal(b, &fj)
			if fj.Encoding != "base64" || *fj.Content != bin || h.Get("ETag") != `"`+fj.Hash+`"` {
				t.Fatalf("body %s etag %s", b, h.Get("ETag"))
			}
		}},
		{name: "raw download", call: call{method: "GET", path: "/src/main.go", header: map[string]string{"Accept": "application/octet-stream"}}, status: 200, check: func(t *testing.T, h http.Header, b []byte) {
			if string(b) != "package main\n" || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") || !strings.Contains(h.Get("Content-Disposition"), `filename=main.go`) {
				t.Fatalf("body %q headers %v", b, h)
			}
		}},
		{name: "not modified", call: call{method: "GET", path: "/src/main.go", header: map[string]string{"If-None-Match": `"0f3d3c1e5b5e1bb3b7e3b2c69c58f0d0f8e3d5e08ac43d1ab7c5cbb9b4d0b6c1"`}}, status: 200},
		{name: "list dir", call: call{method: "GET", path: "/src"}, status: 200, check: func(t *testing.T, h http.Header, b []byte) {
			var l struct{ Data []FileInfo }
			json.Unmarshal(b, &l)
			if len(l.Data) != 2 || l.Data[0].Name != "__init__.py" || l.Data[1].Path != "/src/main.go" {
				t.Fatalf("body %s", b)
			}
		}},
		{name: "get missing", call: call{method: "GET", path: "/nope"}, status: 404, code: "not_found"},
		{name: "put missing", call: call{method: "PUT", path: "/nope", body: `{"content":"x"}`}, status: 404},
		{name: "put", call: call{method: "PUT", path: "/src/main.go", body: `{"content":"package main // v2\n"}`}, status: 200},
		{name: "put if-match wrong", call: call{method: "PUT", path: "/src/main.go", body: `{"content":"x"}`, header: map[string]string{"If-Match": `"deadbeef"`}}, status: 412, code: "precondition_failed"},
		{name: "make readonly", call: call{method: "PUT", path: "/src/main.go", body: `{"is_readonly":true}`}, status: 200, check: func(t *testing.T, h http.Header, b []byte) {
			var fj fileJSON
			json.Unmarshal(b, &fj)
			if !fj.Readonly || fj.Size != 19 {
				t.Fatalf("body %s", b)
			}
		}},
		{name: "put readonly", call: call{method: "PUT", path: "/src/main.go", body: `{"content":"x"}`}, status: 403, code: "forbidden"},
		{name: "put too large", call: call{method: "PUT", path: "/docs/big", body: `{"content":"` + strings.Repeat("x", 1001) + `"}`}, status: 413},
		{name: "post too large", call: call{method: "POST", path: "/docs/big", body: `{"content":"` + strings.Repeat("x", 1001) + `"}`}, status: 413, code: "too_large"},
		{name: "fill 1", call: call{method: "POST", path: "/docs/f1", body: `{"content":"` + strings.Repeat("x", 1000) + `"}`}, status: 201},
		{name: "fill 2", call: call{method: "POST", path: "/docs/f2", body: `{"content":"` + strings.Repeat("x", 1000) + `"}`}, status: 201},
		{name: "quota", call: call{method: "POST", path: "/docs/f3", body: `{"content":"` + strings.Repeat("x", 1000) + `"}`}, status: 507, code: "insufficient_storage"},
		{name: "quota left nothing", call: call{method: "GET", path: "/docs/f3"}, status: 404},
		{name: "stat", call: call{method: "POST", path: "/_/stat", body: `{"path":"/src/main.go"}`}, status: 200},
		{name: "stat missing", call: call{method: "POST", path: "/_/stat", body: `{"path":"/x"}`}, status: 404},
		{name: "stat bad body", call: call{method: "POST", path: "/_/stat", body: `{"path":1}`}, status: 400, field: "path"},
		{name: "move", call: call{method: "POST", path: "/_/move", body: `{"src_path":"/docs/f2","dst_path":"/moved/f2"}`}, status: 200},
		{name: "move onto existing", call: call{method: "POST", path: "/_/move", body: `{"src_path":"/docs/f1","dst_path":"/moved/f2"}`}, status: 409},
		{name: "move to reserved", call: call{method: "POST", path: "/_/move", body: `{"src_path":"/docs/f1","dst_path":"/_hidden"}`}, status: 422, field: "dst_path"},
		{name: "copy file over quota", call: call{method: "POST", path: "/_/copy", body: `{"src_path":"/docs/f1","dst_path":"/copy/f1"}`}, status: 507},
		{name: "delete a file", call: call{method: "DELETE", path: "/moved/f2"}, status: 204},
		{name: "copy dir", call: call{method: "POST", path: "/_/copy", body: `{"src_path":"/src","dst_path":"/src2"}`}, status: 200},
		{name: "copied content", call: call{method: "GET", path: "/src2/main.go"}, status: 200, check: func(t *testing.T, h http.Header, b []byte) {
			if !strings.Contains(string(b), "v2") {
				t.Fatalf("body %s", b)
			}
		}},
		{name: "copy into itself", call: call{method: "POST", path: "/_/copy", body: `{"src_path":"/src","dst_path":"/src/sub"}`}, status: 422},
		{name: "grep", call: call{method: "POST", path: "/_/grep", body: `{"pattern":"package\\s+main","path_pattern":"*.go"}`}, status: 200, check: func(t *testing.T, h http.Header, b []byte) {
			var r GrepResult
			json.Unmarshal(b, &r)
			if len(r.Files) != 2 || r.Files[0].Path != "/src/main.go" || r.Files[0].Matches[0].LineNumber != 1 || r.Truncated {
				t.Fatalf("body %s", b)
			}
		}},
		{name: "grep full path glob", call: call{method: "POST", path: "/_/grep", body: `{"pattern":"main","path_pattern":"/src2/*"}`}, status: 200, check: func(t *testing.T, h http.Header, b []byte) {
			var r GrepResult
			json.Unmarshal(b, &r)
			if len(r.Files) != 1 || r.Files[0].Path != "/src2/main.go" {
				t.Fatalf("body %s", b)
			}
		}},
		{name: "grep bad regexp", call: call{method: "POST", path: "/_/grep", body: `{"pattern":"("}`}, status: 422, field: "pattern"},
		{name: "delete non-empty dir", call: call{method: "DELETE", path: "/src"}, status: 409, code: "conflict", check: func(t *testing.T, h http.Header, b []byte) {
			if !strings.Contains(string(b), "use ?recursive=true") {
				t.Fatalf("body %s", b)
			}
		}},
		{name: "delete recursive", call: call{method: "DELETE", path: "/src?recursive=true"}, status: 204},
		{name: "deleted", call: call{method: "GET", path: "/src/main.go"}, status: 404},
		{name: "delete missing", call: call{method: "DELETE", path: "/src"}, status: 404},
		{name: "delete root", call: call{method: "DELETE", path: "/"}, status: 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, h, b := do(t, srv, sid, tc.call)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			code, field := errCode(b)
			if tc.code != "" && code != tc.code {
				t.Fatalf("code %q, want %q: %s", code, tc.code, b)
			}
			if tc.field != "" && field != tc.field {
				t.Fatalf("field %q, want %q: %s", field, tc.field, b)
			}
			if tc.check != nil {
				tc.check(t, h, b)
			}
			f.check(t)
		})
	}
}

func TestHTTPRawUpload(t *testing.T) {
	srv, f := newServer(t, Config{MaxFileSize: 1 << 20})
	body := strings.Repeat("\x00\x01binary", 10000)
	req, _ := http.NewRequest("POST", srv.URL+"/api/v1/sessions/"+f.sid+"/fs/up/load.bin", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	status, h, b := do(t, srv, f.sid, call{method: "GET", path: "/up/load.bin", header: map[string]string{"Accept": "application/octet-stream"}})
	if status != 200 || string(b) != body || h.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("status %d len %d type %s", status, len(b), h.Get("Content-Type"))
	}
	if st, _, _ := do(t, srv, f.sid, call{method: "GET", path: "/up/load.bin", header: map[string]string{"If-None-Match": h.Get("ETag")}}); st != 304 {
		t.Fatalf("If-None-Match: status %d", st)
	}
	// PUT raw with If-Match of the current ETag
	req, _ = http.NewRequest("PUT", srv.URL+"/api/v1/sessions/"+f.sid+"/fs/up/load.bin", strings.NewReader("new"))
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("If-Match", h.Get("ETag"))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("put status %d", resp.StatusCode)
	}
	// over the limit
	req, _ = http.NewRequest("POST", srv.URL+"/api/v1/sessions/"+f.sid+"/fs/big.bin", strings.NewReader(strings.Repeat("x", 1<<20+1)))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(b), "1 MiB per-file limit") {
		t.Fatalf("status %d %s", resp.StatusCode, b)
	}
	// names with spaces and percent signs survive URL encoding
	status, _, b = do(t, srv, f.sid, call{method: "POST", path: "/a%20b%25c.txt", body: `{"content":"hi"}`})
	if status != 201 || !strings.Contains(string(b), `"path":"/a b%c.txt"`) {
		t.Fatalf("status %d %s", status, b)
	}
	f.check(t)
}
