package dsl

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPackageClauseFirst: a file may start with its package clause
// (after comments only) and has at most one; a clause after a declaration
// or a second one is a syntax error at its keyword, pointing at what comes
// before it, and the misplaced clause is not used (it is Bad).
func TestPackageClauseFirst(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
		bad  []bool // per declaration
	}{
		{"first", "package p\ntype T { x: int }\n", nil, []bool{false, false}},
		{"after comments", "// c\n/* b */ package p\nflow f() { exec a() {} }\n", nil, []bool{false, false}},
		{"after a declaration", "type T { x: int }\n\npackage p\n", []string{
			`t.ff:3:1: error: syntax error: package clause after a declaration: write "package p" first in the file`,
			`	t.ff:1:1: first declaration here`,
		}, []bool{false, true}},
		{"second", "package p\npackage p\nflow f() { exec a() {} }\n", []string{
			`t.ff:2:1: error: syntax error: second package clause: a file has at most one, before its declarations`,
			`	t.ff:1:1: first package clause here`,
		}, []bool{false, true, false}},
		{"second after a declaration", "package p\nflow f() { exec a() {} } package q\n", []string{
			`t.ff:2:26: error: syntax error: second package clause: a file has at most one, before its declarations`,
			`	t.ff:1:1: first package clause here`,
		}, []bool{false, false, true}},
		// A clause with a syntax error of its own reports that one only.
		{"bad and late", "type T { x: int }\npackage\n", []string{
			`t.ff:2:8: error: syntax error: unexpected end of file, expected a name`,
		}, []bool{false}},
		{"bad and late, kept", "type T { x: int }\npackage p q\n", []string{
			`t.ff:2:11: error: syntax error: unexpected "q"`,
		}, []bool{false, true}},
		// Declarations with syntax errors count as declarations.
		{"after a bad declaration", "type T { x int }\npackage p\n", []string{
			`t.ff:1:12: error: syntax error: unexpected "int", expected ":"`,
			`t.ff:2:1: error: syntax error: package clause after a declaration: write "package p" first in the file`,
			`	t.ff:1:1: first declaration here`,
		}, []bool{true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, parseDiags(tt.src)); diff != "" {
				t.Errorf("%q (-want +got):\n%s", tt.src, diff)
			}
			f, _ := Parse("t.ff", []byte(tt.src))
			var bad []bool
			for _, d := range f.Decls {
				bad = append(bad, d.Bad)
			}
			if diff := cmp.Diff(tt.bad, bad); diff != "" {
				t.Errorf("%q: Bad of each declaration (-want +got):\n%s", tt.src, diff)
			}
		})
	}
}
