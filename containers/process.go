package containers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// ProcessConfig configures the process runtime.
type ProcessConfig struct {
	// Dir holds one log file per process (<Dir>/<id>.log); required.
	Dir    string
	Logger *slog.Logger // nil: slog.Default()
}

// Process is the Runtime for development (`filepath serve --runtime
// process`): each agent is a local process running Spec.Cmd, UNISOLATED on
// the host: no image, no limits, no capability drop, full network and file
// access as the orchestrator's user.
//
// The working directory is Spec.WorkspaceDir; the environment is PATH and
// HOME of the orchestrator plus Spec.Env (and FILEPATH_STATE_DIR, the
// directory <Dir>/volumes/<name> of a Spec.StateVolume, its labels in
// <Dir>/volume-labels/<name>.json). Stdout and stderr are written to a
// timestamped log file in the same framing Docker uses, so Logs (with Since
// and Follow) behaves as for Docker. Stop signals the process group; Pause
// and Unpause send SIGSTOP and SIGCONT to it. Processes end with the
// orchestrator: Close kills them, and each gets SIGKILL if the orchestrator
// dies (Pdeathsig, delivered by a dedicated OS thread that starts them). The
// table of processes is in memory: a restarted orchestrator lists none.
type Process struct {
	cfg   ProcessConfig
	log   *slog.Logger
	spawn chan func()
	quit  chan struct{}
	done  chan struct{}

	mu     sync.Mutex // guards procs and each proc's mutable fields
	procs  map[string]*proc
	closed bool
}

var _ Runtime = (*Process)(nil)

type proc struct {
	id      string
	spec    Spec
	state   State
	started time.Time
	ended   time.Time
	code    int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdinMu sync.Mutex // serialises writers of stdin
	exited  chan struct{}
	log     *logFile
}

// NewProcess returns a process runtime; it logs a warning that agents run
// unisolated.
func NewProcess(cfg ProcessConfig) (*Process, error) {
	if cfg.Dir == "" {
		return nil, fieldErrorf("dir", "process runtime needs a log directory")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("process runtime: %w", err)
	}
	p := &Process{cfg: cfg, log: cfg.Logger, spawn: make(chan func()), quit: make(chan struct{}),
		done: make(chan struct{}), procs: map[string]*proc{}}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.log.Warn("process runtime: agents run UNISOLATED on the host (no container, no limits, full access as this user); use it for development only")
	go p.spawner()
	return p, nil
}

// spawner starts every process from one locked OS thread, so Pdeathsig
// (tied to the thread that forked) fires only when the runtime ends.
func (p *Process) spawner() {
	runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
	defer close(p.done)
	for {
		select {
		case f := <-p.spawn:
			f()
		case <-p.quit:
			return
		}
	}
}

// Close kills every running process and waits for them. Safe to call twice.
func (p *Process) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var running []*proc
	for _, pr := range p.procs {
		switch pr.state {
		case StateRunning, StatePaused:
			running = append(running, pr)
		case StateCreated:
			pr.log.close()
		}
	}
	p.mu.Unlock()
	for _, pr := range running {
		pr.signal(syscall.SIGKILL)
		pr.signal(syscall.SIGCONT)
		<-pr.exited
	}
	close(p.quit)
	<-p.done
	return nil
}

func (p *Process) get(id string) (*proc, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, ok := p.procs[id]
	if !ok {
		return nil, errorf(CodeNotFound, "container %q not found", id)
	}
	return pr, nil
}

// Create implements Runtime.
func (p *Process) Create(ctx context.Context, spec Spec) (string, error) {
	if err := validateSpec(spec); err != nil {
		return "", err
	}
	if len(spec.Cmd) == 0 {
		return "", fieldErrorf("cmd", "the process runtime needs a command (Spec.Cmd)")
	}
	if spec.WorkspaceDir != "" {
		if fi, err := os.Stat(spec.WorkspaceDir); err != nil || !fi.IsDir() {
			return "", fieldErrorf("workspace_dir", "workspace %s is not a directory", spec.WorkspaceDir)
		}
	}
	var b [8]byte
	rand.Read(b[:])
	id := "proc-" + hex.EncodeToString(b[:])
	spec.Labels = labels(spec)
	lf, err := createLogFile(filepath.Join(p.cfg.Dir, id+".log"))
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		lf.close()
		return "", errorf(CodeUnavailable, "process runtime is closed")
	}
	p.procs[id] = &proc{id: id, spec: spec, state: StateCreated, exited: make(chan struct{}), log: lf}
	return id, nil
}

