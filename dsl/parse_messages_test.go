package dsl

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSuggestSwapsAndCase checks the suggestions for misspelt names: a swap of
// two adjacent letters is one edit, and case is ignored.
func TestSuggestSwapsAndCase(t *testing.T) {
	tests := []struct {
		name       string
		candidates []string
		want       string
	}{
		{"exce", Keywords, "exec"},
		{"flwo", Keywords, "flow"},
		{"tpye", Keywords, "type"},
		{"retyr", Keywords, "retry"},
		{"Strin", []string{"string", "int", "Clip"}, "string"},
		{"String", []string{"string", "int"}, "string"},
		{"INT", []string{"string", "int"}, "int"},
		{"clip", []string{"Clip"}, "Clip"},
		{"xyz", Keywords, ""},
		{"exec", Keywords, ""},
	}
	for _, tt := range tests {
		if got := Suggest(tt.name, tt.candidates); got != tt.want {
			t.Errorf("Suggest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestEditDistance checks the distance on swaps, inserts, deletes and
// substitutions, both ways round.
func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"exec", "exec", 0},
		{"exce", "exec", 1},
		{"ab", "ba", 1},
		{"abc", "ca", 3}, // a restricted swap: no edit of the swapped pair
		{"kitten", "sitting", 3},
		{"flow", "flwo", 1},
		{"attempts", "atempts", 1},
		{"backof", "backoff", 1},
	}
	for _, tt := range tests {
		if got := EditDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := EditDistance(tt.b, tt.a); got != tt.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tt.b, tt.a, got, tt.want)
		}
	}
}

// TestStringLiteral checks where the lexer reports what is wrong
// inside a string literal (at the escape or byte, not at the opening
// quote) and that StringLit.Valid agrees with it.
func TestStringLiteral(t *testing.T) {
	tests := []struct {
		src   string
		want  []string
		valid bool
	}{
		{`"a\qb"`, []string{`t.ff:1:3: error: invalid escape sequence \q in string literal: write \\ for a backslash`}, false},
		{`"\x4g"`, []string{`t.ff:1:2: error: invalid escape sequence \x in string literal: \x takes 2 hex digits`}, false},
		{`"ab\u12"`, []string{`t.ff:1:4: error: invalid escape sequence \u in string literal: \u takes 4 hex digits`}, false},
		{`"\ud800"`, []string{`t.ff:1:2: error: invalid escape sequence \u in string literal`}, false},
		{`"\400"`, []string{`t.ff:1:2: error: invalid escape sequence \4 in string literal: an octal escape is 3 digits, at most \377`}, false},
		{`"\'"`, []string{`t.ff:1:2: error: invalid escape sequence \' in string literal`}, false},
		{"\"gp\xffu\"", []string{"t.ff:1:4: error: invalid UTF-8 byte 0xff in string literal: .ff files are UTF-8 text"}, false},
		{"\"caf\xc3\xa9 \xc3\"", []string{"t.ff:1:8: error: invalid UTF-8 byte 0xc3 in string literal"}, false},
		{`"a\"b\\c\n\t\u00e9\x41\101"`, nil, true},
		{"\"caf\xc3\xa9\"", nil, true},
	}
	for _, tt := range tests {
		var diags Diagnostics
		toks := scan("t.ff", []byte(tt.src), &diags)
		var got []string
		for _, d := range diags {
			got = append(got, d.Range.Start.String()+": "+d.Severity.String()+": "+d.Message)
		}
		if len(got) != len(tt.want) {
			t.Errorf("%q: got %q, want %q", tt.src, got, tt.want)
		} else {
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("%q: got %q, want prefix %q", tt.src, got[i], tt.want[i])
				}
			}
		}
		if len(toks) != 2 || toks[0].Type != tokString {
			t.Fatalf("%q: tokens %v, want one string", tt.src, toks)
		}
		if v := (&StringLit{Raw: toks[0].Value}).Valid(); v != tt.valid {
			t.Errorf("%q: Valid() = %v, want %v", tt.src, v, tt.valid)
		}
	}
}

