package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"sync"

	"github.com/invopop/jsonschema"
	"github.com/labstack/echo/v4"
)

// A route's query parameters are one struct (opDoc.query), read by
// bindQuery and documented from the same fields: `query:"name"` names a
// parameter, and its type says how it is read. int64: a whole number within
// the minimum and maximum of the field's schema, its default when absent
// (a query struct's JSONSchemaExtend sets them with bound); bool: true or
// false, false when absent; string: as sent, "" when absent; *string: nil
// when absent.

// queryReflector reflects a query struct into the schemas of its
// parameters: named by their query tags, none required.
var queryReflector = jsonschema.Reflector{FieldNameTag: "query", DoNotReference: true, RequiredFromJSONSchemaTags: true, Anonymous: true}

var querySchemas sync.Map // reflect.Type → *jsonschema.Schema

// querySchema returns the schema of the query struct t (shared: read only).
func querySchema(t reflect.Type) *jsonschema.Schema {
	if s, ok := querySchemas.Load(t); ok {
		return s.(*jsonschema.Schema)
	}
	s, _ := querySchemas.LoadOrStore(t, queryReflector.ReflectFromType(t))
	return s.(*jsonschema.Schema)
}

// bound sets the minimum, maximum and default of the whole-number parameter
// name of a query struct's schema s.
func bound(s *jsonschema.Schema, name string, min, max, def int64) {
	p, ok := s.Properties.Get(name)
	if !ok {
		panic("api: bound: no query parameter " + name)
	}
	p.Minimum, p.Maximum = json.Number(strconv.FormatInt(min, 10)), json.Number(strconv.FormatInt(max, 10))
	p.Default = def
}

// queryParameters documents the query struct t's fields.
func queryParameters(t reflect.Type) ([]parameter, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("query %s is not a struct", t)
	}
	if err := checkQueryStruct(t); err != nil {
		return nil, err
	}
	s := querySchema(t)
	var ps []parameter
	for p := s.Properties.Oldest(); p != nil; p = p.Next() {
		sch := *p.Value
		sch.Description = ""
		ps = append(ps, parameter{Name: p.Key, In: "query", Description: p.Value.Description, Schema: &sch})
	}
	return ps, nil
}

// checkQueryStruct fails on a field bindQuery cannot read.
func checkQueryStruct(t reflect.Type) error {
	s := querySchema(t)
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("query")
		if name == "" {
			return fmt.Errorf("query %s: field %s has no query tag", t, f.Name)
		}
		switch f.Type {
		case reflect.TypeFor[int64]():
			p, _ := s.Properties.Get(name)
			if _, _, _, ok := intBounds(p); !ok {
				return fmt.Errorf("query %s: %s has no bounds (bound it in JSONSchemaExtend)", t, name)
			}
		case reflect.TypeFor[bool](), reflect.TypeFor[string](), reflect.TypeFor[*string]():
		default:
			return fmt.Errorf("query %s: %s is a %s; bindQuery reads int64, bool, string and *string", t, name, f.Type)
		}
	}
	return nil
}

func intBounds(p *jsonschema.Schema) (min, max, def int64, ok bool) {
	if p == nil {
		return 0, 0, 0, false
	}
	min, err1 := p.Minimum.Int64()
	max, err2 := p.Maximum.Int64()
	def, ok = p.Default.(int64)
	return min, max, def, ok && err1 == nil && err2 == nil
}

// bindQuery reads the request's query parameters into q, a pointer to a
// query struct. A value that is not what its field takes is a 400 naming
// the parameter.
func bindQuery(c echo.Context, q any) error {
	v := reflect.ValueOf(q).Elem()
	t := v.Type()
	if err := checkQueryStruct(t); err != nil {
		return fmt.Errorf("bind query: %w", err) // a bug: the route's tests fail
	}
	s := querySchema(t)
	for i := range t.NumField() {
		name := t.Field(i).Tag.Get("query")
		raw := c.QueryParam(name)
		switch f := v.Field(i); f.Interface().(type) {
		case int64:
			p, _ := s.Properties.Get(name)
			min, max, def, _ := intBounds(p)
			if raw == "" {
				f.SetInt(def)
				continue
			}
			n, err := strconv.ParseInt(raw, 10, 64)
			if err != nil || n < min || n > max {
				return badRequest(name, "query parameter %q must be an integer from %d to %d, not %q", name, min, max, raw)
			}
			f.SetInt(n)
		case bool:
			if raw == "" {
				f.SetBool(false)
				continue
			}
			b, err := strconv.ParseBool(raw)
			if err != nil {
				return badRequest(name, "query parameter %q must be true or false, not %q", name, raw)
			}
			f.SetBool(b)
		case string:
			f.SetString(raw)
		case *string:
			if c.QueryParams().Has(name) {
				f.Set(reflect.ValueOf(&raw))
			} else {
				f.SetZero()
			}
		}
	}
	return nil
}
