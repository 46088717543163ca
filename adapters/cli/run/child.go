package run

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/filepath-dev/filepath/protocol"
)

// MaxCLILine bounds one line of a CLI's stdout. Claude puts a whole file it
// read in one line; a longer line is dropped (and logged), never buffered
// without bound.
const MaxCLILine = 64 << 20

// tailSize is how much of a CLI's stderr is kept for the error record of a
// crash.
const tailSize = 4 << 10

// drainWait is how long the stdout of an exited CLI may stay open (held by
// a process it left behind) before the group is killed.
const drainWait = 2 * time.Second

// ExitError is a CLI that exited when nobody asked it to.
type ExitError struct {
	CLI  string
	Code int    // -1 when killed by a signal
	Tail string // the end of its stderr
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("%s exited with code %d", e.CLI, e.Code)
	if t := strings.TrimSpace(e.Tail); t != "" {
		msg += "; the end of its stderr:\n" + t
	}
	return msg
}

// ChildSpec says how to start a CLI.
type ChildSpec struct {
	Name   string   // for logs and errors, e.g. "claude"
	Path   string   // the program
	Args   []string // its arguments
	Env    []string // its whole environment
	Dir    string   // its working directory
	Stderr io.Writer
	Log    *slog.Logger
}

// Child is a running CLI: its stdout lines arrive on Lines, its stderr is
// copied to ChildSpec.Stderr and its end kept. The CLI runs in its own
// process group so that a stop reaches the commands it started.
type Child struct {
	name  string
	cmd   *exec.Cmd
	stdin *os.File
	out   *os.File
	log   *slog.Logger

	lines chan []byte
	quit  chan struct{} // closed by Close: nobody reads Lines any more
	done  chan struct{} // closed when the process has exited and stdout is drained

	mu       sync.Mutex // guards tail and closed
	tail     []byte
	closed   bool
	exitCode int
}

// StartChild starts the CLI.
func StartChild(spec ChildSpec) (*Child, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env, cmd.Dir = spec.Env, spec.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	log := spec.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Child{name: spec.Name, cmd: cmd, stdin: inW, out: outR, log: log,
		lines: make(chan []byte, 64), quit: make(chan struct{}), done: make(chan struct{})}
	stderr := spec.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	read := make(chan struct{})
	go c.readStdout(read)
	errDone := make(chan struct{})
	go c.copyStderr(errR, stderr, errDone)
	go c.wait(read, errDone)
	return c, nil
}

func (c *Child) readStdout(finished chan<- struct{}) {
	defer close(finished)
	defer close(c.lines)
	r := protocol.NewReader(c.out, MaxCLILine)
	for {
		line, err := r.Next()
		var long *protocol.LineTooLongError
		switch {
		case errors.As(err, &long):
			c.log.Warn("dropped a line of the CLI's output over the limit", "cli", c.name, "bytes", long.Size, "limit", long.Limit)
			continue
		case err != nil:
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				c.log.Warn("read the CLI's output", "cli", c.name, "err", err)
			}
			return
		}
		select {
		case c.lines <- append([]byte(nil), line...):
		case <-c.quit:
			return
		}
	}
}

func (c *Child) copyStderr(r *os.File, w io.Writer, done chan<- struct{}) {
	defer close(done)
	defer r.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			c.mu.Lock()
			c.tail = append(c.tail, buf[:n]...)
			if len(c.tail) > tailSize {
				c.tail = append(c.tail[:0], c.tail[len(c.tail)-tailSize:]...)
			}
			c.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (c *Child) wait(read, errDone <-chan struct{}) {
	err := c.cmd.Wait()
	code := 0
	if err != nil {
		code = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
	}
	// A command the CLI left running may hold its stdout or stderr open:
	// give the output a moment to end, then end the whole group.
	t := time.NewTimer(drainWait)
	defer t.Stop()
	select {
	case <-read:
	case <-t.C:
		c.log.Warn("the CLI exited but something it started holds its output open; killing its process group", "cli", c.name)
		c.signal(syscall.SIGKILL)
		c.out.Close()
		<-read
	}
	select {
	case <-errDone:
	case <-time.After(drainWait):
	}
	c.mu.Lock()
	c.exitCode = code
	c.mu.Unlock()
	c.out.Close()
	c.stdin.Close()
	close(c.done)
}

// Lines delivers the CLI's stdout, one line at a time, and is closed at its
// end.
func (c *Child) Lines() <-chan []byte { return c.lines }

// Done is closed when the CLI has exited and its output has ended.
func (c *Child) Done() <-chan struct{} { return c.done }

// Exit is the CLI's exit after Done: nil for code 0.
func (c *Child) Exit() *ExitError {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exitCode == 0 {
		return nil
	}
	return &ExitError{CLI: c.name, Code: c.exitCode, Tail: string(c.tail)}
}

// Tail is the end of the CLI's stderr so far.
func (c *Child) Tail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.tail)
}

// Send writes one line (a newline is added) to the CLI's stdin.
func (c *Child) Send(line []byte) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("%s: its input is closed", c.name)
	}
	if _, err := c.stdin.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write to %s: %w", c.name, err)
	}
	return nil
}

// CloseInput closes the CLI's stdin (end of input). Safe twice.
func (c *Child) CloseInput() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.stdin.Close()
	}
}

func (c *Child) signal(sig syscall.Signal) {
	if p := c.cmd.Process; p != nil {
		// The group first (the CLI and what it started), then the CLI itself
		// in case it moved to a group of its own.
		syscall.Kill(-p.Pid, sig)
		syscall.Kill(p.Pid, sig)
	}
}

// Signal sends sig to the CLI's process group.
func (c *Child) Signal(sig syscall.Signal) {
	select {
	case <-c.done:
	default:
		c.signal(sig)
	}
}

// Kill ends the CLI: SIGTERM to its group, then SIGKILL after grace. It
// returns once the CLI is gone.
func (c *Child) Kill(grace time.Duration) {
	c.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return
	case <-t.C:
	}
	c.Signal(syscall.SIGKILL)
	<-c.done
}

// Close stops delivering lines (whoever reads Lines has gone) and kills the
// CLI if it still runs. Safe twice.
func (c *Child) Close() {
	c.mu.Lock()
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
	c.mu.Unlock()
	c.CloseInput()
	c.Kill(time.Second)
}
