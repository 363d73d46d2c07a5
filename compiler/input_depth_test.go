package compiler

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/runtime/flowinput"
)

// shallowest returns the JSON of the value of t that nests least deep:
// every required field given its shallowest value, no optional field,
// lists and maps empty.
func shallowest(types map[string]*plan.Type, t *plan.TypeRef) any {
	switch t.Kind {
	case plan.KindNamed:
		m := map[string]any{}
		for _, f := range types[t.Name].Fields {
			if !f.Optional {
				m[f.Name] = shallowest(types, &f.Type)
			}
		}
		return m
	case plan.KindList:
		return []any{}
	case plan.KindMap:
		return map[string]any{}
	case plan.KindString:
		return ""
	case plan.KindBool:
		return false
	case plan.KindTime:
		return "2026-01-01T00:00:00Z"
	case plan.KindBytes, plan.KindJSON:
		return nil
	}
	return 0 // int, float, duration
}

// refOf returns the type reference of the .ff type s: a record name, or
// a list or map of one.
func refOf(s string) *plan.TypeRef {
	switch {
	case strings.HasPrefix(s, "["):
		return &plan.TypeRef{Kind: plan.KindList, Elem: refOf(strings.Trim(s, "[]"))}
	case strings.HasPrefix(s, "{string: "):
		return &plan.TypeRef{Kind: plan.KindMap, Elem: refOf(strings.TrimSuffix(strings.TrimPrefix(s, "{string: "), "}"))}
	}
	return &plan.TypeRef{Kind: plan.KindNamed, Name: s}
}

// chain declares a chain of n records through required fields x, T0 to
// Tn, Tn ending with last.
func chain(n int, last string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "type T%d { x: T%d }\n", i, i+1)
	}
	fmt.Fprintf(&b, "type T%d { %s }\n", n, last)
	return b.String()
}

// TestInputDepthAgreesWithFlowinput: ffc refuses (FF0311, at the flow's
// input type) a flow whose every input nests deeper than ffrun's input
// check takes (plan.MaxInputDepth typed levels, runtime/flowinput):
// chains of records through required fields. Optional fields, lists and
// maps end such a chain, since their values can be absent or empty. For
// each case, ffc accepts the flow exactly when flowinput accepts the
// shallowest value of its input type.
func TestInputDepthAgreesWithFlowinput(t *testing.T) {
	if flowinput.MaxDepth != plan.MaxInputDepth {
		t.Fatalf("flowinput.MaxDepth %d, plan.MaxInputDepth %d", flowinput.MaxDepth, plan.MaxInputDepth)
	}
	n := plan.MaxInputDepth
	for _, c := range []struct {
		name, types, input string
		ok                 bool
	}{
		// T0 ... Tn-1 through x, and the field of Tn-1: n levels.
		{"chain at the limit", chain(n-1, "v: int"), "T0", true},
		{"chain one past the limit", chain(n, "v: int"), "T0", false},
		{"chain ending in a record without fields", chain(n, ""), "T0", true},
		{"chain ending in an empty record", chain(n, "e: E") + "type E {}\n", "T0", false},
		{"chain ending in a list", chain(n, "l: [int]"), "T0", false},
		{"chain ending in json", chain(n, "j: json"), "T0", false},
		{"chain ending in an optional field", chain(n, "v?: int"), "T0", true},
		{"long chain broken by an optional field", chain(n, "v: int") + "type A { a?: T0, b: int }\n", "A", true},
		{"long chain under a list", chain(3*n, "v: int"), "[T0]", true},
		{"long chain under a map", chain(3*n, "v: int"), "{string: T0}", true},
		{"long chain of another field", chain(n, "v: int") + "type B { short: int, long: T0 }\n", "B", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := c.types + "flow f(" + c.input + ") { exec a(" + c.input + ") {} }\n"
			_, diags := Compile([]dsl.Source{{Name: "d.ff", Data: []byte(src)}})
			if ffc := !diags.HasErrors(); ffc != c.ok {
				t.Fatalf("ffc accepts: %v, want %v: %v", ffc, c.ok, diags)
			}
			if !c.ok {
				d := diags[0]
				if n, _ := diags.Count(); n != 1 || d.Code != dsl.CodeTypeDepth || d.Range.Start.Line != strings.Count(c.types, "\n")+1 ||
					!strings.Contains(d.Message, "the input type of flow \"f\", nests") {
					t.Errorf("want one FF0311 at the flow's input type, got %v", diags)
				}
			}
			// The types as ffc compiles them, under an input that ends
			// the chain, for flowinput.
			pkg, diags := Compile([]dsl.Source{{Name: "d.ff", Data: []byte(c.types + "flow f([json]) { exec a([json]) {} }\n")}})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			fl := pkg.Flows[0]
			fl.Types = pkg.Types
			types := map[string]*plan.Type{}
			for i := range pkg.Types {
				types[pkg.Types[i].Name] = &pkg.Types[i]
			}
			in := refOf(c.input)
			fl.Input = in
			value, err := json.Marshal(shallowest(types, in))
			if err != nil {
				t.Fatal(err)
			}
			err = flowinput.Flow(&fl, "input", value)
			if ffrun := err == nil; ffrun != c.ok {
				t.Errorf("flowinput accepts the shallowest input: %v (%v), want %v", ffrun, err, c.ok)
			}
		})
	}
}
