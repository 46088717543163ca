package containers

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
)

// The network sandbox. Docker makes a container's network namespace when
// it starts the container, and the agent's program runs at once: a listener
// opened in that namespace afterwards (ListenIn) races the agent's first
// connection, and lost it in most runs. So Create first makes the namespace,
// in a sandbox container of its own that only waits, and the agent's
// container joins it (network mode container:<sandbox>): ListenIn serves the
// namespace before the agent's program runs. The sandbox has the Spec's
// network mode. It is stopped when its container has exited (Wait) and
// removed with it (Remove); PruneSandboxes removes any a crash left behind.
//
// The sandbox's program is made here, not pulled or built: filepath needs
// no registry and no toolchain at run time, and the program must run on
// any image-less engine. It is a minimal static ELF executable (129 bytes on
// amd64) that calls pause (ppoll on arm64) forever; SIGKILL ends it.

// Labels of the sandbox (Spec-derived labels besides). A sandbox is not
// managed (List never returns it); LabelNetns is on the container that owns
// one, naming it.
const (
	LabelSandbox = "filepath.sandbox" // "true" on a sandbox container
	LabelNetns   = "filepath.netns"   // on a container: the id of the sandbox it owns
)

// sandboxRepo is the repository of the sandbox image; its tag is a hash of
// the program, so a changed program is a new image.
const sandboxRepo = "filepath/sandbox"

// sandboxGrace is how old a sandbox that no container joins must be before
// PruneSandboxes removes it: one younger may belong to a Create in progress.
const sandboxGrace = 2 * time.Minute

// sandboxProgram returns the sandbox's executable for an engine of the
// given architecture (Docker's names: amd64, arm64).
func sandboxProgram(arch string) ([]byte, error) {
	switch arch {
	case "amd64", "x86_64":
		return elfExecutable(0x3e, []byte{
			0xb8, 0x22, 0x00, 0x00, 0x00, // mov eax, 34 (pause)
			0x0f, 0x05, // syscall
			0xeb, 0xf7, // jmp back to the mov
		}), nil
	case "arm64", "aarch64":
		var code []byte
		for _, ins := range []uint32{
			0xaa1f03e0, 0xaa1f03e1, 0xaa1f03e2, 0xaa1f03e3, 0xaa1f03e4, // mov x0..x4, xzr: ppoll(NULL, 0, NULL, NULL, 0)
			0xd2800928, // mov x8, #73 (ppoll)
			0xd4000001, // svc #0
			0x17fffff9, // b back to the first mov
		} {
			code = binary.LittleEndian.AppendUint32(code, ins)
		}
		return elfExecutable(0xb7, code), nil
	}
	return nil, fmt.Errorf("no network sandbox program for a Docker engine on %q (filepath has one for amd64 and arm64)", arch)
}

// elfExecutable wraps code in a static 64-bit little-endian ELF executable
// of one read+execute segment, loaded at 0x400000, entered at its code.
func elfExecutable(machine uint16, code []byte) []byte {
	const base, ehsize, phsize = 0x400000, 64, 56
	size := uint64(ehsize + phsize + len(code))
	var b bytes.Buffer
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little-endian */, 1 /* version */, 0 /* System V */, 0, 0, 0, 0, 0, 0, 0, 0})
	le := binary.LittleEndian
	for _, v := range []any{
		uint16(2) /* executable */, machine, uint32(1), uint64(base + ehsize + phsize) /* entry */, uint64(ehsize) /* phoff */, uint64(0), /* shoff */
		uint32(0) /* flags */, uint16(ehsize), uint16(phsize), uint16(1) /* phnum */, uint16(0), uint16(0), uint16(0),
		// the one program header: PT_LOAD, R+X, the whole file at base
		uint32(1), uint32(5), uint64(0), uint64(base), uint64(base), size, size, uint64(0x10000),
	} {
		binary.Write(&b, le, v) //nolint:errcheck // a bytes.Buffer does not fail
	}
	b.Write(code)
	return b.Bytes()
}

// sandboxImage returns the sandbox image, importing it (docker import of a
// root filesystem holding only the program) the first time.
func (d *Docker) sandboxImage(ctx context.Context) (string, error) {
	d.sandboxMu.Lock()
	defer d.sandboxMu.Unlock()
	if d.sandboxRef != "" {
		return d.sandboxRef, nil
	}
	v, err := d.cli.ServerVersion(ctx)
	if err != nil {
		return "", d.wrap("ask the engine's version for", "sandbox", err)
	}
	prog, err := sandboxProgram(v.Arch)
	if err != nil {
		return "", errorf(CodeUnavailable, "%v", err)
	}
	sum := sha256.Sum256(prog)
	ref := sandboxRepo + ":" + hex.EncodeToString(sum[:6])
	if _, err := d.cli.ImageInspect(ctx, ref); err == nil {
		d.sandboxRef = ref
		return ref, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", d.wrap("inspect image", ref, err)
	}
	var rootfs bytes.Buffer
	tw := tar.NewWriter(&rootfs)
	tw.WriteHeader(&tar.Header{Name: "sandbox", Mode: 0o555, Size: int64(len(prog)), ModTime: time.Unix(0, 0)}) //nolint:errcheck // into a buffer
	tw.Write(prog)                                                                                              //nolint:errcheck
	tw.Close()                                                                                                  //nolint:errcheck
	rc, err := d.cli.ImageImport(ctx, image.ImportSource{Source: &rootfs, SourceName: "-"}, ref, image.ImportOptions{
		Changes:  []string{`ENTRYPOINT ["/sandbox"]`, "LABEL " + LabelSandbox + "=true"},
		Platform: "linux/" + v.Arch,
	})
	if err != nil {
		return "", d.wrap("import the network sandbox image", ref, err)
	}
	defer rc.Close()
	if err := jsonStreamError(rc); err != nil {
		return "", fmt.Errorf("import the network sandbox image %s: %w", ref, err)
	}
	d.sandboxRef = ref
	return ref, nil
}

