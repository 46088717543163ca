package ship

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/gitnet"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
)

// Forges.
const (
	ForgeGitHub = "github"
	ForgeGitLab = "gitlab"
)

// PullRequestRequest opens (or updates) a pull request for a pushed branch.
type PullRequestRequest struct {
	UserID, SessionID string
	// RemoteURL is the repository's git URL: its host and owner/name.
	RemoteURL string
	// Branch is the pushed branch (the head); Base the branch to merge
	// into ("": the repository's default branch).
	Branch, Base string
	Title, Body  string
	// Credential names the token ("": the github_token or gitlab_token
	// whose host is the remote's).
	Credential string
	// APIBase is the forge's REST API root ("": api.github.com for
	// github.com, https://HOST/api/v3 for GitHub Enterprise, https://HOST/api/v4
	// for GitLab).
	APIBase string
}

// PullRequest is an opened or updated pull (merge) request.
type PullRequest struct {
	Forge  string `json:"forge" jsonschema:"enum=github,enum=gitlab"`
	URL    string `json:"url"`
	Number int    `json:"number"`
	// Updated says it existed for the branch already: its title and body
	// were replaced.
	Updated bool   `json:"updated"`
	Branch  string `json:"branch"`
	Base    string `json:"base"`
}

// forgeCall is one REST call's setup.
type forgeCall struct {
	forge, api, token string
	client            *http.Client
}

// OpenPullRequest opens a pull request (GitHub) or merge request (GitLab)
// of req.Branch, or updates the one open for it.
func (p *Pusher) OpenPullRequest(ctx context.Context, req PullRequestRequest) (PullRequest, error) {
	if err := validBranch(req.Branch); err != nil {
		return PullRequest{}, err
	}
	if strings.TrimSpace(req.Title) == "" {
		return PullRequest{}, orchestrator.FieldErrorf("title", "a pull request needs a title")
	}
	t, err := gitnet.Parse(req.RemoteURL)
	if err != nil {
		return PullRequest{}, orchestrator.FieldErrorf("remote_url", "%s", strings.Replace(err.Error(), "git_repo_url", "remote_url", 1))
	}
	repo := repoPath(req.RemoteURL)
	if strings.Count(repo, "/") < 1 {
		return PullRequest{}, orchestrator.FieldErrorf("remote_url", "%s does not name a repository (owner/name)", redact(req.RemoteURL))
	}
	cred, err := p.forgeToken(ctx, req, t)
	if err != nil {
		return PullRequest{}, err
	}
	fc := forgeCall{forge: ForgeGitHub, token: cred.Value}
	if cred.Kind == secrets.KindGitLabToken {
		fc.forge = ForgeGitLab
	}
	fc.api = strings.TrimRight(req.APIBase, "/")
	if fc.api == "" {
		switch host := strings.ToLower(t.Host); {
		case fc.forge == ForgeGitHub && host == "github.com":
			fc.api = "https://api.github.com"
		case fc.forge == ForgeGitHub:
			fc.api = "https://" + host + "/api/v3"
		default:
			fc.api = "https://" + host + "/api/v4"
		}
	}
	u, err := url.Parse(fc.api)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
		return PullRequest{}, orchestrator.FieldErrorf("api_base", "api_base %q is not an http(s) URL", req.APIBase)
	}
	if fc.client, err = p.forgeClient(ctx, u); err != nil {
		return PullRequest{}, err
	}
	if fc.forge == ForgeGitLab {
		return fc.gitlab(ctx, repo, req)
	}
	return fc.github(ctx, repo, req)
}

// repoPath is owner/name of a git URL (scp-like or a URL).
func repoPath(raw string) string {
	path := raw
	if u, err := url.Parse(raw); err == nil && strings.Contains(raw, "://") {
		path = u.Path
	} else if _, after, ok := strings.Cut(raw, ":"); ok {
		path = after
	}
	return strings.TrimSuffix(strings.Trim(path, "/"), ".git")
}

