package api_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/filepath-dev/filepath/internal/testkit"
	"github.com/filepath-dev/filepath/orchestrator/changes"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/protocol"
)

// hostGit runs git in dir on the host.
func hostGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "safe.directory=*", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com", "GIT_COMMITTER_NAME=Ada",
		"GIT_COMMITTER_EMAIL=ada@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func writeHost(t testing.TB, dir, p, content string) {
	t.Helper()
	testkit.WriteFile(t, filepath.Join(dir, p), content)
}

// copyIn copies host directory dir (a repository, .git included) into the
// root of workspace fs.
func copyIn(t testing.TB, dir string, fsys *vfs.FS) {
	t.Helper()
	ctx := context.Background()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel := "/" + filepath.ToSlash(strings.TrimPrefix(p, dir+"/"))
		if d.IsDir() {
			_, _, err := fsys.MkdirAll(ctx, rel, false)
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, _, err = fsys.WriteFile(ctx, rel, b, vfs.WriteOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The review routes on a real repository: the node's changes (commits,
// committed and uncommitted files with their patches), one file alone, a
// comment on two lines delivered as the user's message quoting them, and
// the ways out: the changes as tar.gz and zip, the workspace as an archive,
// a bundle that git clones and fetches, a patch series that git am applies
// to the base with HEAD's tree as the result.
func TestChangesAPI(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	alice, bob := e.account("alice"), e.account("bob")
	s, root := e.session(alice)

	repo := t.TempDir()
	hostGit(t, repo, "init", "-q")
	writeHost(t, repo, "src/main.go", "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n")
	writeHost(t, repo, "README.md", "# demo\n")
	hostGit(t, repo, "add", "-A")
	hostGit(t, repo, "commit", "-q", "-m", "base")
	base := strings.TrimSpace(hostGit(t, repo, "rev-parse", "HEAD"))
	writeHost(t, repo, "src/main.go", "package main\n\nfunc main() {\n\tprintln(\"hello\")\n\tprintln(\"world\")\n}\n")
	writeHost(t, repo, "docs/new.md", "new doc\n")
	writeHost(t, repo, "bin/blob.dat", "\x00\x01binary\x02")
	hostGit(t, repo, "add", "-A")
	hostGit(t, repo, "commit", "-q", "-m", "say hello\n\nAnd the world.")
	hostGit(t, repo, "mv", "README.md", "README.txt")
	hostGit(t, repo, "commit", "-q", "-m", "rename the readme")
	head := strings.TrimSpace(hostGit(t, repo, "rev-parse", "HEAD"))
	writeHost(t, repo, "src/main.go", "package main\n\nfunc main() {\n\tprintln(\"hello\")\n\tprintln(\"world!\")\n}\n")
	writeHost(t, repo, "notes.txt", "untracked\n")
	copyIn(t, repo, e.files.Session(s.ID))
	if err := e.sessions.SetBaseCommit(ctx, s.ID, base); err != nil {
		t.Fatal(err)
	}
	// a commit event reported by the agent, made during a command record
	recs, err := e.st.Append(ctx, s.ID,
		protocol.Record{NodeID: root.ID, Kind: protocol.KindEvent, Data: json.RawMessage(`{"type":"command","cmd":"git commit","status":"done"}`)},
		protocol.Record{NodeID: root.ID, Kind: protocol.KindEvent, Ref: -1, Data: json.RawMessage(`{"type":"commit","hash":"` + head[:10] + `","message":"rename the readme"}`)})
	if err != nil {
		t.Fatal(err)
	}
	commit := recs[1:]

	nodePath := "/api/v1/sessions/" + s.ID + "/nodes/" + root.ID
	r := e.do(http.MethodGet, nodePath+"/changes", alice.key, "")
	if r.status != http.StatusOK {
		t.Fatalf("changes: %d %s", r.status, r.body)
	}
	var ch changes.Changes
	if err := json.Unmarshal(r.body, &ch); err != nil {
		t.Fatal(err)
	}
	if ch.Base.Kind != changes.BaseClone || ch.Base.Commit != base || ch.Head != head || ch.Branch != "main" || len(ch.Commits) != 2 {
		t.Fatalf("changes: base %+v head %s branch %s commits %+v", ch.Base, ch.Head, ch.Branch, ch.Commits)
	}
	if c := ch.Commits[0]; c.Subject != "rename the readme" || c.Record != commit[0].Seq || c.Ref != recs[0].Seq || c.NodeID != root.ID {
		t.Fatalf("the newest commit links to its records: %+v (commit record %+v)", c, commit[0])
	}
	status := func(fds []changes.FileDiff) string {
		var out []string
		for _, f := range fds {
			out = append(out, f.Status+" "+f.Path)
		}
		sort.Strings(out)
		return strings.Join(out, ", ")
	}
	if got := status(ch.Committed); got != "added bin/blob.dat, added docs/new.md, modified src/main.go, renamed README.txt" {
		t.Fatalf("committed: %s", got)
	}
	if got := status(ch.Uncommitted); got != "added notes.txt, modified src/main.go" {
		t.Fatalf("uncommitted: %s", got)
	}
	for _, f := range ch.Committed {
		if f.Path == "src/main.go" && f.Patch != "@@ -1,5 +1,6 @@\n package main\n \n func main() {\n-\tprintln(\"hi\")\n+\tprintln(\"hello\")\n+\tprintln(\"world\")\n }\n" {
			t.Fatalf("committed patch of src/main.go:\n%s", f.Patch)
		}
		if f.Path == "bin/blob.dat" && (!f.Binary || f.Patch != "") {
			t.Fatalf("binary: %+v", f)
		}
	}
	r = e.do(http.MethodGet, nodePath+"/changes/file?section=uncommitted&path=src/main.go", alice.key, "")
	var fd changes.FileDiff
	if r.status != http.StatusOK || json.Unmarshal(r.body, &fd) != nil || !strings.Contains(fd.Patch, "+\tprintln(\"world!\")") {
		t.Fatalf("one file: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/api/v1/sessions/"+s.ID+"/changes/file?section=committed&path=README.txt", alice.key, ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"old_path":"README.md"`) {
		t.Fatalf("a rename alone: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/api/v1/sessions/"+s.ID+"/changes?text=false", alice.key, ""); r.status != http.StatusOK || strings.Contains(string(r.body), `"patch"`) {
		t.Fatalf("session changes without text: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, nodePath+"/changes?base=nope", alice.key, ""); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("an unknown base: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, nodePath+"/changes", bob.key, ""); r.status != http.StatusNotFound {
		t.Fatalf("another user's node: %d", r.status)
	}

	// a comment on two lines
	r = e.do(http.MethodPost, nodePath+"/comments", alice.key, `{"path":"src/main.go","start_line":4,"end_line":5,"side":"new","section":"uncommitted",
		"lines":["+\tprintln(\"hello\")","+\tprintln(\"world!\")"],"body":"Use one call."}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("comment: %d %s", r.status, r.body)
	}
	var rec protocol.Record
	if err := json.Unmarshal(r.body, &rec); err != nil {
		t.Fatal(err)
	}
	in, err := protocol.DecodeInput(rec.Data)
	if err != nil {
		t.Fatal(err)
	}
	msg := in.(protocol.MessageInput)
	want := "Comment on src/main.go, lines 4-5:\n\n> +\tprintln(\"hello\")\n> +\tprintln(\"world!\")\n\nUse one call."
	if msg.From != protocol.FromUser || msg.Content != want || msg.Comment == nil || *msg.Comment != (protocol.DiffComment{Path: "src/main.go", StartLine: 4, EndLine: 5, Side: "new", Section: "uncommitted"}) {
		t.Fatalf("comment message: %+v %+v", msg, msg.Comment)
	}
	if r := e.do(http.MethodPost, nodePath+"/comments", alice.key, `{"path":"a","start_line":3,"end_line":2,"side":"new","lines":["+x"],"body":"b"}`); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("a backwards range: %d", r.status)
	}

	// the changes as archives
	r = e.do(http.MethodGet, nodePath+"/changes/download?format=tar.gz", alice.key, "")
	if r.status != http.StatusOK || !strings.Contains(r.header.Get("Content-Disposition"), "changes.tar.gz") {
		t.Fatalf("changes tar.gz: %d %v", r.status, r.header)
	}
	got := untar(t, r.body)
	if got["src/main.go"] != "package main\n\nfunc main() {\n\tprintln(\"hello\")\n\tprintln(\"world!\")\n}\n" || got["notes.txt"] != "untracked\n" ||
		got["FILEPATH-DELETED"] != "README.md\n" || got["README.txt"] != "# demo\n" || len(got) != 6 {
		t.Fatalf("changes tar.gz holds %v", names(got))
	}
	r = e.do(http.MethodGet, nodePath+"/changes/download?format=zip", alice.key, "")
	if z := unzip(t, r.body); r.status != http.StatusOK || z["docs/new.md"] != "new doc\n" || len(z) != 6 {
		t.Fatalf("changes zip: %d %v", r.status, names(z))
	}
	r = e.do(http.MethodGet, "/api/v1/sessions/"+s.ID+"/download?format=zip&path=/src", alice.key, "")
	if z := unzip(t, r.body); r.status != http.StatusOK || len(z) != 1 || z["main.go"] == "" {
		t.Fatalf("a directory as zip: %d %v", r.status, names(z))
	}
	r = e.do(http.MethodGet, "/api/v1/sessions/"+s.ID+"/download", alice.key, "")
	if w := untar(t, r.body); r.status != http.StatusOK || w["README.txt"] != "# demo\n" || w[".git/HEAD"] == "" {
		t.Fatalf("the workspace as tar.gz: %d %d files", r.status, len(w))
	}

	// a bundle of the whole history clones; one of base..HEAD fetches into
	// a clone of the base
	out := t.TempDir()
	r = e.do(http.MethodGet, nodePath+"/changes/download?format=bundle&base=none", alice.key, "")
	full := filepath.Join(out, "full.bundle")
	if err := os.WriteFile(full, r.body, 0o644); err != nil {
		t.Fatal(err)
	}
	hostGit(t, out, "clone", "-q", full, "cloned")
	if h := strings.TrimSpace(hostGit(t, filepath.Join(out, "cloned"), "rev-parse", "HEAD")); h != head {
		t.Fatalf("the clone of the bundle is at %s, want %s", h, head)
	}
	r = e.do(http.MethodGet, nodePath+"/changes/download?format=bundle", alice.key, "")
	inc := filepath.Join(out, "inc.bundle")
	if err := os.WriteFile(inc, r.body, 0o644); err != nil {
		t.Fatal(err)
	}
	hostGit(t, out, "clone", "-q", repo, "atbase")
	atBase := filepath.Join(out, "atbase")
	hostGit(t, atBase, "reset", "-q", "--hard", base)
	hostGit(t, atBase, "bundle", "verify", inc)
	hostGit(t, atBase, "fetch", "-q", inc, "main:fetched")
	if h := strings.TrimSpace(hostGit(t, atBase, "rev-parse", "fetched")); h != head {
		t.Fatalf("fetched from the bundle: %s, want %s", h, head)
	}

	// the patch series applies to the base with git am
	r = e.do(http.MethodGet, nodePath+"/changes/download?format=patch", alice.key, "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "Subject: [PATCH 1/2] say hello") {
		t.Fatalf("patches: %d\n%s", r.status, r.body)
	}
	series := filepath.Join(out, "series.patch")
	if err := os.WriteFile(series, r.body, 0o644); err != nil {
		t.Fatal(err)
	}
	hostGit(t, atBase, "checkout", "-q", "-b", "am", base)
	hostGit(t, atBase, "am", "-q", series)
	if a, b := hostGit(t, atBase, "rev-parse", "HEAD^{tree}"), hostGit(t, repo, "rev-parse", "HEAD^{tree}"); a != b {
		t.Fatalf("git am of the series gives tree %s, HEAD's is %s", a, b)
	}
	if log := hostGit(t, atBase, "log", "--format=%s|%an", "-2"); log != "rename the readme|Ada\nsay hello|Ada\n" {
		t.Fatalf("the applied commits: %q", log)
	}
}

func untar(t testing.TB, b []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("tar: %v", err)
		}
		if h.Typeflag == tar.TypeReg {
			c, _ := io.ReadAll(tr)
			out[h.Name] = string(c)
		}
	}
}

func unzip(t testing.TB, b []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("zip: %v", err)
	}
	out := map[string]string{}
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		c, _ := io.ReadAll(rc)
		rc.Close()
		out[f.Name] = string(c)
	}
	return out
}

func names(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