// Start implements Runtime.
func (p *Process) Start(ctx context.Context, id string) error {
	pr, err := p.get(id)
	if err != nil {
		return err
	}
	p.mu.Lock()
	closed, state := p.closed, pr.state
	p.mu.Unlock()
	if closed {
		return errorf(CodeUnavailable, "process runtime is closed")
	}
	if state != StateCreated {
		return errorf(CodeConflict, "container %s was already started", id)
	}

	argv := append(append([]string(nil), pr.spec.Entrypoint...), pr.spec.Cmd...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = pr.spec.WorkspaceDir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	env := pr.spec.Env
	if pr.spec.StateVolume != "" {
		dir, err := p.makeVolume(pr.spec)
		if err != nil {
			return fmt.Errorf("start %s: state volume: %w", id, err)
		}
		env = maps.Clone(env)
		if env == nil {
			env = map[string]string{}
		}
		env[EnvStateDir] = dir
	}
	cmd.Env = append(cmd.Env, envList(env)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	errc := make(chan error, 1)
	select {
	case p.spawn <- func() { errc <- cmd.Start() }:
	case <-p.quit:
		return errorf(CodeUnavailable, "process runtime is closed")
	case <-ctx.Done():
		return fmt.Errorf("start %s: %w", id, ctx.Err())
	}
	if err := <-errc; err != nil {
		return errorf(CodeInvalid, "start %s: %v", id, err)
	}
	p.mu.Lock()
	pr.cmd, pr.stdin, pr.state, pr.started = cmd, stdin, StateRunning, time.Now().UTC()
	p.mu.Unlock()

	var copiers sync.WaitGroup
	copiers.Add(2)
	go func() { defer copiers.Done(); pr.log.copy(Stdout, stdout) }()
	go func() { defer copiers.Done(); pr.log.copy(Stderr, stderr) }()
	go func() {
		copiers.Wait() // Wait closes the pipes: read them to the end first
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		} else if err != nil {
			code = -1
		}
		pr.log.close()
		p.mu.Lock()
		pr.state, pr.code, pr.ended = StateExited, code, time.Now().UTC()
		p.mu.Unlock()
		close(pr.exited)
	}()
	return nil
}

// signal sends sig to the process group.
func (pr *proc) signal(sig syscall.Signal) {
	if pr.cmd != nil && pr.cmd.Process != nil {
		syscall.Kill(-pr.cmd.Process.Pid, sig)
	}
}

// AttachStdin implements Runtime.
func (p *Process) AttachStdin(ctx context.Context, id string) (io.WriteCloser, error) {
	pr, err := p.get(id)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr.state != StateRunning && pr.state != StatePaused {
		return nil, errorf(CodeConflict, "container %s is not running", id)
	}
	return &procStdin{pr: pr}, nil
}

type procStdin struct {
	pr     *proc
	mu     sync.Mutex
	closed bool
}

func (s *procStdin) Write(b []byte) (int, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return 0, os.ErrClosed
	}
	s.pr.stdinMu.Lock()
	defer s.pr.stdinMu.Unlock()
	return s.pr.stdin.Write(b)
}

// Close detaches; the process's stdin stays open.
func (s *procStdin) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

// Logs implements Runtime.
func (p *Process) Logs(ctx context.Context, id string, opts LogOptions) (*LogReader, error) {
	pr, err := p.get(id)
	if err != nil {
		return nil, err
	}
	rc, err := pr.log.reader(ctx, opts.Follow)
	if err != nil {
		return nil, err
	}
	return NewLogReader(rc, opts), nil
}

// Wait implements Runtime.
func (p *Process) Wait(ctx context.Context, id string) (int, error) {
	pr, err := p.get(id)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	created := pr.state == StateCreated
	p.mu.Unlock()
	if created {
		return 0, nil
	}
	select {
	case <-pr.exited:
		p.mu.Lock()
		defer p.mu.Unlock()
		return pr.code, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("wait for container %s: %w", id, ctx.Err())
	}
}

// Stop implements Runtime.
func (p *Process) Stop(ctx context.Context, id string, grace time.Duration) error {
	pr, err := p.get(id)
	if err != nil {
		return err
	}
	p.mu.Lock()
	state := pr.state
	if state == StatePaused {
		pr.state = StateRunning
	}
	p.mu.Unlock()
	if state != StateRunning && state != StatePaused {
		return nil
	}
	if state == StatePaused {
		pr.signal(syscall.SIGCONT)
	}
	pr.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-pr.exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop container %s: %w", id, ctx.Err())
	case <-t.C:
	}
	pr.signal(syscall.SIGKILL)
	select {
	case <-pr.exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop container %s: %w", id, ctx.Err())
	}
}

