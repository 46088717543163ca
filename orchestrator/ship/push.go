// Package ship takes a node's work out of filepath: it pushes a branch from
// a node's workspace to a git remote with a credential from the secret
// store, from the host, so that no credential ever enters an agent's
// container.
//
//	New(Config{Secrets, AllowPrivate, Resolver}) *Pusher
//	Push(ctx, PushRequest) (PushResult, error)
//	ProbeHostKey(ctx, userID, url) (HostKey, error)   // what an SSH remote presents, and whether it is pinned
//
// The workspace's repository is written by an agent, so git never runs in
// it: its objects reachable from the commit to push are copied (go-git,
// which executes nothing) into a bare repository in a temporary directory,
// and `git push` runs there with gitnet's destination rules, no hooks, no
// configuration but its own, and the credential in its environment (HTTPS)
// or a 0600 file removed afterwards (SSH, with the host key pinned per
// remote).
package ship

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/revlist"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"golang.org/x/crypto/ssh"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/gitnet"
	"github.com/filepath-dev/filepath/orchestrator/store/secrets"
)

// DefaultTimeout bounds one push.
const DefaultTimeout = 10 * time.Minute

// maxOutput bounds the git output kept for an error or a result.
const maxOutput = 8 << 10

// Config configures New.
type Config struct {
	// Secrets holds the credentials and the pinned host keys (required).
	Secrets *secrets.Store
	// AllowPrivate allows remotes on loopback and private addresses
	// (--git-allow-private), as for the clone.
	AllowPrivate bool
	// Resolver looks host names up (net.DefaultResolver).
	Resolver gitnet.Resolver
	// Timeout bounds one push (DefaultTimeout).
	Timeout time.Duration
}

// Pusher pushes branches. It is safe for concurrent use.
type Pusher struct{ cfg Config }

// New returns a Pusher.
func New(cfg Config) *Pusher {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Pusher{cfg: cfg}
}

// PushRequest is one push.
type PushRequest struct {
	UserID    string
	SessionID string
	// Dir is the node's workspace as the host sees it (a git work tree).
	Dir string
	// RemoteURL is where to push (https://, http://, ssh:// or user@host:path).
	RemoteURL string
	// Branch is the remote branch to create or update.
	Branch string
	// Ref is what to push from the workspace ("": HEAD).
	Ref string
	// Credential names the secret to use; "": the one whose host is the
	// remote's host.
	Credential string
	// TrustHostKey is the fingerprint of an SSH remote's host key the user
	// confirmed: the first push to a host pins it.
	TrustHostKey string
}

// PushResult says what a push did.
type PushResult struct {
	// RemoteURL is where it pushed (without any user information).
	RemoteURL string `json:"remote_url"`
	Branch    string `json:"branch"`
	// Commit is the commit the branch points at now.
	Commit string `json:"commit"`
	// Status is created (a new branch), updated (fast-forward) or
	// up_to_date.
	Status string `json:"status" jsonschema:"enum=created,enum=updated,enum=up_to_date"`
	// Credential is the name of the secret used.
	Credential string `json:"credential"`
	// Remote is what the remote said (its "remote:" lines), e.g. a link to
	// open a pull request.
	Remote string `json:"remote,omitempty"`
}

// HostKey is the key an SSH remote presents.
type HostKey struct {
	// Host is host:port, the name its pin is kept under.
	Host        string `json:"host"`
	KeyType     string `json:"key_type"`
	Fingerprint string `json:"fingerprint"`
	// Pinned says the user trusts this key for Host already; PinnedOther
	// that another key is pinned (the host's key changed, or someone is
	// in the middle).
	Pinned      bool `json:"pinned"`
	PinnedOther bool `json:"pinned_other,omitempty"`
}

var branchRE = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)

