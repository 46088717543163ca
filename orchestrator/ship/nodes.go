package ship

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/protocol"
)

// Workspaces lends the host directory of a node's workspace to the
// orchestrator's own work on it; runner.Runner implements it.
type Workspaces interface {
	// Workspace returns the directory, and release to give it back.
	Workspace(ctx context.Context, nodeID string) (dir string, release func(), err error)
}

// NodePush is a push of a node's commits; empty fields take their
// defaults.
type NodePush struct {
	// RemoteURL: default the session's git URL.
	RemoteURL string `json:"remote_url,omitempty" jsonschema_description:"default: the session's git URL"`
	// Branch: default filepath/<node name>.
	Branch string `json:"branch,omitempty" jsonschema_description:"the remote branch; default filepath/<node name>"`
	// Ref is what to push from the workspace (default HEAD).
	Ref string `json:"ref,omitempty" jsonschema_description:"what to push from the workspace: a branch, tag or commit (default HEAD)"`
	// Credential names the secret (default: the one for the remote's host).
	Credential string `json:"credential,omitempty" jsonschema_description:"the name of the secret to use (default: the one whose host is the remote's)"`
	// TrustHostKey is an SSH host key fingerprint the user checked.
	TrustHostKey string `json:"trust_host_key,omitempty" jsonschema_description:"an SSH host key's fingerprint (SHA256:...) you checked: the first push to that host pins it"`
}

// Plan is what a push would send: shown to the person who approves an
// agent's request to push.
type Plan struct {
	RemoteURL string `json:"remote_url"`
	Branch    string `json:"branch"`
	// Commit is the commit the branch would point at.
	Commit string `json:"commit"`
	// Commits are the newest commits it brings, "abc1234 subject", at most
	// maxPlanCommits.
	Commits []string `json:"commits"`
	// Credential is the secret it would use: the one named, else the one
	// for the remote's host ("": none fits yet).
	Credential string `json:"credential,omitempty"`
	// UntrustedHost is the host:port of an SSH remote whose key the user
	// has not trusted yet: the push fails until they trust it in the
	// Push dialog.
	UntrustedHost string `json:"untrusted_host,omitempty"`
}

const maxPlanCommits = 20

// Nodes pushes nodes' commits: the session's defaults, the node's
// workspace lent by Workspaces, the Pusher.
type Nodes struct {
	pusher   *Pusher
	sessions *sessions.Store
	ws       Workspaces
}

// NewNodes returns the pushes of the nodes of ss.
func NewNodes(p *Pusher, ss *sessions.Store, ws Workspaces) *Nodes {
	return &Nodes{pusher: p, sessions: ss, ws: ws}
}

// Pusher is the pusher it uses.
func (n *Nodes) Pusher() *Pusher { return n.pusher }

// defaults fills req's remote and branch from the session and node of
// userID.
func (n *Nodes) defaults(ctx context.Context, userID, sessionID, nodeID string, req *NodePush) error {
	sess, err := n.sessions.GetSession(ctx, userID, sessionID)
	if err != nil {
		return err
	}
	node, err := n.sessions.GetNode(ctx, userID, sessionID, nodeID)
	if err != nil {
		return err
	}
	req.RemoteURL, req.Branch = strings.TrimSpace(req.RemoteURL), strings.TrimSpace(req.Branch)
	if req.RemoteURL == "" {
		if sess.GitRepoURL == nil || *sess.GitRepoURL == "" {
			return orchestrator.FieldErrorf("remote_url", "the session has no git URL: give the remote's")
		}
		req.RemoteURL = *sess.GitRepoURL
	}
	if req.Branch == "" {
		req.Branch = "filepath/" + node.Name
	}
	return validBranch(req.Branch)
}

// RemoteOf is url, or the git URL of userID's session.
func (n *Nodes) RemoteOf(ctx context.Context, userID, sessionID, url string) (string, error) {
	sess, err := n.sessions.GetSession(ctx, userID, sessionID)
	if err != nil {
		return "", err
	}
	if url = strings.TrimSpace(url); url != "" {
		return url, nil
	}
	if sess.GitRepoURL == nil || *sess.GitRepoURL == "" {
		return "", orchestrator.FieldErrorf("remote_url", "the session has no git URL: give the remote's")
	}
	return *sess.GitRepoURL, nil
}

