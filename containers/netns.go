package containers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// NetnsListener opens listeners inside a running container's own network
// namespace: what runs in the container reaches them on its own loopback,
// with any network mode (--network none included), while nothing listens on
// the host. Docker implements it; the process runtime has no namespaces.
type NetnsListener interface {
	// ListenIn listens on TCP addr (e.g. "127.0.0.1:7428") in the network
	// namespace of container id, which must be running or created and not
	// started yet (CodeConflict otherwise): a listener opened before Start
	// accepts from the container's first instruction. The listener keeps
	// the namespace alive: close it when the container exits.
	ListenIn(ctx context.Context, id, addr string) (net.Listener, error)
}

var _ NetnsListener = (*Docker)(nil)

// ListenIn implements NetnsListener. It needs to see the container's
// processes (/proc/<pid>/ns/net: the host's PID namespace, `pid: host` when
// the orchestrator itself runs in a container) and CAP_SYS_ADMIN for setns.
func (d *Docker) ListenIn(ctx context.Context, id, addr string) (net.Listener, error) {
	pid, err := d.netnsPid(ctx, id)
	if err != nil {
		return nil, err
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if errors.Is(err, fs.ErrNotExist) {
		// Gone meanwhile, or not visible: tell which.
		if _, ierr := d.netnsPid(ctx, id); ierr != nil {
			return nil, ierr
		}
		return nil, errorf(CodeUnavailable, "listen in container %.12s: its process %d is not visible here (/proc/%d): the orchestrator must share the host's PID namespace (pid: host in compose.yaml)", id, pid, pid)
	}
	if err != nil {
		return nil, fmt.Errorf("listen in container %.12s: %w", id, err)
	}
	defer ns.Close()
	// The pid may have ended and been reused between the inspect and the
	// open: the namespace is the container's only if its pid is still that.
	// (A created container that started meanwhile reports its own pid,
	// in the same namespace: then its namespace is checked.)
	if again, err := d.netnsPid(ctx, id); err != nil {
		return nil, err
	} else if again != pid {
		if ok, err := inNetns(again, ns); err != nil || !ok {
			return nil, errorf(CodeConflict, "listen in container %.12s: it restarted meanwhile", id)
		}
	}
	ln, err := listenInNetns(ns, addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s in container %.12s: %w", addr, id, err)
	}
	return ln, nil
}

// runningPid returns the host pid of a running container's first process.
func (d *Docker) runningPid(ctx context.Context, id string) (int, error) {
	c, err := d.cli.ContainerInspect(ctx, id)
	if err != nil {
		return 0, d.wrap("inspect", id, err)
	}
	if c.State == nil || !c.State.Running || c.State.Pid <= 0 {
		return 0, errorf(CodeConflict, "container %.12s is not running", id)
	}
	return c.State.Pid, nil
}

// listenInNetns listens on addr in the network namespace open as target.
// The socket is created on an OS thread that enters target and comes back;
// a socket keeps the namespace it was created in for its whole life.
func listenInNetns(target *os.File, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		ln, restored, err := listenOnThread(target, addr)
		if restored {
			runtime.UnlockOSThread()
		}
		// Otherwise the thread stays locked and ends with this goroutine:
		// the runtime never reuses a thread left in a foreign namespace.
		ch <- result{ln, err}
	}()
	r := <-ch
	return r.ln, r.err
}

// listenOnThread runs on a locked OS thread. restored reports whether the
// thread is in its own network namespace when it returns.
func listenOnThread(target *os.File, addr string) (_ net.Listener, restored bool, _ error) {
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, fmt.Errorf("open the orchestrator's network namespace: %w", err)
	}
	defer self.Close()
	same, err := sameFile(self, target)
	if err != nil {
		return nil, true, err
	}
	if same {
		// --network host: the "container's" loopback is the host's.
		return nil, true, errors.New("the container shares the orchestrator's network namespace (network mode host); use bridge or none")
	}
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("enter the container's network namespace (needs CAP_SYS_ADMIN): %w", err)
	}
	ln, lerr := net.Listen("tcp", addr)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, false, fmt.Errorf("return to the orchestrator's network namespace: %w", err)
	}
	if lerr != nil {
		return nil, true, lerr
	}
	return ln, true, nil
}

// inNetns reports whether process pid is in network namespace ns.
func inNetns(pid int, ns *os.File) (bool, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return false, err
	}
	defer f.Close()
	return sameFile(f, ns)
}

// sameFile reports whether a and b are the same namespace (device and inode).
func sameFile(a, b *os.File) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Fstat(int(a.Fd()), &sa); err != nil {
		return false, fmt.Errorf("stat network namespace: %w", err)
	}
	if err := unix.Fstat(int(b.Fd()), &sb); err != nil {
		return false, fmt.Errorf("stat network namespace: %w", err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}