// validBranch checks a branch name by git's rules (check-ref-format) that
// matter here.
func validBranch(b string) error {
	bad := b == "" || len(b) > 200 || !branchRE.MatchString(b) || strings.Contains(b, "..") || strings.Contains(b, "//") ||
		strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".") || strings.HasSuffix(b, ".lock") ||
		strings.HasPrefix(b, "-") || strings.Contains(b, "/.") || strings.HasPrefix(b, ".") || b == "HEAD"
	if bad {
		return orchestrator.FieldErrorf("branch", "%q is not a branch name git accepts (letters, digits, '.', '_', '-', '/'; no '..', no leading '-' or '.')", b)
	}
	return nil
}

// redact is raw without a password or token in its user information.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		u.User = url.User(u.User.Username())
		return u.String()
	}
	return raw
}

// target parses and checks a remote: where it points, and the addresses to
// pin the connection to (none with private hosts allowed).
func (p *Pusher) target(ctx context.Context, raw string) (gitnet.Target, []netip.Addr, error) {
	t, err := gitnet.Parse(raw)
	if err != nil {
		return t, nil, orchestrator.FieldErrorf("remote_url", "%s", strings.Replace(err.Error(), "git_repo_url", "remote_url", 1))
	}
	if t.Scheme != "https" && t.Scheme != "http" && t.Scheme != "ssh" {
		return t, nil, orchestrator.FieldErrorf("remote_url", "push over https, http or ssh, not %s", t.Scheme)
	}
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			return t, nil, orchestrator.FieldErrorf("remote_url", "the remote URL holds a password: add it as a secret in Settings instead")
		}
	}
	if p.cfg.AllowPrivate {
		return t, nil, nil
	}
	addrs, err := gitnet.Resolve(ctx, p.cfg.Resolver, t, false)
	if err != nil {
		var oe *orchestrator.Error
		if errors.As(err, &oe) {
			oe.Field, oe.Message = "remote_url", strings.Replace(oe.Message, "git_repo_url", "remote_url", 1)
		}
		return t, nil, err
	}
	return t, addrs, nil
}

// hostPort is the name a remote's SSH host key is pinned under.
func hostPort(t gitnet.Target) string {
	port := t.Port
	if port == "" {
		port = "22"
	}
	return strings.ToLower(net.JoinHostPort(t.Host, port))
}

var errCaptured = errors.New("host key captured")

// ProbeHostKey connects to the SSH remote raw and returns the host key it
// presents, and whether userID pinned it: the UI shows its fingerprint for
// the user to confirm before the first push.
func (p *Pusher) ProbeHostKey(ctx context.Context, userID, raw string) (HostKey, error) {
	t, addrs, err := p.target(ctx, raw)
	if err != nil {
		return HostKey{}, err
	}
	if t.Scheme != "ssh" {
		return HostKey{}, orchestrator.FieldErrorf("remote_url", "%s is not an SSH remote", redact(raw))
	}
	key, err := p.hostKey(ctx, t, addrs)
	if err != nil {
		return HostKey{}, err
	}
	hk := HostKey{Host: hostPort(t), KeyType: key.Type(), Fingerprint: ssh.FingerprintSHA256(key)}
	pin, ok, err := p.cfg.Secrets.HostKey(ctx, userID, hk.Host)
	if err != nil {
		return HostKey{}, err
	}
	hk.Pinned = ok && pin.Fingerprint == hk.Fingerprint
	hk.PinnedOther = ok && !hk.Pinned
	return hk, nil
}

// hostKey reads the host key the SSH server at t presents.
func (p *Pusher) hostKey(ctx context.Context, t gitnet.Target, addrs []netip.Addr) (ssh.PublicKey, error) {
	host := t.Host
	if len(addrs) > 0 {
		host = addrs[0].String()
	}
	port := t.Port
	if port == "" {
		port = "22"
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, orchestrator.Errorf(orchestrator.EUnavailable, "cannot reach %s: %v", hostPort(t), err)
	}
	defer conn.Close()
	if dl, ok := dctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	var key ssh.PublicKey
	_, _, _, err = ssh.NewClientConn(conn, net.JoinHostPort(t.Host, port), &ssh.ClientConfig{User: "git",
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error { key = k; return errCaptured }})
	if key == nil {
		return nil, orchestrator.Errorf(orchestrator.EUnavailable, "%s did not present an SSH host key: %v", hostPort(t), err)
	}
	return key, nil
}