// jsonStreamError reads an engine's JSON message stream to its end and
// returns the error it reported, if any.
func jsonStreamError(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if m.ErrorDetail.Message != "" {
			return errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
	}
}

// sandboxed reports whether a container of network mode n gets a sandbox:
// not on the host's network (nothing to make first), nor in another
// container's.
func sandboxed(n container.NetworkMode) bool { return !n.IsHost() && !n.IsContainer() }

// createSandbox creates and starts spec's sandbox with the network mode
// network, and returns its id.
func (d *Docker) createSandbox(ctx context.Context, spec Spec, network string) (string, error) {
	img, err := d.sandboxImage(ctx)
	if err != nil {
		return "", err
	}
	l := d.labels(spec)
	delete(l, LabelManaged)
	l[LabelSandbox] = "true"
	pids, init := int64(4), false
	host := &container.HostConfig{
		NetworkMode:    container.NetworkMode(network),
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		Init:           &init,
		Resources:      container.Resources{Memory: 16 << 20, NanoCPUs: 1e8, PidsLimit: &pids},
		LogConfig:      container.LogConfig{Type: "none"},
	}
	name := ""
	if spec.Name != "" {
		name = spec.Name + "-net"
	}
	resp, err := d.cli.ContainerCreate(ctx, &container.Config{Image: img, Labels: l}, host, nil, nil, name)
	if err != nil {
		return "", d.wrap("create the network sandbox of", spec.NodeID, err)
	}
	if err := d.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		d.removeQuietly(ctx, resp.ID)
		return "", d.wrap("start the network sandbox of", spec.NodeID, err)
	}
	return resp.ID, nil
}

// removeQuietly removes a container whatever its state, logging nothing:
// cleanup after another error, which is the one reported.
func (d *Docker) removeQuietly(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	d.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true}) //nolint:errcheck // best effort
}

// joinMode is the network mode of a container that joins container id's
// network namespace: its sandbox's, or its own when it has none.
func (d *Docker) joinMode(ctx context.Context, id string) (container.NetworkMode, error) {
	c, err := d.cli.ContainerInspect(ctx, id)
	if err != nil {
		return "", d.wrap("inspect", id, err)
	}
	if c.HostConfig != nil && c.HostConfig.NetworkMode.IsContainer() {
		return c.HostConfig.NetworkMode, nil
	}
	return container.NetworkMode("container:" + c.ID), nil
}

// sandboxFor returns the sandbox container id owns ("" : none) and
// whether it was started by Create and has not been stopped since. It
// asks the engine only about a container this Docker did not create.
func (d *Docker) sandboxFor(ctx context.Context, id string) (sb string, fresh bool, err error) {
	d.netnsMu.Lock()
	k, ok := d.netns[id]
	d.netnsMu.Unlock()
	if ok {
		return k.sandbox, k.fresh, nil
	}
	c, err := d.cli.ContainerInspect(ctx, id)
	if err != nil {
		return "", false, d.wrap("inspect", id, err)
	}
	sb = sandboxOf(c.Config)
	d.rememberSandbox(c.ID, sb, false)
	return sb, false, nil
}

// rememberSandbox notes container id's sandbox (fresh: it runs since
// Create), or forgets the container with sb "" and forget.
func (d *Docker) rememberSandbox(id, sb string, fresh bool) {
	d.netnsMu.Lock()
	defer d.netnsMu.Unlock()
	if d.netns == nil {
		d.netns = map[string]netnsOf{}
	}
	d.netns[id] = netnsOf{sandbox: sb, fresh: fresh}
}

func (d *Docker) forgetSandbox(id string) {
	d.netnsMu.Lock()
	defer d.netnsMu.Unlock()
	delete(d.netns, id)
}

// netnsOf is what Docker remembers of a container's sandbox.
type netnsOf struct {
	sandbox string // "" : the container has none
	fresh   bool   // started by Create, not stopped since
}

