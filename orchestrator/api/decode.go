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

// Nullable is a request field that may be absent, null or a value (a
// PATCH's): it keeps the JSON as sent, and Get reads it. Its schema is T's
// (with a nullable tag on the field, and omitzero: it may be absent).
type Nullable[T any] struct{ raw json.RawMessage }

// UnmarshalJSON keeps b (null included) to be read by Get.
func (n *Nullable[T]) UnmarshalJSON(b []byte) error {
	n.raw = append(json.RawMessage(nil), b...)
	return nil
}

// IsZero reports whether the field was absent.
func (n Nullable[T]) IsZero() bool { return n.raw == nil }

// Get reports whether the field was sent and its value (nil: null); err
// when the value is not a T.
func (n Nullable[T]) Get() (set bool, v *T, err error) {
	if n.raw == nil {
		return false, nil, nil
	}
	if string(n.raw) == "null" {
		return true, nil, nil
	}
	v = new(T)
	if err := json.Unmarshal(n.raw, v); err != nil {
		return true, nil, err
	}
	return true, v, nil
}

// JSONSchemaAlias says that the field's schema is T's.
func (Nullable[T]) JSONSchemaAlias() any { return *new(T) }
