package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/store"
)

// badRequest returns a 400-class error about field (may be ""): the shape of
// the request itself is wrong (orchestrator.Malformedf).
func badRequest(field, format string, args ...any) error {
	return orchestrator.Malformedf(field, format, args...)
}

// httpStatus maps an error to its HTTP status: Echo's own errors (no route,
// method not allowed) carry theirs, the rest orchestrator.HTTPStatus, the
// one mapping of error codes to statuses.
func httpStatus(err error) int {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return he.Code
	}
	return orchestrator.HTTPStatus(err)
}

// errorDetailOf builds the JSON error for err; internal errors get a generic
// message so that no internals leak.
func errorDetailOf(c echo.Context, err error) orchestrator.ErrorDetail {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return orchestrator.ErrorDetail{Code: orchestrator.ENotFound, Message: fmt.Sprintf("no such route: %s %s", c.Request().Method, c.Request().URL.Path)}
		case http.StatusMethodNotAllowed:
			return orchestrator.ErrorDetail{Code: orchestrator.EMethodNotAllowed, Message: fmt.Sprintf("method %s not allowed on %s", c.Request().Method, c.Request().URL.Path)}
		case http.StatusRequestEntityTooLarge:
			return orchestrator.ErrorDetail{Code: orchestrator.ETooLarge, Message: "request body too large"}
		case http.StatusUnauthorized:
			return orchestrator.ErrorDetail{Code: orchestrator.EUnauthorized, Message: "authentication required"}
		}
		if he.Code >= 500 {
			return orchestrator.ErrorDetail{Code: orchestrator.EInternal, Message: "internal error"}
		}
		return orchestrator.ErrorDetail{Code: orchestrator.EInvalid, Message: http.StatusText(he.Code)}
	}
	return orchestrator.ErrorBodyOf(err).Error
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
	err = store.Unavailable(err)
	status := httpStatus(err)
	detail := errorDetailOf(c, err)
	if status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", orchestrator.RetryAfter)
	}
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
		werr = c.JSON(status, orchestrator.ErrorBody{Error: detail})
	}
	if werr != nil {
		s.log.Debug("write error answer", "err", werr)
	}
}
