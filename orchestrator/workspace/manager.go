package workspace

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/filepath-dev/filepath/orchestrator/vfs"
	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
	"golang.org/x/sys/unix"
)

// Propagation is the bind propagation the container runtime must use for
// /workspace ("-v <Path(node)>:/workspace:rslave"), so that a mount made
// again at Path(node) after an orchestrator restart reaches the running
// container.
const Propagation = "rslave"

// ContainerPath is where the workspace appears inside a container.
const ContainerPath = paths.WorkspaceRoot

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// Dir holds one mount point per node (<data>/mnt). It is made a
	// shared mount point so that remounts propagate into containers.
	Dir string
	// Open returns the filesystem a node's mount serves (the session VFS,
	// restricted to the node's allowed paths). It must report its session
	// (SessionID() string, as *vfs.FS does).
	Open func(ctx context.Context, nodeID string) (FS, error)
	// Options for every mount; Options.Fanout is the Manager's own.
	Options Options
	Logger  *slog.Logger
}

// Manager owns one mount per node under Dir/<node-id>. Its Fanout must be
// installed as the VFS's Invalidator (vfs.VFS.SetInvalidator), so that each
// mount learns of changes made through the others and the REST API.
type Manager struct {
	cfg    ManagerConfig
	fanout Fanout

	mu     sync.Mutex // guards mounts and closed
	mounts map[string]*MountPoint
	closed bool
}

// NewManager creates Dir and makes it a shared mount point.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.Dir == "" {
		return nil, errors.New("workspace: mount directory is required")
	}
	if cfg.Open == nil {
		return nil, errors.New("workspace: Open is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Options.Logger == nil {
		cfg.Options.Logger = cfg.Logger
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: mount directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("workspace: mount directory: %w", err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return nil, fmt.Errorf("workspace: mount directory: %w", err)
	}
	cfg.Dir = dir
	if err := MakeShared(dir); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, mounts: map[string]*MountPoint{}}
	m.cfg.Options.Fanout = &m.fanout
	return m, nil
}

// Fanout is the VFS Invalidator that keeps the Manager's mounts coherent.
func (m *Manager) Fanout() *Fanout { return &m.fanout }

// Path returns the host mount point of a node's workspace.
func (m *Manager) Path(nodeID string) string { return filepath.Join(m.cfg.Dir, nodeID) }

// Bind returns the docker -v / HostConfig.Binds entry for a node:
// "<Path(node)>:/workspace:rslave".
func (m *Manager) Bind(nodeID string) string {
	return m.Path(nodeID) + ":" + ContainerPath + ":" + Propagation
}

func validNodeID(id string) error {
	if id == "" || id[0] == '.' || strings.ContainsAny(id, "/\x00") || len(id) > 200 {
		return fmt.Errorf("workspace: invalid node id %q", id)
	}
	return nil
}

// Mount mounts a node's workspace at Path(nodeID) unless it is mounted
// already, and returns the path. Dead mounts left there by a previous
// process are replaced (see mountReplacing): the path holds one mount.
func (m *Manager) Mount(ctx context.Context, nodeID string) (string, error) {
	if err := validNodeID(nodeID); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return "", errors.New("workspace: manager closed")
	}
	if _, ok := m.mounts[nodeID]; ok {
		return m.Path(nodeID), nil
	}
	return m.mountLocked(ctx, nodeID)
}

func (m *Manager) mountLocked(ctx context.Context, nodeID string) (string, error) {
	dir := m.Path(nodeID)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("workspace: mount point for node %s: %w", nodeID, err)
	}
	fsys, err := m.cfg.Open(ctx, nodeID)
	if err != nil {
		return "", fmt.Errorf("workspace: open filesystem of node %s: %w", nodeID, err)
	}
	// Without the notices, the 30 s kernel caches would hide other nodes'
	// changes: refuse rather than serve stale files.
	if r, ok := fsys.(interface{ Invalidator() vfs.Invalidator }); ok && r.Invalidator() != vfs.Invalidator(&m.fanout) {
		return "", fmt.Errorf("workspace: node %s: the session filesystem does not report its changes to this Manager: install Manager.Fanout() with vfs.VFS.SetInvalidator", nodeID)
	}
	mt, err := m.mountReplacing(ctx, nodeID, dir, fsys)
	if err != nil {
		return "", fmt.Errorf("workspace: node %s: %w", nodeID, err)
	}
	m.mounts[nodeID] = mt
	return dir, nil
}

