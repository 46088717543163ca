package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
)

// DockerConfig configures the Docker runtime.
type DockerConfig struct {
	// Host is the engine address; "" uses DOCKER_HOST and friends (client.FromEnv).
	Host string
	// Network is the network mode for specs that leave Network empty
	// (default "none": agents reach the network only through what the
	// orchestrator serves in their namespace, ListenIn).
	Network string
	// LogMaxSize and LogMaxFiles bound each container's json-file log
	// (defaults "32m" and 4: at most 128 MiB of log per container). They
	// also bound what a restarted orchestrator can recover: the newest
	// LogMaxSize x LogMaxFiles of json-file data, about 100 MB of plain
	// output once the driver's JSON wrapping (~70 bytes a line) is paid.
	LogMaxSize  string
	LogMaxFiles int
	// Instance, when set, is put on every container as label
	// filepath.instance, and List returns only containers carrying it, so two
	// orchestrators (or test runs) sharing one engine never list, and so never
	// reconcile away, each other's containers. "" lists every managed container.
	Instance string
	// NoInit turns off Docker's init process (docker-init/tini as PID 1,
	// which forwards SIGTERM to the agent and reaps zombies).
	NoInit bool
}

// Docker is the Runtime backed by a Docker engine (API 1.41+; negotiated).
//
// Each container runs in the network namespace of a sandbox container that
// Create makes first (sandbox.go), so that ListenIn serves it before the
// container's program runs. Containers are hardened by default: all capabilities dropped,
// no-new-privileges, memory/CPU/pids limits (DefaultLimits), no Docker
// socket or other mounts besides /workspace and the state volume, docker-init as PID 1, stdin
// open without a TTY (OpenStdin, not StdinOnce), and a json-file log
// bounded by LogMaxSize x LogMaxFiles. The relay follows that log (with
// timestamps) instead of attaching stdout, so output printed while the
// orchestrator is down is recovered from it.
type Docker struct {
	cli *client.Client
	cfg DockerConfig

	sandboxMu  sync.Mutex // guards sandboxRef, held while the image is imported
	sandboxRef string     // the network sandbox image, once it exists

	netnsMu sync.Mutex         // guards netns (leaf)
	netns   map[string]netnsOf // container id → its sandbox, as far as known
}

var _ Runtime = (*Docker)(nil)

// NewDocker connects to the engine and checks that it answers.
func NewDocker(ctx context.Context, cfg DockerConfig) (*Docker, error) {
	if cfg.Network == "" {
		cfg.Network = "none"
	}
	if cfg.LogMaxSize == "" {
		cfg.LogMaxSize = "32m"
	}
	if cfg.LogMaxFiles <= 0 {
		cfg.LogMaxFiles = 4
	}
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, errorf(CodeUnavailable, "docker client: %v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		cli.Close()
		return nil, errorf(CodeUnavailable, "docker engine not reachable at %s: %v", cli.DaemonHost(), err)
	}
	return &Docker{cli: cli, cfg: cfg}, nil
}

// Close releases the client's connections.
func (d *Docker) Close() error { return d.cli.Close() }

// wrap turns a Docker error about container id into a coded error.
func (d *Docker) wrap(op, id string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s container %s: %w", op, id, err)
	case cerrdefs.IsNotFound(err):
		return errorf(CodeNotFound, "container %q not found", id)
	case client.IsErrConnectionFailed(err):
		return errorf(CodeUnavailable, "docker engine not reachable at %s: %v", d.cli.DaemonHost(), err)
	case cerrdefs.IsConflict(err):
		return errorf(CodeConflict, "%s container %s: %v", op, id, err)
	}
	return fmt.Errorf("%s container %s: %w", op, id, err)
}