// Push pushes req.Ref of the workspace to req.Branch of the remote.
func (p *Pusher) Push(ctx context.Context, req PushRequest) (PushResult, error) {
	if err := validBranch(req.Branch); err != nil {
		return PushResult{}, err
	}
	t, addrs, err := p.target(ctx, req.RemoteURL)
	if err != nil {
		return PushResult{}, err
	}
	res := PushResult{RemoteURL: redact(req.RemoteURL), Branch: req.Branch}
	cred, err := p.credential(ctx, req, t)
	if err != nil {
		return res, err
	}
	res.Credential = cred.Name

	src, commit, err := openCommit(req.Dir, req.Ref)
	if err != nil {
		return res, err
	}
	res.Commit = commit.String()

	home, err := os.MkdirTemp("", "filepath-push-")
	if err != nil {
		return res, fmt.Errorf("push: %w", err)
	}
	defer os.RemoveAll(home)
	var auth gitnet.Push
	switch cred.Kind {
	case secrets.KindGitSSH:
		if auth.HostKeyAlgorithms, err = p.pinHost(ctx, req, t, addrs, home); err != nil {
			return res, err
		}
		auth.KeyFile = filepath.Join(home, "id")
		if err := os.WriteFile(auth.KeyFile, []byte(strings.TrimSpace(cred.Value)+"\n"), 0o600); err != nil {
			return res, fmt.Errorf("push: %w", err)
		}
	default:
		user := cred.Username
		if user == "" {
			user = map[string]string{secrets.KindGitLabToken: "oauth2"}[cred.Kind]
		}
		if user == "" {
			user = "x-access-token"
		}
		auth.Header = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+cred.Value))
	}

	cctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	bare := filepath.Join(home, "repo.git")
	if err := copyCommit(src, commit, bare); err != nil {
		return res, err
	}
	gc := gitnet.PushCommand(req.RemoteURL, t, addrs, home, "refs/heads/filepath-push:refs/heads/"+req.Branch, auth)
	cmd := exec.CommandContext(cctx, "git", gc.Args...)
	var stdout, stderr bytes.Buffer
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = bare, gc.Env, &stdout, &stderr
	runErr := cmd.Run()
	res.Remote = remoteLines(stderr.String())
	if cctx.Err() == context.DeadlineExceeded {
		return res, orchestrator.Errorf(orchestrator.EUnavailable, "push to %s: gave up after %s", res.RemoteURL, p.cfg.Timeout)
	}
	r := refusal{has: func(h plumbing.Hash) bool { return isCommit(src, h) },
		list: func() (map[string]plumbing.Hash, error) { return listRefs(cctx, req.RemoteURL, t, addrs, home, auth) }}
	return res, outcome(&res, r, stdout.String(), stderr.String(), runErr)
}

// listRefs are the branches and tags of the remote (`git ls-remote`).
func listRefs(ctx context.Context, raw string, t gitnet.Target, addrs []netip.Addr, home string, auth gitnet.Push) (map[string]plumbing.Hash, error) {
	lc := gitnet.ListCommand(raw, t, addrs, home, auth)
	cmd := exec.CommandContext(ctx, "git", lc.Args...)
	var stdout, stderr bytes.Buffer
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = home, lc.Env, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("git ls-remote: %v: %s", err, lastLines(stderr.String()))
	}
	refs := map[string]plumbing.Hash{}
	for l := range strings.Lines(stdout.String()) {
		hash, name, ok := strings.Cut(strings.TrimSpace(l), "\t")
		if ok && (len(hash) == 40 || len(hash) == 64) && plumbing.IsHash(hash) {
			refs[name] = plumbing.NewHash(hash)
		}
	}
	return refs, nil
}

