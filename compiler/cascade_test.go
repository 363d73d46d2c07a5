package compiler

import (
	"strings"
	"testing"

	"github.com/flowfabric/ff/dsl"
)

// TestInputSelf: `input a` on exec a itself is an error that says so,
// without advising an edge a -> a (a cycle), and is the only diagnostic:
// a root exec with an input type counts as receiving the flow's input,
// so FF0903 does not follow.
func TestInputSelf(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"type T { id: string }\nflow f(T) { exec a(T) { input a } }\n",
			`r.ff:2:31: error: exec "a" cannot take its input from itself; as a root exec it receives the flow's input: remove ` + "`input a`" + ` [FF0402]`},
		{"type T { id: string }\nflow f(T) { exec u(T) -> T {} exec a(T) { input a } u -> a }\n",
			`r.ff:2:49: error: exec "a" cannot take its input from itself: name one of its upstreams (u) [FF0402]`},
	} {
		_, diags := Compile([]dsl.Source{{Name: "r.ff", Data: []byte(c.src)}})
		if len(diags) != 1 || diags[0].String() != c.want {
			t.Errorf("%s: got %v\nwant %s", c.src, diags, c.want)
		}
	}
}

// TestLongNameCascade: a declared name over its length limit is reported
// once (FF0107); its uses are left alone, as those of a declaration with
// a syntax error are, instead of each being reported as unknown.
func TestLongNameCascade(t *testing.T) {
	long, long65 := strings.Repeat("x", 129), strings.Repeat("y", 65)
	src := "flow f() {\n exec a() {}\n exec " + long + "() {}\n a -> " + long + "\n}\n" +
		"type " + long + " { a: int }\nflow g(" + long + ") { exec b(" + long + ") {} }\n" +
		"budget " + long65 + " { dimension d { hard 1 } }\nquota q" + long65 + " { concurrency 1 }\n" +
		"flow h() { budget " + long65 + " quota q" + long65 + " exec a() {} }\n"
	_, diags := Compile([]dsl.Source{{Name: "r.ff", Data: []byte(src)}})
	if n, _ := diags.Count(); n != 4 {
		t.Errorf("want 4 errors, got %v", diags)
	}
	for _, d := range diags {
		if d.Code != dsl.CodeBadName {
			t.Errorf("%v: a cascade of FF0107 (the name is declared)", d)
		}
	}
}
