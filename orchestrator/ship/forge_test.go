package ship_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/ship"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
)

// fakeForge implements the pull-request endpoints of GitHub's REST API
// (repos/{o}/{r}, pulls: create, list by head, update) and the merge-request
// endpoints of GitLab's (projects/{id}, merge_requests: create, list by
// source branch, update), as documented, for one repository o/r and one
// token.
type fakeForge struct {
	*httptest.Server
	token string
	mu    sync.Mutex
	prs   []map[string]string // number is its index + 1
}

func newFakeForge(t *testing.T, token string) *fakeForge {
	f := &fakeForge{token: token}
	mux := http.NewServeMux()
	gh := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+f.token {
				w.WriteHeader(401)
				fmt.Fprint(w, `{"message":"Bad credentials"}`)
				return
			}
			h(w, r)
		}
	}
	gl := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("PRIVATE-TOKEN") != f.token {
				w.WriteHeader(401)
				fmt.Fprint(w, `{"message":"401 Unauthorized"}`)
				return
			}
			h(w, r)
		}
	}
	find := func(head string) int {
		for i, p := range f.prs {
			if p["head"] == head {
				return i
			}
		}
		return -1
	}
	mux.HandleFunc("GET /gh/repos/o/r", gh(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"default_branch":"main"}`) }))
	mux.HandleFunc("POST /gh/repos/o/r/pulls", gh(func(w http.ResponseWriter, r *http.Request) {
		var in map[string]string
		json.NewDecoder(r.Body).Decode(&in)
		f.mu.Lock()
		defer f.mu.Unlock()
		if find(in["head"]) >= 0 {
			w.WriteHeader(422)
			fmt.Fprintf(w, `{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for o:%s."}]}`, in["head"])
			return
		}
		f.prs = append(f.prs, in)
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"number":%d,"html_url":"%s/o/r/pull/%d"}`, len(f.prs), f.URL, len(f.prs))
	}))
	mux.HandleFunc("GET /gh/repos/o/r/pulls", gh(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		head := strings.TrimPrefix(r.URL.Query().Get("head"), "o:")
		if i := find(head); i >= 0 && r.URL.Query().Get("state") == "open" {
			fmt.Fprintf(w, `[{"number":%d,"html_url":"%s/o/r/pull/%d"}]`, i+1, f.URL, i+1)
			return
		}
		fmt.Fprint(w, `[]`)
	}))
	mux.HandleFunc("PATCH /gh/repos/o/r/pulls/{n}", gh(func(w http.ResponseWriter, r *http.Request) {
		var in map[string]string
		json.NewDecoder(r.Body).Decode(&in)
		n, _ := strconv.Atoi(r.PathValue("n"))
		f.mu.Lock()
		defer f.mu.Unlock()
		f.prs[n-1]["title"], f.prs[n-1]["body"] = in["title"], in["body"]
		fmt.Fprintf(w, `{"number":%d,"html_url":"%s/o/r/pull/%d"}`, n, f.URL, n)
	}))
	mux.HandleFunc("GET /gl/projects/{id}", gl(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "o/r" {
			w.WriteHeader(404)
			fmt.Fprint(w, `{"message":"404 Project Not Found"}`)
			return
		}
		fmt.Fprint(w, `{"default_branch":"trunk"}`)
	}))
	mux.HandleFunc("POST /gl/projects/{id}/merge_requests", gl(func(w http.ResponseWriter, r *http.Request) {
		var in map[string]string
		json.NewDecoder(r.Body).Decode(&in)
		f.mu.Lock()
		defer f.mu.Unlock()
		if find(in["source_branch"]) >= 0 {
			w.WriteHeader(409)
			fmt.Fprintf(w, `{"message":["Another open merge request already exists for this source branch: !1"]}`)
			return
		}
		in["head"], in["body"] = in["source_branch"], in["description"]
		f.prs = append(f.prs, in)
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"iid":%d,"web_url":"%s/o/r/-/merge_requests/%d"}`, len(f.prs), f.URL, len(f.prs))
	}))
	mux.HandleFunc("GET /gl/projects/{id}/merge_requests", gl(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if i := find(r.URL.Query().Get("source_branch")); i >= 0 && r.URL.Query().Get("state") == "opened" {
			fmt.Fprintf(w, `[{"iid":%d,"web_url":"%s/o/r/-/merge_requests/%d"}]`, i+1, f.URL, i+1)
			return
		}
		fmt.Fprint(w, `[]`)
	}))
	mux.HandleFunc("PUT /gl/projects/{id}/merge_requests/{n}", gl(func(w http.ResponseWriter, r *http.Request) {
		var in map[string]string
		json.NewDecoder(r.Body).Decode(&in)
		n, _ := strconv.Atoi(r.PathValue("n"))
		f.mu.Lock()
		defer f.mu.Unlock()
		f.prs[n-1]["title"], f.prs[n-1]["body"] = in["title"], in["description"]
		fmt.Fprintf(w, `{"iid":%d,"web_url":"%s/o/r/-/merge_requests/%d"}`, n, f.URL, n)
	}))
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func (f *fakeForge) pr(n int) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.prs[n-1]
}