// forgeToken opens the token for the remote's forge.
func (p *Pusher) forgeToken(ctx context.Context, req PullRequestRequest, t gitnet.Target) (secrets.Secret, error) {
	fits := func(kind string) bool { return kind == secrets.KindGitHubToken || kind == secrets.KindGitLabToken }
	name := req.Credential
	if name == "" {
		infos, err := p.cfg.Secrets.List(ctx, req.UserID, req.SessionID)
		if err != nil {
			return secrets.Secret{}, err
		}
		for _, in := range infos {
			if fits(in.Kind) && (in.Host == strings.ToLower(t.Host) || in.Host == hostPortOf(t)) {
				name = in.Name
				break
			}
		}
		if name == "" {
			return secrets.Secret{}, orchestrator.FieldErrorf("credential", "no forge token for %s: add a github_token or gitlab_token with host %s in Settings", t.Host, t.Host)
		}
	}
	s, err := p.cfg.Secrets.Open(ctx, req.UserID, req.SessionID, name)
	if orchestrator.ErrorCode(err) == orchestrator.ENotFound {
		return s, orchestrator.FieldErrorf("credential", "you have no secret %q", name)
	}
	if err == nil && !fits(s.Kind) {
		return secrets.Secret{}, orchestrator.FieldErrorf("credential", "the secret %s is a %s; a pull request needs a github_token or gitlab_token", name, s.Kind)
	}
	return s, err
}

// forgeClient is an HTTP client for the API at u under the clone's
// destination rules: its address checked and pinned, no redirects.
func (p *Pusher) forgeClient(ctx context.Context, u *url.URL) (*http.Client, error) {
	var addrs []netip.Addr
	if !p.cfg.AllowPrivate {
		var err error
		addrs, err = gitnet.Resolve(ctx, p.cfg.Resolver, gitnet.Target{Scheme: u.Scheme, Host: u.Hostname(), Port: u.Port()}, false)
		if err != nil {
			var oe *orchestrator.Error
			if errors.As(err, &oe) {
				oe.Field, oe.Message = "api_base", strings.Replace(oe.Message, "git_repo_url", "the forge's API", 1)
			}
			return nil, err
		}
	}
	d := &net.Dialer{Timeout: 15 * time.Second}
	tr := &http.Transport{Proxy: nil, TLSHandshakeTimeout: 15 * time.Second, ResponseHeaderTimeout: time.Minute,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if len(addrs) > 0 {
				_, port, _ := net.SplitHostPort(addr)
				addr = net.JoinHostPort(addrs[0].String(), port)
			}
			return d.DialContext(ctx, network, addr)
		}}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, nil
}

// forgeError is a forge's error answer.
type forgeError struct {
	status int
	msg    string
}

func (e *forgeError) Error() string { return fmt.Sprintf("%d: %s", e.status, e.msg) }

// call sends one JSON request and decodes the answer into out.
func (fc forgeCall) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, fc.api+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "filepath")
	if fc.forge == ForgeGitLab {
		req.Header.Set("PRIVATE-TOKEN", fc.token)
	} else {
		req.Header.Set("Authorization", "Bearer "+fc.token)
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	}
	resp, err := fc.client.Do(req)
	if err != nil {
		return orchestrator.Errorf(orchestrator.EUnavailable, "the forge's API at %s is unreachable: %v", fc.api, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return &forgeError{status: resp.StatusCode, msg: forgeMessage(raw)}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("the forge's answer to %s %s: %w", method, path, err)
		}
	}
	return nil
}

// forgeMessage is the readable part of a forge's error body.
func forgeMessage(raw []byte) string {
	var e struct {
		Message any `json:"message"`
		Error   any `json:"error"`
		Errors  []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return truncate(strings.TrimSpace(string(raw)))
	}
	parts := []string{}
	for _, m := range []any{e.Message, e.Error} {
		switch v := m.(type) {
		case string:
			parts = append(parts, v)
		case []any:
			for _, x := range v {
				parts = append(parts, fmt.Sprint(x))
			}
		case nil:
		default:
			b, _ := json.Marshal(v)
			parts = append(parts, string(b))
		}
	}
	for _, x := range e.Errors {
		if x.Message != "" {
			parts = append(parts, x.Message)
		}
	}
	return truncate(strings.Join(parts, "; "))
}

// coded turns a forge's error into the orchestrator's.
func coded(what string, err error) error {
	var fe *forgeError
	if !errors.As(err, &fe) {
		return err
	}
	switch fe.status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return orchestrator.FieldErrorf("credential", "the forge refused the token for %s (wrong, expired, or without the right scope): %s", what, fe.msg)
	case http.StatusNotFound:
		return orchestrator.Errorf(orchestrator.ENotFound, "the forge has no %s (or the token cannot see it): %s", what, fe.msg)
	}
	return orchestrator.Errorf(orchestrator.EInvalid, "the forge refused %s (%d): %s", what, fe.status, fe.msg)
}

