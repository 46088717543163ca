package vfs

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
)

// MaxAuditLimit bounds one page of GET /fs/_/audit.
const MaxAuditLimit = 1000

// audit answers GET /fs/_/audit?limit=N: the session's security audit
// records (refused paths, symlink escapes, loops), newest first.
func (h *Handler) audit(c echo.Context) error {
	limit := 100
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxAuditLimit {
			return orchestrator.FieldErrorf("limit", "limit must be a whole number from 1 to %d", MaxAuditLimit)
		}
		limit = n
	}
	entries, err := h.v.AuditLog(c.Request().Context(), c.Param("id"), limit)
	if err != nil {
		return err
	}
	if entries == nil {
		entries = []AuditEntry{}
	}
	return c.JSON(http.StatusOK, map[string]any{"data": entries})
}
