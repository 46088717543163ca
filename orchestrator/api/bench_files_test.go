package api_test

import (
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// BenchmarkFileTransfer measures a 50 MB file through the user API over
// loopback HTTP: a multipart upload streamed into the session filesystem
// (vfs Upload, SQLite chunks), a raw PUT, and a download; beside them, in
// the same run, `cp` of the same file on the same ext4 disk (the floor),
// and the same HTTP upload written to a plain file and the same download
// served from one (the cost of HTTP, and multipart, alone). MB/s is 10^6
// bytes per second.
//
//	go test -run '^$' -bench FileTransfer -benchtime 5x -count 5 ./orchestrator/api/
func BenchmarkFileTransfer(b *testing.B) {
	const size = 50 << 20
	dir := b.TempDir()
	src := filepath.Join(dir, "src.bin")
	fh, err := os.Create(src)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(fh, &pattern{n: size}); err != nil {
		b.Fatal(err)
	}
	fh.Close()
	mbps := func(b *testing.B, start time.Time) {
		b.ReportMetric(float64(size)*float64(b.N)/time.Since(start).Seconds()/1e6, "MB/s")
	}
	// each runs transfer (one of the file) b.N times and reports the MB/s.
	each := func(b *testing.B, transfer func()) {
		start := time.Now()
		for range b.N {
			transfer()
		}
		mbps(b, start)
	}

	b.Run("cp-ext4", func(b *testing.B) {
		start := time.Now()
		for i := range b.N {
			dst := filepath.Join(dir, "cp.bin")
			if out, err := exec.Command("cp", src, dst).CombinedOutput(); err != nil {
				b.Fatalf("cp: %v %s", err, out)
			}
			if i == b.N-1 {
				mbps(b, start)
			}
			os.Remove(dst)
		}
	})

	e := newEnv(b, envOpts{files: vfs.Config{MaxFileSize: 64 << 20}})
	a := e.account("bench")
	s, _ := e.session(a)
	upload := func(b *testing.B, url string) {
		f, err := os.Open(src)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		go func() {
			part, err := mw.CreateFormFile("file", "big.bin")
			if err == nil {
				_, err = io.Copy(part, f)
			}
			if err == nil {
				err = mw.Close()
			}
			pw.CloseWithError(err)
		}()
		req, _ := http.NewRequest("POST", url, pr)
		req.Header.Set("Authorization", "Bearer "+a.key)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			b.Fatalf("upload: %d %s", resp.StatusCode, body)
		}
	}

	// download GETs url (as alice: the plain server ignores it) and reads
	// the whole file.
	download := func(b *testing.B, url string) {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+a.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != size {
			b.Fatalf("downloaded %d bytes", n)
		}
	}

	b.Run("http-multipart-to-ext4-file", func(b *testing.B) {
		// the same request, its file part written to a plain file
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mr, err := r.MultipartReader()
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			p, err := mr.NextPart()
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			out, err := os.Create(filepath.Join(dir, "http.bin"))
			if err == nil {
				_, err = io.CopyBuffer(out, p, make([]byte, 256<<10))
				out.Close()
			}
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			w.WriteHeader(201)
		}))
		defer srv.Close()
		each(b, func() { upload(b, srv.URL+"/") })
	})

	b.Run("http-download-of-ext4-file", func(b *testing.B) {
		// the same download served from the plain file (http.ServeFile)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, src) }))
		defer srv.Close()
		each(b, func() { download(b, srv.URL+"/") })
	})

	b.Run("upload-multipart", func(b *testing.B) {
		each(b, func() { upload(b, e.base+"/api/v1/sessions/"+s.ID+"/fs/_/upload?overwrite=true") })
	})

	b.Run("upload-raw-put", func(b *testing.B) {
		if r := e.doT(b, "POST", "/api/v1/sessions/"+s.ID+"/fs/raw.bin", a.key, `{"content":""}`); r.status != 201 && r.status != 409 {
			b.Fatalf("create: %d %s", r.status, r.body)
		}
		each(b, func() {
			f, _ := os.Open(src)
			req, _ := http.NewRequest("PUT", e.base+"/api/v1/sessions/"+s.ID+"/fs/raw.bin", f)
			req.Header.Set("Authorization", "Bearer "+a.key)
			req.Header.Set("Content-Type", "application/octet-stream")
			resp, err := http.DefaultClient.Do(req)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("put: %d", resp.StatusCode)
			}
		})
	})

	b.Run("download", func(b *testing.B) {
		each(b, func() { download(b, e.base+"/api/v1/sessions/"+s.ID+"/fs/big.bin?download=true") })
	})
}