func (fc forgeCall) github(ctx context.Context, repo string, req PullRequestRequest) (PullRequest, error) {
	base := req.Base
	if base == "" {
		var r struct {
			DefaultBranch string `json:"default_branch"`
		}
		if err := fc.call(ctx, http.MethodGet, "/repos/"+repo, nil, &r); err != nil {
			return PullRequest{}, coded("repository "+repo, err)
		}
		base = r.DefaultBranch
	}
	type pr struct {
		Number  int    `json:"number"`
		HTMLURL string `json:"html_url"`
	}
	var got pr
	err := fc.call(ctx, http.MethodPost, "/repos/"+repo+"/pulls", map[string]string{"title": req.Title, "head": req.Branch, "base": base, "body": req.Body}, &got)
	out := PullRequest{Forge: ForgeGitHub, Branch: req.Branch, Base: base}
	var fe *forgeError
	if errors.As(err, &fe) && fe.status == http.StatusUnprocessableEntity && strings.Contains(strings.ToLower(fe.msg), "already exists") {
		owner, _, _ := strings.Cut(repo, "/")
		var open []pr
		q := url.Values{"head": {owner + ":" + req.Branch}, "state": {"open"}}
		if err := fc.call(ctx, http.MethodGet, "/repos/"+repo+"/pulls?"+q.Encode(), nil, &open); err != nil {
			return out, coded("the pull requests of "+repo, err)
		}
		if len(open) == 0 {
			return out, orchestrator.Errorf(orchestrator.EConflict, "the forge says a pull request for %s exists but lists none open: %s", req.Branch, fe.msg)
		}
		if err := fc.call(ctx, http.MethodPatch, fmt.Sprintf("/repos/%s/pulls/%d", repo, open[0].Number), map[string]string{"title": req.Title, "body": req.Body}, &got); err != nil {
			return PullRequest{Forge: ForgeGitHub, URL: open[0].HTMLURL, Number: open[0].Number, Branch: req.Branch, Base: base},
				coded(fmt.Sprintf("an update of pull request %s", open[0].HTMLURL), err)
		}
		out.Updated = true
	} else if err != nil {
		return out, coded("a pull request of "+req.Branch+" into "+base, err)
	}
	out.URL, out.Number = got.HTMLURL, got.Number
	return out, nil
}

func (fc forgeCall) gitlab(ctx context.Context, repo string, req PullRequestRequest) (PullRequest, error) {
	project := "/projects/" + url.PathEscape(repo)
	base := req.Base
	if base == "" {
		var r struct {
			DefaultBranch string `json:"default_branch"`
		}
		if err := fc.call(ctx, http.MethodGet, project, nil, &r); err != nil {
			return PullRequest{}, coded("project "+repo, err)
		}
		base = r.DefaultBranch
	}
	type mr struct {
		IID    int    `json:"iid"`
		WebURL string `json:"web_url"`
	}
	var got mr
	err := fc.call(ctx, http.MethodPost, project+"/merge_requests", map[string]string{"source_branch": req.Branch, "target_branch": base, "title": req.Title, "description": req.Body}, &got)
	out := PullRequest{Forge: ForgeGitLab, Branch: req.Branch, Base: base}
	var fe *forgeError
	if errors.As(err, &fe) && fe.status == http.StatusConflict {
		var open []mr
		q := url.Values{"source_branch": {req.Branch}, "state": {"opened"}}
		if err := fc.call(ctx, http.MethodGet, project+"/merge_requests?"+q.Encode(), nil, &open); err != nil {
			return out, coded("the merge requests of "+repo, err)
		}
		if len(open) == 0 {
			return out, orchestrator.Errorf(orchestrator.EConflict, "the forge says a merge request for %s exists but lists none open: %s", req.Branch, fe.msg)
		}
		if err := fc.call(ctx, http.MethodPut, fmt.Sprintf("%s/merge_requests/%d", project, open[0].IID), map[string]string{"title": req.Title, "description": req.Body}, &got); err != nil {
			return PullRequest{Forge: ForgeGitLab, URL: open[0].WebURL, Number: open[0].IID, Branch: req.Branch, Base: base},
				coded("an update of merge request "+open[0].WebURL, err)
		}
		out.Updated = true
	} else if err != nil {
		return out, coded("a merge request of "+req.Branch+" into "+base, err)
	}
	out.URL, out.Number = got.WebURL, got.IID
	return out, nil
}
