// Package orchestrator holds the domain vocabulary shared by the orchestrator's
// subpackages: the coded error type that every layer returns and only the HTTP
// edges map to a status (HTTPStatus).
package orchestrator

import (
	"errors"
	"fmt"
)

// Error codes. HTTPStatus maps each to one HTTP status, for the user API
// and the agent API alike; nothing else does.
const (
	EInvalid             = "invalid"                // 400 / 422: a field or argument is wrong
	ENotFound            = "not_found"              // 404
	EConflict            = "conflict"               // 409: exists already, not empty, wrong state
	ETooLarge            = "too_large"              // 413: a size limit
	EForbidden           = "forbidden"              // 403: readonly, outside allowed paths
	EPreconditionFailed  = "precondition_failed"    // 412: If-Match did not match
	EInsufficientStorage = "insufficient_storage"   // 507: a quota
	ERangeNotSatisfiable = "range_not_satisfiable"  // 416: a byte range past the end of a file
	EUnsupportedMedia    = "unsupported_media_type" // 415: a file of a type the operation does not read
	EUnauthorized        = "unauthorized"           // 401
	EUnavailable         = "unavailable"            // 503: a dependency (Docker, FUSE) is missing
	EInternal            = "internal"               // 500: a bug or an I/O failure
	// EMethodNotAllowed is the HTTP edges' own: the route exists, but not
	// with the request's method.
	EMethodNotAllowed = "method_not_allowed" // 405
)

// ErrorCodes returns every error code above.
func ErrorCodes() []string {
	return []string{EInvalid, ENotFound, EConflict, ETooLarge, EForbidden, EPreconditionFailed,
		EInsufficientStorage, ERangeNotSatisfiable, EUnsupportedMedia, EUnauthorized, EUnavailable, EInternal, EMethodNotAllowed}
}

// Error is an error with a code, a message a user can act on, and optionally
// the request field it is about.
type Error struct {
	Code    string
	Message string
	Field   string
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldErrorf returns an EInvalid *Error about one request field.
func FieldErrorf(field, format string, args ...any) *Error {
	return &Error{Code: EInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}

// coded is an error of a package the orchestrator builds on and that cannot
// import it (containers.Error), carrying one of the codes above.
type coded interface {
	error
	ErrorCode() string
	ErrorField() string
}

// RetryAfter is the Retry-After (seconds) of a 503: what is unavailable (a
// locked database, the Docker engine) is usually back within it.
const RetryAfter = "5"

// ErrorCode returns the code of the first *Error (or coded error, such as a
// containers.Error) in err's chain, EInternal for any other non-nil error, and
// "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var c coded
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	return EInternal
}

// ErrorMessage returns the user-facing message of err: the *Error's message,
// or a generic text for internal errors so that no internals leak.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	var c coded
	if errors.As(err, &c) {
		return c.Error()
	}
	return "internal error"
}

// ErrorField returns the field of the first *Error in err's chain, or "".
func ErrorField(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	var c coded
	if errors.As(err, &c) {
		return c.ErrorField()
	}
	return ""
}
