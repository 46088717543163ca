package workspace

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Release unmounts the bind mount NewManager made of its directory
// (MakeShared) once no workspace is mounted below it, so that nothing of
// the server stays mounted after it stops and the data directory can be
// removed. With a workspace still mounted below (the dead mount of a
// container that keeps running, for the next start to replace) it leaves
// the directory mounted: the next start must find the same shared mount,
// which that container's /workspace follows. Call it after Shutdown.
func (m *Manager) Release() error {
	below, err := mountedBelow(m.cfg.Dir)
	if err != nil || below {
		return err
	}
	return ClearMounts(m.cfg.Dir)
}

// mountedBelow reports whether anything is mounted under dir (not at dir).
func mountedBelow(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("workspace: read mountinfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 && strings.HasPrefix(unescapeMountPath(fields[4]), prefix) {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("workspace: read mountinfo: %w", err)
	}
	return false, nil
}
