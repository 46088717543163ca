// Package errno is the error of the session filesystem (orchestrator/vfs)
// and of its path rules: an errno for the FUSE layer and a code for the
// HTTP layer.
package errno

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/filepath-dev/filepath/orchestrator"
)

// Error is a session filesystem failure. It satisfies errors.Is(err,
// syscall.ENOENT) and friends for the FUSE layer, and errors.As(err,
// **orchestrator.Error) with a code for the HTTP layer.
type Error struct {
	Errno   syscall.Errno
	Code    string
	Message string
	Path    string
}

func (e *Error) Error() string { return e.Message }

// Unwrap exposes both the errno and the coded orchestrator error.
func (e *Error) Unwrap() []error {
	return []error{e.Errno, &orchestrator.Error{Code: e.Code, Message: e.Message}}
}

// codeFor maps an errno to the orchestrator error code the API uses.
func codeFor(errno syscall.Errno) string {
	switch errno {
	case syscall.ENOENT:
		return orchestrator.ENotFound
	case syscall.EEXIST, syscall.ENOTEMPTY, syscall.EBUSY:
		return orchestrator.EConflict
	case syscall.EACCES, syscall.EPERM:
		return orchestrator.EForbidden
	case syscall.EFBIG:
		return orchestrator.ETooLarge
	case syscall.ENOSPC, syscall.EDQUOT:
		return orchestrator.EInsufficientStorage
	case syscall.ENOTDIR, syscall.EISDIR, syscall.ELOOP, syscall.EINVAL, syscall.EXDEV, syscall.ENAMETOOLONG:
		return orchestrator.EInvalid
	case syscall.EIO:
		return orchestrator.EInternal
	}
	return orchestrator.EInternal
}

// New builds an *Error about path p with the errno's code.
func New(errno syscall.Errno, p string, format string, args ...any) *Error {
	return &Error{Errno: errno, Code: codeFor(errno), Message: fmt.Sprintf(format, args...), Path: p}
}

// WithCode overrides the orchestrator code (e.g. ENOTDIR on a REST path is
// a conflict) and returns e.
func (e *Error) WithCode(code string) *Error { e.Code = code; return e }

// Of returns the errno for err (EIO for unknown errors, 0 for nil), for the
// FUSE layer.
func Of(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Errno
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return syscall.EIO
}