// Create implements Runtime.
func (d *Docker) Create(ctx context.Context, spec Spec) (string, error) {
	if err := validateSpec(spec); err != nil {
		return "", err
	}
	if spec.Image == "" {
		return "", fieldErrorf("image", "image is required")
	}
	img, err := d.cli.ImageInspect(ctx, spec.Image)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", &Error{Code: CodeUnavailable, Field: "image",
				Message: fmt.Sprintf("image %q is not on this machine: build it with docker build (make images builds the test and tutorial agents), or spawn a custom agent with an image you have", spec.Image)}
		}
		return "", d.wrap("inspect image for", spec.Image, err)
	}
	lim := spec.Limits.withDefaults()
	network := container.NetworkMode(spec.Network)
	if network == "" {
		network = container.NetworkMode(d.cfg.Network)
	}
	labels := d.labels(spec)
	sandbox := ""
	switch {
	case spec.JoinNetwork != "":
		if network, err = d.joinMode(ctx, spec.JoinNetwork); err != nil {
			return "", err
		}
	case sandboxed(network):
		if sandbox, err = d.createSandbox(ctx, spec, string(network)); err != nil {
			return "", err
		}
		network = container.NetworkMode("container:" + sandbox)
		labels[LabelNetns] = sandbox
	}
	cfg := &container.Config{
		Image:     spec.Image,
		Env:       envList(spec.Env),
		Labels:    labels,
		User:      spec.User,
		OpenStdin: true, // stdin stays open across attaches (StdinOnce false)
		StdinOnce: false,
		Tty:       false,
	}
	if len(spec.Cmd) > 0 {
		cfg.Cmd = spec.Cmd
	}
	if len(spec.Entrypoint) > 0 {
		cfg.Entrypoint = spec.Entrypoint
	}
	pids := lim.PidsLimit
	init := !d.cfg.NoInit
	host := &container.HostConfig{
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		NetworkMode:    network,
		ReadonlyRootfs: spec.ReadOnlyRootfs,
		Init:           &init,
		Resources: container.Resources{
			Memory:    lim.MemoryBytes,
			NanoCPUs:  lim.NanoCPUs,
			PidsLimit: &pids,
		},
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{
			"max-size": d.cfg.LogMaxSize,
			"max-file": strconv.Itoa(d.cfg.LogMaxFiles),
		}},
	}
	if spec.ReadOnlyRootfs {
		host.Tmpfs = map[string]string{"/tmp": "rw,nosuid,nodev,size=64m"}
	}
	if spec.WorkspaceDir != "" {
		m := mount.Mount{Type: mount.TypeBind, Source: spec.WorkspaceDir, Target: "/workspace"}
		if spec.WorkspacePropagation != "" {
			m.BindOptions = &mount.BindOptions{Propagation: mount.Propagation(spec.WorkspacePropagation)}
		}
		host.Mounts = []mount.Mount{m}
		cfg.WorkingDir = "/workspace"
	}
	if spec.StateVolume != "" {
		var imageEnv []string
		if img.Config != nil {
			imageEnv = img.Config.Env
		}
		if dir := stateDir(spec.Env, imageEnv); dir != "" {
			if err := d.createVolume(ctx, spec); err != nil {
				if sandbox != "" {
					d.removeQuietly(ctx, sandbox)
				}
				return "", err
			}
			host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeVolume, Source: spec.StateVolume, Target: dir})
		}
	}
	resp, err := d.cli.ContainerCreate(ctx, cfg, host, nil, nil, spec.Name)
	if err != nil {
		if sandbox != "" {
			d.removeQuietly(ctx, sandbox)
		}
		return "", d.wrap("create", spec.Name, err)
	}
	d.rememberSandbox(resp.ID, sandbox, sandbox != "")
	return resp.ID, nil
}

// Start implements Runtime. A container whose sandbox was stopped (it ran
// and exited before) gets it started again first.
func (d *Docker) Start(ctx context.Context, id string) error {
	if err := d.ensureSandbox(ctx, id); err != nil {
		return err
	}
	err := d.cli.ContainerStart(ctx, id, container.StartOptions{})
	if err != nil && strings.Contains(err.Error(), "is not a shared or slave mount") {
		return errorf(CodeUnavailable,
			"start container %s: %v (workspace propagation needs a shared host mount: mount --make-rshared on the data directory's mount)", id, err)
	}
	return d.wrap("start", id, err)
}

// AttachStdin implements Runtime with a hijacked attach carrying stdin only.
func (d *Docker) AttachStdin(ctx context.Context, id string) (io.WriteCloser, error) {
	hr, err := d.cli.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: true})
	if err != nil {
		return nil, d.wrap("attach", id, err)
	}
	return &hijacked{hr: hr}, nil
}

type hijacked struct{ hr types.HijackedResponse }

func (h *hijacked) Write(p []byte) (int, error) { return h.hr.Conn.Write(p) }

// Close ends this attach only; the container's stdin stays open.
func (h *hijacked) Close() error { return h.hr.Conn.Close() }

// Logs implements Runtime by reading Docker's log with timestamps (the
// json-file driver keeps what was printed while nobody was attached).
func (d *Docker) Logs(ctx context.Context, id string, opts LogOptions) (*LogReader, error) {
	rc, err := d.cli.ContainerLogs(ctx, id, container.LogsOptions{
		ShowStdout: opts.Stdout || !opts.Stderr,
		ShowStderr: opts.Stderr || !opts.Stdout,
		Since:      sinceParam(opts.Since),
		Timestamps: true,
		Follow:     opts.Follow,
	})
	if err != nil {
		return nil, d.wrap("logs of", id, err)
	}
	return NewLogReader(rc, opts), nil
}

