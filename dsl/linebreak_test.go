package dsl

import "testing"

// TestOutputTypeOnNextLine: line breaks are white space, so a flow's
// output type may start the line after its "->", at column 1. Error
// recovery cuts declarations at a name at the start of a line outside
// brackets, but never at the name right after "->", which is a type.
func TestOutputTypeOnNextLine(t *testing.T) {
	for _, src := range []string{
		"type T { id: string }\nflow f(T) ->\nT { exec a(T) -> T {} }\n",
		"type T { id: string }\nflow f(T)\n->\nT { exec a(T) -> T {} }\n",
		"type T { id: string }\nflow f(T) ->\n[T] { exec a(T) -> [T] {} }\n",
	} {
		f, diags := Parse("r.ff", []byte(src))
		if len(diags) > 0 {
			t.Errorf("valid source refused:\n%s\n%v", src, diags)
			continue
		}
		if len(f.Decls) != 2 || f.Decls[1].Flow == nil || f.Decls[1].Flow.Output == nil {
			t.Errorf("%s: want a type and a flow with an output type, got %d declarations", src, len(f.Decls))
		}
	}
}
