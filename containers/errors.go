package containers

import (
	"errors"
	"fmt"
)

// Codes a Runtime's errors carry. They are the orchestrator's error codes
// (orchestrator.EInvalid, ...), which only the HTTP edge maps to statuses.
// containers does not import the orchestrator (the arrows point protocol ←
// containers ← relay ← orchestrator): the orchestrator recognises an *Error
// by its ErrorCode and ErrorField methods.
const (
	CodeInvalid     = "invalid"     // a Spec field or argument is wrong
	CodeNotFound    = "not_found"   // no such container
	CodeConflict    = "conflict"    // the container is in the wrong state
	CodeUnavailable = "unavailable" // the engine, an image or the runtime is missing
)

// Error is a Runtime failure with a code, a message a user can act on, and
// optionally the Spec field it is about (in its JSON spelling).
type Error struct {
	Code    string
	Message string
	Field   string
}

func (e *Error) Error() string      { return e.Message }
func (e *Error) ErrorCode() string  { return e.Code }
func (e *Error) ErrorField() string { return e.Field }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func fieldErrorf(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of the first *Error in err's chain, or "".
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// FieldOf returns the field of the first *Error in err's chain, or "".
func FieldOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}