// Wait implements Runtime. Once the container has exited its sandbox is
// stopped.
func (d *Docker) Wait(ctx context.Context, id string) (int, error) {
	resC, errC := d.cli.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case res := <-resC:
		if res.Error != nil && res.Error.Message != "" {
			return int(res.StatusCode), fmt.Errorf("wait for container %s: %s", id, res.Error.Message)
		}
		d.stopSandbox(ctx, id)
		return int(res.StatusCode), nil
	case err := <-errC:
		return 0, d.wrap("wait for", id, err)
	}
}

// Stop implements Runtime. It signals itself rather than using Docker's
// stop so that grace has sub-second precision and ctx bounds every step.
func (d *Docker) Stop(ctx context.Context, id string, grace time.Duration) error {
	info, err := d.Inspect(ctx, id)
	if err != nil {
		return err
	}
	switch info.State {
	case StateExited, StateCreated:
		return nil
	case StatePaused:
		if err := d.Unpause(ctx, id); err != nil {
			return err
		}
	}
	if err := d.kill(ctx, id, "SIGTERM"); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, grace)
	_, err = d.Wait(wctx, id)
	cancel()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("stop container %s: %w", id, ctx.Err())
	}
	if err := d.kill(ctx, id, "SIGKILL"); err != nil {
		return err
	}
	if _, err := d.Wait(ctx, id); err != nil {
		return fmt.Errorf("stop container %s: %w", id, err)
	}
	return nil
}

// kill sends sig; a container that already stopped is fine.
func (d *Docker) kill(ctx context.Context, id, sig string) error {
	err := d.cli.ContainerKill(ctx, id, sig)
	if err != nil && cerrdefs.IsConflict(err) { // "is not running"
		return nil
	}
	return d.wrap("kill", id, err)
}

// HasImage reports whether image is on this machine (the runner tells the
// spawn dialog which agents can run).
func (d *Docker) HasImage(ctx context.Context, image string) (bool, error) {
	_, err := d.cli.ImageInspect(ctx, image)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	}
	return false, d.wrap("inspect image for", image, err)
}

// Pause implements Runtime.
func (d *Docker) Pause(ctx context.Context, id string) error {
	return d.wrap("pause", id, d.cli.ContainerPause(ctx, id))
}

// Unpause implements Runtime.
func (d *Docker) Unpause(ctx context.Context, id string) error {
	return d.wrap("unpause", id, d.cli.ContainerUnpause(ctx, id))
}

// Remove implements Runtime. The container's sandbox goes with it.
func (d *Docker) Remove(ctx context.Context, id string) error {
	sandbox, _, _ := d.sandboxFor(ctx, id) // gone already: so is what it had
	d.forgetSandbox(id)
	err := d.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && (cerrdefs.IsNotFound(err) || strings.Contains(err.Error(), "already in progress")) {
		err = nil
	}
	if err != nil {
		return d.wrap("remove", id, err)
	}
	if sandbox != "" {
		err := d.cli.ContainerRemove(ctx, sandbox, container.RemoveOptions{Force: true})
		if err != nil && !cerrdefs.IsNotFound(err) && !strings.Contains(err.Error(), "already in progress") {
			return d.wrap("remove the network sandbox of", id, err)
		}
	}
	return nil
}

// createVolume makes the spec's state volume, labeled like its containers,
// unless it exists.
func (d *Docker) createVolume(ctx context.Context, spec Spec) error {
	if _, err := d.cli.VolumeInspect(ctx, spec.StateVolume); err == nil {
		return nil
	}
	_, err := d.cli.VolumeCreate(ctx, volume.CreateOptions{Name: spec.StateVolume, Labels: d.labels(spec)})
	if err != nil {
		return d.wrap("create the state volume of", spec.NodeID, err)
	}
	return nil
}

// RemoveVolume implements Runtime. Docker refuses to remove a volume a
// container (running or not) uses, even forced: that is CodeConflict.
func (d *Docker) RemoveVolume(ctx context.Context, name string) error {
	err := d.cli.VolumeRemove(ctx, name, true)
	switch {
	case err == nil, cerrdefs.IsNotFound(err):
		return nil
	case cerrdefs.IsConflict(err):
		return errorf(CodeConflict, "remove volume %s: %v", name, err)
	case client.IsErrConnectionFailed(err):
		return errorf(CodeUnavailable, "docker engine not reachable at %s: %v", d.cli.DaemonHost(), err)
	}
	return fmt.Errorf("remove volume %s: %w", name, err)
}