// credential opens the secret a push uses: the one named, else the one
// whose host is the remote's and whose kind fits its scheme.
func (p *Pusher) credential(ctx context.Context, req PushRequest, t gitnet.Target) (secrets.Secret, error) {
	fits := func(kind string) bool {
		if t.Scheme == "ssh" {
			return kind == secrets.KindGitSSH
		}
		return kind == secrets.KindGitHTTPS || kind == secrets.KindGitHubToken || kind == secrets.KindGitLabToken
	}
	want := "an SSH key (kind git_ssh)"
	if t.Scheme != "ssh" {
		want = "a git_https credential or a github_token / gitlab_token"
	}
	name := req.Credential
	if name == "" {
		infos, err := p.cfg.Secrets.List(ctx, req.UserID, req.SessionID)
		if err != nil {
			return secrets.Secret{}, err
		}
		host := strings.ToLower(t.Host)
		for _, in := range infos {
			if fits(in.Kind) && (in.Host == host || in.Host == hostPortOf(t)) {
				name = in.Name
				break
			}
		}
		if name == "" {
			return secrets.Secret{}, orchestrator.FieldErrorf("credential", "no credential for %s: add %s with host %s in Settings, or name one", t.Host, want, t.Host)
		}
	}
	s, err := p.cfg.Secrets.Open(ctx, req.UserID, req.SessionID, name)
	if orchestrator.ErrorCode(err) == orchestrator.ENotFound {
		return s, orchestrator.FieldErrorf("credential", "you have no secret %q", name)
	}
	if err != nil {
		return s, err
	}
	if !fits(s.Kind) {
		return secrets.Secret{}, orchestrator.FieldErrorf("credential", "the secret %s is a %s; a push to %s needs %s", name, s.Kind, t.Scheme, want)
	}
	return s, nil
}

// hostPortOf is t's host with its port when the URL names one.
func hostPortOf(t gitnet.Target) string {
	if t.Port == "" {
		return strings.ToLower(t.Host)
	}
	return strings.ToLower(net.JoinHostPort(t.Host, t.Port))
}

// pinHost writes home/known_hosts with the key pinned for the SSH remote,
// pinning the one it presents now when the user confirmed its
// fingerprint; an unpinned host without that confirmation is refused,
// naming the fingerprint to confirm. It returns the pinned key's
// algorithms: ssh offers only those, so the server presents that key.
func (p *Pusher) pinHost(ctx context.Context, req PushRequest, t gitnet.Target, addrs []netip.Addr, home string) (string, error) {
	hp := hostPort(t)
	pin, ok, err := p.cfg.Secrets.HostKey(ctx, req.UserID, hp)
	if err != nil {
		return "", err
	}
	if !ok {
		key, err := p.hostKey(ctx, t, addrs)
		if err != nil {
			return "", err
		}
		fp := ssh.FingerprintSHA256(key)
		if req.TrustHostKey != fp {
			return "", &orchestrator.Error{Code: orchestrator.EPreconditionFailed, Field: "trust_host_key",
				Message: fmt.Sprintf("%s is a new SSH host: it presents the %s key %s. Check it with the host's owner, then push again trusting it (trust_host_key)", hp, key.Type(), fp)}
		}
		if pin, err = p.cfg.Secrets.TrustHostKey(ctx, req.UserID, hp, key); err != nil {
			return "", err
		}
	}
	algs := pin.KeyType
	if algs == ssh.KeyAlgoRSA {
		algs = ssh.KeyAlgoRSASHA512 + "," + ssh.KeyAlgoRSASHA256 + "," + ssh.KeyAlgoRSA
	}
	line := gitnet.HostKeyAlias + " " + pin.PublicKey + "\n"
	if err := os.WriteFile(filepath.Join(home, "known_hosts"), []byte(line), 0o600); err != nil {
		return "", fmt.Errorf("push: %w", err)
	}
	return algs, nil
}