// Plan is what Push(req) would send now; its Commit pins it (push it as
// Ref to send exactly what was shown).
func (n *Nodes) Plan(ctx context.Context, userID, sessionID, nodeID string, req NodePush) (Plan, error) {
	if err := n.defaults(ctx, userID, sessionID, nodeID, &req); err != nil {
		return Plan{}, err
	}
	t, _, err := n.pusher.target(ctx, req.RemoteURL)
	if err != nil {
		return Plan{}, err
	}
	// A credential named must exist and fit; without one, none may fit yet
	// (the user adds it before approving).
	cred, err := n.pusher.credential(ctx, PushRequest{UserID: userID, SessionID: sessionID, Credential: req.Credential}, t)
	if err != nil && req.Credential != "" {
		return Plan{}, err
	}
	untrusted := ""
	if t.Scheme == "ssh" {
		_, pinned, err := n.pusher.cfg.Secrets.HostKey(ctx, userID, hostPort(t))
		if err != nil {
			return Plan{}, err
		}
		if !pinned {
			untrusted = hostPort(t)
		}
	}
	dir, release, err := n.ws.Workspace(ctx, nodeID)
	if err != nil {
		return Plan{}, err
	}
	defer release()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return Plan{}, orchestrator.Errorf(orchestrator.EInvalid, "the workspace is not a git repository: %v", err)
	}
	ref := req.Ref
	if ref == "" {
		ref = "HEAD"
	}
	h, err := repo.ResolveRevision(plumbing.Revision(ref))
	if err != nil {
		return Plan{}, orchestrator.FieldErrorf("ref", "%s does not name a commit in the workspace (are there commits?)", ref)
	}
	p := Plan{RemoteURL: redact(req.RemoteURL), Branch: req.Branch, Commit: h.String(), Commits: []string{},
		Credential: cred.Name, UntrustedHost: untrusted}
	iter, err := repo.Log(&git.LogOptions{From: *h})
	if err != nil {
		return Plan{}, fmt.Errorf("read commits: %w", err)
	}
	defer iter.Close()
	for len(p.Commits) < maxPlanCommits {
		c, err := iter.Next()
		if err != nil {
			break
		}
		p.Commits = append(p.Commits, shortCommit(c))
	}
	return p, nil
}

func shortCommit(c *object.Commit) string {
	subject, _, _ := strings.Cut(strings.TrimSpace(c.Message), "\n")
	return c.Hash.String()[:7] + " " + subject
}

// Push pushes a node's commits as userID.
func (n *Nodes) Push(ctx context.Context, userID, sessionID, nodeID string, req NodePush) (PushResult, error) {
	if err := n.defaults(ctx, userID, sessionID, nodeID, &req); err != nil {
		return PushResult{}, err
	}
	dir, release, err := n.ws.Workspace(ctx, nodeID)
	if err != nil {
		return PushResult{}, err
	}
	defer release()
	return n.pusher.Push(ctx, PushRequest{UserID: userID, SessionID: sessionID, Dir: dir, RemoteURL: req.RemoteURL,
		Branch: req.Branch, Ref: req.Ref, Credential: req.Credential, TrustHostKey: req.TrustHostKey})
}

// NodePullRequest opens a pull request of a node's pushed branch; empty
// fields take their defaults.
type NodePullRequest struct {
	RemoteURL string `json:"remote_url,omitempty" jsonschema_description:"the repository (default: the session's git URL)"`
	Branch    string `json:"branch,omitempty" jsonschema_description:"the pushed branch (default filepath/<node name>)"`
	Base      string `json:"base,omitempty" jsonschema_description:"the branch to merge into (default: the repository's default branch)"`
	Title     string `json:"title,omitempty" jsonschema_description:"default: the subject of the node's newest commit"`
	Body      string `json:"body,omitempty" jsonschema_description:"default: the node's commits, newest first"`
	// Credential names the token (default: the forge token for the host).
	Credential string `json:"credential,omitempty" jsonschema_description:"the name of a github_token or gitlab_token secret (default: the one whose host is the remote's)"`
	// APIBase is the forge's REST API root.
	APIBase string `json:"api_base,omitempty" jsonschema_description:"the forge's REST API root (default: api.github.com for github.com, https://HOST/api/v3 for GitHub Enterprise with a github_token, https://HOST/api/v4 for GitLab)"`
}

// OpenPullRequest opens (or updates) the pull request of a node's pushed
// branch as userID, drafting a missing title and body from its commits.
func (n *Nodes) OpenPullRequest(ctx context.Context, userID, sessionID, nodeID string, req NodePullRequest) (PullRequest, error) {
	push := NodePush{RemoteURL: req.RemoteURL, Branch: req.Branch}
	if err := n.defaults(ctx, userID, sessionID, nodeID, &push); err != nil {
		return PullRequest{}, err
	}
	if strings.TrimSpace(req.Title) == "" || strings.TrimSpace(req.Body) == "" {
		plan, err := n.Plan(ctx, userID, sessionID, nodeID, push)
		if err != nil {
			return PullRequest{}, err
		}
		if strings.TrimSpace(req.Title) == "" && len(plan.Commits) > 0 {
			_, req.Title, _ = strings.Cut(plan.Commits[0], " ")
		}
		if strings.TrimSpace(req.Body) == "" {
			req.Body = "Commits:\n\n- " + strings.Join(plan.Commits, "\n- ") + "\n\nPushed from filepath."
		}
	}
	pr, err := n.pusher.OpenPullRequest(ctx, PullRequestRequest{UserID: userID, SessionID: sessionID, RemoteURL: push.RemoteURL,
		Branch: push.Branch, Base: req.Base, Title: req.Title, Body: req.Body, Credential: req.Credential, APIBase: req.APIBase})
	if err != nil {
		return pr, err
	}
	// The node carries its pull request (a "node" record: the tree shows
	// the link); an update of the same one changes nothing there.
	link := protocol.PullRequestLink{Forge: pr.Forge, URL: pr.URL, Number: pr.Number, Branch: pr.Branch, Base: pr.Base}
	if _, err := n.sessions.UpdateNode(ctx, userID, sessionID, nodeID, sessions.NodePatch{PullRequest: &link}); err != nil {
		return pr, fmt.Errorf("the pull request %s is open, but keeping it on the node failed: %w", pr.URL, err)
	}
	return pr, nil
}
