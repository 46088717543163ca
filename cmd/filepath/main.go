// Command filepath runs trees of AI coding agents (filepath serve) and checks
// agent output against the filepath Agent Protocol (filepath validate).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signalContext()
	code := Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// signalContext ends on SIGINT or SIGTERM: serve shuts down gracefully.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// usage lists the subcommands; each adds its own line.
const usage = `usage: filepath COMMAND [ARGS]

commands:
  validate [--inputs] [--max-line N] [FILE|-]   check NDJSON agent events (or inputs) against the protocol
  schema [--inputs]                             print the JSON Schema of events (or inputs)
  vfs export SESSION FILE | vfs import FILE     copy a session's files to or from an AgentFS SQLite file
  serve [--addr A] [--data DIR] [--runtime R]   serve the API, the live stream and the UI
  user add NAME | user login NAME               create a user / print a fresh login URL
  user logout NAME                              end every browser session of a user
  apikey create [--user NAME] [--expires D]     print a new API key; it stops working after D (720h, 30d), or never
  apikey list [--user NAME]                     list API keys (id, prefix, user, name, created, last used, expires)
  apikey revoke ID                              revoke an API key at once
  healthcheck [--addr A]                        exit 0 when the server on A answers /healthz ok
  migrate --from sqlite:DB --to postgres://...  copy a data directory's database into an empty PostgreSQL one, verified
  version                                       print the version
  help                                          print this help

Run 'filepath COMMAND -h' for the flags of a command.
`

// Main runs the filepath command with args (without the program name) and
// returns the exit code: 0 ok, 1 failure, 2 usage error.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "validate":
		return runValidate(ctx, rest, stdin, stdout, stderr)
	case "schema":
		return runSchema(rest, stdout, stderr)
	case "vfs":
		return runVFS(ctx, rest, stdout, stderr)
	case "serve":
		return runServe(ctx, rest, stdout, stderr)
	case "user":
		return runUser(ctx, rest, stdout, stderr)
	case "apikey":
		return runAPIKey(ctx, rest, stdout, stderr)
	case "healthcheck":
		return runHealthcheck(ctx, rest, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, rest, stdout, stderr)
	case "version", "--version":
		return runVersion(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "filepath: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}
