package files

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/filepath-dev/filepath/orchestrator"
)

// Serve answers req with file p's bytes as disposition (attachment or
// inline), typed by its stored MIME type: whole (200), or one range of them
// (Range: bytes=a-b, a-, -n; 206 with Content-Range; 416 when it starts
// past the end: the error, with Content-Range set). Several ranges, a
// malformed Range, or an If-Range of another version get the whole file,
// as RFC 9110 allows. The file's ETag, Last-Modified and a sandboxing CSP
// go with it. An error before anything was written is the caller's to
// answer; it is audited as "download".
func (s *Service) Serve(w http.ResponseWriter, req *http.Request, fc Caller, p, disp string) error {
	ctx := req.Context()
	params := map[string]string{"path": p}
	if rg := req.Header.Get("Range"); rg != "" {
		params["range"] = rg
	}
	_, err := Do(s, ctx, fc, "download", params, func() (map[string]any, error) {
		f, err := fc.FS.OpenPath(ctx, p)
		if err != nil {
			return nil, err
		}
		info := f.Info()
		m, err := fc.FS.MetaOf(ctx, info)
		if err != nil {
			return nil, err
		}
		hdr := w.Header()
		hdr.Set("ETag", `"`+info.Hash+`"`)
		hdr.Set("Accept-Ranges", "bytes")
		start, n, partial := int64(0), info.Size, false
		if ir := req.Header.Get("If-Range"); ir == "" || strings.Trim(strings.TrimPrefix(strings.TrimSpace(ir), "W/"), `"`) == info.Hash {
			var rerr error
			start, n, partial, rerr = byteRange(req.Header.Get("Range"), info.Size)
			if rerr != nil {
				hdr.Set("Content-Range", fmt.Sprintf("bytes */%d", info.Size))
				return nil, rerr
			}
		}
		ct := m.MimeType
		if ct == "" {
			ct = "application/octet-stream"
		}
		hdr.Set("Content-Type", ct)
		hdr.Set("Content-Disposition", mime.FormatMediaType(disp, map[string]string{"filename": info.Name}))
		// An agent's file never runs as this origin's page, even if a
		// browser ignores the attachment or it is shown inline.
		hdr.Set("Content-Security-Policy", "default-src 'none'; sandbox")
		hdr.Set("Last-Modified", info.UpdatedAt.UTC().Format(http.TimeFormat))
		hdr.Set("Content-Length", strconv.FormatInt(n, 10))
		status := http.StatusOK
		if partial {
			status = http.StatusPartialContent
			hdr.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, start+n-1, info.Size))
		}
		w.WriteHeader(status)
		out := map[string]any{"status": status, "offset": start, "bytes": n, "size": info.Size}
		if req.Method == http.MethodHead || n == 0 {
			return out, nil
		}
		if _, err := f.Seek(start, io.SeekStart); err != nil {
			return nil, err
		}
		if _, err := io.CopyBuffer(w, io.LimitReader(f, n), make([]byte, 256<<10)); err != nil {
			return nil, err
		}
		return out, nil
	})
	return err
}

// byteRange reads a Range header of one range of a file of size bytes:
// where it starts, how long it is, and whether it is a range at all
// (false: serve the whole file). A range that starts at or past the end
// is ERangeNotSatisfiable.
func byteRange(h string, size int64) (start, n int64, ok bool, err error) {
	spec, found := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, size, false, nil
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, size, false, nil
	}
	unsatisfiable := orchestrator.Errorf(orchestrator.ERangeNotSatisfiable, "range %s is not within the file's %d bytes", spec, size)
	if first == "" { // the last n bytes
		k, perr := strconv.ParseInt(last, 10, 64)
		switch {
		case perr != nil || k < 0:
			return 0, size, false, nil
		case k == 0 || size == 0:
			return 0, 0, false, unsatisfiable
		}
		k = min(k, size)
		return size - k, k, true, nil
	}
	a, perr := strconv.ParseInt(first, 10, 64)
	if perr != nil || a < 0 {
		return 0, size, false, nil
	}
	b := size - 1
	if last != "" {
		if b, perr = strconv.ParseInt(last, 10, 64); perr != nil || b < a {
			return 0, size, false, nil
		}
		b = min(b, size-1)
	}
	if a >= size {
		return 0, 0, false, unsatisfiable
	}
	return a, b - a + 1, true, nil
}
