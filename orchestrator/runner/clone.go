package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	gogit "github.com/go-git/go-git/v5"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/gitindex"
	"github.com/filepath-dev/filepath/orchestrator/gitnet"
	"github.com/filepath-dev/filepath/orchestrator/store/sessions"
	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/protocol"
)

// DefaultCloneTimeout bounds `git clone` of a session's repository.
const DefaultCloneTimeout = 10 * time.Minute

// maxCloneOutput bounds the git output kept in the command record.
const maxCloneOutput = 16 << 10

// cloneRepo clones the session's repository into dir (the node's workspace,
// as the host sees it) before the agent starts, when the session has a git
// URL and the workspace is still empty: the session filesystem is shared by
// all of its nodes, so the first node to start clones it for everyone. With
// an importer (the session filesystem) git clones into a directory of the
// host and the checkout is imported in bulk (importClone). The
// clone shows in the node's chat as a command event pair; a failure is
// returned (the caller marks the node error and does not start it). cloned
// says that this call cloned it.
func (r *Runner) cloneRepo(ctx context.Context, sess protocol.Session, node sessions.Node, dir string) (cloned bool, err error) {
	if sess.GitRepoURL == nil || *sess.GitRepoURL == "" {
		return false, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("read workspace: %w", err)
	}
	if len(entries) > 0 {
		return false, nil // cloned already (or the user put files there first)
	}
	url := *sess.GitRepoURL
	shown := "git clone " + url + " /workspace"
	r.appendCommand(ctx, node, protocol.CommandEvent{Cmd: shown, Status: protocol.StepStart})
	// Where the URL points is checked again now, not only when the session
	// was made (its DNS answer may have changed), and the clone is pinned
	// to the address checked.
	var addrs []netip.Addr
	target, err := gitnet.Parse(url)
	if err == nil && !r.cfg.GitAllowPrivate {
		addrs, err = gitnet.Resolve(ctx, r.cfg.Resolver, target, false)
	}
	if err != nil {
		msg := err.Error()
		r.appendCommand(ctx, node, protocol.CommandEvent{Cmd: shown, Status: protocol.StepError, Stderr: &msg})
		return false, err
	}
	home, err := os.MkdirTemp("", "filepath-git-home-")
	if err != nil {
		return false, fmt.Errorf("git clone: %w", err)
	}
	defer os.RemoveAll(home)

	timeout := r.cfg.CloneTimeout
	if timeout <= 0 {
		timeout = DefaultCloneTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// git runs with none of the host's credentials (no SSH agent or keys,
	// no credential helper, no config), network protocols only, and no
	// prompts: a private repository fails at once instead of waiting for a
	// password nobody can type. "--" ends the options: the URL was
	// validated by the store, and git must never read it as a flag.
	gc := gitnet.CloneCommand(url, target, addrs, home)
	cmd := exec.CommandContext(cctx, "git", gc.Args...)
	cmd.Dir = dir
	if r.cfg.Import != nil {
		// cloned on the host, then imported (importClone)
		if cmd.Dir, err = r.cloneDir(node.ID); err != nil {
			return false, err
		}
		defer r.removeClone(cmd.Dir)
	}
	cmd.Env = gc.Env
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	code := 0
	if err != nil {
		code = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
	}
	var ierr error
	if err == nil && r.cfg.Import != nil {
		if ierr = r.importClone(cctx, node, cmd.Dir); ierr != nil {
			err, code = ierr, -1
			fmt.Fprintf(&out, "\nimport into /workspace: %s\n", orchestrator.ErrorMessage(ierr))
		}
	}
	text := progressText(out.String())
	exitF := float64(code)
	ev := protocol.CommandEvent{Cmd: shown, Status: protocol.StepDone, Exit: &exitF, Stderr: &text}
	if err != nil {
		ev.Status = protocol.StepError
	}
	r.appendCommand(ctx, node, ev)
	switch {
	case err == nil:
		r.recordBaseCommit(ctx, sess.ID, cmd.Dir) // the host clone when imported: still there (removeClone is deferred)
		return true, nil
	case ierr != nil && cctx.Err() == nil:
		return false, fmt.Errorf("git clone %s: import into the workspace: %w", url, ierr)
	case cctx.Err() == context.DeadlineExceeded:
		return false, orchestrator.Errorf(orchestrator.EUnavailable, "git clone %s: gave up after %s", url, timeout)
	default:
		return false, orchestrator.Errorf(orchestrator.EInvalid, "git clone %s failed (exit %d): %s", url, code, lastLine(text))
	}
}

// recordBaseCommit keeps the commit the clone in dir checked out as the
// session's base commit: the default base of its Changes view. A clone of
// an empty repository has none; a failure is logged, never the clone's.
func (r *Runner) recordBaseCommit(ctx context.Context, sessionID, dir string) {
	repo, err := gogit.PlainOpen(dir)
	if err != nil {
		r.log.Warn("read cloned repository", "session", sessionID, "err", err)
		return
	}
	head, err := repo.Head()
	if err != nil {
		return // an empty repository: no commit yet
	}
	if err := r.sessions.SetBaseCommit(context.WithoutCancel(ctx), sessionID, head.Hash().String()); err != nil {
		r.log.Warn("record base commit", "session", sessionID, "err", err)
	}
}

// TreeImporter brings a directory tree made on the host into a node's
// workspace in bulk, in a few large transactions (vfs.FS.ImportTree,
// through cmd/filepath): the session's repository is cloned on the host
// and imported, not written through the mount file by file.
type TreeImporter interface {
	// ImportTree copies hostDir into the node's empty workspace, keeping
	// modes, symlinks and times, and returns what each path (relative to
	// hostDir, "a/b") became there.
	ImportTree(ctx context.Context, nodeID, hostDir string) (map[string]vfs.Attr, error)
	// WriteFile replaces the content of file p of the node's workspace
	// and sets its modification time.
	WriteFile(ctx context.Context, nodeID, p string, data []byte, mtime time.Time) error
}

// clonesDir holds the host clones being imported, below the data
// directory; what a previous process left there is removed at start.
const clonesDir = "clones"

func clearClones(dataDir string) error {
	if err := os.RemoveAll(filepath.Join(dataDir, clonesDir)); err != nil {
		return fmt.Errorf("remove the clones a previous run left: %w", err)
	}
	return nil
}

// cloneDir makes the empty host directory a node's clone goes into.
func (r *Runner) cloneDir(nodeID string) (string, error) {
	root := filepath.Join(r.cfg.DataDir, clonesDir)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("git clone: %w", err)
	}
	dir, err := os.MkdirTemp(root, nodeID+"-")
	if err != nil {
		return "", fmt.Errorf("git clone: %w", err)
	}
	return dir, nil
}

