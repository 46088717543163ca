package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"
)

// recoverPanic turns a handler panic into a 500 without internals.
func (s *Server) recoverPanic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("handler panic", "path", c.Request().URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				err = fmt.Errorf("handler panic: %v", p)
			}
		}()
		return next(c)
	}
}

// logRequests logs each request at debug level (errors at warn/error are
// logged by the error handler).
func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if s.log.Enabled(c.Request().Context(), slog.LevelDebug) {
			status := c.Response().Status
			if err != nil {
				status = httpStatus(err)
			}
			s.log.Debug("request", "method", c.Request().Method, "path", c.Request().URL.Path, "status", status, "dur", time.Since(start), "ip", c.RealIP())
		}
		return err
	}
}

// secureHeaders sets headers that keep browsers from sniffing types and from
// framing the app.
func secureHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		return next(c)
	}
}
