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
)

// Propagation is the bind propagation the container runtime must use for
// /workspace ("-v <Path(node)>:/workspace:rslave"), so that a mount made
// again at Path(node) after an orchestrator restart reaches the running
// container.
const Propagation = "rslave"

// ContainerPath is where the workspace appears inside a container.
const ContainerPath = "/workspace"

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
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\x00") || len(id) > 200 {
		return fmt.Errorf("workspace: invalid node id %q", id)
	}
	return nil
}

// Mount mounts a node's workspace at Path(nodeID) unless it is mounted
// already, and returns the path. A dead mount left there by a previous
// process is replaced.
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
	mt, err := Mount(ctx, dir, fsys, m.cfg.Options)
	if err != nil {
		return "", fmt.Errorf("workspace: node %s: %w", nodeID, err)
	}
	m.mounts[nodeID] = mt
	return dir, nil
}

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

// Recover runs at start, after a previous orchestrator process died with
// its mounts: each listed node is mounted again at the same path, stacked on
// the dead mount, so running containers that bound the old mount with
// rslave propagation see the new one without a restart. Mounts of nodes not
// listed are detached and their mount points removed.
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

// Shutdown stops serving every workspace without unmounting: each mount
// point is left dead (ENOTCONN), exactly as if the process had been killed,
// so that Recover in the next process can stack a new mount on it and the
// running containers see the new one. Call it when the orchestrator stops
// but its containers keep running; use Unmount for a node whose container
// is gone. Safe to call more than once; the Manager is closed afterwards.
func (m *Manager) Shutdown() error {
	m.mu.Lock()
	m.closed = true
	mounts := m.mounts
	m.mounts = map[string]*MountPoint{}
	m.mu.Unlock()
	var errs []error
	for id, mt := range mounts {
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
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, false, fmt.Errorf("workspace: read mountinfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 || unescapeMountPath(fields[4]) != dir {
			continue
		}
		mountPoint, shared = true, false
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
		return false, false, fmt.Errorf("workspace: read mountinfo: %w", err)
	}
	return mountPoint, shared, nil
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