// removeClone removes a host clone in the background: the agent need not
// wait for it (Close does; once Close has begun, it is removed at once,
// and what is left then goes at the next start: clearClones).
func (r *Runner) removeClone(dir string) {
	remove := func() {
		if err := os.RemoveAll(dir); err != nil {
			r.log.Warn("remove a host clone", "dir", dir, "err", err)
		}
	}
	r.mu.Lock()
	closed := r.closed
	if !closed {
		r.wg.Go(remove)
	}
	r.mu.Unlock()
	if closed {
		remove()
	}
}

// importClone imports the checkout at hostDir, its .git too, into the
// node's workspace, and then gives git's index the stat data the files
// have there (inode numbers, change times): the agent's first git status
// trusts every file without reading it, and writes no index.
func (r *Runner) importClone(ctx context.Context, node sessions.Node, hostDir string) error {
	attrs, err := r.cfg.Import.ImportTree(ctx, node.ID, hostDir)
	if err != nil {
		return err
	}
	index, err := os.ReadFile(filepath.Join(hostDir, ".git", "index"))
	if errors.Is(err, iofs.ErrNotExist) {
		return nil // an empty repository
	}
	if err != nil {
		return err
	}
	var newest time.Time
	index, _, err = gitindex.Restat(index, func(p string) (gitindex.Stat, bool) {
		a, ok := attrs[p]
		if !ok || a.IsDir() {
			return gitindex.Stat{}, false
		}
		if a.Mtime.After(newest) {
			newest = a.Mtime
		}
		return gitindex.Stat{Ctime: a.Ctime, Mtime: a.Mtime, Ino: uint32(a.Ino), UID: a.UID, GID: a.GID, Size: uint32(a.Size)}, true
	})
	if err != nil {
		return err
	}
	// Racy git: an entry whose file changed in the second the index was
	// written (git compares whole seconds) is read again, so git trusts
	// an entry only when the index is from a later second than its file.
	mtime := time.Now()
	if later := time.Unix(newest.Unix()+1, 0); mtime.Before(later) {
		mtime = later
	}
	return r.cfg.Import.WriteFile(ctx, node.ID, "/.git/index", index, mtime)
}

func (r *Runner) appendCommand(ctx context.Context, node sessions.Node, ev protocol.CommandEvent) {
	ev.Type = protocol.TypeCommand
	data, err := json.Marshal(ev)
	if err == nil {
		_, err = r.st.Append(context.WithoutCancel(ctx), node.SessionID, protocol.Record{NodeID: node.ID, Kind: protocol.KindEvent, Data: data})
	}
	if err != nil {
		r.log.Warn("append clone progress", "node", node.ID, "err", err)
	}
}

// progressText keeps what a person reads of git's progress output: each
// carriage-return-rewritten line only in its final state.
func progressText(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		if j := strings.LastIndexByte(l, '\r'); j >= 0 {
			lines[i] = l[j+1:]
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// tailBuffer keeps the last maxCloneOutput bytes written to it.
type tailBuffer struct{ b bytes.Buffer }

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > maxCloneOutput {
		p = p[len(p)-maxCloneOutput:]
	}
	if over := t.b.Len() + len(p) - maxCloneOutput; over > 0 {
		t.b.Next(over)
	}
	t.b.Write(p)
	return n, nil
}

func (t *tailBuffer) String() string { return t.b.String() }

var _ io.Writer = (*tailBuffer)(nil)