// TestUnclosed checks the diagnostic of a declaration that ends
// inside a bracket it opened: it is placed right after the last token and
// points at the opening bracket.
func TestUnclosed(t *testing.T) {
	tests := []struct {
		src  string
		want []string
	}{
		{"type T { id: string\n\nflow f() {}\n", []string{
			`t.ff:1:20: error: syntax error: type body is not closed: add "}"`,
			`	t.ff:1:8: "{" opened here`,
		}},
		{"flow f() {\n  exec a() { retry { attempts 2 }\n", []string{
			`t.ff:2:34: error: syntax error: exec body is not closed: add "}"`,
			`	t.ff:2:12: "{" opened here`,
		}},
		{"flow f() { requires [\"a\",\n", []string{
			`t.ff:1:26: error: syntax error: "[" is not closed: add "]"`,
			`	t.ff:1:21: "[" opened here`,
		}},
		{"type T { m: {string: int\n", []string{
			`t.ff:1:25: error: syntax error: map type is not closed: add "}"`,
			`	t.ff:1:13: "{" opened here`,
		}},
		// The parser wants a type first: that is what it says.
		{"type T { id:\n", []string{`t.ff:1:13: error: syntax error: unexpected end of file, expected a type`}},
		{"flow f() -> {\n  exec a() {}\n}\n", []string{
			`t.ff:1:10: error: syntax error: "->" is not followed by a type: write "-> T {" for an output of type T, or leave "->" out for none`,
		}},
		{"flow f() {}\n}\n", []string{`t.ff:2:1: error: syntax error: unexpected "}": there is no "{" open for it to close`}},
	}
	for _, tt := range tests {
		_, diags := Parse("t.ff", []byte(tt.src))
		var got []string
		for _, d := range diags {
			got = append(got, d.Range.Start.String()+": "+d.Severity.String()+": "+d.Message)
			for _, r := range d.Related {
				got = append(got, "\t"+r.Range.Start.String()+": "+r.Message)
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.src, diff)
		}
	}
}

// TestUnexpectedInBlock checks the diagnostic of a token that cannot start
// a statement of its block: it names the block and lists what can, in one
// list that `or "}"` ends.
func TestUnexpectedInBlock(t *testing.T) {
	tests := []struct {
		src  string
		want string
	}{
		{"flow f() { exec a() { retry { atempts 2 } } }\n",
			`t.ff:1:31: error: syntax error: unexpected "atempts" in retry block, expected attempts, backoff, delay, max_delay, jitter or "}" (did you mean "attempts"?)`},
		{"budget b { dimension d { hard 1 } rest 1h }\n",
			`t.ff:1:35: error: syntax error: unexpected "rest" in budget body, expected dimension, reset, on_hard_limit, scope or "}" (did you mean "reset"?)`},
		{"budget b { dimension d { hrd 1 } }\n",
			`t.ff:1:26: error: syntax error: unexpected "hrd" in dimension body, expected hard, soft or "}" (did you mean "hard"?)`},
		{"quota q { concurrency 1 ky id }\n",
			`t.ff:1:25: error: syntax error: unexpected "ky" in quota body, expected rate, concurrency, jitter, key or "}"`},
		{"flow f() { 5 }\n",
			`t.ff:1:12: error: syntax error: unexpected integer 5 in flow body, expected exec, an edge (a -> b), result, a setting (namespace, lane, priority, timeout, deadline, retry, requires, budget, quota) or "}"`},
		{"flow f() { exec a() { lame \"x\" } }\n",
			`t.ff:1:23: error: syntax error: unexpected "lame" in exec body, expected a setting (kind, lane, priority, timeout, deadline, retry, requires, budget, quota, input, join) or "}" (did you mean "lane"?)`},
	}
	for _, tt := range tests {
		wantOneDiagnostic(t, tt.src, tt.want)
	}
}

// TestMissingBlock checks the diagnostics of an exec header without its
// body and of a retry policy without its block: each says what to write.
func TestMissingBlock(t *testing.T) {
	tests := []struct {
		src  string
		want string
	}{
		{"flow f() {\n  exec a()\n  exec b() {}\n}\n",
			`t.ff:2:11: error: syntax error: exec "a" has no body: add "{}" after its declaration (its settings go inside)`},
		{"flow f() {\n  exec a(T) -> {string: [T]} timeout 5s\n}\n",
			`t.ff:2:29: error: syntax error: exec "a" has no body: add "{}" after its declaration (its settings go inside)`},
		{"flow f() {\n  exec a() {}\n  exec b()\n}\n",
			`t.ff:3:11: error: syntax error: exec "b" has no body: add "{}" after its declaration (its settings go inside)`},
		{"flow f() {\n  exec a()",
			`t.ff:2:11: error: syntax error: exec "a" has no body: add "{}" after its declaration (its settings go inside)`},
		// Not an exec: the general message.
		{"flow f()\n  exec a() {}\n}\n", `t.ff:2:3: error: syntax error: unexpected "exec", expected "{"`},
		{"flow f() { exec a() { retry 3 } }\n",
			`t.ff:1:29: error: syntax error: unexpected integer 3 after "retry", expected "{": a retry policy is a block, e.g. retry { attempts 3 }`},
		{"flow f() {\n  retry attempts 3\n  exec a() {}\n}\n",
			`t.ff:2:9: error: syntax error: unexpected "attempts" after "retry", expected "{": a retry policy is a block, e.g. retry { attempts 3 }`},
	}
	for _, tt := range tests {
		wantOneDiagnostic(t, tt.src, tt.want)
	}
}

