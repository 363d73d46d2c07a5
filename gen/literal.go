package gen

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// literal returns a Go composite literal that rebuilds v, a value of a
// type declared in package plan. It walks the value by reflection so that
// fields added to the plan later are embedded without changes here. Zero
// fields are left out; an empty but non-nil slice or map is kept, so the
// literal marshals to the same JSON as v.
func literal(v reflect.Value) (jen.Code, error) {
	return lit(v, true)
}

// lit renders v; typed says whether a composite literal must name its type
// (false for elements of a slice or map, where Go lets it be elided).
func lit(v reflect.Value, typed bool) (jen.Code, error) {
	switch v.Kind() {
	case reflect.String:
		return jen.Lit(v.String()), nil
	case reflect.Bool:
		return jen.Lit(v.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		// Untyped constant: assignable to whichever integer type the
		// field has.
		return jen.Op(fmt.Sprint(v.Int())), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return jen.Op(fmt.Sprint(v.Uint())), nil
	case reflect.Float32, reflect.Float64:
		return jen.Lit(v.Float()), nil
	case reflect.Pointer:
		if v.IsNil() {
			return jen.Nil(), nil
		}
		inner, err := lit(v.Elem(), true)
		if err != nil {
			return nil, err
		}
		if v.Elem().Kind() != reflect.Struct {
			return nil, fmt.Errorf("cannot embed a pointer to %s", v.Elem().Type())
		}
		if !typed {
			// &T{...} elided to {...} inside a []*T literal.
			return lit(v.Elem(), false)
		}
		return jen.Op("&").Add(inner), nil
	case reflect.Struct:
		var items []jen.Code
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			fv := v.Field(i)
			if fv.IsZero() && !emptyNonNil(fv) {
				continue
			}
			c, err := lit(fv, true)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", t.Name(), sf.Name, err)
			}
			items = append(items, jen.Id(sf.Name).Op(":").Add(c))
		}
		// Small records of scalars read better on one line; others get a
		// line per field.
		if !flat(v) && len(items) > 0 {
			for i, it := range items {
				items[i] = jen.Line().Add(it)
			}
			items = append(items, jen.Line())
		}
		if !typed {
			return jen.Values(items...), nil
		}
		typ, err := typeCode(t)
		if err != nil {
			return nil, err
		}
		return typ.Values(items...), nil
	case reflect.Slice:
		if v.IsNil() {
			return jen.Nil(), nil
		}
		typ, err := typeCode(v.Type())
		if err != nil {
			return nil, err
		}
		var items []jen.Code
		for i := range v.Len() {
			c, err := lit(v.Index(i), false)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			items = append(items, jen.Line().Add(c))
		}
		if len(items) > 0 {
			items = append(items, jen.Line())
		}
		if isScalarSlice(v.Type()) {
			// Short lists of strings or numbers read better on one line.
			items = items[:0]
			for i := range v.Len() {
				c, _ := lit(v.Index(i), false)
				items = append(items, c)
			}
		}
		return typ.Values(items...), nil
	case reflect.Map:
		if v.IsNil() {
			return jen.Nil(), nil
		}
		typ, err := typeCode(v.Type())
		if err != nil {
			return nil, err
		}
		keys := v.MapKeys()
		if v.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("cannot embed a map keyed by %s", v.Type().Key())
		}
		slices.SortFunc(keys, func(a, b reflect.Value) int { return cmp.Compare(a.String(), b.String()) })
		var items []jen.Code
		for _, k := range keys {
			c, err := lit(v.MapIndex(k), false)
			if err != nil {
				return nil, fmt.Errorf("[%q]: %w", k.String(), err)
			}
			items = append(items, jen.Line().Lit(k.String()).Op(":").Add(c))
		}
		if len(items) > 0 {
			items = append(items, jen.Line())
		}
		return typ.Values(items...), nil
	default:
		return nil, fmt.Errorf("cannot embed a value of kind %s", v.Kind())
	}
}

// flatMax is the largest number of scalar values a record literal may
// hold to be written on one line.
const flatMax = 5

// flat reports whether the struct v is small and holds only scalars, lists
// of scalars and records that are flat themselves, so that its literal
// fits on one line.
func flat(v reflect.Value) bool {
	n, ok := leaves(v)
	return ok && n <= flatMax
}

