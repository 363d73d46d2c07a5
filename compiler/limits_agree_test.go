package compiler

import (
	"strings"
	"testing"

	"github.com/flowfabric/ff/dsl"
)

// agreeWithValidate compiles src and requires ffc and plan validation
// (what ffrun applies to a staged plan) to agree: ok says whether ffc
// accepts it; if it does, Validate accepts every flow, and if it does
// not, the only error is code.
func agreeWithValidate(t *testing.T, src string, ok bool, code dsl.Code) {
	t.Helper()
	pkg, diags := Compile([]dsl.Source{{Name: "r.ff", Data: []byte(src)}})
	if !ok {
		if n, _ := diags.Count(); n != 1 || diags[0].Code != code {
			t.Errorf("want one error %s, got %v", code, diags)
		}
		return
	}
	if diags.HasErrors() {
		t.Fatalf("ffc refuses it: %v", diags)
	}
	for i := range pkg.Flows {
		if err := pkg.Flows[i].Validate(); err != nil {
			t.Errorf("ffc accepts flow %q, but plan.(*Flow).Validate refuses it:\n%v", pkg.Flows[i].Name, err)
		}
	}
}

// TestDefaultKindTooLong: an exec's default kind "<flow>.<exec>" is a
// kind like any other, at most 128 bytes; longer is FF0507 (set `kind`),
// as ffrun would refuse it.
func TestDefaultKindTooLong(t *testing.T) {
	exec := func(n int) string { return strings.Repeat("e", n) }
	flow := strings.Repeat("f", 100)
	agreeWithValidate(t, "flow "+flow+"() { exec "+exec(27)+"() {} }\n", true, "")
	agreeWithValidate(t, "flow "+flow+"() { exec "+exec(28)+"() {} }\n", false, dsl.CodeEmptyString)
	agreeWithValidate(t, "flow "+flow+"() { exec "+exec(100)+"() { kind \"k\" } }\n", true, "")
}

// TestDeepTypeNesting: lists and maps nest at most 32 deep in a type
// reference (plan.MaxTypeDepth), as plan validation takes; deeper is
// FF0311.
func TestDeepTypeNesting(t *testing.T) {
	typ := func(n int) string {
		return "type T { a: " + strings.Repeat("[", n) + "string" + strings.Repeat("]", n) + " }\nflow f(T) { exec a(T) {} }\n"
	}
	agreeWithValidate(t, typ(32), true, "")
	agreeWithValidate(t, typ(33), false, dsl.CodeTypeDepth)
	agreeWithValidate(t, typ(40), false, dsl.CodeTypeDepth)
	agreeWithValidate(t, "flow f(["+strings.Repeat("{string: ", 33)+"int"+strings.Repeat("}", 33)+"]) { exec a(["+strings.Repeat("{string: ", 31)+"int"+strings.Repeat("}", 31)+"]) {} }\n", false, dsl.CodeTypeDepth)
}