// wantOneDiagnostic checks that parsing src gives exactly one diagnostic,
// printed as want.
func wantOneDiagnostic(t *testing.T, src, want string) {
	t.Helper()
	_, diags := Parse("t.ff", []byte(src))
	if len(diags) != 1 {
		t.Errorf("%q: %d diagnostics %v, want 1", src, len(diags), diags)
		return
	}
	d := diags[0]
	if got := d.Range.Start.String() + ": " + d.Severity.String() + ": " + d.Message; got != want {
		t.Errorf("%q:\n got %s\nwant %s", src, got, want)
	}
}

// TestScheduleSyntax checks the syntax diagnostics of schedules: a
// statement their body does not accept, a value missing or unclosed in
// an input, and recovery at the next declaration.
func TestScheduleSyntax(t *testing.T) {
	tests := []struct {
		src  string
		want []string
	}{
		{"schedule s {\n  flow f\n  crn \"@hourly\"\n}\n", []string{
			`t.ff:3:3: error: syntax error: unexpected "crn" in schedule body, expected flow, cron, timezone, input or "}" (did you mean "cron"?)`,
		}},
		{"schedule s {\n  input { a: 1 b: }\n}\n", []string{
			`t.ff:2:19: error: syntax error: unexpected "}", expected a value`,
		}},
		{"schedule s {\n  input { a: [1, 2 }\n}\n", []string{
			`t.ff:2:20: error: syntax error: unexpected "}", expected "]"`,
		}},
		{"schedule s {\n  input { a: 1\n\nflow f() {}\n", []string{
			`t.ff:2:15: error: syntax error: input object is not closed: add "}"`,
			`	t.ff:2:9: "{" opened here`,
		}},
		{"schedule s { flow f cron 5 }\nschedule t { flow f cron \"@daily\" }\n", []string{
			`t.ff:1:26: error: syntax error: unexpected integer 5, expected a string`,
		}},
		{"schedul s { }\n", []string{
			`t.ff:1:1: error: syntax error: unexpected "schedul", expected a declaration (package, type, budget, quota, flow or schedule) (did you mean "schedule"?)`,
		}},
	}
	for _, tt := range tests {
		f, diags := Parse("t.ff", []byte(tt.src))
		var got []string
		for _, d := range diags {
			got = append(got, d.Range.Start.String()+": "+d.Severity.String()+": "+d.Message)
			for _, r := range d.Related {
				got = append(got, "\t"+r.Range.Start.String()+": "+r.Message)
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.src, diff)
		}
		if !strings.HasPrefix(tt.src, "schedul ") && (len(f.Decls) == 0 || f.Decls[0].Schedule == nil) {
			t.Errorf("%q: no schedule parsed", tt.src)
		}
	}
	// The declaration after a broken one parses whole.
	f, _ := Parse("t.ff", []byte(tests[4].src))
	if len(f.Decls) != 2 || f.Decls[1].Bad || f.Decls[1].Schedule == nil || f.Decls[1].Schedule.Name.Name != "t" {
		t.Errorf("recovery after a broken schedule: got %d declarations", len(f.Decls))
	}
}

// TestScheduleValue checks the AST of an input value: each kind of
// literal, keys as names or strings, optional commas.
func TestScheduleValue(t *testing.T) {
	src := "schedule s { input { a: \"x\" \"b c\": [1, -2,] d: 30s, e: { f: true g: null } } }"
	f, diags := Parse("t.ff", []byte(src))
	if len(diags) != 0 {
		t.Fatal(diags)
	}
	v := f.Decls[0].Schedule.Items[0].Input
	if v.Object == nil || len(v.Object.Members) != 4 {
		t.Fatalf("input is not an object of 4 members: %+v", v)
	}
	m := v.Object.Members
	var keys []string
	for _, x := range m {
		keys = append(keys, x.Key())
	}
	if diff := cmp.Diff([]string{"a", "b c", "d", "e"}, keys); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	if m[0].Value.String == nil || len(m[1].Value.List.Items) != 2 || m[1].Value.List.Items[1].Int.Text != "-2" ||
		m[2].Value.Duration == nil || m[3].Value.Object.Members[1].Value.Word.Name != "null" {
		t.Errorf("values parsed wrongly: %+v", m)
	}
	if r := m[1].KeyRange(); r.Start.Col != 29 || r.End.Col != 34 {
		t.Errorf("quoted key range = %v; want columns 29 to 34", r)
	}
}
