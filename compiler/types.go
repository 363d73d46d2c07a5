package compiler

import (
	"maps"
	"slices"
	"strings"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
)

// checkType compiles a type declaration. A field whose type has an error
// is left out of the plan's type and noted in c.unresolvedFields.
func (c *checker) checkType(td *dsl.TypeDecl) {
	t := &plan.Type{Name: td.Name.Name, Fields: []plan.Field{}}
	seen := map[string]*dsl.Ident{}
	for _, f := range td.Fields {
		if prev, ok := seen[f.Name.Name]; ok {
			c.diags.Errorf(f.Name.Range(), dsl.CodeDuplicate, "field %q is already declared in type %q", f.Name.Name, td.Name.Name).
				With(prev.Range(), "previous declaration here")
			continue
		}
		seen[f.Name.Name] = f.Name
		c.checkIdentLen(f.Name)
		ref, ok := c.resolveType(f.Type)
		if !ok {
			if c.unresolvedFields[t.Name] == nil {
				c.unresolvedFields[t.Name] = map[string]bool{}
			}
			c.unresolvedFields[t.Name][f.Name.Name] = true
			continue
		}
		t.Fields = append(t.Fields, plan.Field{Name: f.Name.Name, Type: *ref, Optional: f.Optional})
	}
	c.planTypes[t.Name] = t
}

// resolveType converts a type expression, reporting unknown names and
// lists and maps nested more than plan.MaxTypeDepth deep. It returns false
// when the type has an error.
func (c *checker) resolveType(te *dsl.TypeExpr) (*plan.TypeRef, bool) {
	return c.resolveTypeAt(te, 0)
}

// resolveTypeAt is resolveType for te inside depth lists and maps.
func (c *checker) resolveTypeAt(te *dsl.TypeExpr, depth int) (*plan.TypeRef, bool) {
	if (te.List != nil || te.Map != nil) && depth == plan.MaxTypeDepth {
		c.diags.Errorf(te.Range(), dsl.CodeTypeDepth, "type nests more than %d lists and maps deep; declare a record type for an inner level", plan.MaxTypeDepth)
		return nil, false
	}
	switch {
	case te.List != nil:
		elem, ok := c.resolveTypeAt(te.List, depth+1)
		if !ok {
			return nil, false
		}
		return &plan.TypeRef{Kind: plan.KindList, Elem: elem}, true
	case te.Map != nil:
		ok := true
		if te.Map.Key.Name != plan.KindString {
			c.diags.Errorf(te.Map.Key.Range(), dsl.CodeMapKey, "map keys must be string, not %q: write {string: T}", te.Map.Key.Name)
			ok = false
		}
		elem, elemOK := c.resolveTypeAt(te.Map.Value, depth+1)
		if !ok || !elemOK {
			return nil, false
		}
		return &plan.TypeRef{Kind: plan.KindMap, Elem: elem}, true
	case te.Named != nil:
		name := te.Named.Name
		for _, b := range builtinTypes {
			if b == name {
				return &plan.TypeRef{Kind: name}, true
			}
		}
		if _, ok := c.types[name]; ok {
			return &plan.TypeRef{Kind: plan.KindNamed, Name: name}, true
		}
		if d, ok := c.names[name]; ok {
			c.diags.Errorf(te.Named.Range(), dsl.CodeUnknownType, "%q is a %s, not a type", name, d.kind)
			return nil, false
		}
		c.unknown(te.Named, dsl.CodeUnknownType, "type", append(slices.Sorted(maps.Keys(c.types)), builtinTypes...), "")
		return nil, false
	}
	return nil, false
}

// checkRecursiveTypes reports types that contain themselves through
// required named fields: such a value would be infinite, and Go rejects the
// generated struct. An optional field (a pointer in Go), a list or a map
// ends the chain: `next?: Node` is a linked list.
func (c *checker) checkRecursiveTypes() {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var visit func(name string)
	visit = func(name string) {
		color[name] = grey
		stack = append(stack, name)
		for _, f := range c.types[name].Fields {
			te := f.Type
			if te.Named == nil || f.Optional {
				continue
			}
			next := te.Named.Name
			if _, ok := c.types[next]; !ok {
				continue
			}
			switch color[next] {
			case white:
				visit(next)
			case grey:
				i := len(stack) - 1
				for stack[i] != next {
					i--
				}
				cycle := append(append([]string{}, stack[i:]...), next)
				c.diags.Errorf(te.Named.Range(), dsl.CodeRecursiveType,
					"type %q contains itself through required fields: %s; make one of them optional, a list or a map",
					next, strings.Join(cycle, " -> "))
			}
		}
		stack = stack[:len(stack)-1]
		color[name] = black
	}
	for _, name := range slices.Sorted(maps.Keys(c.types)) {
		if color[name] == white {
			visit(name)
		}
	}
}

// checkInputDepth reports the input type t of flow fd when every value of
// it nests deeper than ffrun takes a run's input (plan.MaxInputDepth, what
// runtime/flowinput checks): a chain of records through required fields
// longer than that compiles, but every run of the flow would be refused.
func (c *checker) checkInputDepth(fd *dsl.FlowDecl, t *plan.TypeRef) {
	if d := c.minDepth(t); d > plan.MaxInputDepth {
		c.diags.Errorf(fd.Input.Range(), dsl.CodeTypeDepth,
			"every value of %s, the input type of flow %q, nests %d levels deep through required record fields, and ffrun takes a run's input %d levels deep at most: make a field of the chain optional, or flatten the type",
			plan.TypeString(t), fd.Name.Name, d, plan.MaxInputDepth)
	}
}

// minDepth returns how deep the shallowest value of t nests, counted as
// runtime/flowinput counts the levels of a run's input: the value of a
// required record field is one level below its record (it is checked even
// when it is null), while an optional field may be absent and a list or
// map empty, so they end the chain. A value of any other type is 0 deep.
func (c *checker) minDepth(t *plan.TypeRef) int {
	if t.Kind != plan.KindNamed {
		return 0
	}
	if d, ok := c.minDepths[t.Name]; ok {
		return d
	}
	// A type that contains itself through required fields is FF0302
	// already: let the cycle count for nothing.
	c.minDepths[t.Name] = 0
	d := 0
	if pt := c.planTypes[t.Name]; pt != nil {
		for i := range pt.Fields {
			if f := &pt.Fields[i]; !f.Optional {
				d = max(d, 1+c.minDepth(&f.Type))
			}
		}
	}
	c.minDepths[t.Name] = d
	return d
}

// typeClosure adds name and every named type it reaches to set.
func (c *checker) typeClosure(t *plan.TypeRef, set map[string]bool) {
	for t != nil {
		switch t.Kind {
		case plan.KindList, plan.KindMap:
			t = t.Elem
			continue
		case plan.KindNamed:
			if set[t.Name] {
				return
			}
			set[t.Name] = true
			if pt := c.planTypes[t.Name]; pt != nil {
				for i := range pt.Fields {
					c.typeClosure(&pt.Fields[i].Type, set)
				}
			}
		}
		return
	}
}
