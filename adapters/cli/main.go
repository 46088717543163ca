// Command filepath-cli-adapter runs a vendor coding CLI (Claude Code, Codex,
// Amp, Cursor) in its structured stream mode inside an agent container and
// speaks FAP for it: FAP inputs on stdin become the CLI's input, the CLI's
// stream becomes FAP events on stdout. One binary serves the four CLIs (the
// part is chosen by --agent or FILEPATH_AGENT_TYPE) because everything but
// the parser and the driver is the same: inputs, commits, state, stop, exit.
//
//	--agent      FILEPATH_AGENT_TYPE    claude-code, codex, amp or cursor
//	--bin        FILEPATH_CLI_BIN       the CLI program (claude, codex, amp, cursor-agent on PATH)
//	--args       FILEPATH_CLI_ARGS      extra arguments for the CLI, split on spaces
//	--workspace  FILEPATH_CLI_WORKSPACE the working directory (/workspace)
//	--state      FILEPATH_STATE_DIR     the CLI's session state (/home/agent/.state): mount a
//	                                    volume of the node there and a restarted container
//	                                    resumes its conversation
//	--grace      FILEPATH_CLI_GRACE     how long a stop may take before the CLI is killed (2s)
//	--log-level  FILEPATH_LOG_LEVEL     debug shows every line the parser skipped (info)
//
// From the container contract: FILEPATH_TASK (the first message, given once
// per node), FILEPATH_MODEL, FILEPATH_API_URL and FILEPATH_API_KEY (the
// gateway and the node's token, for Claude Code and Codex; filepath's agent
// tools as an MCP server for every CLI; the approvals inbox that answers
// Claude Code's permission prompts and Codex's approval requests), and
// FILEPATH_VENDOR_KEY: the name of the vendor key (Amp's, Cursor's) whose
// value the adapter reads from the agent API and gives the CLI.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/filepath-dev/filepath/adapters/cli/codex"
	"github.com/filepath-dev/filepath/adapters/cli/run"
	"github.com/filepath-dev/filepath/adapters/cli/streamjson"
)

func main() {
	os.Exit(Main(context.Background(), os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr))
}

// Agents are the agent types the adapter serves.
var Agents = []string{"claude-code", "codex", "amp", "cursor"}

// Main runs the adapter with args and env; it returns the exit code.
func Main(ctx context.Context, args, env []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, env, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "filepath-cli-adapter: %v\n", err)
		return 2
	}
	if cfg.Env, err = run.FetchVendorKey(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "filepath-cli-adapter: %v\n", err)
		return 1
	}
	state, err := run.OpenState(cfg.StateDir, cfg.Agent)
	if err != nil {
		fmt.Fprintf(stderr, "filepath-cli-adapter: %v\n", err)
		return 1
	}
	var drv run.Driver
	switch cfg.Agent {
	case "claude-code":
		drv = streamjson.NewClaude(cfg, state)
	case "codex":
		drv = codex.New(cfg, state)
	case "amp":
		drv = streamjson.NewAmp(cfg, state)
	case "cursor":
		drv = streamjson.NewCursor(cfg, state)
	}
	cfg.Log.Info("starting", "agent", cfg.Agent, "state", cfg.StateDir, "resume", state.Session())
	return run.Main(ctx, cfg, drv, state, stdin, stdout)
}

func parseConfig(args, env []string, stderr io.Writer) (run.Config, error) {
	get := func(k, def string) string {
		if v, ok := run.Lookup(env, k); ok && v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("filepath-cli-adapter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	agent := fs.String("agent", get("FILEPATH_AGENT_TYPE", ""), "claude-code, codex, amp or cursor")
	bin := fs.String("bin", get("FILEPATH_CLI_BIN", ""), "the CLI program")
	extra := fs.String("args", get("FILEPATH_CLI_ARGS", ""), "extra CLI arguments, split on spaces")
	ws := fs.String("workspace", get("FILEPATH_CLI_WORKSPACE", "/workspace"), "the working directory")
	stateDir := fs.String("state", get("FILEPATH_STATE_DIR", run.DefaultStateDir), "where the CLI's session state lives")
	graceS := fs.String("grace", get("FILEPATH_CLI_GRACE", "2s"), "how long a stop may take")
	level := fs.String("log-level", get("FILEPATH_LOG_LEVEL", "info"), "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return run.Config{}, err
	}
	known := false
	for _, a := range Agents {
		known = known || a == *agent
	}
	if !known {
		return run.Config{}, fmt.Errorf("unknown agent %q: set --agent or FILEPATH_AGENT_TYPE to one of %s", *agent, strings.Join(Agents, ", "))
	}
	grace, err := time.ParseDuration(*graceS)
	if err != nil || grace <= 0 {
		return run.Config{}, fmt.Errorf("--grace %q: want a positive duration like 2s", *graceS)
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return run.Config{}, fmt.Errorf("--log-level %q: want debug, info, warn or error", *level)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv})).With("adapter", *agent)
	return run.Config{
		Agent: *agent, Bin: *bin, Args: strings.Fields(*extra), Workspace: *ws, StateDir: *stateDir,
		Task: get("FILEPATH_TASK", ""), Model: get("FILEPATH_MODEL", ""),
		APIURL: get("FILEPATH_API_URL", ""), APIKey: get("FILEPATH_API_KEY", ""),
		Grace: grace, Env: env, Stderr: stderr, Log: log,
	}, nil
}
