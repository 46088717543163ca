package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/filepath-dev/filepath/internal/testkit"
)

// serveVars are the variables serve reads.
var serveVars = []string{"FILEPATH_ADDR", "FILEPATH_DATA", "FILEPATH_LOG_LEVEL", "FILEPATH_LOG_FORMAT", "FILEPATH_RUNTIME", "FILEPATH_ALLOWED_ORIGINS", "FILEPATH_MAX_BODY", "FILEPATH_SESSION_TTL", "FILEPATH_TRUSTED_PROXIES",
	"FILEPATH_MAILBOX", "FILEPATH_MAX_AGENTS", "FILEPATH_STREAM_BUFFER", "FILEPATH_MAX_LINE", "FILEPATH_SESSION_QUOTA", "FILEPATH_FILE_MAX", "FILEPATH_FILE_CACHE", "FILEPATH_CHECK_TIMEOUT", "FILEPATH_CHECK_TIMEOUT_MAX",
	"FILEPATH_APPROVAL_TIMEOUT", "FILEPATH_GIT_ALLOW_PRIVATE",
	"FILEPATH_OPENROUTER_API_KEY", "FILEPATH_OPENROUTER_BASE_URL", "FILEPATH_ANTHROPIC_API_KEY", "FILEPATH_ANTHROPIC_BASE_URL", "FILEPATH_OPENAI_API_KEY", "FILEPATH_OPENAI_BASE_URL",
	"FILEPATH_SESSION_BUDGET_TOKENS", "FILEPATH_SESSION_BUDGET_USD", "FILEPATH_GATEWAY_MAX_BODY", "FILEPATH_GATEWAY_TIMEOUT", "FILEPATH_MODELS_TTL"}

// parseServeEnv parses serve's args with exactly env's variables of
// serveVars set.
func parseServeEnv(t *testing.T, env map[string]string, args []string) (serveConfig, error) {
	t.Helper()
	for _, k := range serveVars {
		t.Setenv(k, env[k])
		if _, ok := env[k]; !ok {
			unsetenv(t, k)
		}
	}
	return parseServe(args, io.Discard)
}