// Pause implements Runtime.
func (p *Process) Pause(ctx context.Context, id string) error {
	return p.setPaused(id, true)
}

// Unpause implements Runtime.
func (p *Process) Unpause(ctx context.Context, id string) error {
	return p.setPaused(id, false)
}

func (p *Process) setPaused(id string, pause bool) error {
	pr, err := p.get(id)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case pause && pr.state == StateRunning:
		pr.signal(syscall.SIGSTOP)
		pr.state = StatePaused
	case !pause && pr.state == StatePaused:
		pr.signal(syscall.SIGCONT)
		pr.state = StateRunning
	case pause:
		return errorf(CodeConflict, "container %s is not running", id)
	default:
		return errorf(CodeConflict, "container %s is not paused", id)
	}
	return nil
}

// Remove implements Runtime.
func (p *Process) Remove(ctx context.Context, id string) error {
	pr, err := p.get(id)
	if err != nil {
		return nil
	}
	p.mu.Lock()
	running := pr.state == StateRunning || pr.state == StatePaused
	p.mu.Unlock()
	if running {
		pr.signal(syscall.SIGKILL)
		pr.signal(syscall.SIGCONT)
		select {
		case <-pr.exited:
		case <-ctx.Done():
			return fmt.Errorf("remove container %s: %w", id, ctx.Err())
		}
	}
	p.mu.Lock()
	delete(p.procs, id)
	p.mu.Unlock()
	pr.log.close()
	os.Remove(pr.log.path)
	return nil
}

// volumeDir is the directory of a state volume: <Dir>/volumes/<name>.
func (p *Process) volumeDir(name string) string {
	return filepath.Join(p.cfg.Dir, "volumes", name)
}

// volumeLabels is the file of a state volume's labels (those of the spec
// that made it, as JSON): <Dir>/volume-labels/<name>.json, outside the
// directory the agent writes.
func (p *Process) volumeLabels(name string) string {
	return filepath.Join(p.cfg.Dir, "volume-labels", name+".json")
}

// makeVolume makes spec's state volume, labelled like its process, unless
// it exists, and returns its directory.
func (p *Process) makeVolume(spec Spec) (string, error) {
	dir := p.volumeDir(spec.StateVolume)
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir, nil
	}
	b, err := json.Marshal(spec.Labels)
	if err != nil {
		return "", err
	}
	lf := p.volumeLabels(spec.StateVolume)
	if err := os.MkdirAll(filepath.Dir(lf), 0o700); err != nil {
		return "", err
	}
	// the labels first: a volume directory is never there without them
	if err := os.WriteFile(lf, b, 0o600); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// RemoveVolume implements Runtime. A volume a process of this runtime