// openCommit opens the repository at dir and resolves ref ("": HEAD) to
// a commit. go-git reads the agent's repository: nothing in it (hooks,
// configuration) runs.
func openCommit(dir, ref string) (*git.Repository, plumbing.Hash, error) {
	src, err := git.PlainOpen(dir)
	if err != nil {
		return nil, plumbing.ZeroHash, orchestrator.Errorf(orchestrator.EInvalid, "the workspace is not a git repository: %v", err)
	}
	if ref == "" {
		ref = "HEAD"
	}
	h, err := src.ResolveRevision(plumbing.Revision(ref))
	if err != nil {
		return nil, plumbing.ZeroHash, orchestrator.FieldErrorf("ref", "%s does not name a commit in the workspace (are there commits?): %v", ref, err)
	}
	if _, err := src.CommitObject(*h); err != nil {
		return nil, plumbing.ZeroHash, orchestrator.FieldErrorf("ref", "%s is not a commit: %v", ref, err)
	}
	return src, *h, nil
}

// isCommit says the workspace has the commit h.
func isCommit(src *git.Repository, h plumbing.Hash) bool {
	_, err := src.CommitObject(h)
	return err == nil
}

// packWindow is how many objects the copy's pack compares for a delta
// (git's pack.window).
const packWindow = 10

