package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/hub"
	"github.com/filepath-dev/filepath/orchestrator/store"
)

// serveConfig is the validated configuration of `filepath serve`.
type serveConfig struct {
	Addr           string
	Data           string
	LogLevel       slog.Level
	LogFormat      string // text | json
	Runtime        string // docker | process (wired by the lifecycle runner)
	AllowedOrigins []string
	MaxBody        int64
	StreamBuffer   int
}

// env returns the FILEPATH_* variable name or def when it is unset.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// parseServe reads flags, then FILEPATH_* env vars for what the flags left
// unset (flags win), and validates the result.
func parseServe(args []string, stderr io.Writer) (serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", env("FILEPATH_ADDR", "127.0.0.1:8080"), "listen address (env FILEPATH_ADDR)")
	data := fs.String("data", env("FILEPATH_DATA", "./data"), "data directory: filepath.db, node workspaces, logs (env FILEPATH_DATA)")
	level := fs.String("log-level", env("FILEPATH_LOG_LEVEL", "info"), "debug, info, warn or error (env FILEPATH_LOG_LEVEL)")
	format := fs.String("log-format", env("FILEPATH_LOG_FORMAT", "text"), "text or json (env FILEPATH_LOG_FORMAT)")
	runtime := fs.String("runtime", env("FILEPATH_RUNTIME", "docker"), "agent runtime: docker or process (env FILEPATH_RUNTIME)")
	origins := fs.String("allowed-origins", env("FILEPATH_ALLOWED_ORIGINS", ""), "comma-separated extra WebSocket origin patterns, e.g. app.example.com (env FILEPATH_ALLOWED_ORIGINS)")
	maxBody := fs.String("max-body", env("FILEPATH_MAX_BODY", "1MiB"), "largest JSON request body (env FILEPATH_MAX_BODY)")
	buffer := fs.Int("stream-buffer", hub.DefaultBuffer, "records buffered per stream client before it is dropped as too slow")
	if err := fs.Parse(args); err != nil {
		return serveConfig{}, err
	}
	if fs.NArg() > 0 {
		return serveConfig{}, fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	cfg := serveConfig{Addr: *addr, Data: *data, LogFormat: *format, Runtime: *runtime, StreamBuffer: *buffer}
	if err := cfg.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return cfg, fmt.Errorf("serve: --log-level %q: want debug, info, warn or error", *level)
	}
	switch cfg.LogFormat {
	case "text", "json":
	default:
		return cfg, fmt.Errorf("serve: --log-format %q: want text or json", cfg.LogFormat)
	}
	switch cfg.Runtime {
	case "docker", "process":
	default:
		return cfg, fmt.Errorf("serve: --runtime %q: want docker or process", cfg.Runtime)
	}
	if cfg.Addr == "" {
		return cfg, errors.New("serve: --addr is empty")
	}
	if cfg.Data == "" {
		return cfg, errors.New("serve: --data is empty")
	}
	if cfg.StreamBuffer < 1 {
		return cfg, fmt.Errorf("serve: --stream-buffer %d: want at least 1", cfg.StreamBuffer)
	}
	n, err := parseSize(*maxBody)
	if err != nil || n < 1 {
		return cfg, fmt.Errorf("serve: --max-body %q: want a size like 1MiB or 65536", *maxBody)
	}
	cfg.MaxBody = n
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.AllowedOrigins = append(cfg.AllowedOrigins, o)
		}
	}
	return cfg, nil
}

// parseSize parses a byte size: 123, 64KiB, 1MiB, 2GiB (also KB/MB/GB as
// powers of 1000).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(v), u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, err
	}
	return n * mult, nil
}

func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// runServe is `filepath serve`: it serves until ctx ends (main cancels it on
// SIGINT/SIGTERM).
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseServe(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	log := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	if err := serve(ctx, cfg, stdout, log); err != nil {
		log.Error("serve failed", "err", err)
		return 1
	}
	return 0
}

// serve builds the hub, the store and the API server, and runs them until
// ctx ends.
func serve(ctx context.Context, cfg serveConfig, stdout io.Writer, log *slog.Logger) error {
	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	h := hub.New(hub.Config{Buffer: cfg.StreamBuffer}, func(r store.Record) string { return r.SessionID })
	defer h.Close()
	st, err := store.Open(ctx, store.Config{Path: filepath.Join(cfg.Data, "filepath.db"), Publisher: h})
	if err != nil {
		return err
	}
	defer st.Close()

	// The lifecycle runner (cfg.Runtime) is wired here once it exists:
	// build it from st and cfg.Runtime, pass it as api.Config.Runner, and
	// close it after srv.Run returns.
	srv, err := api.New(api.Config{
		Addr:           cfg.Addr,
		Store:          st,
		Hub:            h,
		Logger:         log,
		Stdout:         stdout,
		AllowedOrigins: cfg.AllowedOrigins,
		MaxBody:        cfg.MaxBody,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	log.Info("starting", "data", cfg.Data, "runtime", cfg.Runtime)
	return srv.Run(ctx)
}
