package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// filesEnv is a server with a session filesystem and one session of its owner.
type filesEnv struct {
	e   *testEnv
	a   account
	sid string
}

func newFilesEnv(t *testing.T, cfg vfs.Config) *filesEnv {
	e := newEnv(t, envOpts{files: cfg})
	a := e.account("alice")
	s, _ := e.session(a)
	return &filesEnv{e: e, a: a, sid: s.ID}
}

type call struct {
	method, path, body string
	header             map[string]string
}

// do calls a /fs route of the session as its owner.
func (f *filesEnv) do(t *testing.T, c call) (int, http.Header, []byte) {
	t.Helper()
	var hdr []string
	for k, v := range c.header {
		hdr = append(hdr, k, v)
	}
	r := f.e.doT(t, c.method, "/api/v1/sessions/"+f.sid+"/fs"+c.path, f.a.key, c.body, hdr...)
	return r.status, r.header, r.body
}

// check runs the filesystem's consistency check.
func (f *filesEnv) check(t *testing.T) {
	t.Helper()
	if err := f.e.files.Check(context.Background(), f.sid); err != nil {
		t.Fatalf("consistency check: %v", err)
	}
}

// fileJSON is a file as the /fs routes answer it.
type fileJSON struct {
	vfs.FileInfo
	SessionID string  `json:"session_id"`
	Content   *string `json:"content"`
	Encoding  string  `json:"encoding"`
}

func errCode(b []byte) (string, string) {
	var e struct {
		Error struct{ Code, Message, Field string }
	}
	json.Unmarshal(b, &e)
	return e.Error.Code, e.Error.Field
}

