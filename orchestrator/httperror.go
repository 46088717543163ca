package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// StatusClientClosed is the status of a request whose caller went away
// before the answer (nginx's 499): nobody reads it, the logs do.
const StatusClientClosed = 499

// CodeCanceled is the code of an answer to a request its caller canceled.
const CodeCanceled = "canceled"

// HTTPStatus returns the HTTP status of err: of its code, for the user API
// and the agent API alike. EInvalid is 422 (a well-formed request with a
// wrong value) unless the request itself is malformed (Malformedf): 400.
// A request body over its bound (*http.MaxBytesError) is 413; a request
// whose caller went away (context.Canceled) StatusClientClosed.
func HTTPStatus(err error) int {
	var (
		mbe *http.MaxBytesError
		bad *malformed
	)
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge
	case errors.As(err, &bad):
		return http.StatusBadRequest
	case ErrorCode(err) == EInternal && errors.Is(err, context.Canceled):
		return StatusClientClosed
	}
	switch ErrorCode(err) {
	case EInvalid:
		return http.StatusUnprocessableEntity
	case ENotFound:
		return http.StatusNotFound
	case EConflict:
		return http.StatusConflict
	case ETooLarge:
		return http.StatusRequestEntityTooLarge
	case EForbidden:
		return http.StatusForbidden
	case EPreconditionFailed:
		return http.StatusPreconditionFailed
	case EInsufficientStorage:
		return http.StatusInsufficientStorage
	case ERangeNotSatisfiable:
		return http.StatusRequestedRangeNotSatisfiable
	case EUnsupportedMedia:
		return http.StatusUnsupportedMediaType
	case EUnauthorized:
		return http.StatusUnauthorized
	case EUnavailable:
		return http.StatusServiceUnavailable
	case EMethodNotAllowed:
		return http.StatusMethodNotAllowed
	}
	return http.StatusInternalServerError
}

// malformed marks an EInvalid error about the shape of the request itself.
type malformed struct{ err *Error }

func (e *malformed) Error() string { return e.err.Message }
func (e *malformed) Unwrap() error { return e.err }

// Malformedf returns an EInvalid error about the shape of a request itself
// (malformed JSON, a wrong JSON type, an unknown field, a bad query
// parameter) and field (may be ""): HTTPStatus makes it 400, where a
// well-formed request with a wrong value is 422.
func Malformedf(field, format string, args ...any) error {
	return &malformed{err: &Error{Code: EInvalid, Field: field, Message: fmt.Sprintf(format, args...)}}
}

// ErrorBody is the JSON of every error answer of the user API and the agent
// API: {"error":{"code","message","field"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong: a code (the Error codes, or
// CodeCanceled), a message a person can act on, and the request field it is
// about, if one is.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// ErrorBodyOf returns the answer's body for err, whose status is
// HTTPStatus(err). An internal error's message is generic: no internals
// leak.
func ErrorBodyOf(err error) ErrorBody {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return ErrorBody{ErrorDetail{Code: ETooLarge, Message: fmt.Sprintf("request body too large: the limit is %d bytes", mbe.Limit)}}
	case HTTPStatus(err) == StatusClientClosed:
		return ErrorBody{ErrorDetail{Code: CodeCanceled, Message: "the request was canceled"}}
	}
	return ErrorBody{ErrorDetail{Code: ErrorCode(err), Message: ErrorMessage(err), Field: ErrorField(err)}}
}