// (started or not) names is in use: CodeConflict, as Docker.
func (p *Process) RemoveVolume(ctx context.Context, name string) error {
	if !volumeNameRE.MatchString(name) {
		return fieldErrorf("state_volume", "state volume name %q is not valid", name)
	}
	p.mu.Lock()
	for _, pr := range p.procs {
		if pr.spec.StateVolume == name {
			p.mu.Unlock()
			return errorf(CodeConflict, "remove volume %s: it is in use by %s", name, pr.id)
		}
	}
	p.mu.Unlock()
	if err := os.RemoveAll(p.volumeDir(name)); err != nil {
		return fmt.Errorf("remove volume %s: %w", name, err)
	}
	if err := os.Remove(p.volumeLabels(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove volume %s: %w", name, err)
	}
	return nil
}

// ListVolumes implements Runtime: the directories under <Dir>/volumes whose
// labels file says filepath.managed and has every wanted label.
func (p *Process) ListVolumes(ctx context.Context, want map[string]string) ([]VolumeInfo, error) {
	ents, err := os.ReadDir(filepath.Join(p.cfg.Dir, "volumes"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	var out []VolumeInfo
outer:
	for _, e := range ents {
		if !e.IsDir() || !volumeNameRE.MatchString(e.Name()) {
			continue
		}
		b, err := os.ReadFile(p.volumeLabels(e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // not labelled: not listed
		}
		if err != nil {
			return nil, fmt.Errorf("list volumes: %w", err)
		}
		var l map[string]string
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("list volumes: the labels of %s: %w", e.Name(), err)
		}
		if l[LabelManaged] != "true" {
			continue
		}
		for k, v := range want {
			if l[k] != v {
				continue outer
			}
		}
		out = append(out, VolumeInfo{Name: e.Name(), SessionID: l[LabelSession], NodeID: l[LabelNode], Labels: l})
	}
	return out, nil
}

// List implements Runtime.
func (p *Process) List(ctx context.Context, want map[string]string) ([]Info, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Info
outer:
	for _, pr := range p.procs {
		for k, v := range want {
			if pr.spec.Labels[k] != v {
				continue outer
			}
		}
		out = append(out, pr.infoLocked())
	}
	return out, nil
}

// Inspect implements Runtime.
func (p *Process) Inspect(ctx context.Context, id string) (Info, error) {
	pr, err := p.get(id)
	if err != nil {
		return Info{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return pr.infoLocked(), nil
}

func (pr *proc) infoLocked() Info {
	return Info{
		ID: pr.id, Name: pr.spec.Name, Image: pr.spec.Image,
		SessionID: pr.spec.SessionID, NodeID: pr.spec.NodeID, Labels: maps.Clone(pr.spec.Labels),
		State: pr.state, ExitCode: pr.code, StartedAt: pr.started, FinishedAt: pr.ended,
	}
}

// logFile is a process's output in Docker's framing, with a notification
// for followers.
type logFile struct {
	path string

	mu     sync.Mutex // guards f, size, wake, done
	f      *os.File
	size   int64         // bytes of complete frames
	wake   chan struct{} // closed and replaced at each write
	done   bool          // no more writes
	partTS [3]time.Time  // time of the line in progress per stream
}

func createLogFile(path string) (*logFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create process log: %w", err)
	}
	return &logFile{path: path, f: f, wake: make(chan struct{})}, nil
}

// copy reads a stream like Docker's log copier: one frame per line, and
// fragments of at most 16 KiB that share the time of the line's first one.
func (l *logFile) copy(s Stream, r io.Reader) {
	buf := make([]byte, 16<<10)
	n := 0
	for {
		k, err := r.Read(buf[n:])
		n += k
		p := 0
		for {
			i := indexByte(buf[p:n], '\n')
			if i < 0 {
				break
			}
			l.write(s, buf[p:p+i+1], true)
			p += i + 1
		}
		if p < n && (err != nil || (p == 0 && n == len(buf))) {
			l.write(s, buf[p:n], false)
			p = n
		}
		copy(buf, buf[p:n])
		n -= p
		if err != nil {
			return
		}
	}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func (l *logFile) write(s Stream, content []byte, last bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	t := l.partTS[s]
	if t.IsZero() {
		t = time.Now().UTC()
	}
	if last {
		l.partTS[s] = time.Time{}
	} else {
		l.partTS[s] = t
	}
	frame := appendFrame(nil, s, t, asDockerStores(content))
	if _, err := l.f.Write(frame); err != nil {
		return
	}
	l.size += int64(len(frame))
	close(l.wake)
	l.wake = make(chan struct{})
}

// asDockerStores returns a frame's content as Docker's json-file driver
// gives it back: the driver stores each frame (a line, or a 16 KiB piece of
// a longer one) as a JSON string and writes every byte that is not part of
// valid UTF-8 there as \ufffd, so reading the log yields U+FFFD for each
// such byte (and for each byte of a character cut at a piece boundary).
// The process runtime does the same so that both runtimes hand the relay
// the same lines (docs/protocol.md, "Invalid UTF-8").
func asDockerStores(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

func (l *logFile) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	l.done = true
	l.f.Close()
	close(l.wake)
}

// reader reads the file up to the last complete frame; with follow it
// waits for more until the log is closed or ctx ends.
func (l *logFile) reader(ctx context.Context, follow bool) (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, fmt.Errorf("open process log: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	return &logFollower{l: l, f: f, ctx: ctx, cancel: cancel, follow: follow}, nil
}

type logFollower struct {
	l      *logFile
	f      *os.File
	off    int64
	ctx    context.Context
	cancel context.CancelFunc
	follow bool
}

func (r *logFollower) Read(p []byte) (int, error) {
	for {
		r.l.mu.Lock()
		size, wake, done := r.l.size, r.l.wake, r.l.done
		r.l.mu.Unlock()
		if r.off < size {
			n, err := r.f.ReadAt(p[:min(int64(len(p)), size-r.off)], r.off)
			r.off += int64(n)
			if n > 0 {
				return n, nil
			}
			if err != nil {
				return 0, err
			}
		}
		if done || !r.follow {
			return 0, io.EOF
		}
		select {
		case <-wake:
		case <-r.ctx.Done():
			return 0, r.ctx.Err()
		}
	}
}

func (r *logFollower) Close() error {
	r.cancel()
	return r.f.Close()
}