func TestFiles(t *testing.T) {
	f := newFilesEnv(t, vfs.Config{MaxFileSize: 1000, SessionQuota: 2500})
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
			var l struct{ Data []vfs.FileInfo }
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
		{name: "copy dir", call: call{method: "POST", path: "/_/copy", body: `{"src_path":"/src","dst_path":"/src2"}`}, status: 201},
		{name: "copied content", call: call{method: "GET", path: "/src2/main.go"}, status: 200, check: func(t *testing.T, h http.Header, b []byte) {
			if !strings.Contains(string(b), "v2") {
				t.Fatalf("body %s", b)
			}
		}},
		{name: "copy into itself", call: call{method: "POST", path: "/_/copy", body: `{"src_path":"/src","dst_path":"/src/sub"}`}, status: 422},
		{name: "grep", call: call{method: "POST", path: "/_/grep", body: `{"pattern":"package\\s+main","path_pattern":"*.go"}`}, status: 200, check: func(t *testing.T, h http.Header, b []byte) {
			var r vfs.GrepResult
			json.Unmarshal(b, &r)
			if len(r.Files) != 2 || r.Files[0].Path != "/src/main.go" || r.Files[0].Matches[0].LineNumber != 1 || r.Truncated {
				t.Fatalf("body %s", b)
			}
		}},
		{name: "grep full path glob", call: call{method: "POST", path: "/_/grep", body: `{"pattern":"main","path_pattern":"/src2/*"}`}, status: 200, check: func(t *testing.T, h http.Header, b []byte) {
			var r vfs.GrepResult
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
			status, h, b := f.do(t, tc.call)
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

func TestFilesRawUpload(t *testing.T) {
	f := newFilesEnv(t, vfs.Config{MaxFileSize: 1 << 20})
	body := strings.Repeat("\x00\x01binary", 10000)
	raw := map[string]string{"Content-Type": "application/octet-stream"}
	if status, _, b := f.do(t, call{method: "POST", path: "/up/load.bin", body: body, header: raw}); status != 201 {
		t.Fatalf("raw upload: %d %s", status, b)
	}
	status, h, b := f.do(t, call{method: "GET", path: "/up/load.bin", header: map[string]string{"Accept": "application/octet-stream"}})
	if status != 200 || string(b) != body || h.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("status %d len %d type %s", status, len(b), h.Get("Content-Type"))
	}
	for _, method := range []string{"GET", "HEAD"} {
		if st, _, _ := f.do(t, call{method: method, path: "/up/load.bin", header: map[string]string{"If-None-Match": h.Get("ETag")}}); st != 304 {
			t.Fatalf("%s If-None-Match: status %d", method, st)
		}
	}
	// PUT raw with If-Match of the current ETag
	if st, _, b := f.do(t, call{method: "PUT", path: "/up/load.bin", body: "new", header: map[string]string{"Content-Type": "application/octet-stream", "If-Match": h.Get("ETag")}}); st != 200 {
		t.Fatalf("put status %d %s", st, b)
	}
	// over the limit
	if st, _, b := f.do(t, call{method: "POST", path: "/big.bin", body: strings.Repeat("x", 1<<20+1), header: raw}); st != 413 || !strings.Contains(string(b), "1 MiB per-file limit") {
		t.Fatalf("status %d %s", st, b)
	}
	// names with spaces and percent signs survive URL encoding
	status, _, b = f.do(t, call{method: "POST", path: "/a%20b%25c.txt", body: `{"content":"hi"}`})
	if status != 201 || !strings.Contains(string(b), `"path":"/a b%c.txt"`) {
		t.Fatalf("status %d %s", status, b)
	}
	f.check(t)
}

// TestFilesAudit: a refused symlink escape through the REST API is in the
// session's audit log, which GET /fs/_/audit serves newest first.
func TestFilesAudit(t *testing.T) {
	f := newFilesEnv(t, vfs.Config{})
	ctx := context.Background()
	if _, err := f.e.files.Session(f.sid).Symlink(ctx, vfs.RootIno, "escape", "../etc/passwd"); err != nil {
		t.Fatal(err)
	}
	if code, _, b := f.do(t, call{method: "GET", path: "/_/audit"}); code != 200 || strings.TrimSpace(string(b)) != `{"data":[]}` {
		t.Fatalf("empty audit log: %d %s", code, b)
	}
	if code, _, b := f.do(t, call{method: "GET", path: "/escape"}); code != 403 || !strings.Contains(string(b), "symlink escapes the workspace") {
		t.Fatalf("GET /escape: %d %s", code, b)
	}
	code, _, b := f.do(t, call{method: "GET", path: "/_/audit?limit=5"})
	var got struct {
		Data []vfs.AuditEntry `json:"data"`
	}
	if code != 200 || json.Unmarshal(b, &got) != nil || len(got.Data) != 1 ||
		!strings.Contains(got.Data[0].Error, "symlink escapes the workspace") || !strings.Contains(string(got.Data[0].Parameters), "/escape") {
		t.Fatalf("audit: %d %s", code, b)
	}
	for _, bad := range []string{"0", "x", "100000"} {
		if code, _, b := f.do(t, call{method: "GET", path: "/_/audit?limit=" + bad}); code != 422 || !strings.Contains(string(b), `"field":"limit"`) {
			t.Fatalf("limit=%s: %d %s", bad, code, b)
		}
	}
}

// TestFilesAuthorized: the file routes are reached only by the session's
// owner.
func TestFilesAuthorized(t *testing.T) {
	e := newEnv(t, envOpts{})
	a, b := e.account("alice"), e.account("bob")
	s, _ := e.session(a)
	tests := []struct {
		name   string
		key    string
		path   string
		status int
	}{
		{name: "owner", key: a.key, path: "/api/v1/sessions/" + s.ID + "/fs/", status: 200},
		{name: "other user", key: b.key, path: "/api/v1/sessions/" + s.ID + "/fs/", status: 404},
		{name: "unknown session", key: a.key, path: "/api/v1/sessions/nope/fs/", status: 404},
		{name: "anonymous", path: "/api/v1/sessions/" + s.ID + "/fs/", status: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := e.do("GET", tt.path, tt.key, ""); r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
		})
	}
}

// TestFilesSpecial: FIFOs, sockets and devices (made through a mount)
// are listed and stat'ed as what they are; reading or writing one as a
// file is a conflict that says why. A path longer than the API's bound
// is refused naming it, though the session may hold deeper files.
func TestFilesSpecial(t *testing.T) {
	f := newFilesEnv(t, vfs.Config{})
	ctx := context.Background()
	fs := f.e.files.Session(f.sid)
	d, err := fs.Mkdir(ctx, vfs.RootIno, "run", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		name       string
		mode, rdev uint32
	}{{"fifo", vfs.ModeFIFO | 0o644, 0}, {"sock", vfs.ModeSocket | 0o755, 0}, {"null", vfs.ModeCharDev | 0o666, 1<<8 | 3}} {
		if _, err := fs.Mknod(ctx, d.Ino, m.name, m.mode, m.rdev); err != nil {
			t.Fatal(err)
		}
	}
	status, _, b := f.do(t, call{method: "GET", path: "/run"})
	var l struct{ Data []vfs.FileInfo }
	json.Unmarshal(b, &l)
	var got []string
	for _, e := range l.Data {
		got = append(got, e.Name+":"+e.Type+":"+e.Device)
	}
	if status != 200 || strings.Join(got, " ") != "fifo:fifo: null:char-device:1:3 sock:socket:" {
		t.Fatalf("list /run: %d %s", status, b)
	}
	for _, c := range []call{
		{method: "GET", path: "/run/fifo"},
		{method: "GET", path: "/run/null", header: map[string]string{"Accept": "application/octet-stream"}},
		{method: "PUT", path: "/run/sock", body: `{"content":"x"}`},
		{method: "POST", path: "/run/fifo", body: `{"content":"x"}`},
	} {
		status, _, b := f.do(t, c)
		if code, _ := errCode(b); c.method != "POST" && (status != 409 || code != "conflict" || !strings.Contains(string(b), "not a regular file")) {
			t.Fatalf("%s %s: %d %s", c.method, c.path, status, b)
		} else if c.method == "POST" && status != 409 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, status, b)
		}
	}
	status, _, b = f.do(t, call{method: "POST", path: "/_/stat", body: `{"path":"/run/sock"}`})
	if !strings.Contains(string(b), `"type":"socket"`) || status != 200 {
		t.Fatalf("stat /run/sock: %d %s", status, b)
	}
	long := "/" + strings.Repeat("d/", 2048) + "f" // 4098 bytes
	status, _, b = f.do(t, call{method: "GET", path: long})
	if code, _ := errCode(b); status != 422 || code != "invalid" || !strings.Contains(string(b), "longer than 4096 bytes") {
		t.Fatalf("GET of a %d-byte path: %d %s", len(long), status, b)
	}
	f.check(t)
}
