package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/filepath-dev/filepath/orchestrator/store/identity"
)

const apikeyUsage = `usage:
  filepath apikey create [--data DIR] [--user NAME] [--name LABEL] [--expires DURATION]
                                       print a new API key (send it as Authorization: Bearer KEY);
                                       with --expires (e.g. 720h, 30d) it stops working that long from now
  filepath apikey list [--data DIR] [--user NAME] [--nodes]
                                       list keys: id, prefix, user, name, created, last used, expires
  filepath apikey revoke [--data DIR] ID
                                       delete a key; it stops working at once
`

// maxExpiryDays keeps --expires Nd within a time.Duration (about 292 years).
const maxExpiryDays = 100 * 365

// parseExpiry reads --expires: a Go duration ("720h", "1h30m") or whole
// days ("30d"), more than zero.
func parseExpiry(v string) (time.Duration, error) {
	const want = "want a positive duration such as 720h, 90m or 30d"
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || strings.HasPrefix(days, "+") {
			return 0, fmt.Errorf("--expires %q: %s", v, want)
		}
		if n > maxExpiryDays {
			return 0, fmt.Errorf("--expires %q: at most %dd", v, maxExpiryDays)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, fmt.Errorf("--expires %q: %s", v, want)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("--expires %q: %s (a key that never expires: leave --expires out)", v, want)
	}
	return d, nil
}

