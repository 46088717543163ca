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

	"github.com/filepath-dev/filepath/orchestrator/store"
	"github.com/filepath-dev/filepath/orchestrator/store/identity"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
)

const vfsUsage = `usage:
  filepath vfs export SESSION FILE [--data DIR]                   write a session's files as an AgentFS SQLite file
  filepath vfs import FILE [--name N] [--user NAME] [--data DIR]  create a session from an AgentFS file, print its id
`

// parseInterleaved parses flags that may come before, between or after the
// positional arguments, and returns the positionals.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// vfsStore opens the store of a data directory and a VFS over it.
func vfsStore(ctx context.Context, data string) (*store.Store, *vfs.VFS, error) {
	st, err := openStore(ctx, data)
	if err != nil {
		return nil, nil, err
	}
	rdb, err := st.ReadDB().DB()
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, vfs.New(st.SQL(), vfs.Config{ReadDB: rdb}), nil
}

// runVFS is `filepath vfs export|import`.
func runVFS(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "export" && args[0] != "import") {
		fmt.Fprint(stderr, vfsUsage)
		return 2
	}
	sub := args[0]
	fs := flag.NewFlagSet("vfs "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv("FILEPATH_DATA")
	if def == "" {
		def = "./data"
	}
	data := fs.String("data", def, "data directory (env FILEPATH_DATA)")
	name := fs.String("name", "", "session name (import; default: imported FILE)")
	user := fs.String("user", "", "owner of the new session (import; default: the only user)")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	want := map[string]int{"export": 2, "import": 1}[sub]
	if len(pos) != want {
		fmt.Fprintf(stderr, "filepath vfs %s: want %d arguments, got %d\n\n%s", sub, want, len(pos), vfsUsage)
		return 2
	}
	st, v, err := vfsStore(ctx, *data)
	if err != nil {
		fmt.Fprintf(stderr, "filepath vfs %s: %v\n", sub, err)
		return 1
	}
	defer st.Close()
	if sub == "export" {
		err = vfsExport(ctx, st, v, pos[0], pos[1])
	} else {
		var id string
		id, err = vfsImport(ctx, st, v, pos[0], *name, *user)
		if err == nil {
			fmt.Fprintln(stdout, id)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "filepath vfs %s: %v\n", sub, err)
		return 1
	}
	return 0
}

func vfsExport(ctx context.Context, st *store.Store, v *vfs.VFS, sessionID, file string) error {
	if _, err := sessions.New(st, sessions.Config{}).SessionByID(ctx, sessionID); err != nil {
		return err
	}
	return v.Export(ctx, sessionID, file)
}

func vfsImport(ctx context.Context, st *store.Store, v *vfs.VFS, file, name, userName string) (string, error) {
	ident, sess := identity.New(st), sessions.New(st, sessions.Config{})
	if _, err := os.Stat(file); err != nil {
		return "", err
	}
	var u identity.User
	if userName != "" {
		var err error
		if u, err = ident.UserByName(ctx, userName); err != nil {
			return "", err
		}
	} else {
		users, err := ident.ListUsers(ctx)
		if err != nil {
			return "", err
		}
		if len(users) != 1 {
			names := make([]string, len(users))
			for i, x := range users {
				names[i] = x.Name
			}
			return "", fmt.Errorf("--user is required: there are %d users (%s)", len(users), strings.Join(names, ", "))
		}
		u = users[0]
	}
	if name == "" {
		name = "imported " + filepath.Base(file)
	}
	s, err := sess.CreateSession(ctx, u.ID, sessions.NewSession{Name: name})
	if err != nil {
		return "", err
	}
	if err := v.Import(ctx, s.ID, file); err != nil {
		if derr := sess.DeleteSession(ctx, u.ID, s.ID); derr != nil {
			err = errors.Join(err, fmt.Errorf("remove the new session: %w", derr))
		}
		return "", err
	}
	return s.ID, nil
}
