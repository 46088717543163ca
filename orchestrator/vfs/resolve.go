package vfs

import (
	"context"
	"fmt"
	"strings"
	"syscall"

	"github.com/filepath-dev/filepath/orchestrator/vfs/paths"
	"github.com/filepath-dev/filepath/protocol"
)

// resolved is the result of walking a path: the entry's parent directory and
// name, and its attributes when it exists.
type resolved struct {
	parent int64  // 0 for the root
	name   string // "" for the root
	path   string // canonical path after following symlinks
	attr   Attr
	exists bool
}

// resolve walks the cleaned path p from the root. Symlinks in the middle are
// always followed, the last one only when followLast is set. A symlink's
// absolute target is a container path: under paths.WorkspaceRoot it is the session
// path below it; anywhere else, like ".." above the root, it is an error
// ("symlink escapes the workspace", EACCES, audited); more than paths.MaxSymlinks
// hops is ELOOP.
// With mk set (q must then be a transaction), missing directories are
// created and the event of the first one appended
// to *mk: a created directory's event stands for everything below it. The
// walk keeps the canonical path in one buffer, so resolving a deep path
// costs its length, not its length times its depth.
func (fs *FS) resolve(ctx context.Context, q querier, p string, followLast bool, mk *[]event) (resolved, error) {
	type frame struct {
		ino  int64
		name string
		end  int // len(buf) up to and including this frame's name
	}
	stack := []frame{{RootIno, "", 0}}
	var buf []byte // the canonical path of the top of the stack ("" for the root)
	canon := func() string {
		if len(buf) == 0 {
			return "/"
		}
		return string(buf)
	}
	child := func(name string) string {
		b := make([]byte, 0, len(buf)+1+len(name))
		return string(append(append(append(b, buf...), '/'), name...))
	}
	segs := paths.Split(p)
	hops := 0
	made := false
	escape := func(why string) error {
		return fs.audited(errorf(syscall.EACCES, p, "symlink escapes the workspace resolving %s%s", p, why), "resolve", p)
	}
	for len(segs) > 0 {
		name := segs[0]
		segs = segs[1:]
		last := len(segs) == 0
		switch name {
		case "", ".":
			continue
		case "..":
			if len(stack) == 1 {
				return resolved{}, escape("")
			}
			stack = stack[:len(stack)-1]
			buf = buf[:stack[len(stack)-1].end]
			continue
		}
		cur := stack[len(stack)-1].ino
		a, err := fs.lookup(ctx, q, cur, name)
		if IsErrno(err, syscall.ENOENT) {
			if last {
				return resolved{parent: cur, name: name, path: child(name)}, nil
			}
			if mk == nil {
				return resolved{}, errorf(syscall.ENOENT, p, "%s not found", child(name))
			}
			tx, ok := q.(*txn)
			if !ok {
				return resolved{}, fmt.Errorf("resolve %s: creating directories needs a transaction", p)
			}
			if fs.allowed != nil {
				if err := fs.checkPathTx("mkdir", child(name), true); err != nil {
					return resolved{}, err
				}
			}
			a, err = fs.mknod(ctx, tx, cur, name, ModeDir|0o755, "")
			if err != nil {
				return resolved{}, err
			}
			if !made {
				made = true
				*mk = append(*mk, event{op: protocol.FileCreated, path: child(name)})
			}
		} else if err != nil {
			return resolved{}, err
		}
		if a.IsSymlink() && (!last || followLast) {
			hops++
			if hops > paths.MaxSymlinks {
				return resolved{}, errorf(syscall.ELOOP, p, "too many levels of symbolic links resolving %s", p)
			}
			target, err := fs.readlink(ctx, q, a.Ino)
			if err != nil {
				return resolved{}, err
			}
			tsegs := paths.Split(target)
			if strings.HasPrefix(target, "/") {
				rest, ok := paths.UnderWorkspace(tsegs)
				if !ok {
					return resolved{}, escape(": " + paths.Trunc(target) + " is outside " + paths.WorkspaceRoot)
				}
				stack, buf, tsegs = stack[:1], buf[:0], rest
			}
			segs = append(tsegs, segs...)
			if len(segs) == 0 {
				break
			}
			continue
		}
		if last {
			return resolved{parent: cur, name: name, path: child(name), attr: a, exists: true}, nil
		}
		if !a.IsDir() {
			return resolved{}, errorf(syscall.ENOTDIR, p, "%s is not a directory", child(name))
		}
		buf = append(append(buf, '/'), name...)
		stack = append(stack, frame{a.Ino, name, len(buf)})
	}
	// the walk ended on a directory (the root, or a symlink target such as "..")
	top := stack[len(stack)-1]
	a, err := fs.getAttr(ctx, q, top.ino)
	if err != nil {
		return resolved{}, err
	}
	r := resolved{path: canon(), attr: a, exists: true, name: top.name}
	if len(stack) > 1 {
		r.parent = stack[len(stack)-2].ino
	}
	return r, nil
}