// runAPIKey is `filepath apikey create|list|revoke`. create prints the new
// key alone on stdout, so that scripts can capture it.
func runAPIKey(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, apikeyUsage)
		return 2
	}
	switch args[0] {
	case "create":
	case "list":
		return runAPIKeyList(ctx, args[1:], stdout, stderr)
	case "revoke":
		return runAPIKeyRevoke(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "apikey: unknown command %q\n%s", args[0], apikeyUsage)
		return 2
	}
	fs := flag.NewFlagSet("apikey create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", env("FILEPATH_DATA", "./data"), "data directory (env FILEPATH_DATA)")
	userName := fs.String("user", "", "the user the key acts as (default: the first administrator)")
	keyName := fs.String("name", "", "a label for the key")
	expires := fs.String("expires", "", "the key stops working this long from now: a duration such as 720h or 30d (default: never)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "apikey create: unexpected argument %q\n%s", fs.Arg(0), apikeyUsage)
		return 2
	}
	var ttl time.Duration
	expiresSet := false
	fs.Visit(func(f *flag.Flag) { expiresSet = expiresSet || f.Name == "expires" })
	if expiresSet {
		var err error
		if ttl, err = parseExpiry(*expires); err != nil {
			fmt.Fprintf(stderr, "apikey create: %v\n", err)
			return 2
		}
	}
	st, err := openStore(ctx, *data)
	if err != nil {
		fmt.Fprintf(stderr, "apikey create: %v\n", err)
		return 1
	}
	defer st.Close()
	ident := identity.New(st)
	u, err := keyUser(ctx, ident, *userName)
	if err != nil {
		fmt.Fprintf(stderr, "apikey create: %v\n", err)
		return 1
	}
	var key string
	if ttl > 0 {
		key, _, err = ident.CreateAPIKeyExpiring(ctx, u.ID, *keyName, st.Now().Add(ttl))
	} else {
		key, _, err = ident.CreateAPIKey(ctx, u.ID, *keyName)
	}
	if err != nil {
		fmt.Fprintf(stderr, "apikey create: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, key)
	return 0
}

// keyUser returns the user called name, or the first administrator when name
// is empty.
func keyUser(ctx context.Context, ident *identity.Store, name string) (identity.User, error) {
	if name != "" {
		u, err := ident.UserByName(ctx, name)
		if err != nil {
			return identity.User{}, fmt.Errorf("user %q: %w", name, err)
		}
		return u, nil
	}
	us, err := ident.ListUsers(ctx)
	if err != nil {
		return identity.User{}, err
	}
	for _, u := range us {
		if u.IsAdmin {
			return u, nil
		}
	}
	return identity.User{}, errors.New("no administrator yet: start `filepath serve` once, or pass --user NAME")
}

// runAPIKeyList is `filepath apikey list`: every user's keys (or one
// user's), newest first, as a table. Agents' node keys, made and deleted
// with their containers, show only with --nodes. EXPIRES is the time a key
// stops working, "never", or "expired" once that time has passed.
func runAPIKeyList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apikey list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", env("FILEPATH_DATA", "./data"), "data directory (env FILEPATH_DATA)")
	userName := fs.String("user", "", "list only this user's keys")
	nodes := fs.Bool("nodes", false, "also list the keys of running agents (one per container)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "apikey list: unexpected argument %q\n%s", fs.Arg(0), apikeyUsage)
		return 2
	}
	st, err := openStore(ctx, *data)
	if err != nil {
		fmt.Fprintf(stderr, "apikey list: %v\n", err)
		return 1
	}
	defer st.Close()
	ident := identity.New(st)
	var users []identity.User
	if *userName != "" {
		u, err := ident.UserByName(ctx, *userName)
		if err != nil {
			fmt.Fprintf(stderr, "apikey list: user %q: %v\n", *userName, err)
			return 1
		}
		users = []identity.User{u}
	} else if users, err = ident.ListUsers(ctx); err != nil {
		fmt.Fprintf(stderr, "apikey list: %v\n", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	now := st.Now()
	fmt.Fprintln(tw, "ID\tPREFIX\tUSER\tNAME\tCREATED\tLAST USED\tEXPIRES")
	for _, u := range users {
		keys, err := ident.ListAPIKeys(ctx, u.ID)
		if err != nil {
			fmt.Fprintf(stderr, "apikey list: %v\n", err)
			return 1
		}
		for _, k := range keys {
			if k.NodeID != "" && !*nodes {
				continue
			}
			used := "never"
			if k.LastUsedAt != nil {
				used = k.LastUsedAt.UTC().Format(time.RFC3339)
			}
			name := k.Name
			if name == "" {
				name = "-"
			}
			expires := "never"
			if k.ExpiresAt != nil {
				expires = k.ExpiresAt.UTC().Format(time.RFC3339)
				if !now.Before(*k.ExpiresAt) {
					expires = "expired"
				}
			}
			fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, u.Name, name, k.CreatedAt.UTC().Format(time.RFC3339), used, expires)
		}
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(stderr, "apikey list: %v\n", err)
		return 1
	}
	return 0
}

// runAPIKeyRevoke is `filepath apikey revoke ID`: it deletes the key, so
// the next request with it is refused (401); the server needs no restart.
func runAPIKeyRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("apikey revoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", env("FILEPATH_DATA", "./data"), "data directory (env FILEPATH_DATA)")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(rest) != 1 {
		fmt.Fprintf(stderr, "apikey revoke: want one key ID (see `filepath apikey list`)\n%s", apikeyUsage)
		return 2
	}
	id := strings.TrimSpace(rest[0])
	st, err := openStore(ctx, *data)
	if err != nil {
		fmt.Fprintf(stderr, "apikey revoke: %v\n", err)
		return 1
	}
	defer st.Close()
	ident := identity.New(st)
	users, err := ident.ListUsers(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "apikey revoke: %v\n", err)
		return 1
	}
	for _, u := range users {
		keys, err := ident.ListAPIKeys(ctx, u.ID)
		if err != nil {
			fmt.Fprintf(stderr, "apikey revoke: %v\n", err)
			return 1
		}
		for _, k := range keys {
			if k.ID != id {
				continue
			}
			if err := ident.DeleteAPIKey(ctx, u.ID, k.ID); err != nil {
				fmt.Fprintf(stderr, "apikey revoke: %v\n", err)
				return 1
			}
			fmt.Fprintf(stdout, "revoked key %s (%s…) of %s\n", k.ID, k.Prefix, u.Name)
			return 0
		}
	}
	fmt.Fprintf(stderr, "apikey revoke: no key with ID %q (the ID is the first column of `filepath apikey list`, not the key itself)\n", id)
	return 1
}
