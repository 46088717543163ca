package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
)

// errorBody is the JSON shape of every error answer:
// {"error":{"code":"...","message":"...","field":"..."}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// requestError marks an error in the shape of the request itself (malformed
// JSON, a wrong JSON type, an unknown field, a bad query parameter): 400, while
// well-formed requests with bad field values get 422.
type requestError struct{ err *orchestrator.Error }

func (e *requestError) Error() string { return e.err.Message }
func (e *requestError) Unwrap() error { return e.err }

// badRequest returns a 400-class error about field (may be "").
func badRequest(field, format string, args ...any) error {
	return &requestError{err: &orchestrator.Error{Code: orchestrator.EInvalid, Field: field, Message: fmt.Sprintf(format, args...)}}
}

// Edge codes for HTTP-level failures that have no domain meaning.
const (
	codeMethodNotAllowed = "method_not_allowed"
)

// httpStatus maps an error to its HTTP status. It is the only place that
// knows the mapping from orchestrator error codes to statuses.
func httpStatus(err error) int {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return he.Code
	}
	switch orchestrator.ErrorCode(err) {
	case orchestrator.EInvalid:
		var re *requestError
		if errors.As(err, &re) {
			return http.StatusBadRequest
		}
		return http.StatusUnprocessableEntity
	case orchestrator.ENotFound:
		return http.StatusNotFound
	case orchestrator.EConflict:
		return http.StatusConflict
	case orchestrator.ETooLarge:
		return http.StatusRequestEntityTooLarge
	case orchestrator.EForbidden:
		return http.StatusForbidden
	case orchestrator.EPreconditionFailed:
		return http.StatusPreconditionFailed
	case orchestrator.EInsufficientStorage:
		return http.StatusInsufficientStorage
	case orchestrator.EUnauthorized:
		return http.StatusUnauthorized
	case orchestrator.EUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// errorDetailOf builds the JSON error for err; internal errors get a generic
// message so that no internals leak.
func errorDetailOf(c echo.Context, err error) errorDetail {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return errorDetail{Code: orchestrator.ENotFound, Message: fmt.Sprintf("no such route: %s %s", c.Request().Method, c.Request().URL.Path)}
		case http.StatusMethodNotAllowed:
			return errorDetail{Code: codeMethodNotAllowed, Message: fmt.Sprintf("method %s not allowed on %s", c.Request().Method, c.Request().URL.Path)}
		case http.StatusRequestEntityTooLarge:
			return errorDetail{Code: orchestrator.ETooLarge, Message: "request body too large"}
		case http.StatusUnauthorized:
			return errorDetail{Code: orchestrator.EUnauthorized, Message: "authentication required"}
		}
		if he.Code >= 500 {
			return errorDetail{Code: orchestrator.EInternal, Message: "internal error"}
		}
		return errorDetail{Code: orchestrator.EInvalid, Message: http.StatusText(he.Code)}
	}
	return errorDetail{
		Code:    orchestrator.ErrorCode(err),
		Message: orchestrator.ErrorMessage(err),
		Field:   orchestrator.ErrorField(err),
	}
}

// handleError is the Echo error handler: every error answer is JSON.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if errors.Is(err, echo.ErrNotFound) && !isAPI(c.Request().URL.Path) &&
		(c.Request().Method == http.MethodGet || c.Request().Method == http.MethodHead) {
		// An unrouted GET outside /api is a UI path (SPA fallback).
		if err = s.serveUI(c); err == nil || c.Response().Committed {
			return
		}
	}
	status := httpStatus(err)
	detail := errorDetailOf(c, err)
	if status == http.StatusInternalServerError {
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "status", status, "err", err)
	}
	if status == http.StatusMethodNotAllowed && c.Response().Header().Get(echo.HeaderAllow) == "" {
		c.Response().Header().Set(echo.HeaderAllow, "")
	}
	var werr error
	if c.Request().Method == http.MethodHead {
		werr = c.NoContent(status)
	} else {
		werr = c.JSON(status, errorBody{Error: detail})
	}
	if werr != nil {
		s.log.Debug("write error answer", "err", werr)
	}
}
