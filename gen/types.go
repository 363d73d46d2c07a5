package gen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/internal/goname"
)

// goType returns a fresh statement for the Go type of ref:
//
//	string → string, int → int64, float → float64, bool → bool,
//	bytes → []byte, time → time.Time, duration → time.Duration,
//	json → json.RawMessage, [T] → []T, {string: T} → map[string]T,
//	a named type → its struct.
func (g *generator) goType(ref *plan.TypeRef) (*jen.Statement, error) {
	if ref == nil {
		return nil, fmt.Errorf("missing type")
	}
	switch ref.Kind {
	case plan.KindString:
		return jen.String(), nil
	case plan.KindInt:
		return jen.Int64(), nil
	case plan.KindFloat:
		return jen.Float64(), nil
	case plan.KindBool:
		return jen.Bool(), nil
	case plan.KindBytes:
		return jen.Index().Byte(), nil
	case plan.KindTime:
		return jen.Qual(pathTime, "Time"), nil
	case plan.KindDuration:
		return jen.Qual(pathTime, "Duration"), nil
	case plan.KindJSON:
		return jen.Qual(pathJSON, "RawMessage"), nil
	case plan.KindList:
		elem, err := g.goType(ref.Elem)
		if err != nil {
			return nil, fmt.Errorf("list element: %w", err)
		}
		return jen.Index().Add(elem), nil
	case plan.KindMap:
		elem, err := g.goType(ref.Elem)
		if err != nil {
			return nil, fmt.Errorf("map value: %w", err)
		}
		return jen.Map(jen.String()).Add(elem), nil
	case plan.KindNamed:
		if _, ok := g.types[ref.Name]; !ok {
			return nil, fmt.Errorf("unknown type %q", ref.Name)
		}
		return jen.Id(goname.Of(ref.Name)), nil
	default:
		return nil, fmt.Errorf("unknown type kind %q", ref.Kind)
	}
}

// pointerWhenOptional reports whether an optional field of this kind is a
// pointer, so that absence can be told apart from the zero value. Slices,
// maps and json.RawMessage are left as they are: nil already means absent.
func pointerWhenOptional(ref *plan.TypeRef) bool {
	switch ref.Kind {
	case plan.KindList, plan.KindMap, plan.KindJSON, plan.KindBytes:
		return false
	default:
		return true
	}
}

// genType writes the struct of one declared type.
func (g *generator) genType(f *jen.File, t *plan.Type) error {
	var fields []jen.Code
	for _, fd := range t.Fields {
		typ, err := g.goType(&fd.Type)
		if err != nil {
			return fmt.Errorf("gen: type %q: field %q: %w", t.Name, fd.Name, err)
		}
		tag := fd.Name
		if fd.Optional {
			tag += ",omitempty"
			if pointerWhenOptional(&fd.Type) {
				typ = jen.Op("*").Add(typ)
			}
		}
		fields = append(fields, jen.Id(goname.Of(fd.Name)).Add(typ).Tag(map[string]string{"json": tag}))
	}
	ident := goname.Of(t.Name)
	decl(f, "%s is the .ff type %q. JSON field names are the .ff field names; optional fields are omitted when empty.", ident, t.Name)
	f.Type().Id(ident).Struct(fields...)
	f.Line()
	return nil
}

// checkTypeRefs verifies that every type reference in the plan resolves,
// so that generation cannot fail half-way.
func (g *generator) checkTypeRefs() error {
	var errs []string
	check := func(where string, ref *plan.TypeRef) {
		if ref == nil {
			return
		}
		if _, err := g.goType(ref); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", where, err))
		}
	}
	for _, t := range g.typeList {
		for _, fd := range t.Fields {
			check(fmt.Sprintf("type %q: field %q", t.Name, fd.Name), &fd.Type)
		}
	}
	for _, fl := range g.flowList {
		check(fmt.Sprintf("flow %q: input", fl.Name), fl.Input)
		check(fmt.Sprintf("flow %q: output", fl.Name), fl.Output)
		for _, ex := range fl.Execs {
			check(fmt.Sprintf("flow %q: exec %q: input", fl.Name, ex.Name), ex.Input)
			check(fmt.Sprintf("flow %q: exec %q: output", fl.Name, ex.Name), ex.Output)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("gen: bad types in plan:\n\t%s", strings.Join(errs, "\n\t"))
	}
	return nil
}

// checkRecursion rejects a type that contains itself through required,
// non-list, non-map fields: such a struct would have infinite size.
func (g *generator) checkRecursion() error {
	const (
		active = iota + 1 // on the current path
		done              // fully explored
	)
	state := map[string]int{}
	var stack []string
	var visit func(name string) error
	visit = func(name string) error {
		switch state[name] {
		case active:
			i := slices.Index(stack, name)
			cycle := append(slices.Clone(stack[i:]), name)
			return fmt.Errorf("gen: type %q contains itself (%s); make one of those fields optional or a list",
				name, strings.Join(cycle, " -> "))
		case done:
			return nil
		}
		state[name] = active
		stack = append(stack, name)
		for _, fd := range g.types[name].Fields {
			if fd.Optional || fd.Type.Kind != plan.KindNamed {
				continue
			}
			if err := visit(fd.Type.Name); err != nil {
				return err
			}
		}
		stack = stack[:len(stack)-1]
		state[name] = done
		return nil
	}
	for _, t := range g.typeList {
		if err := visit(t.Name); err != nil {
			return err
		}
	}
	return nil
}