// ListVolumes implements Runtime: the volumes labelled filepath.managed
// (and, with DockerConfig.Instance, of this instance) with every wanted label.
func (d *Docker) ListVolumes(ctx context.Context, want map[string]string) ([]VolumeInfo, error) {
	f := filters.NewArgs(filters.Arg("label", LabelManaged+"=true"))
	if d.cfg.Instance != "" {
		f.Add("label", LabelInstance+"="+d.cfg.Instance)
	}
	for k, v := range want {
		f.Add("label", k+"="+v)
	}
	resp, err := d.cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		if client.IsErrConnectionFailed(err) {
			return nil, errorf(CodeUnavailable, "docker engine not reachable at %s: %v", d.cli.DaemonHost(), err)
		}
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	out := make([]VolumeInfo, 0, len(resp.Volumes))
	for _, v := range resp.Volumes {
		if v == nil {
			continue
		}
		out = append(out, VolumeInfo{Name: v.Name, SessionID: v.Labels[LabelSession], NodeID: v.Labels[LabelNode], Labels: v.Labels})
	}
	slices.SortFunc(out, func(a, b VolumeInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// stateDir is where the state volume goes: FILEPATH_STATE_DIR of the spec's
// environment, else of the image's; "" for none.
func stateDir(env map[string]string, imageEnv []string) string {
	if dir, ok := env[EnvStateDir]; ok {
		return dir
	}
	for _, kv := range imageEnv {
		if v, ok := strings.CutPrefix(kv, EnvStateDir+"="); ok {
			return v
		}
	}
	return ""
}

// List implements Runtime. It inspects each container for exit code and times.
func (d *Docker) List(ctx context.Context, want map[string]string) ([]Info, error) {
	f := filters.NewArgs(filters.Arg("label", LabelManaged+"=true"))
	if d.cfg.Instance != "" {
		f.Add("label", LabelInstance+"="+d.cfg.Instance)
	}
	for k, v := range want {
		f.Add("label", k+"="+v)
	}
	cs, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, d.wrap("list", "", err)
	}
	out := make([]Info, 0, len(cs))
	for _, c := range cs {
		info, err := d.Inspect(ctx, c.ID)
		if CodeOf(err) == CodeNotFound {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// Inspect implements Runtime.
func (d *Docker) Inspect(ctx context.Context, id string) (Info, error) {
	c, err := d.cli.ContainerInspect(ctx, id)
	if err != nil {
		return Info{}, d.wrap("inspect", id, err)
	}
	info := Info{ID: c.ID, Name: strings.TrimPrefix(c.Name, "/")}
	if c.Config != nil {
		info.Image = c.Config.Image
		info.Labels = c.Config.Labels
		info.SessionID = c.Config.Labels[LabelSession]
		info.NodeID = c.Config.Labels[LabelNode]
	}
	if st := c.State; st != nil {
		switch st.Status {
		case "created":
			info.State = StateCreated
		case "running":
			info.State = StateRunning
		case "paused":
			info.State = StatePaused
		default: // exited, dead, removing, restarting
			info.State = StateExited
		}
		info.ExitCode = st.ExitCode
		info.OOMKilled = st.OOMKilled
		info.StartedAt = dockerTime(st.StartedAt)
		info.FinishedAt = dockerTime(st.FinishedAt)
	}
	return info, nil
}

func dockerTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t
}

func (d *Docker) labels(spec Spec) map[string]string {
	l := labels(spec)
	if d.cfg.Instance != "" {
		l[LabelInstance] = d.cfg.Instance
	}
	return l
}

// validateSpec checks what every runtime needs.
func validateSpec(spec Spec) error {
	if spec.SessionID == "" {
		return fieldErrorf("session_id", "session id is required")
	}
	if spec.NodeID == "" {
		return fieldErrorf("node_id", "node id is required")
	}
	if spec.StateVolume != "" && !volumeNameRE.MatchString(spec.StateVolume) {
		return fieldErrorf("state_volume", "state volume name %q: want letters, digits, '_', '.' or '-', starting with a letter or digit", spec.StateVolume)
	}
	return nil
}

// volumeNameRE is what Docker accepts as a volume name (and what is safe as
// a directory name).
var volumeNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`)

// labels returns the spec's labels plus the filepath.* ones.
func labels(spec Spec) map[string]string {
	l := maps.Clone(spec.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[LabelManaged] = "true"
	l[LabelSession] = spec.SessionID
	l[LabelNode] = spec.NodeID
	return l
}

// envList returns env as sorted KEY=value strings.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}