// mountReplacing mounts fsys at dir and leaves it the only mount there.
//
// Mounts left at dir by a previous process (dead, ENOTCONN, after a crash or
// Shutdown) are replaced so that a running container that bound the topmost
// of them still gets the new one: the new mount is stacked on that one, which
// propagates it into the container (Propagation); then the old top is made
// private, so that unmounting it no longer reaches the container, the new
// mount is moved aside, every old layer is detached, and the new mount is
// moved back. The container keeps its copy of the new mount; the host keeps
// one mount per node however often the orchestrator restarts.
func (m *Manager) mountReplacing(ctx context.Context, nodeID, dir string, fsys FS) (*MountPoint, error) {
	layers, err := mountLayers(dir)
	if err != nil {
		return nil, err
	}
	if layers == 0 {
		return Mount(ctx, dir, fsys, m.cfg.Options)
	}
	// A handle on the old top, which the new mount will cover. O_PATH
	// opens nothing in the dead filesystem, so it works on ENOTCONN.
	old, err := unix.Open(dir, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		m.cfg.Logger.Warn("workspace: cannot hold the old mount; a container bound to it will not see the new one", "dir", dir, "err", err)
		if err := ClearMounts(dir); err != nil {
			return nil, err
		}
		return Mount(ctx, dir, fsys, m.cfg.Options)
	}
	defer unix.Close(old)
	mt, err := Mount(ctx, dir, fsys, m.cfg.Options)
	if err != nil {
		return nil, err
	}
	if err := m.dropLayersBelow(nodeID, dir, old); err != nil {
		if errors.Is(err, errMovedAway) {
			// Detached with the staging mount: end its server.
			if aerr := mt.Abort(); aerr == nil {
				<-mt.done
			}
			return nil, err
		}
		m.cfg.Logger.Warn("workspace: the new mount stays stacked on the dead ones", "dir", dir, "err", err)
	}
	return mt, nil
}

// errMovedAway: the new mount could not be moved back to its mount point.
var errMovedAway = errors.New("the new mount could not be moved back")

// dropLayersBelow detaches every mount under the topmost one at dir, old
// being a handle on the one just below it (see mountReplacing).
func (m *Manager) dropLayersBelow(nodeID, dir string, old int) error {
	// Without this, detaching the old top would also detach, by
	// propagation, the container's copy of the new mount.
	if err := unix.Mount("", fmt.Sprintf("/proc/self/fd/%d", old), "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the old mount private: %w", err)
	}
	// The kernel moves a mount only out of a parent that does not
	// propagate: park the new mount on a private bind mount meanwhile.
	stage := filepath.Join(m.cfg.Dir, stagePrefix+nodeID)
	if err := os.Mkdir(stage, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("staging directory: %w", err)
	}
	defer os.Remove(stage)
	if err := ClearMounts(stage); err != nil {
		return err
	}
	if err := unix.Mount(stage, stage, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("staging mount: %w", err)
	}
	defer unix.Unmount(stage, unix.MNT_DETACH)
	if err := unix.Mount("", stage, "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("staging mount: %w", err)
	}
	if err := unix.Mount(dir, stage, "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move the new mount aside: %w", err)
	}
	cerr := ClearMounts(dir)
	if err := unix.Mount(stage, dir, "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("%w: %w", errMovedAway, err)
	}
	if cerr != nil {
		return fmt.Errorf("detach the old mounts: %w", cerr)
	}
	return nil
}

// stagePrefix starts the name of the directory under Dir where
// mountReplacing parks a new mount; node ids never start with a dot.
const stagePrefix = ".replacing-"

// Unmount unmounts a node's workspace (lazily when a container still uses
// it) and removes the mount point. Unknown nodes are a no-op.
func (m *Manager) Unmount(nodeID string) error {
	m.mu.Lock()
	mt := m.mounts[nodeID]
	delete(m.mounts, nodeID)
	m.mu.Unlock()
	if mt == nil {
		if validNodeID(nodeID) == nil {
			return ClearMounts(m.Path(nodeID))
		}
		return nil
	}
	err := mt.Close()
	if cerr := ClearMounts(mt.Dir()); err == nil {
		err = cerr // dead mounts stacked below by earlier runs
	}
	if rerr := os.Remove(mt.Dir()); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		m.cfg.Logger.Warn("workspace: remove mount point", "dir", mt.Dir(), "err", rerr)
	}
	return err
}

