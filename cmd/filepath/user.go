package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/api"
	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
)

const userUsage = `usage:
  filepath user add NAME [--admin] [--data DIR] [--url URL] [--ttl 24h]   create a user, print a login URL
  filepath user login NAME [--data DIR] [--url URL] [--ttl 24h]           print a fresh login URL
  filepath user logout NAME [--data DIR]                                  end every browser session of the user
`

// adminFlags are the flags shared by the admin commands.
type adminFlags struct {
	data *string
	url  *string
	ttl  *time.Duration
}

func addAdminFlags(fs *flag.FlagSet) adminFlags {
	return adminFlags{
		data: fs.String("data", env("FILEPATH_DATA", "./data"), "data directory (env FILEPATH_DATA)"),
		url:  fs.String("url", "", "base URL of the server, for login links (default: the address the server last served on)"),
		ttl:  fs.Duration("ttl", api.DefaultLoginTTL, "how long a login link stays valid"),
	}
}

// urlFile is where serve writes the URL it serves on, so that admin
// commands print login links that work without --url.
const urlFile = "url"

// baseURL is the server's base URL for login links: --url, else the one the
// server last wrote to the data directory, else FILEPATH_ADDR's default.
func baseURL(flagURL, data string) string {
	if flagURL != "" {
		return strings.TrimRight(flagURL, "/")
	}
	if b, err := os.ReadFile(filepath.Join(data, urlFile)); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	return "http://" + env("FILEPATH_ADDR", "127.0.0.1:8080")
}

// openStore opens the database of a data directory for an admin command
// (the PostgreSQL database of FILEPATH_DATABASE_URL when it is set). It
// never creates a SQLite file: a typo in --data must not start an empty
// database beside the real one.
func openStore(ctx context.Context, data string) (*store.Store, error) {
	if u := os.Getenv("FILEPATH_DATABASE_URL"); u != "" {
		return store.Open(ctx, store.Config{URL: u})
	}
	path := filepath.Join(data, "filepath.db")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no filepath database at %s: start `filepath serve --data %s` once first, or pass the --data of your server", path, data)
	}
	return store.Open(ctx, store.Config{Path: path})
}

// parseWithName parses args where the one positional NAME may come before or
// after the flags.
func parseWithName(fs *flag.FlagSet, args []string) (string, error) {
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	rest := fs.Args()
	if name == "" && len(rest) > 0 {
		name, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 {
		return "", fmt.Errorf("unexpected argument %q", rest[0])
	}
	if name == "" {
		return "", errors.New("missing user NAME")
	}
	return name, nil
}

// runUser is `filepath user add|login|logout NAME`.
func runUser(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "add" && args[0] != "login" && args[0] != "logout") {
		fmt.Fprint(stderr, userUsage)
		return 2
	}
	sub := args[0]
	fs := flag.NewFlagSet("user "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	af := addAdminFlags(fs)
	admin := fs.Bool("admin", false, "make the user an administrator (add only)")
	name, err := parseWithName(fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "user %s: %v\n%s", sub, err, userUsage)
		return 2
	}
	if *af.ttl <= 0 {
		fmt.Fprintf(stderr, "user %s: --ttl must be positive\n", sub)
		return 2
	}
	st, err := openStore(ctx, *af.data)
	if err != nil {
		fmt.Fprintf(stderr, "user %s: %v\n", sub, err)
		return 1
	}
	defer st.Close()
	ident := identity.New(st)
	var u identity.User
	if sub == "add" {
		u, err = ident.CreateUser(ctx, name, *admin)
	} else {
		u, err = ident.UserByName(ctx, name)
	}
	if err != nil {
		fmt.Fprintf(stderr, "user %s %s: %v\n", sub, name, err)
		return 1
	}
	if sub == "logout" {
		n, err := ident.DeleteWebSessionsOf(ctx, u.ID)
		if err != nil {
			fmt.Fprintf(stderr, "user logout %s: %v\n", name, err)
			return 1
		}
		fmt.Fprintf(stdout, "ended %d browser sessions of %s\n", n, name)
		return 0
	}
	tok, err := ident.CreateLoginToken(ctx, u.ID, *af.ttl)
	if err != nil {
		fmt.Fprintf(stderr, "user %s %s: create login token: %v\n", sub, name, err)
		return 1
	}
	fmt.Fprintln(stdout, api.LoginURL(baseURL(*af.url, *af.data), tok))
	return 0
}
