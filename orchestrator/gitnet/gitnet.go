// Package gitnet decides whether the orchestrator may fetch a session's git
// repository from (or push a branch to) where its URL points, and builds the
// `git clone` and `git push` commands that do so without the host's
// credentials.
//
// A URL whose host resolves to a loopback, private, link-local, shared
// (100.64.0.0/10) or unspecified address is refused unless the server allows
// private hosts (--git-allow-private): otherwise a user could have the server
// clone a repository only the server's own network reaches and read it. The
// address is resolved once and the clone is pinned to it (curl's resolve
// list for http(s), the connected address for ssh and git://), so a second
// DNS answer cannot point the clone elsewhere; redirects are not followed.
package gitnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/filepath-dev/filepath/orchestrator"
)

// AllowFlag names the setting that allows private hosts, for error messages.
const AllowFlag = "--git-allow-private (FILEPATH_GIT_ALLOW_PRIVATE=1)"

// Target is where a git URL points.
type Target struct {
	Scheme string // https, http, ssh or git ("ssh" for scp-like user@host:path)
	Host   string // without brackets
	Port   string // "" when the URL names none
	scp    bool
}

// Parse returns the target of a git URL: scheme://[user@]host[:port]/path or
// scp-like [user@]host:path.
func Parse(raw string) (Target, error) {
	if scheme, _, ok := strings.Cut(raw, "://"); ok {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			return Target{}, orchestrator.FieldErrorf("git_repo_url", "git_repo_url %q is not a valid URL with a host", raw)
		}
		return Target{Scheme: strings.ToLower(scheme), Host: u.Hostname(), Port: u.Port()}, nil
	}
	hostpart := raw
	if i := strings.LastIndexByte(hostpart[:max(0, strings.IndexByte(hostpart, ':'))], '@'); i >= 0 {
		hostpart = hostpart[i+1:]
	}
	var host string
	if strings.HasPrefix(hostpart, "[") {
		end := strings.IndexByte(hostpart, ']')
		if end < 0 {
			return Target{}, orchestrator.FieldErrorf("git_repo_url", "git_repo_url %q has an unclosed '['", raw)
		}
		host = hostpart[1:end]
	} else {
		h, _, ok := strings.Cut(hostpart, ":")
		if !ok || h == "" {
			return Target{}, orchestrator.FieldErrorf("git_repo_url", "git_repo_url %q is not a URL nor user@host:path", raw)
		}
		host = h
	}
	return Target{Scheme: "ssh", Host: host, scp: true}, nil
}

// Private reports whether a is an address only the server's own host or
// network reaches.
func Private(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsUnspecified() || a.IsMulticast() ||
		shared.Contains(a) || thisNet.Contains(a)
}

var (
	shared  = netip.MustParsePrefix("100.64.0.0/10") // carrier-grade NAT
	thisNet = netip.MustParsePrefix("0.0.0.0/8")
)

// Resolver looks host names up; net.DefaultResolver in production.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Resolve returns the addresses of t's host (the host itself when it is an
// address), refusing any private one unless allowPrivate: a host with one
// private address among public ones is refused too (a client may pick any).
func Resolve(ctx context.Context, r Resolver, t Target, allowPrivate bool) ([]netip.Addr, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(t.Host); err == nil {
		addrs = []netip.Addr{a.Unmap()}
	} else {
		if r == nil {
			r = net.DefaultResolver
		}
		got, err := r.LookupNetIP(ctx, "ip", t.Host)
		if err != nil || len(got) == 0 {
			return nil, orchestrator.FieldErrorf("git_repo_url", "git_repo_url host %q does not resolve: %v", t.Host, err)
		}
		for _, a := range got {
			addrs = append(addrs, a.Unmap())
		}
	}
	if allowPrivate {
		return addrs, nil
	}
	for _, a := range addrs {
		if Private(a) {
			what := fmt.Sprintf("host %q resolves to %s", t.Host, a)
			if a.String() == t.Host {
				what = fmt.Sprintf("host %s", a)
			}
			return nil, orchestrator.FieldErrorf("git_repo_url",
				"git_repo_url %s, a loopback, private or link-local address; this server clones only from public hosts unless started with %s", what, AllowFlag)
		}
	}
	return addrs, nil
}

// Check is the check at session creation: it refuses a URL whose host is or
// resolves to a private address unless allowPrivate. A host that does not
// resolve now is accepted (the clone, which checks again, reports it).
func Check(ctx context.Context, r Resolver, raw string, allowPrivate bool) error {
	if allowPrivate {
		return nil
	}
	t, err := Parse(raw)
	if err != nil {
		return err
	}
	_, err = Resolve(ctx, r, t, false)
	if err != nil && strings.Contains(err.Error(), "does not resolve") {
		return nil
	}
	return err
}

// Command is how to run one `git clone` or `git push`.
type Command struct {
	Args []string // after "git"
	Env  []string // the whole environment
}

