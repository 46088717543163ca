package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/filepath-dev/filepath/orchestrator"
)

// decodeJSON reads one JSON object from the request body into v, strictly:
// unknown fields, trailing data, wrong types and bodies over the limit are
// errors naming the problem. The body is already bounded by limitBody.
func decodeJSON(c echo.Context, v any) error {
	body := c.Request().Body
	if body == nil || body == http.NoBody {
		return badRequest("", "request body is empty; expected a JSON object")
	}
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	// Exactly one value: anything but whitespace after it is an error.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return jsonError(err)
		}
		return badRequest("", "malformed JSON: unexpected data after the object")
	}
	return nil
}

// jsonError turns a json decoding error into a coded error naming the field.
func jsonError(err error) error {
	var (
		syn  *json.SyntaxError
		typ  *json.UnmarshalTypeError
		big  *http.MaxBytesError
		perr *orchestrator.Error
	)
	switch {
	case errors.As(err, &big):
		return &orchestrator.Error{Code: orchestrator.ETooLarge, Message: fmt.Sprintf("request body too large: the limit is %d bytes", big.Limit)}
	case errors.As(err, &perr):
		return err
	case errors.Is(err, io.EOF):
		return badRequest("", "request body is empty; expected a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "malformed JSON: unexpected end of body")
	case errors.As(err, &syn):
		return badRequest("", "malformed JSON at byte %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest("", "request body must be a JSON object, not %s", typ.Value)
		}
		return badRequest(typ.Field, "field %q must be %s, not %s", typ.Field, jsonTypeName(typ.Type.Kind().String()), typ.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name, uerr := strconv.Unquote(f)
		if uerr != nil {
			name = f
		}
		return badRequest(name, "unknown field %q", name)
	}
	return badRequest("", "malformed JSON: %s", strings.TrimPrefix(msg, "json: "))
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	case "ptr":
		return "a value of the right type"
	}
	return "a value of the right type"
}

// limitBody bounds every request body to max bytes; reads past it fail with
// *http.MaxBytesError, which decodeJSON maps to 413. A declared
// Content-Length over the limit is refused before reading anything.
func limitBody(max int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.ContentLength > max {
				return &orchestrator.Error{Code: orchestrator.ETooLarge, Message: fmt.Sprintf("request body too large: %d bytes, the limit is %d bytes", r.ContentLength, max)}
			}
			if r.Body != nil && r.Body != http.NoBody {
				r.Body = http.MaxBytesReader(c.Response(), r.Body, max)
			}
			return next(c)
		}
	}
}

// queryInt parses an optional non-negative integer query parameter.
func queryInt(c echo.Context, name string, def, min, max int64) (int64, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min || n > max {
		return 0, badRequest(name, "query parameter %q must be an integer from %d to %d, not %q", name, min, max, v)
	}
	return n, nil
}

// queryBool parses an optional boolean query parameter (default false).
func queryBool(c echo.Context, name string) (bool, error) {
	v := c.QueryParam(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest(name, "query parameter %q must be true or false, not %q", name, v)
	}
	return b, nil
}
