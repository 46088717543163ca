package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/filepath-dev/filepath/containers"
	"github.com/filepath-dev/filepath/protocol"
)

// Defaults of the health checks (Config).
const (
	DefaultCheckTimeout     = 5 * time.Minute
	DefaultCheckOutput      = 4 << 10
	DefaultCheckConcurrency = 2
	// maxPackageJSON bounds the package.json read for detection.
	maxPackageJSON = 1 << 20
)

// LabelRole marks the short-lived containers of health checks and rescue
// commits (value RoleCheck): Reconcile removes any it finds (they belong to
// a start the orchestrator did not finish).
const (
	LabelRole = "filepath.role"
	RoleCheck = "check"
)

// GoBuildCheck is the detected build check of a Go repository.
const GoBuildCheck = "go build -o /dev/null ./..."

// npmDefaultTest is the test script `npm init` writes: it always fails.
const npmDefaultTest = `echo "Error: no test specified" && exit 1`

// DetectChecks returns the health checks a repository implies, from files
// at its root: Go (go.mod or go.work): go build and go vet of ./... (the
// build with -o /dev/null: a plain `go build ./...` of a single main
// package writes its binary into /workspace, where the next rescue commit
// would pick it up); Node (package.json): its build and test scripts (not
// npm init's placeholder test). None found: nil.
func DetectChecks(fsys fs.FS) []protocol.Check {
	var out []protocol.Check
	if exists(fsys, "go.mod") || exists(fsys, "go.work") {
		out = append(out, protocol.Check{Command: GoBuildCheck}, protocol.Check{Command: "go vet ./..."})
	}
	if f, err := fsys.Open("package.json"); err == nil {
		var pkg struct {
			Scripts map[string]string `json:"scripts"`
		}
		err := json.NewDecoder(io.LimitReader(f, maxPackageJSON)).Decode(&pkg)
		f.Close()
		if err == nil {
			if strings.TrimSpace(pkg.Scripts["build"]) != "" {
				out = append(out, protocol.Check{Command: "npm run build"})
			}
			if t := strings.TrimSpace(pkg.Scripts["test"]); t != "" && t != npmDefaultTest {
				out = append(out, protocol.Check{Command: "npm test"})
			}
		}
	}
	return out
}

func exists(fsys fs.FS, name string) bool {
	fi, err := fs.Stat(fsys, name)
	return err == nil && !fi.IsDir()
}

func (r *Runner) checkTimeout(c protocol.Check) time.Duration {
	if c.Timeout > 0 {
		return time.Duration(c.Timeout) * time.Second
	}
	if r.cfg.CheckTimeout > 0 {
		return r.cfg.CheckTimeout
	}
	return DefaultCheckTimeout
}

func (r *Runner) checkOutput() int {
	if r.cfg.CheckOutput > 0 {
		return r.cfg.CheckOutput
	}
	return DefaultCheckOutput
}

// runSpec is a short-lived container of the node's own image (its
// toolchain), with /workspace mounted as the agent gets it and the agent's
// limits and network, running `sh -c script` instead of the agent. With the
// process runtime it is a local process in the workspace directory.
func (r *Runner) runSpec(p *startPlan, script string, env map[string]string) containers.Spec {
	return containers.Spec{
		SessionID: p.sess.ID, NodeID: p.node.ID, Image: p.image, Env: env,
		Labels:       map[string]string{LabelInstance: r.instance, LabelRole: RoleCheck},
		WorkspaceDir: p.dir, WorkspacePropagation: r.cfg.WorkspacePropagation,
		Network: r.cfg.Network, Limits: r.cfg.Limits,
		Entrypoint: []string{"sh", "-c"}, Cmd: []string{script},
	}
}

// run runs script for a start, one at a time per CheckConcurrency.
func (r *Runner) run(ctx context.Context, p *startPlan, script string, env map[string]string, timeout time.Duration) (containers.RunResult, error) {
	select {
	case r.checkSem <- struct{}{}:
	case <-ctx.Done():
		return containers.RunResult{}, ctx.Err()
	}
	defer func() { <-r.checkSem }()
	return containers.Run(ctx, r.rt, r.runSpec(p, script, env), containers.RunOptions{Timeout: timeout, MaxOutput: r.checkOutput()})
}

// runChecks runs the session's checks (or the detected ones) in the
// workspace and hands each result to show as it ends (or one block saying
// none was found). A failing check is a result; only ctx's end and show's
// error stop it.
// checksOf is what runs before p's agent: the session's checks, or the
// ones detected in its workspace.
func checksOf(p *startPlan) []protocol.Check {
	if len(p.sess.Checks) > 0 {
		return p.sess.Checks
	}
	return DetectChecks(os.DirFS(p.dir))
}