// passEnv are the host variables git still gets: the command search path,
// the proxy an operator set for the server's egress, and extra CA
// certificates. Nothing else: no SSH agent, no HOME with its keys and
// credential helpers, no GIT_* settings.
var passEnv = []string{"PATH", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR"}

// CloneCommand returns the command cloning raw into the current directory,
// with home as its HOME (an empty directory the caller made and removes).
// With addrs (Resolve's answer) the connection is pinned to them; with
// none (private hosts allowed) git resolves the host itself.
func CloneCommand(raw string, t Target, addrs []netip.Addr, home string) Command {
	c, target := command(raw, t, addrs, home, nil)
	c.Args = append(c.Args, "clone", "--progress", "--", target, ".")
	return c
}

// HostKeyAlias is the name a push's SSH connection checks the remote's host
// key under: PushCommand's caller writes home/known_hosts with the one key
// pinned for the remote under this name.
const HostKeyAlias = "filepath-remote"

// Push says how PushCommand authenticates.
type Push struct {
	// Header is an HTTP Authorization header's value (HTTPS remotes),
	// given to git in its environment, never its arguments.
	Header string
	// KeyFile is an SSH private key's file (ssh remotes); home/known_hosts
	// must pin the host's key under HostKeyAlias: any other key is refused.
	KeyFile string
	// HostKeyAlgorithms are the pinned key's algorithms (ssh's
	// HostKeyAlgorithms), so the server presents that key.
	HostKeyAlgorithms string
}

// PushCommand returns the command pushing refspec (src:dst) of the
// repository in the current directory to raw, with the same destination
// rules as CloneCommand (pinned to addrs, no redirects, no host
// credentials, a minimal environment) and auth's credential.
func PushCommand(raw string, t Target, addrs []netip.Addr, home, refspec string, auth Push) Command {
	c, target := command(raw, t, addrs, home, &auth)
	c.Args = append(c.Args, "push", "--porcelain", "--", target, refspec)
	return c
}

// ListCommand returns the command listing the branches and tags of raw
// (`git ls-remote`, one "HASH<TAB>REF" line each) with PushCommand's rules
// and auth's credential: what a push's remote has before it pushes.
func ListCommand(raw string, t Target, addrs []netip.Addr, home string, auth Push) Command {
	c, target := command(raw, t, addrs, home, &auth)
	c.Args = append(c.Args, "ls-remote", "--refs", "--heads", "--tags", "--", target)
	return c
}

// command is the part of a git command before its subcommand, and the URL
// it connects to.
func command(raw string, t Target, addrs []netip.Addr, home string, push *Push) (Command, string) {
	args := []string{
		// Only network protocols: no file://, no ext:: (runs a command).
		"-c", "protocol.allow=never",
		"-c", "protocol.https.allow=always", "-c", "protocol.http.allow=always",
		"-c", "protocol.ssh.allow=always", "-c", "protocol.git.allow=always",
		// No credential helper: a private repository fails instead of
		// using the host's stored passwords.
		"-c", "credential.helper=",
		"-c", "core.askPass=",
	}
	target := raw
	sshHost := ""
	if len(addrs) > 0 {
		// A redirect could lead anywhere, past the check.
		args = append(args, "-c", "http.followRedirects=false")
		switch t.Scheme {
		case "https", "http":
			port := t.Port
			if port == "" {
				port = map[string]string{"https": "443", "http": "80"}[t.Scheme]
			}
			ips := make([]string, len(addrs))
			for i, a := range addrs {
				ips[i] = a.String()
				if a.Is6() {
					ips[i] = "[" + ips[i] + "]"
				}
			}
			args = append(args, "-c", "http.curloptResolve="+t.Host+":"+port+":"+strings.Join(ips, ","))
		case "git":
			// git:// has no TLS: connecting to the address is the same.
			if u, err := url.Parse(raw); err == nil {
				u.Host = net.JoinHostPort(addrs[0].String(), u.Port())
				if u.Port() == "" {
					u.Host = hostLiteral(addrs[0])
				}
				target = u.String()
			}
		case "ssh":
			sshHost = addrs[0].String()
		}
	}

	ssh := []string{"ssh", "-F", "/dev/null", "-o", "IdentityAgent=none", "-o", "IdentitiesOnly=yes",
		"-o", "BatchMode=yes", "-o", "UserKnownHostsFile=" + filepath.Join(home, "known_hosts")}
	switch {
	case push != nil && push.KeyFile != "":
		// The one key pinned for this remote, under one name whatever the
		// address connected to.
		ssh = append(ssh, "-o", "IdentityFile="+push.KeyFile, "-o", "StrictHostKeyChecking=yes", "-o", "HostKeyAlias="+HostKeyAlias)
		if push.HostKeyAlgorithms != "" {
			ssh = append(ssh, "-o", "HostKeyAlgorithms="+push.HostKeyAlgorithms)
		}
	default:
		ssh = append(ssh, "-o", "IdentityFile=none", "-o", "StrictHostKeyChecking=accept-new")
		if sshHost != "" {
			// The host key is still checked under the URL's host name.
			ssh = append(ssh, "-o", "HostKeyAlias="+t.Host)
		}
	}
	if sshHost != "" {
		ssh = append(ssh, "-o", "HostName="+sshHost)
	}
	env := []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_SSH_COMMAND=" + strings.Join(ssh, " "),
		"GIT_SSH_VARIANT=ssh",
		"LC_ALL=C",
	}
	if push != nil && push.Header != "" {
		// In the environment (not the arguments, which any local user
		// reads in ps) and only for this one command.
		env = append(env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: "+push.Header)
	}
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return Command{Args: args, Env: env}, target
}

func hostLiteral(a netip.Addr) string {
	if a.Is6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}
