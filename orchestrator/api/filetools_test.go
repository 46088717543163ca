package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/store/audit"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// multipartBody builds an upload of files (name → content).
func multipartBody(t *testing.T, files ...[2]string) (string, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	w.WriteField("note", "a form field is skipped")
	for _, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, f[0]))
		h.Set("Content-Type", "application/octet-stream")
		p, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		p.Write([]byte(f[1]))
	}
	w.Close()
	return b.String(), w.FormDataContentType()
}

func pngFile(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

type uploaded struct {
	Data []struct {
		ID       string `json:"id"`
		Path     string `json:"path"`
		Size     int64  `json:"size_bytes"`
		Hash     string `json:"hash"`
		MimeType string `json:"mime_type"`
		Source   string `json:"source"`
	}
}

func TestUploadMultipart(t *testing.T) {
	f := newFilesEnv(t, vfs.Config{MaxFileSize: 4096, SessionQuota: 10000})
	img := pngFile(t)
	body, ct := multipartBody(t, [2]string{"shot.txt", img}, [2]string{"notes/read me.md", "# hi\n"})
	r := f.e.doT(t, "POST", "/api/v1/sessions/"+f.sid+"/fs/_/upload?dir=/in", f.a.key, body, "Content-Type", ct)
	if r.status != 201 {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
	var up uploaded
	json.Unmarshal(r.body, &up)
	sum := sha256.Sum256([]byte(img))
	if len(up.Data) != 2 || up.Data[0].ID != "/in/shot.txt" || up.Data[0].MimeType != "image/png" || up.Data[0].Source != "upload" ||
		up.Data[0].Hash != hex.EncodeToString(sum[:]) || up.Data[1].Path != "/in/notes/read me.md" || !strings.HasPrefix(up.Data[1].MimeType, "text/") {
		t.Fatalf("uploaded %s", r.body)
	}
	if loc := r.header.Get("Location"); loc != "/api/v1/sessions/"+f.sid+"/fs/in/shot.txt" {
		t.Fatalf("Location %q", loc)
	}
	// the bytes are the session's: the path API reads them
	if _, b, err := f.e.files.Session(f.sid).ReadAll(context.Background(), "/in/shot.txt"); err != nil || string(b) != img {
		t.Fatalf("read back: %v", err)
	}
	tests := []struct {
		name, query string
		files       [][2]string
		status      int
		message     string
	}{
		{"an existing file", "?dir=/in", [][2]string{{"shot.txt", "x"}}, 409, "already exists"},
		{"over the per-file limit", "", [][2]string{{"big.bin", strings.Repeat("x", 4097)}}, 413, "4 KiB per-file limit (--file-max)"},
		{"over the session's quota", "", [][2]string{{"q1", strings.Repeat("x", 4000)}, {"q2", strings.Repeat("x", 4000)}, {"q3", strings.Repeat("x", 4000)}}, 413, "session quota of 10000 bytes exceeded (--session-quota)"},
		{"a name that leaves the directory", "?dir=/in", [][2]string{{"../out.txt", "x"}}, 422, "leaves"},
		{"a reserved name", "", [][2]string{{"_x", "x"}}, 422, "reserved"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body, ct := multipartBody(t, tc.files...)
			r := f.e.doT(t, "POST", "/api/v1/sessions/"+f.sid+"/fs/_/upload"+tc.query, f.a.key, body, "Content-Type", ct)
			if _, msg, _ := r.errorOf(t); r.status != tc.status || !strings.Contains(msg, tc.message) {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
	// Overwrite replaces; a file that failed left nothing.
	body, ct = multipartBody(t, [2]string{"shot.txt", "now text\n"})
	if r := f.e.doT(t, "POST", "/api/v1/sessions/"+f.sid+"/fs/_/upload?dir=/in&overwrite=true", f.a.key, body, "Content-Type", ct); r.status != 201 || !strings.Contains(string(r.body), `"mime_type":"text/plain`) {
		t.Fatalf("overwrite: %d %s", r.status, r.body)
	}
	for _, p := range []string{"/big.bin", "/q3", "/out.txt"} {
		if _, err := f.e.files.Session(f.sid).Stat(context.Background(), p); err == nil {
			t.Fatalf("%s was left", p)
		}
	}
	f.check(t)
}

// pattern streams n bytes without holding them.
type pattern struct{ n, off int64 }

func (p *pattern) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	k := int(min(int64(len(b)), p.n-p.off))
	for i := range k {
		b[i] = byte((p.off + int64(i)) * 31 >> 8)
	}
	p.off += int64(k)
	return k, nil
}

// A 40 MB upload streams: the server's heap grows by a small part of it,
// and the download that follows reads it back.
func TestUpload40MBWithBoundedMemory(t *testing.T) {
	const size = 40 << 20
	f := newFilesEnv(t, vfs.Config{})
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", "big.bin")
		if err == nil {
			_, err = io.Copy(part, &pattern{n: size})
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	req, _ := http.NewRequest("POST", f.e.base+"/api/v1/sessions/"+f.sid+"/fs/_/upload", pr)
	req.Header.Set("Authorization", "Bearer "+f.a.key)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	growth := int64(peak) - int64(base.HeapAlloc)
	t.Logf("heap: %d MiB before, peak %d MiB during a %d MiB upload (growth %d MiB)", base.HeapAlloc>>20, peak>>20, size>>20, growth>>20)
	if growth > 16<<20 {
		t.Fatalf("the heap grew by %d MiB during a %d MiB upload: the upload is held in memory", growth>>20, size>>20)
	}
	h := sha256.New()
	io.Copy(h, &pattern{n: size})
	var up uploaded
	json.Unmarshal(b, &up)
	if len(up.Data) != 1 || up.Data[0].Size != size || up.Data[0].Hash != hex.EncodeToString(h.Sum(nil)) {
		t.Fatalf("uploaded %s", b)
	}
	r := f.e.doT(t, "GET", "/api/v1/sessions/"+f.sid+"/fs/big.bin?download=true", f.a.key, "", "Range", "bytes=41943000-")
	want := make([]byte, size-41943000)
	p := &pattern{n: size, off: 41943000}
	io.ReadFull(p, want)
	if r.status != 206 || !bytes.Equal(r.body, want) || r.header.Get("Content-Range") != fmt.Sprintf("bytes 41943000-%d/%d", size-1, size) {
		t.Fatalf("range of the upload: %d %d bytes %q", r.status, len(r.body), r.header.Get("Content-Range"))
	}
}

func TestDownloadRanges(t *testing.T) {
	f := newFilesEnv(t, vfs.Config{})
	img := pngFile(t)
	// A PNG named .txt is image/png: its type is its content's.
	if _, _, err := f.e.files.Session(f.sid).WriteFile(context.Background(), "/pic.txt", []byte(img), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	get := func(hdr ...string) reply {
		t.Helper()
		return f.e.doT(t, "GET", "/api/v1/sessions/"+f.sid+"/fs/pic.txt?download=true", f.a.key, "", hdr...)
	}
	whole := get()
	sum := sha256.Sum256([]byte(img))
	if whole.status != 200 || whole.header.Get("Content-Type") != "image/png" || whole.header.Get("ETag") != `"`+hex.EncodeToString(sum[:])+`"` ||
		whole.header.Get("Content-Disposition") != `attachment; filename=pic.txt` || whole.header.Get("Accept-Ranges") != "bytes" || string(whole.body) != img {
		t.Fatalf("whole: %d %v", whole.status, whole.header)
	}
	n := len(img)
	tests := []struct {
		name, rng string
		hdr       []string
		status    int
		body      string
		cr        string
	}{
		{"a range", "bytes=1-3", nil, 206, img[1:4], fmt.Sprintf("bytes 1-3/%d", n)},
		{"from an offset", "bytes=8-", nil, 206, img[8:], fmt.Sprintf("bytes 8-%d/%d", n-1, n)},
		{"the last bytes", "bytes=-4", nil, 206, img[n-4:], fmt.Sprintf("bytes %d-%d/%d", n-4, n-1, n)},
		{"an end past the end", fmt.Sprintf("bytes=%d-99999", n-2), nil, 206, img[n-2:], fmt.Sprintf("bytes %d-%d/%d", n-2, n-1, n)},
		{"past the end", fmt.Sprintf("bytes=%d-", n), nil, 416, "", fmt.Sprintf("bytes */%d", n)},
		{"several ranges: the whole file", "bytes=0-1,4-5", nil, 200, img, ""},
		{"malformed: the whole file", "bytes=x-y", nil, 200, img, ""},
		{"If-Range of this version", "bytes=0-0", []string{"If-Range", whole.header.Get("ETag")}, 206, img[:1], fmt.Sprintf("bytes 0-0/%d", n)},
		{"If-Range of another version", "bytes=0-0", []string{"If-Range", `"deadbeef"`}, 200, img, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := get(append([]string{"Range", tc.rng}, tc.hdr...)...)
			if r.status != tc.status || r.header.Get("Content-Range") != tc.cr {
				t.Fatalf("%d %q %s", r.status, r.header.Get("Content-Range"), r.body)
			}
			if tc.status != 416 && string(r.body) != tc.body {
				t.Fatalf("body %q, want %q", r.body, tc.body)
			}
		})
	}
	if r := f.e.doT(t, "HEAD", "/api/v1/sessions/"+f.sid+"/fs/pic.txt?download=true", f.a.key, "", "Range", "bytes=0-9"); r.status != 206 || r.header.Get("Content-Length") != "10" || len(r.body) != 0 {
		t.Fatalf("HEAD with a range: %d %v", r.status, r.header)
	}
	if r := get("If-None-Match", whole.header.Get("ETag")); r.status != 304 {
		t.Fatalf("If-None-Match: %d", r.status)
	}
	if r := f.e.doT(t, "GET", "/api/v1/sessions/"+f.sid+"/fs/pic.txt?download=inline", f.a.key, ""); r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Disposition"), "inline") ||
		!strings.Contains(r.header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("inline: %d %v", r.status, r.header)
	}
}

func TestTextTierRoutes(t *testing.T) {
	f := newFilesEnv(t, vfs.Config{})
	tool := func(route, body string, hdr ...string) reply {
		t.Helper()
		return f.e.doT(t, "POST", "/api/v1/sessions/"+f.sid+"/fs/_/"+route, f.a.key, body, hdr...)
	}
	if r := tool("write_text", `{"id":"/t.md","content":"a\nb\nc\n"}`); r.status != 200 {
		t.Fatalf("write: %d %s", r.status, r.body)
	}
	r := tool("read_text", `{"id":"t.md","start_line":2,"end_line":3}`)
	var rd struct {
		Content    string `json:"content"`
		TotalLines int    `json:"total_lines"`
		Hash       string `json:"hash"`
	}
	json.Unmarshal(r.body, &rd)
	if r.status != 200 || rd.Content != "b\nc\n" || rd.TotalLines != 3 {
		t.Fatalf("read: %d %s", r.status, r.body)
	}
	// If-Match as a header
	if r := tool("replace_lines", `{"id":"/t.md","start_line":2,"end_line":2,"content":"B"}`, "If-Match", `"`+rd.Hash+`"`); r.status != 200 {
		t.Fatalf("replace: %d %s", r.status, r.body)
	}
	r = tool("insert_lines", `{"id":"/t.md","after_line":0,"content":"z"}`, "If-Match", `"`+rd.Hash+`"`)
	cur, _ := f.e.files.Session(f.sid).Stat(context.Background(), "/t.md")
	if code, msg, _ := r.errorOf(t); r.status != 412 || code != "precondition_failed" || r.header.Get("ETag") != `"`+cur.Hash+`"` || !strings.Contains(msg, cur.Hash) {
		t.Fatalf("stale If-Match: %d %s %v", r.status, r.body, r.header)
	}
	if r := tool("line_count", `{"id":"/t.md"}`); r.status != 200 || !strings.Contains(string(r.body), `"total_lines":3`) {
		t.Fatalf("count: %d %s", r.status, r.body)
	}
	if r := tool("search_text", `{"id":"/t.md","pattern":"^[A-Z]$"}`); r.status != 200 || !strings.Contains(string(r.body), `{"line":2,"content":"B"}`) {
		t.Fatalf("search: %d %s", r.status, r.body)
	}
	if r := tool("read_text", `{"id":"/t.md","from":1}`); r.status != 422 {
		t.Fatalf("an unknown argument: %d %s", r.status, r.body)
	}
	if r := tool("info", `{"id":"/t.md"}`); r.status != 200 || !strings.Contains(string(r.body), `"source":"upload"`) {
		t.Fatalf("info: %d %s", r.status, r.body)
	}
}

func TestKVUserAPI(t *testing.T) {
	f := newFilesEnv(t, vfs.Config{})
	kv := "/api/v1/sessions/" + f.sid + "/kv"
	if r := f.e.doT(t, "PUT", kv+"/plan/step", f.a.key, `{"value":{"n":2}}`); r.status != 200 {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	if r := f.e.doT(t, "GET", kv+"/plan/step", f.a.key, ""); r.status != 200 || string(r.body) != `{"key":"plan/step","value":{"n":2}}`+"\n" {
		t.Fatalf("get: %d %q", r.status, r.body)
	}
	if r := f.e.doT(t, "GET", kv+"?prefix=plan/", f.a.key, ""); r.status != 200 || !strings.Contains(string(r.body), `"key":"plan/step"`) {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	if r := f.e.doT(t, "DELETE", kv+"/plan/step", f.a.key, ""); r.status != 200 || !strings.Contains(string(r.body), `"deleted":true`) {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := f.e.doT(t, "GET", kv+"/plan%2Fstep", f.a.key, ""); r.status != 404 {
		t.Fatalf("get after delete: %d %s", r.status, r.body)
	}
}

func TestFileCacheStats(t *testing.T) {
	f := newFilesEnv(t, vfs.Config{})
	ctx := context.Background()
	admin, err := f.e.users.CreateUser(ctx, "root", true)
	if err != nil {
		t.Fatal(err)
	}
	key, _, _ := f.e.users.CreateAPIKey(ctx, admin.ID, "t")
	f.e.doT(t, "POST", "/api/v1/sessions/"+f.sid+"/fs/_/write_text", f.a.key, `{"id":"/a","content":"x\n"}`)
	for range 2 {
		f.e.doT(t, "POST", "/api/v1/sessions/"+f.sid+"/fs/_/read_text", f.a.key, `{"id":"/a"}`)
	}
	r := f.e.doT(t, "GET", "/api/v1/admin/files/cache", key, "")
	var st struct{ Hits, Misses, Entries int64 }
	json.Unmarshal(r.body, &st)
	if r.status != 200 || st.Hits < 1 || st.Entries != 1 {
		t.Fatalf("stats: %d %s", r.status, r.body)
	}
}

// Every file operation is audited: a person's in the session's audit
// with who made it, an agent's (its key) in its node's.
func TestFileOperationsAudited(t *testing.T) {
	f := newFilesEnv(t, vfs.Config{})
	ctx := context.Background()
	s, _ := f.e.sessions.GetSession(ctx, f.a.user.ID, f.sid)
	nodes, _ := f.e.sessions.Tree(ctx, f.a.user.ID, s.ID)
	nodeKey, _, err := f.e.users.CreateNodeAPIKey(ctx, f.a.user.ID, f.sid, nodes[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	f.do(t, call{method: "POST", path: "/doc.txt", body: `{"content":"one\n"}`})
	f.do(t, call{method: "GET", path: "/doc.txt"})
	f.e.doT(t, "POST", "/api/v1/sessions/"+f.sid+"/fs/_/append_bytes", nodeKey, `{"id":"/doc.txt","data":"dHdvCg=="}`)
	f.do(t, call{method: "DELETE", path: "/nope.txt"})
	r := f.e.doT(t, "GET", "/api/v1/sessions/"+f.sid+"/audit?limit=10", f.a.key, "")
	var page struct{ Data []audit.ToolCall }
	json.Unmarshal(r.body, &page)
	var got []string
	for _, c := range page.Data {
		got = append(got, fmt.Sprintf("%s %s %s %s err=%v", c.Source, c.Actor, c.NodeID, c.Name, c.Error != ""))
	}
	want := []string{
		"user alice  delete err=true",
		"api  " + nodes[0].ID + " file_append_bytes err=false",
		"user alice  read err=false",
		"user alice  create err=false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("session audit:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(string(page.Data[3].Parameters), `"/doc.txt"`) {
		t.Fatalf("parameters %s", page.Data[3].Parameters)
	}
	r = f.e.doT(t, "GET", "/api/v1/sessions/"+f.sid+"/nodes/"+nodes[0].ID+"/audit", f.a.key, "")
	if !strings.Contains(string(r.body), `"name":"file_append_bytes"`) || strings.Contains(string(r.body), `"name":"read"`) {
		t.Fatalf("node audit: %s", r.body)
	}
	if r := f.e.doT(t, "GET", "/api/v1/sessions/"+f.sid+"/audit", nodeKey, ""); r.status != 403 {
		t.Fatalf("a node key reads the session's audit: %d", r.status)
	}
}
