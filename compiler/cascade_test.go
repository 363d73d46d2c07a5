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

// TestUnknownExecInEdgeNoCascade: a misspelt exec name in an edge is one
// mistake and one diagnostic, FF0205 with its "did you mean". The execs
// the edge was meant to connect have upstreams that are not all known, so
// their join, their input source and the result inferred from the sinks
// are not checked against the graph without that edge (which would advise
// adding the edge the author wrote, misspelt).
func TestUnknownExecInEdgeNoCascade(t *testing.T) {
	for _, c := range []struct{ name, src string }{
		{"result inferred from sinks", "type T { id: string }\nflow f(T) -> T {\n  exec a(T) -> T {}\n  exec b(T) -> T {}\n  a -> bb\n}\n"},
		{"input names the misspelt upstream", "type T { id: string }\nflow f(T) -> T {\n  exec a(T) -> T {}\n  exec b(T) -> T {}\n  exec c(T) -> T { input b }\n  a -> b\n  a, bb -> c\n  result c\n}\n"},
		{"join count", "flow f() {\n  exec a() {}\n  exec b() {}\n  exec c() { join 2 }\n  a, bb -> c\n}\n"},
		{"edge into a misspelt exec", "type T { id: string }\ntype R { n: int }\nflow f(T) -> R {\n  exec fetch(T) -> T {}\n  exec count(T) -> T {}\n  exec merge(T) -> R { input count }\n  fetch -> count\n  count -> mrege\n  result merge\n}\n"},
		{"root exec by mistake", "type T { id: string }\nflow f() {\n  exec a() -> T {}\n  exec c(T) {}\n  aa -> c\n}\n"},
	} {
		_, diags := Compile([]dsl.Source{{Name: "r.ff", Data: []byte(c.src)}})
		var got []string
		for _, d := range diags {
			got = append(got, d.String())
		}
		if len(diags) != 1 || diags[0].Code != dsl.CodeUnknownExec {
			t.Errorf("%s: a misspelt exec in an edge gives %d diagnostics, want only FF0205:\n%s\n%s",
				c.name, len(diags), strings.Join(got, "\n"), c.src)
		}
	}
}
