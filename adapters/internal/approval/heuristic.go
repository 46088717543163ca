// Package approval is what the adapters share about asking a person for
// permission: the heuristic that says which shell commands need it, and a
// client of the agent API's approvals that survives orchestrator restarts.
package approval

import (
	"path"
	"sort"
	"strings"
)

// The heuristic of the native agents' bash and git tools and of the CLI
// adapters' shell commands (docs/agents.md): a command
// needs a person's approval when it may reach outside the workspace or the
// network. It is a heuristic over the command's words, not a sandbox (the
// container is that): it catches the plain cases a careful engineer would
// ask about first.
//
//   - an absolute path outside /workspace and /tmp (program directories
//     such as /usr/bin and the /dev/null family excepted), or ~ (home);
//   - a URL (scheme://);
//   - a network tool: curl, wget, ssh, scp, sftp, rsync, nc, telnet, ftp, ...;
//   - git push, fetch, pull, clone, ls-remote, remote add, submodule update;
//   - a package install: apt, apt-get, dpkg -i, pip install, npm install
//     (i, ci, add), yarn add, pnpm add, go get, go install, cargo install,
//     gem install, brew install, apk add.

// pathsAllowed are the places a command may name without asking.
var pathsAllowed = []string{"/workspace", "/tmp", "/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr",
	"/dev/zero", "/dev/random", "/dev/urandom", "/dev/fd", "/proc/self",
	"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/lib/go-1.23/bin"}

var networkTools = map[string]bool{"curl": true, "wget": true, "ssh": true, "scp": true, "sftp": true, "rsync": true,
	"nc": true, "ncat": true, "netcat": true, "socat": true, "telnet": true, "ftp": true, "http": true, "httpie": true,
	"ping": true, "dig": true, "nslookup": true, "host": true, "aria2c": true}

var gitRemote = map[string]bool{"push": true, "fetch": true, "pull": true, "clone": true, "ls-remote": true}

// installs maps a package manager to the subcommands that install.
var installs = map[string][]string{
	"apt": {"install", "update", "upgrade"}, "apt-get": {"install", "update", "upgrade"}, "dpkg": {"-i", "--install"},
	"pip": {"install"}, "pip3": {"install"}, "pipx": {"install"}, "uv": {"add", "pip"},
	"npm": {"install", "i", "ci", "add"}, "yarn": {"add", "install"}, "pnpm": {"add", "install", "i"},
	"go": {"get", "install"}, "cargo": {"install", "add"}, "gem": {"install"}, "brew": {"install"}, "apk": {"add"},
}

// CommandPrefixes are the command words the heuristic asks about whatever
// follows them, with why: the network tools, git's remote subcommands and
// the package managers' installs. A CLI that matches commands by prefix
// (Codex's execpolicy rules) asks about these; it cannot see URLs or paths.
func CommandPrefixes() (prefixes [][]string, why []string) {
	add := func(p []string, w string) {
		prefixes = append(prefixes, p)
		why = append(why, w)
	}
	for _, t := range sortedKeys(networkTools) {
		add([]string{t}, t+" reaches the network")
	}
	for _, g := range append(sortedKeys(gitRemote), "remote", "submodule") {
		add([]string{"git", g}, "git "+g+" talks to a remote repository")
	}
	for _, pm := range sortedKeys(installs) {
		for _, sub := range installs[pm] {
			add([]string{pm, sub}, pm+" "+sub+" installs packages from the network")
		}
	}
	return prefixes, why
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Reason says why command needs a person's approval ("" : it does not).
func Reason(command string) string {
	words := shellWords(command)
	for i, w := range words {
		if strings.Contains(w, "://") {
			return "it names a URL (" + cutWord(w) + "): it may reach the network"
		}
		base := path.Base(w)
		// The command word of a pipeline segment.
		first := i == 0 || isOperator(words[i-1])
		if first && networkTools[base] {
			return base + " reaches the network"
		}
		if first && (base == "git") {
			rest := words[i+1:]
			for j := 0; j < len(rest); j++ {
				a := rest[j]
				if isOperator(a) {
					break
				}
				if a == "-C" || a == "-c" || a == "--git-dir" || a == "--work-tree" || a == "--namespace" {
					j++ // the option's value
					continue
				}
				if strings.HasPrefix(a, "-") {
					continue
				}
				if gitRemote[a] {
					return "git " + a + " talks to a remote repository"
				}
				if a == "remote" || a == "submodule" {
					return "git " + a + " may add or fetch a remote repository"
				}
				break
			}
		}
		if first {
			if subs, ok := installs[base]; ok && i+1 < len(words) {
				for _, a := range words[i+1:] {
					if isOperator(a) {
						break
					}
					for _, s := range subs {
						if a == s {
							return base + " " + a + " installs packages from the network"
						}
					}
				}
			}
		}
		if p := pathIn(w); p != "" && !allowedPath(p) {
			return "it names " + cutWord(p) + ", outside /workspace and /tmp"
		}
	}
	return ""
}

// pathIn returns the absolute (or home) path a word names, if any: the word
// itself, or what follows a redirection or an = (--out=/etc/x).
func pathIn(w string) string {
	w = strings.TrimLeft(w, "<>&0123456789|")
	if _, after, ok := strings.Cut(w, "="); ok && !strings.HasPrefix(w, "/") {
		w = after
	}
	if strings.HasPrefix(w, "~") || strings.HasPrefix(w, "$HOME") || strings.HasPrefix(w, "${HOME}") {
		return w
	}
	if strings.HasPrefix(w, "/") {
		return w
	}
	return ""
}

// WritablePath reports whether an agent may write p without asking: an
// absolute path under /workspace or /tmp.
func WritablePath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	clean := path.Clean(p)
	for _, a := range []string{"/workspace", "/tmp"} {
		if clean == a || strings.HasPrefix(clean, a+"/") {
			return true
		}
	}
	return false
}

func allowedPath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false // ~, $HOME
	}
	clean := path.Clean(p)
	for _, a := range pathsAllowed {
		if clean == a || strings.HasPrefix(clean, a+"/") {
			return true
		}
	}
	return false
}

func isOperator(w string) bool {
	switch w {
	case "|", "||", "&&", ";", "&", "(", ")", "{", "}", "then", "do", "else", "sudo", "env", "xargs", "time", "nohup", "exec":
		return true
	}
	return false
}

// shellWords splits a command line into words and operators, dropping
// quotes (a word in quotes is still a word: curl "https://x" names a URL).
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote = r
		case r == ' ' || r == '\t' || r == '\n':
			flush()
		case r == ';' || r == '|' || r == '&' || r == '(' || r == ')':
			flush()
			out = append(out, string(r))
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return out
}

func cutWord(w string) string {
	if len(w) > 80 {
		return w[:77] + "..."
	}
	return w
}