// TestPullRequest: on GitHub's API and on GitLab's, a pull (merge) request
// carries the branch, the default base, the title and the body, and its URL
// is answered; opening it again for the same branch updates the same one
// (the forge's "already exists" answer followed to it); a wrong token is
// a credential error with the forge's words.
func TestPullRequest(t *testing.T) {
	for _, tt := range []struct {
		forge, kind, api, base string
	}{
		{ship.ForgeGitHub, secrets.KindGitHubToken, "/gh", "main"},
		{ship.ForgeGitLab, secrets.KindGitLabToken, "/gl", "trunk"},
	} {
		t.Run(tt.forge, func(t *testing.T) {
			e := newEnv(t)
			const token = "tok-FORGE-1"
			f := newFakeForge(t, token)
			e.set(t, "forge", secrets.NewSecret{Kind: tt.kind, Host: "git.example.com", Value: token})
			req := ship.PullRequestRequest{UserID: e.uid, RemoteURL: "https://git.example.com/o/r.git", Branch: "filepath/fixer",
				Title: "Fix the bug", Body: "It was off by one.", APIBase: f.URL + tt.api}
			pr, err := e.push.OpenPullRequest(e.ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if pr.Forge != tt.forge || pr.Number != 1 || pr.Updated || pr.Base != tt.base || !strings.HasPrefix(pr.URL, f.URL+"/o/r/") {
				t.Fatalf("opened %+v", pr)
			}
			got := f.pr(1)
			if got["head"] != "filepath/fixer" || got["title"] != "Fix the bug" || got["body"] != "It was off by one." {
				t.Fatalf("the forge got %v", got)
			}
			if b := got["base"] + got["target_branch"]; b != tt.base {
				t.Fatalf("the base sent is %q, want the default branch %s", b, tt.base)
			}

			req.Title, req.Body = "Fix the bug (v2)", "Also the tests."
			again, err := e.push.OpenPullRequest(e.ctx, req)
			if err != nil || !again.Updated || again.URL != pr.URL || again.Number != 1 {
				t.Fatalf("again: %+v, %v", again, err)
			}
			if got := f.pr(1); got["title"] != "Fix the bug (v2)" || got["body"] != "Also the tests." {
				t.Fatalf("after the update the forge has %v", got)
			}

			e.set(t, "forge", secrets.NewSecret{Kind: tt.kind, Host: "git.example.com", Value: "expired"})
			_, err = e.push.OpenPullRequest(e.ctx, req)
			if orchestrator.ErrorField(err) != "credential" || !strings.Contains(err.Error(), "401") && !strings.Contains(err.Error(), "Bad credentials") {
				t.Fatalf("a wrong token: %v", err)
			}
		})
	}
}

// TestPullRequestUnreachable: a forge that does not answer is reported as
// unreachable.
func TestPullRequestUnreachable(t *testing.T) {
	e := newEnv(t)
	e.set(t, "forge", secrets.NewSecret{Kind: secrets.KindGitHubToken, Host: "github.com", Value: "t"})
	_, err := e.push.OpenPullRequest(e.ctx, ship.PullRequestRequest{UserID: e.uid, RemoteURL: "https://github.com/o/r.git", Branch: "b", Title: "x", APIBase: "http://127.0.0.1:1"})
	if orchestrator.ErrorCode(err) != orchestrator.EUnavailable {
		t.Fatalf("unreachable: %v", err)
	}
}