// ensureSandbox starts the sandbox container id owns, unless it has none
// or it runs since Create (starting a running container does nothing).
func (d *Docker) ensureSandbox(ctx context.Context, id string) error {
	sb, fresh, err := d.sandboxFor(ctx, id)
	if err != nil || sb == "" || fresh {
		return err
	}
	for attempt := 0; ; attempt++ {
		err = d.cli.ContainerStart(ctx, sb, container.StartOptions{})
		// A sandbox killed a moment ago (its container exited: stopSandbox)
		// can still be on its way down: the engine then refuses to start it
		// ("cannot start a stopped process"). Wait until it is down, and
		// start it again.
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "cannot start a stopped process") {
			break
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resC, errC := d.cli.ContainerWait(wctx, sb, container.WaitConditionNotRunning)
		select {
		case <-resC:
		case <-errC:
		}
		cancel()
		select {
		case <-ctx.Done():
			return d.wrap("start the network sandbox of", id, ctx.Err())
		case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
		}
	}
	if cerrdefs.IsNotFound(err) {
		return errorf(CodeUnavailable, "start container %.12s: its network sandbox %.12s is gone (removed from outside filepath)", id, sb)
	}
	return d.wrap("start the network sandbox of", id, err)
}

// stopSandbox ends the sandbox of container id, which has exited: nothing
// needs its namespace any more (a listener still open keeps it alive).
func (d *Docker) stopSandbox(ctx context.Context, id string) {
	sb, _, err := d.sandboxFor(ctx, id)
	if err != nil || sb == "" {
		return
	}
	// Not a container that was never started (a wait for "not running"
	// returns at once for it): its sandbox may serve a listener already.
	if c, err := d.cli.ContainerInspect(ctx, id); err != nil || c.State == nil || c.State.Status != "exited" && c.State.Status != "dead" {
		return
	}
	d.rememberSandbox(id, sb, false)
	d.cli.ContainerKill(ctx, sb, "SIGKILL") //nolint:errcheck // stopped or gone already: either is fine
	// The kill returns before the sandbox is down. A Start right after this
	// (a message to a node that just stopped) must find it stopped and start
	// it again, not find it still running and then join a namespace that
	// goes away.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resC, errC := d.cli.ContainerWait(wctx, sb, container.WaitConditionNotRunning)
	select {
	case <-resC:
	case <-errC:
	}
}

// sandboxOf is the sandbox a container's config names (LabelNetns), or "".
func sandboxOf(c *container.Config) string {
	if c == nil {
		return ""
	}
	return c.Labels[LabelNetns]
}

// PruneSandboxes removes the sandboxes (of this instance, with
// DockerConfig.Instance) that no container joins any more and that are
// older than a Create in progress could be: what an orchestrator that
// stopped between making a sandbox and its container left. It returns how
// many it removed.
func (d *Docker) PruneSandboxes(ctx context.Context) (int, error) {
	return d.pruneSandboxes(ctx, sandboxGrace)
}

func (d *Docker) pruneSandboxes(ctx context.Context, grace time.Duration) (int, error) {
	f := filters.NewArgs(filters.Arg("label", LabelSandbox+"=true"))
	if d.cfg.Instance != "" {
		f.Add("label", LabelInstance+"="+d.cfg.Instance)
	}
	sbs, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return 0, d.wrap("list", "sandboxes", err)
	}
	if len(sbs) == 0 {
		return 0, nil
	}
	all, err := d.cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return 0, d.wrap("list", "", err)
	}
	joined := map[string]bool{}
	for _, c := range all {
		if m := container.NetworkMode(c.HostConfig.NetworkMode); m.IsContainer() {
			joined[m.ConnectedContainer()] = true
		}
		if sb := c.Labels[LabelNetns]; sb != "" {
			joined[sb] = true
		}
	}
	n := 0
	var errs []error
	for _, sb := range sbs {
		if joined[sb.ID] || time.Since(time.Unix(sb.Created, 0)) < grace {
			continue
		}
		if err := d.cli.ContainerRemove(ctx, sb.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, d.wrap("remove the orphan network sandbox", sb.ID, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// netnsPid returns the host pid of a process in container id's network
// namespace: its own while it runs, else (created, not started yet) its
// sandbox's. A container in neither state is CodeConflict.
func (d *Docker) netnsPid(ctx context.Context, id string) (int, error) {
	c, err := d.cli.ContainerInspect(ctx, id)
	if err != nil {
		return 0, d.wrap("inspect", id, err)
	}
	if c.State != nil && c.State.Running && c.State.Pid > 0 {
		return c.State.Pid, nil
	}
	if c.State != nil && c.State.Status == "created" && c.HostConfig != nil && c.HostConfig.NetworkMode.IsContainer() {
		sb := c.HostConfig.NetworkMode.ConnectedContainer()
		pid, err := d.runningPid(ctx, sb)
		if CodeOf(err) == CodeConflict || CodeOf(err) == CodeNotFound {
			return 0, errorf(CodeConflict, "container %.12s is not running, and the network namespace it joins (%.12s) is not up: %v", id, sb, err)
		}
		return pid, err
	}
	return 0, errorf(CodeConflict, "container %.12s is not running", id)
}
