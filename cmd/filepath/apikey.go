package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/filepath-dev/filepath/orchestrator/store"
)

const apikeyUsage = `usage:
  filepath apikey create [--data DIR] [--user NAME]   print a new API key (send it as Authorization: Bearer KEY)
`

// runAPIKey is `filepath apikey create`: it prints the new key alone on
// stdout, so that scripts can capture it.
func runAPIKey(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "create" {
		fmt.Fprint(stderr, apikeyUsage)
		return 2
	}
	fs := flag.NewFlagSet("apikey create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", env("FILEPATH_DATA", "./data"), "data directory (env FILEPATH_DATA)")
	userName := fs.String("user", "", "the user the key acts as (default: the first administrator)")
	keyName := fs.String("name", "", "a label for the key")
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
	st, err := openStore(ctx, *data)
	if err != nil {
		fmt.Fprintf(stderr, "apikey create: %v\n", err)
		return 1
	}
	defer st.Close()
	u, err := keyUser(ctx, st, *userName)
	if err != nil {
		fmt.Fprintf(stderr, "apikey create: %v\n", err)
		return 1
	}
	key, _, err := st.CreateAPIKey(ctx, u.ID, *keyName)
	if err != nil {
		fmt.Fprintf(stderr, "apikey create: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, key)
	return 0
}

// keyUser returns the user called name, or the first administrator when name
// is empty.
func keyUser(ctx context.Context, st *store.Store, name string) (store.User, error) {
	if name != "" {
		u, err := st.UserByName(ctx, name)
		if err != nil {
			return store.User{}, fmt.Errorf("user %q: %w", name, err)
		}
		return u, nil
	}
	us, err := st.ListUsers(ctx)
	if err != nil {
		return store.User{}, err
	}
	for _, u := range us {
		if u.IsAdmin {
			return u, nil
		}
	}
	return store.User{}, errors.New("no administrator yet: start `filepath serve` once, or pass --user NAME")
}