// leaves counts the scalar values of the struct v, and reports false when
// it holds something that is not written on one line.
func leaves(v reflect.Value) (int, bool) {
	n := 0
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		fv := v.Field(i)
		if fv.IsZero() && !emptyNonNil(fv) {
			continue
		}
		switch fv.Kind() {
		case reflect.Pointer:
			if fv.Elem().Kind() != reflect.Struct {
				return 0, false
			}
			m, ok := leaves(fv.Elem())
			if !ok {
				return 0, false
			}
			n += m
		case reflect.Struct:
			m, ok := leaves(fv)
			if !ok {
				return 0, false
			}
			n += m
		case reflect.Map, reflect.Interface:
			return 0, false
		case reflect.Slice:
			if !isScalarSlice(fv.Type()) {
				return 0, false
			}
			n++
		default:
			n++
		}
	}
	return n, true
}

// emptyNonNil reports whether v is an empty slice or map that is not nil:
// zero-length but distinct from nil in JSON ("[]" rather than "null").
func emptyNonNil(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		return !v.IsNil() && v.Len() == 0
	}
	return false
}

func isScalarSlice(t reflect.Type) bool {
	switch t.Elem().Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Float64:
		return true
	}
	return false
}

// typeCode names the Go type t, which must be built from types of package
// plan and predeclared types.
func typeCode(t reflect.Type) (*jen.Statement, error) {
	switch t.Kind() {
	case reflect.Pointer:
		inner, err := typeCode(t.Elem())
		if err != nil {
			return nil, err
		}
		return jen.Op("*").Add(inner), nil
	case reflect.Slice:
		inner, err := typeCode(t.Elem())
		if err != nil {
			return nil, err
		}
		return jen.Index().Add(inner), nil
	case reflect.Map:
		k, err := typeCode(t.Key())
		if err != nil {
			return nil, err
		}
		e, err := typeCode(t.Elem())
		if err != nil {
			return nil, err
		}
		return jen.Map(k).Add(e), nil
	}
	if t.Name() == "" {
		return nil, fmt.Errorf("cannot name the anonymous type %s", t)
	}
	switch t.PkgPath() {
	case "":
		return jen.Id(t.Name()), nil
	case pathPlan:
		return jen.Qual(pathPlan, t.Name()), nil
	default:
		return nil, fmt.Errorf("cannot embed a value of type %s", t)
	}
}

// oneLine writes v, a value of a type declared in package plan, as a
// composite literal on a single line, in the exact form gofmt gives it, so
// that it can be placed in already formatted code. typed says whether the
// literal must name its type (false for elements of a slice). Zero fields
// are left out as in literal.
func oneLine(b *strings.Builder, v reflect.Value, typed bool) error {
	switch v.Kind() {
	case reflect.String:
		b.WriteString(strconv.Quote(v.String()))
	case reflect.Bool:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Pointer:
		if v.IsNil() {
			b.WriteString("nil")
			return nil
		}
		if v.Elem().Kind() != reflect.Struct {
			return fmt.Errorf("cannot embed a pointer to %s", v.Elem().Type())
		}
		if typed {
			b.WriteByte('&')
		}
		return oneLine(b, v.Elem(), typed)
	case reflect.Struct:
		t := v.Type()
		if typed {
			if err := typeText(b, t); err != nil {
				return err
			}
		}
		b.WriteByte('{')
		first := true
		for i := range t.NumField() {
			sf := t.Field(i)
			fv := v.Field(i)
			if !sf.IsExported() || (fv.IsZero() && !emptyNonNil(fv)) {
				continue
			}
			if !first {
				b.WriteString(", ")
			}
			first = false
			b.WriteString(sf.Name)
			b.WriteString(": ")
			if err := oneLine(b, fv, true); err != nil {
				return fmt.Errorf("%s.%s: %w", t.Name(), sf.Name, err)
			}
		}
		b.WriteByte('}')
	case reflect.Slice:
		if v.IsNil() {
			b.WriteString("nil")
			return nil
		}
		if err := typeText(b, v.Type()); err != nil {
			return err
		}
		b.WriteByte('{')
		for i := range v.Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := oneLine(b, v.Index(i), false); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		b.WriteByte('}')
	default:
		// Floats and maps have no single gofmt-stable spelling worth
		// reproducing here; the plan has neither in an exec or edge.
		return fmt.Errorf("cannot embed a value of kind %s on one line", v.Kind())
	}
	return nil
}

// typeText writes the name of t as the generated code spells it.
func typeText(b *strings.Builder, t reflect.Type) error {
	switch t.Kind() {
	case reflect.Pointer:
		b.WriteByte('*')
		return typeText(b, t.Elem())
	case reflect.Slice:
		b.WriteString("[]")
		return typeText(b, t.Elem())
	}
	switch t.PkgPath() {
	case "":
		b.WriteString(t.Name())
	case pathPlan:
		b.WriteString("plan.")
		b.WriteString(t.Name())
	default:
		return fmt.Errorf("cannot embed a value of type %s", t)
	}
	return nil
}
