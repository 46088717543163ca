// Package paths holds the rules of session paths, shared by the session
// filesystem (orchestrator/vfs), its REST routes and its FUSE mount: the
// canonical form of a path and its limits, the names reserved for REST
// actions, where the files appear in a container, and a node's
// allowed-paths policy (which paths it may read and write). It does no I/O.
package paths

import (
	"strings"
	"syscall"

	"github.com/filepath-dev/filepath/orchestrator/vfs/errno"
)

// Limits on names and paths.
const (
	MaxNameLen  = 255
	MaxPathLen  = 4096
	MaxSymlinks = 40
)

// WorkspaceRoot is where a session's files appear in an agent's container.
// An absolute symlink target means what it means there: /workspace/a/b is
// the session path /a/b, and anything outside /workspace is outside the
// session.
const WorkspaceRoot = "/workspace"

// CleanPath validates a session path and returns it in canonical form. It must
// start with "/", contain no NUL, no "//", no "." or ".." segment, have
// segments of at most 255 bytes and be at most 4096 bytes long. One trailing
// slash is dropped ("/src/" is "/src").
func CleanPath(p string) (string, error) {
	if p == "" || p[0] != '/' {
		return "", errno.New(syscall.EINVAL, p, "path %q must start with /", Trunc(p))
	}
	if len(p) > MaxPathLen {
		return "", errno.New(syscall.ENAMETOOLONG, p, "path is longer than %d bytes", MaxPathLen)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errno.New(syscall.EINVAL, p, "path %q contains a NUL byte", Trunc(p))
	}
	if strings.Contains(p, "//") {
		return "", errno.New(syscall.EINVAL, p, "path %q contains a double slash", Trunc(p))
	}
	if len(p) > 1 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	if p == "/" {
		return p, nil
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch {
		case seg == "":
			return "", errno.New(syscall.EINVAL, p, "path %q has an empty name", Trunc(p))
		case seg == "..":
			return "", errno.New(syscall.EINVAL, p, "path %q contains '..': path traversal is not allowed", Trunc(p))
		case seg == ".":
			return "", errno.New(syscall.EINVAL, p, "path %q contains a '.' segment", Trunc(p))
		case len(seg) > MaxNameLen:
			return "", errno.New(syscall.ENAMETOOLONG, p, "a name in path %q is longer than %d bytes", Trunc(p), MaxNameLen)
		}
	}
	return p, nil
}

// ValidName reports (as EINVAL or ENAMETOOLONG) a name that cannot be an
// entry of a directory: empty, "." or "..", longer than MaxNameLen, or
// with a '/' or NUL in it.
func ValidName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return errno.New(syscall.EINVAL, name, "invalid name %q", name)
	case len(name) > MaxNameLen:
		return errno.New(syscall.ENAMETOOLONG, name, "name %.32q... is longer than %d bytes", name, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '/' || name[i] == 0 {
			return errno.New(syscall.EINVAL, name, "name %q contains '/' or NUL", name)
		}
	}
	return nil
}

// CheckLen refuses a new entry whose canonical path (which symlinks can
// make longer than the path asked for) is longer than MaxPathLen.
func CheckLen(p string) error {
	if len(p) > MaxPathLen {
		return errno.New(syscall.ENAMETOOLONG, p, "the path %s would be longer than %d bytes", Trunc(p), MaxPathLen)
	}
	return nil
}

// Trunc shortens s to 200 bytes for an error message.
func Trunc(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// Reserved reports whether p's first segment starts with "_" (reserved for
// REST actions such as /_/stat; names like /src/__init__.py are fine).
func Reserved(p string) bool { return strings.HasPrefix(p, "/_") }

// Join returns the path of name in directory dir.
func Join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// Split returns the names of p, root first, leaving out empty ones.
func Split(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// UnderWorkspace returns the segments of an absolute container path (split)
// below WorkspaceRoot, or false when it is not under it. Leading "." and
// ".." stay at the container's root, as the kernel resolves them.
func UnderWorkspace(segs []string) ([]string, bool) {
	for len(segs) > 0 && (segs[0] == "." || segs[0] == "..") {
		segs = segs[1:]
	}
	if len(segs) == 0 || segs[0] != WorkspaceRoot[1:] {
		return nil, false
	}
	return segs[1:], true
}
