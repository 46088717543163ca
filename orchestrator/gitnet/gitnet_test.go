package gitnet

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range f[host] {
		out = append(out, netip.MustParseAddr(s))
	}
	if len(out) == 0 {
		return nil, &netErr{host}
	}
	return out, nil
}

type netErr struct{ host string }

func (e *netErr) Error() string { return "no such host " + e.host }

func TestParseFindsTheHost(t *testing.T) {
	for _, tt := range []struct{ url, scheme, host, port string }{
		{"https://example.com/r.git", "https", "example.com", ""},
		{"http://127.0.0.1:8080/r.git", "http", "127.0.0.1", "8080"},
		{"ssh://git@[::1]:22/r.git", "ssh", "::1", "22"},
		{"git://10.0.0.1/r.git", "git", "10.0.0.1", ""},
		{"git@github.com:o/r.git", "ssh", "github.com", ""},
		{"localhost:r.git", "ssh", "localhost", ""},
		{"git@[fe80::1]:o/r.git", "ssh", "fe80::1", ""},
	} {
		got, err := Parse(tt.url)
		if err != nil || got.Scheme != tt.scheme || got.Host != tt.host || got.Port != tt.port {
			t.Errorf("Parse(%q) = %+v, %v; want %s %s %s", tt.url, got, err, tt.scheme, tt.host, tt.port)
		}
	}
}

func TestResolveRefusesPrivateHosts(t *testing.T) {
	r := fakeResolver{"public.test": {"93.184.216.34"}, "inside.test": {"10.1.2.3"},
		"mixed.test": {"93.184.216.34", "127.0.0.1"}, "mapped.test": {"::ffff:127.0.0.1"}}
	ctx := context.Background()
	for _, tt := range []struct {
		url     string
		refused bool
	}{
		{"https://public.test/r.git", false},
		{"https://93.184.216.34/r.git", false},
		{"http://127.0.0.1:3000/private.git", true},
		{"http://localhost.test.inside.test/x", false}, // does not resolve: Resolve fails, not refused as private
		{"https://inside.test/r.git", true},
		{"https://mixed.test/r.git", true},
		{"https://mapped.test/r.git", true},
		{"git@169.254.169.254:r.git", true},
		{"ssh://[::1]/r.git", true},
		{"git://0.0.0.0/r.git", true},
		{"https://100.64.1.1/r.git", true},
		{"https://[fd00::1]/r.git", true},
	} {
		tg, err := Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Resolve(ctx, r, tg, false)
		refused := err != nil && strings.Contains(err.Error(), "--git-allow-private")
		if refused != tt.refused {
			t.Errorf("%s: err %v, want refused=%v", tt.url, err, tt.refused)
		}
		if refused && !strings.Contains(err.Error(), tg.Host) {
			t.Errorf("%s: error does not name the host: %v", tt.url, err)
		}
		if addrs, err := Resolve(ctx, r, tg, true); tt.refused && (err != nil || len(addrs) == 0) {
			t.Errorf("%s with private hosts allowed: %v %v", tt.url, addrs, err)
		}
	}
	// At session creation an unresolvable host passes (the clone reports it).
	if err := Check(ctx, r, "https://nowhere.test/r.git", false); err != nil {
		t.Errorf("Check of an unresolvable host: %v", err)
	}
	if err := Check(ctx, r, "https://inside.test/r.git", false); err == nil {
		t.Error("Check accepted a host resolving to 10.1.2.3")
	}
}

func TestCloneCommandHasNoHostCredentialsAndIsPinned(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "/tmp/agent.sock")
	t.Setenv("GIT_ASKPASS", "/usr/bin/helper")
	t.Setenv("GIT_SSH_COMMAND", "ssh -i /root/.ssh/id_ed25519")
	t.Setenv("HTTPS_PROXY", "http://proxy.test:3128")
	tg, _ := Parse("https://example.com/r.git")
	c := CloneCommand("https://example.com/r.git", tg, []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:2800::1")}, "/tmp/home")
	env := strings.Join(c.Env, "\n")
	for _, bad := range []string{"SSH_AUTH_SOCK", "/usr/bin/helper", "id_ed25519"} {
		if strings.Contains(env, bad) {
			t.Errorf("git's environment has %s:\n%s", bad, env)
		}
	}
	for _, want := range []string{"HOME=/tmp/home", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0", "IdentityAgent=none", "HTTPS_PROXY=http://proxy.test:3128"} {
		if !strings.Contains(env, want) {
			t.Errorf("git's environment lacks %s:\n%s", want, env)
		}
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"protocol.allow=never", "credential.helper=", "http.followRedirects=false",
		"http.curloptResolve=example.com:443:93.184.216.34,[2606:2800::1]"} {
		if !strings.Contains(args, want) {
			t.Errorf("git's arguments lack %s: %s", want, args)
		}
	}
	if slices.Contains(c.Args, "protocol.file.allow=always") || strings.Contains(args, "protocol.ext.allow=always") {
		t.Errorf("file or ext allowed: %s", args)
	}
	if !slices.Equal(c.Args[len(c.Args)-5:], []string{"clone", "--progress", "--", "https://example.com/r.git", "."}) {
		t.Errorf("clone arguments: %s", args)
	}

	// git:// and ssh connect to the checked address.
	tg, _ = Parse("git://example.com:9418/r.git")
	c = CloneCommand("git://example.com:9418/r.git", tg, []netip.Addr{netip.MustParseAddr("93.184.216.34")}, "/tmp/home")
	if !slices.Contains(c.Args, "git://93.184.216.34:9418/r.git") {
		t.Errorf("git:// not pinned: %v", c.Args)
	}
	tg, _ = Parse("git@example.com:o/r.git")
	c = CloneCommand("git@example.com:o/r.git", tg, []netip.Addr{netip.MustParseAddr("93.184.216.34")}, "/tmp/home")
	if env := strings.Join(c.Env, "\n"); !strings.Contains(env, "HostName=93.184.216.34") || !strings.Contains(env, "HostKeyAlias=example.com") {
		t.Errorf("ssh not pinned: %s", env)
	}
}