func TestParseServe(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
		check   func(t *testing.T, c serveConfig)
	}{
		{name: "defaults", check: func(t *testing.T, c serveConfig) {
			if c.Addr != "127.0.0.1:8080" || c.Data != "./data" || c.LogLevel.String() != "INFO" || c.Runtime != "docker" || c.MaxBody != 1<<20 {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "env", env: map[string]string{"FILEPATH_ADDR": "0.0.0.0:9", "FILEPATH_DATA": "/d", "FILEPATH_LOG_LEVEL": "debug"}, check: func(t *testing.T, c serveConfig) {
			if c.Addr != "0.0.0.0:9" || c.Data != "/d" || c.LogLevel.String() != "DEBUG" {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "flags win", env: map[string]string{"FILEPATH_ADDR": "0.0.0.0:9"}, args: []string{"--addr", "127.0.0.1:7", "--runtime", "process", "--agent-cmd", "bin/testagent --x", "--allowed-origins", "a.example, b.example", "--max-body", "64KiB"}, check: func(t *testing.T, c serveConfig) {
			if c.Addr != "127.0.0.1:7" || c.Runtime != "process" || len(c.AgentCmd) != 2 || len(c.AllowedOrigins) != 2 || c.AllowedOrigins[1] != "b.example" || c.MaxBody != 64<<10 {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "session and proxies default", check: func(t *testing.T, c serveConfig) {
			if c.SessionTTL != 7*24*time.Hour || c.TrustedProxies != nil {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "session and proxies from env", env: map[string]string{"FILEPATH_SESSION_TTL": "12h", "FILEPATH_TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8"}, check: func(t *testing.T, c serveConfig) {
			if c.SessionTTL != 12*time.Hour || len(c.TrustedProxies) != 2 || c.TrustedProxies[0].String() != "127.0.0.1/32" {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "session in days", args: []string{"--session-ttl", "30d"}, check: func(t *testing.T, c serveConfig) {
			if c.SessionTTL != 30*24*time.Hour {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "check timeouts", check: func(t *testing.T, c serveConfig) {
			if c.CheckTimeout != 5*time.Minute || c.CheckTimeoutMax != 30*time.Minute {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "check timeouts set", env: map[string]string{"FILEPATH_CHECK_TIMEOUT_MAX": "2h"}, args: []string{"--check-timeout", "90s"}, check: func(t *testing.T, c serveConfig) {
			if c.CheckTimeout != 90*time.Second || c.CheckTimeoutMax != 2*time.Hour {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "bad check timeout", env: map[string]string{"FILEPATH_CHECK_TIMEOUT": "soon"}, wantErr: "FILEPATH_CHECK_TIMEOUT"},
		{name: "check timeout over its max", args: []string{"--check-timeout", "1h"}, wantErr: "--check-timeout-max"},
		{name: "bad session ttl", env: map[string]string{"FILEPATH_SESSION_TTL": "forever"}, wantErr: "FILEPATH_SESSION_TTL"},
		{name: "too short a session", args: []string{"--session-ttl", "1s"}, wantErr: "--session-ttl"},
		{name: "approval timeout default", check: func(t *testing.T, c serveConfig) {
			if c.ApprovalTimeout != 10*time.Minute {
				t.Fatalf("%+v", c.ApprovalTimeout)
			}
		}},
		{name: "approval timeout from env", env: map[string]string{"FILEPATH_APPROVAL_TIMEOUT": "1h"}, check: func(t *testing.T, c serveConfig) {
			if c.ApprovalTimeout != time.Hour {
				t.Fatalf("%+v", c.ApprovalTimeout)
			}
		}},
		{name: "bad approval timeout", env: map[string]string{"FILEPATH_APPROVAL_TIMEOUT": "never"}, wantErr: "FILEPATH_APPROVAL_TIMEOUT"},
		{name: "too short an approval timeout", args: []string{"--approval-timeout", "0s"}, wantErr: "--approval-timeout"},
		{name: "bad trusted proxies", env: map[string]string{"FILEPATH_TRUSTED_PROXIES": "proxy.local"}, wantErr: "FILEPATH_TRUSTED_PROXIES"},
		{name: "provider keys from env", env: map[string]string{"FILEPATH_OPENROUTER_API_KEY": " sk-or-1 ", "FILEPATH_OPENAI_API_KEY": ""}, check: func(t *testing.T, c serveConfig) {
			if len(c.ProviderKeys) != 1 || c.ProviderKeys["openrouter"] != "sk-or-1" {
				t.Fatalf("%+v", c.ProviderKeys)
			}
		}},
		{name: "bad level", args: []string{"--log-level", "loud"}, wantErr: "--log-level"},
		{name: "bad runtime", args: []string{"--runtime", "vm"}, wantErr: "--runtime"},
		{name: "process runtime without a command", args: []string{"--runtime", "process"}, wantErr: "--agent-cmd"},
		{name: "bad workspace", args: []string{"--workspace", "nfs"}, wantErr: "--workspace"},
		{name: "bad quota", args: []string{"--session-quota", "lots"}, wantErr: "--session-quota"},
		{name: "file limits default", check: func(t *testing.T, c serveConfig) {
			if c.FileMax != 50<<20 || c.SessionQuota != 1<<30 || c.FileCache != 64<<20 {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "no file cache", env: map[string]string{"FILEPATH_FILE_CACHE": "0"}, check: func(t *testing.T, c serveConfig) {
			if c.FileCache != 0 {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "bad file cache", args: []string{"--file-cache", "-1"}, wantErr: "--file-cache"},
		{name: "bad format", args: []string{"--log-format", "xml"}, wantErr: "--log-format"},
		{name: "bad size", args: []string{"--max-body", "lots"}, wantErr: "--max-body"},
		{name: "extra arg", args: []string{"now"}, wantErr: "unexpected argument"},
		{name: "numbers from env", env: map[string]string{"FILEPATH_MAILBOX": " 8 ", "FILEPATH_MAX_AGENTS": "3", "FILEPATH_STREAM_BUFFER": "16", "FILEPATH_MAX_LINE": "64KiB"}, check: func(t *testing.T, c serveConfig) {
			if c.Mailbox != 8 || c.MaxAgents != 3 || c.StreamBuffer != 16 || c.MaxLine != 64<<10 {
				t.Fatalf("%+v", c)
			}
		}},
		// An invalid number in a variable fails, naming the variable; it
		// never falls back to the default.
		{name: "bad int in env", env: map[string]string{"FILEPATH_MAILBOX": "lots"}, wantErr: `FILEPATH_MAILBOX "lots": want a whole number`},
		{name: "float in env", env: map[string]string{"FILEPATH_MAX_AGENTS": "2.5"}, wantErr: `FILEPATH_MAX_AGENTS "2.5"`},
		{name: "zero in env", env: map[string]string{"FILEPATH_STREAM_BUFFER": "0"}, wantErr: `FILEPATH_STREAM_BUFFER "0"`},
		{name: "bad size in env", env: map[string]string{"FILEPATH_MAX_LINE": "1 MB please"}, wantErr: `FILEPATH_MAX_LINE "1 MB please": want a size`},
		{name: "overflowing size in env", env: map[string]string{"FILEPATH_SESSION_QUOTA": "99999999999GiB"}, wantErr: `FILEPATH_SESSION_QUOTA`},
		{name: "bad level in env", env: map[string]string{"FILEPATH_LOG_LEVEL": "loud"}, wantErr: `FILEPATH_LOG_LEVEL "loud"`},
		{name: "bad int flag", args: []string{"--mailbox", "x"}, wantErr: `--mailbox "x"`},
		{name: "git private hosts off by default", check: func(t *testing.T, c serveConfig) {
			if c.GitAllowPrivate {
				t.Fatal("private git hosts allowed by default")
			}
		}},
		{name: "git private hosts from env", env: map[string]string{"FILEPATH_GIT_ALLOW_PRIVATE": "1"}, check: func(t *testing.T, c serveConfig) {
			if !c.GitAllowPrivate {
				t.Fatal("FILEPATH_GIT_ALLOW_PRIVATE=1 ignored")
			}
		}},
		{name: "git private hosts flag", args: []string{"--git-allow-private"}, check: func(t *testing.T, c serveConfig) {
			if !c.GitAllowPrivate {
				t.Fatal("--git-allow-private ignored")
			}
		}},
		{name: "bad git private env", env: map[string]string{"FILEPATH_GIT_ALLOW_PRIVATE": "sure"}, wantErr: `FILEPATH_GIT_ALLOW_PRIVATE "sure"`},
		// A flag wins over the variable: the variable's value is not used.
		{name: "flag over bad env", env: map[string]string{"FILEPATH_MAILBOX": "lots"}, args: []string{"--mailbox", "5"}, check: func(t *testing.T, c serveConfig) {
			if c.Mailbox != 5 {
				t.Fatalf("%+v", c)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseServeEnv(t, tt.env, tt.args)
			if testkit.WantErr(t, err, tt.wantErr) {
				return
			}
			tt.check(t, c)
		})
	}
}

// TestServeEndToEnd runs `filepath serve` through Main on 127.0.0.1:0, logs
// in, uses `apikey create` and `user add/login`, and stops it with ctx.
func TestServeEndToEnd(t *testing.T) {
	// serve makes <data>/mnt a shared mount point for the FUSE workspaces and
	// leaves it (a restarted orchestrator reuses it); DataDir removes it.
	data := testkit.DataDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut := &testkit.Buffer{}, &testkit.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--data", data, "--log-level", "warn"}, nil, out, errOut)
	}()
	re := regexp.MustCompile(`(?m)^login: (http://(\S+?))/login\?token=\S+$`)
	testkit.EventuallyNil(t, 20*time.Second, "the login line", func() error {
		if !re.MatchString(out.String()) {
			return fmt.Errorf("stdout %q stderr %q", out.String(), errOut.String())
		}
		return nil
	})
	if n := strings.Count(out.String(), "\n"); n != 1 {
		t.Fatalf("stdout has %d lines, want exactly the login line: %q", n, out.String())
	}
	m := re.FindStringSubmatch(out.String())
	loginURL, base := strings.TrimSpace(m[0][len("login: "):]), m[1]

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(loginURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}

	var keyOut, keyErr bytes.Buffer
	if code := Main(ctx, []string{"apikey", "create", "--data", data}, nil, &keyOut, &keyErr); code != 0 {
		t.Fatalf("apikey create: %d %s", code, keyErr.String())
	}
	key := strings.TrimSpace(keyOut.String())
	if strings.Count(keyOut.String(), "\n") != 1 || key == "" {
		t.Fatalf("apikey create printed %q, want the key alone", keyOut.String())
	}
	if me := testkit.Request(t, client, "GET", base+"/api/v1/me", key, nil); me.Status != 200 || !strings.Contains(string(me.Body), `"admin"`) {
		t.Fatalf("me: %d %s", me.Status, me.Body)
	}

	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{name: "user add", args: []string{"user", "add", "bob", "--data", data, "--url", base}, code: 0, out: base + "/login?token="},
		{name: "user login", args: []string{"user", "login", "bob", "--data", data, "--url", base}, code: 0, out: base + "/login?token="},
		{name: "user login links to where the server runs", args: []string{"user", "login", "bob", "--data", data}, code: 0, out: base + "/login?token="},
		{name: "user add twice", args: []string{"user", "add", "bob", "--data", data}, code: 1},
		{name: "user login unknown", args: []string{"user", "login", "nobody", "--data", data}, code: 1},
		{name: "user without name", args: []string{"user", "add", "--data", data}, code: 2},
		{name: "user bad sub", args: []string{"user", "rm", "bob"}, code: 2},
		{name: "apikey for bob", args: []string{"apikey", "create", "--user", "bob", "--data", data}, code: 0, out: "fp_"},
		{name: "apikey unknown user", args: []string{"apikey", "create", "--user", "nobody", "--data", data}, code: 1},
		{name: "apikey bad sub", args: []string{"apikey", "frobnicate"}, code: 2},
		{name: "serve bad flag", args: []string{"serve", "--runtime", "vm"}, code: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o, e bytes.Buffer
			code := Main(ctx, tt.args, nil, &o, &e)
			if code != tt.code || !strings.HasPrefix(o.String(), tt.out) {
				t.Fatalf("exit %d stdout %q stderr %q, want %d and %q", code, o.String(), e.String(), tt.code, tt.out)
			}
		})
	}
	// A fresh bob link logs bob in.
	var o bytes.Buffer
	Main(ctx, []string{"user", "login", "bob", "--data", data, "--url", base}, nil, &o, io.Discard)
	resp, err = client.Get(strings.TrimSpace(o.String()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob login: %d", resp.StatusCode)
	}

	cancel()
	if code := testkit.Recv(t, done, 20*time.Second, "serve to stop"); code != 0 {
		t.Fatalf("serve exit %d: %s", code, errOut.String())
	}
}
