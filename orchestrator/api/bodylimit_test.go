package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

// As the README's flag table says: --max-body bounds JSON request bodies,
// except a file's content written to /fs (POST or PUT of a path), which
// --file-max bounds (as base64 JSON); both answer 413 naming the limit.
func TestMaxBodyAndFileWrites(t *testing.T) {
	e := newEnv(t, envOpts{cfg: func(c *api.Config) { c.MaxBody = 1 << 10 }, files: vfs.Config{MaxFileSize: 8 << 10}})
	a := e.account("alice")
	s, _ := e.session(a)
	big := strings.Repeat("x", 4<<10) // over --max-body, under --file-max
	if r := e.do("POST", "/api/v1/sessions", a.key, `{"name":"`+big+`"}`); r.status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.body), "the limit is 1024 bytes") {
		t.Fatalf("a JSON body over --max-body: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/api/v1/sessions/"+s.ID+"/fs/big.txt", a.key, `{"content":"`+big+`"}`); r.status != http.StatusCreated {
		t.Fatalf("a file write over --max-body, under --file-max: %d %s", r.status, r.body)
	}
	huge := strings.Repeat("x", 9<<10)
	if r := e.do("PUT", "/api/v1/sessions/"+s.ID+"/fs/big.txt", a.key, `{"content":"`+huge+`"}`); r.status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.body), "too_large") {
		t.Fatalf("a file write over --file-max: %d %s", r.status, r.body)
	}
}
