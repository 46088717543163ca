// Command native is filepath's own agent, shelley or pi by
// FILEPATH_AGENT_TYPE: a streaming tool loop against the gateway's OpenAI
// chat completions endpoint ($FILEPATH_API_URL/openrouter/v1) that speaks
// FAP (docs/protocol.md) on stdin and stdout. docs/agents.md describes it.
//
// It is built static (CGO_ENABLED=0) into images/shelley and images/pi.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "native:", err)
		os.Exit(2)
	}
	a, err := New(cfg, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "native:", err)
		os.Exit(1)
	}
	// SIGTERM (the orchestrator's second way to stop) is a stop too.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := a.Run(ctx, os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "native:", err)
		os.Exit(1)
	}
}

// Config is the agent's configuration, from flags and FILEPATH_* variables.
type Config struct {
	APIURL    string // FILEPATH_API_URL: the agent-facing API (the LLM gateway)
	APIKey    string // FILEPATH_API_KEY: the node's token
	Model     string // FILEPATH_MODEL
	AgentType string // FILEPATH_AGENT_TYPE: shelley or pi
	Task      string // FILEPATH_TASK: the first user message
	// StartMessage (FILEPATH_START_MESSAGE=1): the first line on stdin is
	// a system message about this start (the health checks, memories, the
	// handoff summary); the first turn waits for it so that the model
	// reads the task and it together.
	StartMessage bool
	ParentID     string // FILEPATH_PARENT_ID
	Workspace    string

	MaxSteps       int           // model calls per turn
	BashTimeout    time.Duration // a command's default time limit
	BashMaxTimeout time.Duration // the most a command may ask for
	IdleTimeout    time.Duration // the longest the model may stay silent
	ConnectRetry   time.Duration // how long "connection refused" is retried
	ContextWindow  int           // tokens; 0: from the model list
	HandoffAt      float64       // share of the context at which to hand off
}

func (c Config) check() error {
	switch {
	case c.APIURL == "":
		return errors.New("FILEPATH_API_URL (or --api-url) is not set: the agent reaches its model through it")
	case c.Model == "":
		return errors.New("FILEPATH_MODEL (or --model) is not set")
	case c.Workspace == "":
		return errors.New("--workspace is empty")
	case c.MaxSteps < 1:
		return fmt.Errorf("max steps must be at least 1, got %d", c.MaxSteps)
	case c.BashTimeout <= 0 || c.BashMaxTimeout < c.BashTimeout:
		return fmt.Errorf("bash timeouts: want 0 < default (%s) <= maximum (%s)", c.BashTimeout, c.BashMaxTimeout)
	case c.IdleTimeout <= 0:
		return fmt.Errorf("idle timeout must be positive, got %s", c.IdleTimeout)
	case c.HandoffAt <= 0 || c.HandoffAt > 1:
		return fmt.Errorf("handoff threshold must be in (0, 1], got %v", c.HandoffAt)
	}
	return nil
}

// parseConfig reads flags; each defaults to its environment variable.
func parseConfig(args []string, getenv func(string) string, errw io.Writer) (Config, error) {
	var c Config
	var bad []string
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	dur := func(name, def string) time.Duration {
		s := env(name, def)
		d, err := time.ParseDuration(s)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s=%q is not a duration (like 90s or 2m)", name, s))
		}
		return d
	}
	num := func(name, def string) int {
		s := env(name, def)
		n, err := strconv.Atoi(s)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s=%q is not an integer", name, s))
		}
		return n
	}
	fs := flag.NewFlagSet("native", flag.ContinueOnError)
	fs.SetOutput(errw)
	fs.StringVar(&c.APIURL, "api-url", getenv("FILEPATH_API_URL"), "base URL of the agent-facing API (FILEPATH_API_URL)")
	fs.StringVar(&c.APIKey, "api-key", getenv("FILEPATH_API_KEY"), "the node's token (FILEPATH_API_KEY)")
	fs.StringVar(&c.Model, "model", getenv("FILEPATH_MODEL"), "model id, e.g. anthropic/claude-sonnet-4 (FILEPATH_MODEL)")
	fs.StringVar(&c.AgentType, "agent-type", getenv("FILEPATH_AGENT_TYPE"), "persona: shelley or pi (FILEPATH_AGENT_TYPE)")
	fs.StringVar(&c.Task, "task", getenv("FILEPATH_TASK"), "the first user message (FILEPATH_TASK)")
	c.ParentID = getenv("FILEPATH_PARENT_ID")
	c.StartMessage = getenv("FILEPATH_START_MESSAGE") == "1"
	fs.StringVar(&c.Workspace, "workspace", "/workspace", "the workspace directory")
	fs.IntVar(&c.MaxSteps, "max-steps", num("FILEPATH_MAX_STEPS", "50"), "model calls per turn (FILEPATH_MAX_STEPS)")
	fs.DurationVar(&c.BashTimeout, "bash-timeout", dur("FILEPATH_BASH_TIMEOUT", "2m"), "default time limit of a command (FILEPATH_BASH_TIMEOUT)")
	fs.DurationVar(&c.BashMaxTimeout, "bash-max-timeout", dur("FILEPATH_BASH_MAX_TIMEOUT", "10m"), "the longest time limit a command may ask for (FILEPATH_BASH_MAX_TIMEOUT)")
	fs.DurationVar(&c.IdleTimeout, "llm-idle-timeout", dur("FILEPATH_LLM_IDLE_TIMEOUT", "3m"), "fail a model call silent this long (FILEPATH_LLM_IDLE_TIMEOUT)")
	fs.DurationVar(&c.ConnectRetry, "connect-retry", dur("FILEPATH_CONNECT_RETRY", "10s"), "retry a refused connection this long (FILEPATH_CONNECT_RETRY)")
	fs.IntVar(&c.ContextWindow, "context-window", num("FILEPATH_CONTEXT_WINDOW", "0"), "the model's context length in tokens; 0: from the model list (FILEPATH_CONTEXT_WINDOW)")
	fs.Float64Var(&c.HandoffAt, "handoff-at", 0.85, "share of the context window at which to hand off")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if len(bad) > 0 {
		return Config{}, errors.New(strings.Join(bad, "; "))
	}
	return c, c.check()
}