func (r *Runner) runChecks(ctx context.Context, p *startPlan, show func(protocol.SystemData) error) error {
	checks := checksOf(p)
	if len(checks) == 0 {
		return show(protocol.SystemData{Type: protocol.SystemCheck,
			Text: "No health checks: none are set on the session and none were detected in /workspace (go.mod, package.json)"})
	}
	for _, c := range checks {
		limit := r.checkTimeout(c)
		res, err := r.run(ctx, p, c.Command, nil, limit)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d := protocol.SystemData{Type: protocol.SystemCheck, Command: c.Command, Output: res.Output, DurationMS: res.Duration.Milliseconds(), TimedOut: res.TimedOut}
		switch {
		case err != nil:
			d.Output = err.Error()
			d.Text = fmt.Sprintf("%s could not run: %v", c.Command, err)
		case res.TimedOut:
			d.Text = fmt.Sprintf("%s timed out: stopped at its limit of %s", c.Command, limit)
		case res.ExitCode == 0:
			code := 0
			d.Exit = &code
			d.Text = fmt.Sprintf("%s passed in %s", c.Command, seconds(res.Duration))
		default:
			code := res.ExitCode
			d.Exit = &code
			d.Text = fmt.Sprintf("%s failed with exit code %d after %s", c.Command, code, seconds(res.Duration))
		}
		if err := show(d); err != nil {
			return err
		}
	}
	return nil
}

func seconds(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }

// rescueScript commits whatever the previous agent left uncommitted in
// /workspace, with git of the node's image, and says what it did on a line
// "filepath-rescue: ...". The identity is filepath's; hooks do not run.
const rescueScript = `g() { git -c safe.directory='*' "$@"; }
command -v git >/dev/null 2>&1 || { echo "filepath-rescue: no git in this image"; exit 3; }
g rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "filepath-rescue: not a repository"; exit 0; }
[ -n "$(g status --porcelain | head -n 1)" ] || { echo "filepath-rescue: clean"; exit 0; }
g add -A && g -c user.name=filepath -c user.email=rescue@filepath.invalid commit -q --no-verify -m "$FILEPATH_RESCUE_MESSAGE" \
  && g log -1 --format='filepath-rescue: committed %H'`

// rescue commits the uncommitted work a previous agent left in the
// workspace. It does nothing when /workspace is not a git repository, and
// nothing while another agent of the session runs: the workspace is shared,
// and changes in it are then that agent's work in progress. A commit is
// returned as a commit event; a rescue that could not run, as a check block.
func (r *Runner) rescue(ctx context.Context, p *startPlan) (*protocol.CommitEvent, *protocol.SystemData) {
	if fi, err := os.Stat(filepath.Join(p.dir, ".git")); p.cloned || err != nil || !fi.IsDir() {
		return nil, nil
	}
	if n := r.othersRunning(p.sess.ID, p.node.ID); n > 0 {
		r.log.Info("no rescue commit: other agents of the session run", "node", p.node.ID, "running", n)
		return nil, nil
	}
	msg := fmt.Sprintf("filepath: rescue uncommitted work of agent %q (node %s) before its %s", p.node.Name, p.node.ID, p.why())
	res, err := r.run(ctx, p, rescueScript, map[string]string{"FILEPATH_RESCUE_MESSAGE": msg}, r.checkTimeout(protocol.Check{}))
	line := ""
	for _, l := range strings.Split(res.Output, "\n") {
		if rest, ok := strings.CutPrefix(l, "filepath-rescue: "); ok {
			line = rest
		}
	}
	hash, committed := strings.CutPrefix(line, "committed ")
	switch {
	case err == nil && committed && res.ExitCode == 0:
		return &protocol.CommitEvent{Type: protocol.TypeCommit, Hash: strings.TrimSpace(hash), Message: msg}, nil
	case err == nil && res.ExitCode == 0 && (line == "clean" || line == "not a repository"):
		return nil, nil
	}
	d := &protocol.SystemData{Type: protocol.SystemCheck, Command: "git add -A && git commit", Output: res.Output, DurationMS: res.Duration.Milliseconds(), TimedOut: res.TimedOut}
	switch {
	case err != nil:
		d.Output = err.Error()
		d.Text = "The rescue commit of uncommitted work could not run in the agent's image: " + err.Error()
	case line == "no git in this image":
		d.Text = "No rescue commit: the agent's image has no git"
	default:
		code := res.ExitCode
		d.Exit = &code
		d.Text = fmt.Sprintf("The rescue commit of uncommitted work failed (exit code %d)", code)
	}
	return nil, d
}

// othersRunning counts the session's nodes other than nodeID whose agent
// runs or starts.
func (r *Runner) othersRunning(sessionID, nodeID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for id, rel := range r.relays {
		if id != nodeID && rel.Node().SessionID == sessionID {
			n++
		}
	}
	for id, job := range r.starting {
		if id != nodeID && job.sessionID == sessionID {
			n++
		}
	}
	return n
}
