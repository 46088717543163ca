package vfs

import (
	"errors"
	"syscall"

	"github.com/filepath-dev/filepath/orchestrator/vfs/errno"
)

// Error is a VFS failure (errno.Error): an errno for the FUSE layer and a
// code for the HTTP layer.
type Error = errno.Error

// errorf builds an *Error with the errno's code.
func errorf(en syscall.Errno, p string, format string, args ...any) *Error {
	return errno.New(en, p, format, args...)
}

// IsErrno reports whether err carries errno.
func IsErrno(err error, errno syscall.Errno) bool { return errors.Is(err, errno) }

// Errno returns the errno for err (EIO for unknown errors, 0 for nil), for the FUSE layer.
func Errno(err error) syscall.Errno { return errno.Of(err) }
