// Command fakeforge serves a forge on a loopback port for end-to-end
// tests: one git repository, o/r, over smart HTTP (git http-backend: anyone
// clones, a push needs the token as its basic-auth password) and the
// pull-request endpoints of GitHub's REST API for it under /api/v3, as
// documented (the repository, pulls: create, list by head, update). It
// seeds o/r with one commit on main, prints its URL, and answers the pull
// requests it holds at GET /_/pulls.
//
//	fakeforge --dir DIR --token TOKEN [--addr 127.0.0.1:0]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// pull is a pull request as the fake keeps it.
type pull struct {
	Number int    `json:"number"`
	Head   string `json:"head"`
	Base   string `json:"base"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	URL    string `json:"html_url"`
}

type forge struct {
	url, token string
	mu         sync.Mutex
	pulls      []*pull
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "loopback address to listen on")
	dir := flag.String("dir", "", "a directory for the repository (o/r.git is made in it)")
	token := flag.String("token", "", "the token a push (basic-auth password) and the API (Bearer) need")
	flag.Parse()
	if *dir == "" || *token == "" || !strings.HasPrefix(*addr, "127.0.0.1:") {
		fmt.Fprintln(os.Stderr, "fakeforge: --dir and --token are required, --addr must be on 127.0.0.1")
		os.Exit(2)
	}
	if err := seed(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "fakeforge:", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeforge:", err)
		os.Exit(1)
	}
	f := &forge{url: "http://" + ln.Addr().String(), token: *token}
	backend, err := gitBackend(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeforge:", err)
		os.Exit(1)
	}
	go http.Serve(ln, f.routes(backend))
	fmt.Println(f.url)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}

// git runs git with none of the host's configuration.
func git(dir string, args ...string) error {
	cmd := exec.Command("git", append([]string{"-c", "user.name=forge", "-c", "user.email=forge@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %v: %v: %s", args, err, out)
	}
	return nil
}

// seed makes dir/o/r.git, a bare repository that takes pushes over HTTP,
// with one commit on main.
func seed(dir string) error {
	bare, work := filepath.Join(dir, "o", "r.git"), filepath.Join(dir, "seed")
	for _, d := range []string{filepath.Dir(bare), work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("# r\n\nA repository of the fake forge.\n"), 0o644); err != nil {
		return err
	}
	for _, step := range []struct {
		dir  string
		args []string
	}{
		{dir, []string{"init", "-q", "--bare", bare}},
		{bare, []string{"config", "http.receivepack", "true"}},
		{work, []string{"init", "-q"}},
		{work, []string{"add", "README.md"}},
		{work, []string{"commit", "-qm", "start"}},
		{work, []string{"push", "-q", bare, "HEAD:refs/heads/main"}},
	} {
		if err := git(step.dir, step.args...); err != nil {
			return err
		}
	}
	return os.RemoveAll(work)
}

func gitBackend(root string) (http.Handler, error) {
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("git --exec-path: %w", err)
	}
	return &cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}}, nil
}

func (f *forge) routes(backend http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/o/r.git/", func(w http.ResponseWriter, r *http.Request) {
		push := r.URL.Query().Get("service") == "git-receive-pack" || strings.HasSuffix(r.URL.Path, "/git-receive-pack")
		if _, pass, ok := r.BasicAuth(); push && (!ok || pass != f.token) {
			w.Header().Set("WWW-Authenticate", `Basic realm="fakeforge"`)
			http.Error(w, "a push needs the token", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	})
	api := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+f.token {
				answer(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("GET /api/v3/repos/o/r", api(func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusOK, map[string]string{"full_name": "o/r", "default_branch": "main"})
	}))
	mux.HandleFunc("POST /api/v3/repos/o/r/pulls", api(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Title, Head, Base, Body string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Title == "" || in.Head == "" || in.Base == "" {
			answer(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed: title, head and base are required"})
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.find(in.Head) != nil {
			answer(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
				"errors": []map[string]string{{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for o:" + in.Head + "."}}})
			return
		}
		n := len(f.pulls) + 1
		p := &pull{Number: n, Head: in.Head, Base: in.Base, Title: in.Title, Body: in.Body, URL: fmt.Sprintf("%s/o/r/pull/%d", f.url, n)}
		f.pulls = append(f.pulls, p)
		answer(w, http.StatusCreated, p)
	}))
	mux.HandleFunc("GET /api/v3/repos/o/r/pulls", api(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		out := []*pull{}
		if p := f.find(strings.TrimPrefix(r.URL.Query().Get("head"), "o:")); p != nil && r.URL.Query().Get("state") == "open" {
			out = append(out, p)
		}
		answer(w, http.StatusOK, out)
	}))
	mux.HandleFunc("PATCH /api/v3/repos/o/r/pulls/{n}", api(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Title, Body string }
		json.NewDecoder(r.Body).Decode(&in)
		n, _ := strconv.Atoi(r.PathValue("n"))
		f.mu.Lock()
		defer f.mu.Unlock()
		if n < 1 || n > len(f.pulls) {
			answer(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		p := f.pulls[n-1]
		p.Title, p.Body = in.Title, in.Body
		answer(w, http.StatusOK, p)
	}))
	mux.HandleFunc("GET /o/r/pull/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		f.mu.Lock()
		defer f.mu.Unlock()
		if n < 1 || n > len(f.pulls) {
			http.NotFound(w, r)
			return
		}
		p := f.pulls[n-1]
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><title>%s</title><h1>%s #%d</h1><p>%s into %s</p>", html.EscapeString(p.Title), html.EscapeString(p.Title), p.Number, html.EscapeString(p.Head), html.EscapeString(p.Base))
	})
	mux.HandleFunc("GET /_/pulls", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		answer(w, http.StatusOK, f.pulls)
	})
	return mux
}

// find is the pull request of head (f.mu held).
func (f *forge) find(head string) *pull {
	for _, p := range f.pulls {
		if p.Head == head {
			return p
		}
	}
	return nil
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