// Recover runs at start, after a previous orchestrator process died or
// stopped with its mounts: each listed node (those whose container still
// runs) is mounted again at the same path, replacing the dead mounts there
// so that a running container that bound the old mount with rslave
// propagation sees the new one without a restart (mountReplacing). Every
// other mount under Dir (finished nodes, dead or live) is detached, all its
// stacked layers, and its mount point removed.
func (m *Manager) Recover(ctx context.Context, nodeIDs []string) error {
	want := map[string]bool{}
	for _, id := range nodeIDs {
		if err := validNodeID(id); err != nil {
			return err
		}
		want[id] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("workspace: manager closed")
	}
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return fmt.Errorf("workspace: recover: %w", err)
	}
	for _, e := range entries {
		id := e.Name()
		if want[id] || m.mounts[id] != nil {
			continue
		}
		dir := m.Path(id)
		if err := ClearMounts(dir); err != nil {
			m.cfg.Logger.Warn("workspace: recover: stale mount", "dir", dir, "err", err)
			continue
		}
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			m.cfg.Logger.Warn("workspace: recover: stale mount point", "dir", dir, "err", err)
		}
	}
	var errs []error
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if m.mounts[id] != nil {
			continue
		}
		if _, err := m.mountLocked(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Mounted returns the node ids with a live mount, sorted.
func (m *Manager) Mounted() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.mounts))
	for id := range m.mounts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Shutdown stops serving every workspace. The mounts of the nodes for which
// running reports true (all of them when running is nil) are not unmounted:
// each is left dead (ENOTCONN), exactly as if the process had been killed,
// so that the next process can stack a new mount on it and the running
// containers see the new one (mountReplacing). The others are unmounted.
// Call it when the orchestrator stops but its containers keep running; use
// Unmount for a node whose container is gone. Safe to call more than once;
// the Manager is closed afterwards.
func (m *Manager) Shutdown(running func(nodeID string) bool) error {
	m.mu.Lock()
	m.closed = true
	mounts := m.mounts
	m.mounts = map[string]*MountPoint{}
	m.mu.Unlock()
	var errs []error
	for id, mt := range mounts {
		if running != nil && !running(id) {
			if err := mt.Close(); err != nil {
				errs = append(errs, fmt.Errorf("workspace: node %s: %w", id, err))
			}
			if err := os.Remove(mt.Dir()); err != nil && !errors.Is(err, os.ErrNotExist) {
				m.cfg.Logger.Warn("workspace: remove mount point", "dir", mt.Dir(), "err", err)
			}
			continue
		}
		if err := mt.Abort(); err != nil {
			errs = append(errs, fmt.Errorf("workspace: node %s: %w", id, err))
			continue
		}
		<-mt.done
	}
	return errors.Join(errs...)
}

// Close unmounts every workspace (containers bound to them lose their
// /workspace). Safe to call more than once.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	ids := make([]string, 0, len(m.mounts))
	for id := range m.mounts {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if err := m.Unmount(id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// MakeShared makes dir a mount point with shared propagation (mount --bind
// dir dir; mount --make-rshared dir) unless it is one already.
func MakeShared(dir string) error {
	mp, shared, err := mountInfo(dir)
	if err != nil {
		return err
	}
	if !mp {
		if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("workspace: bind mount %s onto itself: %w", dir, err)
		}
	}
	if !shared || !mp {
		if err := syscall.Mount("", dir, "", syscall.MS_SHARED|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("workspace: make %s rshared: %w", dir, err)
		}
	}
	return nil
}

// mountInfo reports whether dir is a mount point and whether the topmost
// mount there has shared propagation, from /proc/self/mountinfo.
func mountInfo(dir string) (mountPoint, shared bool, err error) {
	n, shared, err := scanMountInfo(dir)
	return n > 0, shared, err
}

// mountLayers returns how many mounts are stacked at dir.
func mountLayers(dir string) (int, error) {
	n, _, err := scanMountInfo(dir)
	return n, err
}

// scanMountInfo counts the mounts at dir and reports whether the topmost
// (the last listed) has shared propagation.
func scanMountInfo(dir string) (n int, shared bool, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return 0, false, fmt.Errorf("workspace: read mountinfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 || unescapeMountPath(fields[4]) != dir {
			continue
		}
		n, shared = n+1, false
		for _, opt := range fields[6:] {
			if opt == "-" {
				break
			}
			if strings.HasPrefix(opt, "shared:") {
				shared = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, false, fmt.Errorf("workspace: read mountinfo: %w", err)
	}
	return n, shared, nil
}

// unescapeMountPath decodes the octal escapes (\040 for space) mountinfo uses.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
