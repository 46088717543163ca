package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// headTail keeps the first and the last bytes written to it and counts the
// rest: a command's output, bounded.
type headTail struct {
	head, tail []byte
	headMax    int
	tailMax    int
	total      int64
	ring       int // next write position in tail once it is full
}

func newHeadTail(headMax, tailMax int) *headTail {
	return &headTail{headMax: headMax, tailMax: tailMax}
}

func (h *headTail) Write(p []byte) (int, error) {
	n := len(p)
	h.total += int64(n)
	if room := h.headMax - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	if h.tailMax == 0 {
		return n, nil
	}
	for len(p) > 0 {
		if len(h.tail) < h.tailMax {
			k := min(h.tailMax-len(h.tail), len(p))
			h.tail = append(h.tail, p[:k]...)
			p = p[k:]
			continue
		}
		if len(p) >= h.tailMax {
			copy(h.tail, p[len(p)-h.tailMax:])
			h.ring = 0
			return n, nil
		}
		k := copy(h.tail[h.ring:], p)
		h.ring = (h.ring + k) % h.tailMax
		p = p[k:]
	}
	return n, nil
}

// Cut is how many bytes were written but are not kept.
func (h *headTail) Cut() int64 { return h.total - int64(len(h.head)) - int64(len(h.tail)) }

// String is the kept output, with a note where bytes were cut.
func (h *headTail) String() string {
	tail := append(append([]byte(nil), h.tail[h.ring:]...), h.tail[:h.ring]...)
	if c := h.Cut(); c > 0 {
		return fmt.Sprintf("%s\n[… %d bytes cut …]\n%s", h.head, c, tail)
	}
	return string(h.head) + string(tail)
}

// cmdResult is how a command ended.
type cmdResult struct {
	Exit     int // -1 when it did not exit by itself
	Stdout   string
	Stderr   string
	TimedOut bool
	Stopped  bool  // the agent was stopped while it ran
	Err      error // it could not start
}

var errTimeout = errors.New("timed out")

// shell runs commands in the workspace.
type shell struct {
	dir      string
	env      []string
	clock    clock
	keepHead int // output kept per stream: the first keepHead and last keepTail bytes
	keepTail int
}

// commandEnv is the environment of every command the agent runs: its own,
// with nothing that waits for a terminal (pagers, editors, prompts).
func commandEnv() []string {
	env := os.Environ()
	for _, kv := range []string{
		"PAGER=cat", "GIT_PAGER=cat", "GIT_EDITOR=true", "EDITOR=true", "VISUAL=true",
		"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=", "TERM=dumb", "NO_COLOR=1",
	} {
		env = append(env, kv)
	}
	return env
}

// run runs argv in the workspace with stdin from /dev/null, in a process
// group of its own that is killed when the timeout passes (counted in
// running time, see watchdog) or ctx ends.
func (s *shell) run(ctx context.Context, argv []string, timeout time.Duration) cmdResult {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stdout, stderr := newHeadTail(s.keepHead, s.keepTail), newHeadTail(s.keepHead, s.keepTail)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = s.dir
	cmd.Env = s.env
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// the whole group: bash and whatever it started
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// A background process that keeps the output pipes open does not hold
	// the agent up for more than this after the command has exited.
	cmd.WaitDelay = 500 * time.Millisecond
	if err := cmd.Start(); err != nil {
		return cmdResult{Exit: -1, Err: err}
	}
	dog := startWatchdog(ctx, s.clock, timeout, func() { cancel(errTimeout) })
	err := cmd.Wait()
	dog.Stop()
	r := cmdResult{Exit: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errTimeout):
		r.TimedOut = true
	case cause != nil:
		r.Stopped = true
	case err != nil && !errors.As(err, new(*exec.ExitError)) && !errors.Is(err, exec.ErrWaitDelay):
		r.Err = err
	}
	return r
}

// report is a command's result as the model reads it.
func (r cmdResult) report(timeout time.Duration) string {
	var b strings.Builder
	switch {
	case r.Err != nil:
		fmt.Fprintf(&b, "error: %v\n", r.Err)
	case r.TimedOut:
		fmt.Fprintf(&b, "timed out after %s: the command and everything it started were killed\n", timeout)
	case r.Stopped:
		b.WriteString("stopped: the agent was told to stop\n")
	default:
		fmt.Fprintf(&b, "exit code: %d\n", r.Exit)
	}
	if r.Stdout != "" {
		b.WriteString("stdout:\n" + r.Stdout)
		if !strings.HasSuffix(r.Stdout, "\n") {
			b.WriteByte('\n')
		}
	}
	if r.Stderr != "" {
		b.WriteString("stderr:\n" + r.Stderr)
		if !strings.HasSuffix(r.Stderr, "\n") {
			b.WriteByte('\n')
		}
	}
	if r.Stdout == "" && r.Stderr == "" && r.Err == nil {
		b.WriteString("(no output)\n")
	}
	return b.String()
}

// splitArgs splits a command line into words, honouring single and double
// quotes and backslash escapes (for a git call whose args came as one
// string).
func splitArgs(s string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 || escaped {
		return nil, errors.New("unbalanced quotes or a trailing backslash")
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args, nil
}