// copyCommit copies the commit h with every object it reaches into a new
// bare repository at bare, as its branch filepath-push. git push sends
// from there what the remote's branches do not reach through h's history.
func copyCommit(src *git.Repository, h plumbing.Hash, bare string) error {
	dst, err := git.PlainInit(bare, true)
	if err != nil {
		return fmt.Errorf("push: init: %w", err)
	}
	hashes, err := revlist.Objects(src.Storer, []plumbing.Hash{h}, nil)
	if err != nil {
		return fmt.Errorf("push: list objects: %w", err)
	}
	// One pack, not a loose file per object: a push of a 2,000-file
	// history writes one file instead of thousands. With deltas (git's
	// default window), which git push reuses: without them it sends the
	// objects whole (1.5× the bytes of 500 similar Go files).
	pw, ok := dst.Storer.(storer.PackfileWriter)
	if !ok {
		return fmt.Errorf("push: the copy's storage writes no packs")
	}
	w, err := pw.PackfileWriter()
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	if _, err := packfile.NewEncoder(w, src.Storer, false).Encode(hashes, packWindow); err != nil {
		w.Close()
		return fmt.Errorf("push: copy objects: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("push: copy objects: %w", err)
	}
	if err := dst.Storer.SetReference(plumbing.NewHashReference("refs/heads/filepath-push", h)); err != nil {
		return fmt.Errorf("push: %w", err)
	}
	return nil
}

// remoteLines are the remote's own messages in git's output.
func remoteLines(stderr string) string {
	var out []string
	for l := range strings.Lines(stderr) {
		if m, ok := strings.CutPrefix(strings.TrimRight(l, "\r\n"), "remote: "); ok && strings.TrimSpace(m) != "" {
			out = append(out, strings.TrimSpace(m))
		}
	}
	return truncate(strings.Join(out, "\n"))
}

func truncate(s string) string {
	if len(s) > maxOutput {
		return s[:maxOutput] + "…"
	}
	return s
}

// refusal tells apart, when the remote's branch refused a push, a branch
// that exists with commits the workspace never had from a non-fast-forward
// of history the workspace had.
type refusal struct {
	// list reads the remote's refs (asked only on a refusal).
	list func() (map[string]plumbing.Hash, error)
	// has says the workspace has a commit.
	has func(plumbing.Hash) bool
}

// freeName is a branch name like branch that tips lack.
func freeName(branch string, tips map[string]plumbing.Hash) string {
	for i := 2; ; i++ {
		name := fmt.Sprintf("%s-%d", branch, i)
		if _, taken := tips["refs/heads/"+name]; !taken {
			return name
		}
	}
}

// rejected is the error of a push the remote's branch refused before
// anything was sent: the branch exists with commits the workspace never
// had (most often another branch of the same name: the default
// filepath/<node> of an earlier session), or the workspace's history no
// longer contains the commit pushed there before (an amend, a rebase).
func (r refusal) rejected(branch, msg string) error {
	tips, err := r.list()
	tip, ok := tips["refs/heads/"+branch]
	if err != nil || !ok {
		return orchestrator.Errorf(orchestrator.EConflict, "the remote refused %s: it has commits the workspace lacks (non-fast-forward): %s. Pull them into the workspace, or push to another branch", branch, msg)
	}
	short := tip.String()[:12]
	if !r.has(tip) {
		return &orchestrator.Error{Code: orchestrator.EConflict, Field: "branch", Message: fmt.Sprintf(
			"the branch %s already exists on the remote, at %s, with commits this workspace never had (another branch of that name, or commits someone else pushed to it): push under another name, e.g. %s, or fetch %s into the workspace and build on it",
			branch, short, freeName(branch, tips), branch)}
	}
	return orchestrator.Errorf(orchestrator.EConflict,
		"the remote refused %s: non-fast-forward: the remote's %s is at %s, which the commit to push does not contain (the workspace's history changed since it was pushed, e.g. an amend or a rebase, or is behind it). Build on %s, or push to another branch, e.g. %s (%s)",
		branch, branch, short, short, freeName(branch, tips), msg)
}

// outcome reads `git push --porcelain`'s report into res, or the error
// saying what happened with the remote's own words.
func outcome(res *PushResult, r refusal, stdout, stderr string, runErr error) error {
	for l := range strings.Lines(stdout) {
		flag, rest, ok := strings.Cut(strings.TrimRight(l, "\n"), "\t")
		if !ok || len(flag) != 1 {
			continue
		}
		_, summary, _ := strings.Cut(rest, "\t")
		switch flag {
		case "*":
			res.Status = "created"
		case " ", "+":
			res.Status = "updated"
		case "=":
			res.Status = "up_to_date"
		case "!":
			msg := summary
			if remote := res.Remote; remote != "" {
				msg += "; the remote said: " + remote
			}
			switch {
			case strings.Contains(summary, "non-fast-forward"), strings.Contains(summary, "fetch first"):
				return r.rejected(res.Branch, msg)
			default:
				return orchestrator.Errorf(orchestrator.EConflict, "the remote refused %s: %s", res.Branch, msg)
			}
		}
	}
	if runErr == nil && res.Status != "" {
		return nil
	}
	text := strings.TrimSpace(stderr)
	switch low := strings.ToLower(text); {
	case strings.Contains(low, "authentication failed"), strings.Contains(low, "permission denied"),
		strings.Contains(low, "could not read username"), strings.Contains(low, " 401"), strings.Contains(low, " 403"),
		strings.Contains(low, "invalid username or password"):
		return orchestrator.FieldErrorf("credential", "the remote refused the credential %s (wrong or expired?): %s", res.Credential, lastLines(text))
	case strings.Contains(low, "host key verification failed"), strings.Contains(low, "remote host identification has changed"):
		return orchestrator.Errorf(orchestrator.EConflict, "the remote's SSH host key is not the one pinned for it: refusing to push (if its key really changed, forget the pin in Settings and trust the new one)")
	case strings.Contains(low, "could not resolve host"), strings.Contains(low, "connection refused"), strings.Contains(low, "timed out"), strings.Contains(low, "could not read from remote"):
		return orchestrator.Errorf(orchestrator.EUnavailable, "cannot reach %s: %s", res.RemoteURL, lastLines(text))
	}
	if runErr == nil {
		runErr = errors.New("no report")
	}
	return orchestrator.Errorf(orchestrator.EInvalid, "git push to %s failed (%v): %s", res.RemoteURL, runErr, lastLines(text))
}

// lastLines is the end of git's output, without progress lines.
func lastLines(s string) string {
	var keep []string
	for l := range strings.Lines(s) {
		l = strings.TrimSpace(l)
		if l == "" || strings.Contains(l, "\r") || strings.HasPrefix(l, "To ") {
			continue
		}
		keep = append(keep, l)
	}
	if len(keep) > 6 {
		keep = keep[len(keep)-6:]
	}
	return truncate(strings.Join(keep, "\n"))
}
