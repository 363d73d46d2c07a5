package dsl

import (
	"strings"
	"testing"
)

// TestScheduleAsTypeName: keywords are not reserved (spec/language.md,
// "Keywords"): a type named `schedule` may be an output type, and
// `schedule` after "->" at depth zero does not start a declaration.
func TestScheduleAsTypeName(t *testing.T) {
	src := "type schedule { x: int }\nflow f() -> schedule {\n  exec a() -> schedule {}\n  result a\n}\n"
	f, diags := Parse("t.ff", []byte(src))
	if len(diags) != 0 {
		t.Errorf("a type named schedule used as an output type:\n%v", diags)
	}
	if len(f.Decls) != 2 || f.Decls[1].Flow == nil || f.Decls[1].Bad {
		t.Errorf("want a type and a whole flow, got %d declarations", len(f.Decls))
	}
}

// TestExecNamedInput: an exec may be called `input`; errors in its body
// are exec-body errors, not those of a schedule's "input object".
func TestExecNamedInput(t *testing.T) {
	wantOneDiagnostic(t, "flow f() {\n  exec input() {\n    lan \"x\"\n  }\n}\n",
		`t.ff:3:5: error: syntax error: unexpected "lan" in exec body, expected a setting (kind, lane, priority, timeout, deadline, retry, requires, budget, quota, input, join) or "}" (did you mean "lane"?)`)
	wantOneDiagnostic(t, "flow f() {\n  exec input() {\n    timeout\n  }\n}\n",
		`t.ff:4:3: error: syntax error: unexpected "}", expected a duration`)
	_, diags := Parse("t.ff", []byte("flow f() {\n  exec a() {}\n  exec input() {\n    lane \"x\"\n\nflow g() {}\n"))
	if len(diags) == 0 || !strings.Contains(diags[0].Message, "exec body is not closed") {
		t.Errorf("unclosed body of exec input: %v; want \"exec body is not closed\"", diags)
	}
}

// TestScheduleNestedObjectUnclosed: an object left open inside a
// schedule's input is said to be one, not a map type (which a "{" after
// ":" or "[" opens elsewhere).
func TestScheduleNestedObjectUnclosed(t *testing.T) {
	for _, src := range []string{
		"schedule s {\n  input { a: { b: 1\n\nflow f() {}\n",
		"schedule s {\n  input [ { b: 1\n\nflow f() {}\n",
	} {
		_, diags := Parse("t.ff", []byte(src))
		if len(diags) != 1 || strings.Contains(diags[0].Message, "map type") {
			t.Errorf("%q: %v; want one diagnostic about an unclosed object, not a map type", src, diags)
		}
	}
}
