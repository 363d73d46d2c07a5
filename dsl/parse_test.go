package dsl

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestScanTokens(t *testing.T) {
	tests := []struct {
		src  string
		want []string // type:value
	}{
		{"flow f() -> T {}", []string{"Ident:flow", "Ident:f", "Punct:(", "Punct:)", "Punct:->", "Ident:T", "Punct:{", "Punct:}"}},
		{"10_000 -5 1h30m 100ms 30 1.5s 10x", []string{"Int:10_000", "Int:-5", "Duration:1h30m", "Duration:100ms", "Int:30", "Duration:1.5s", "Duration:10x"}},
		{`"a\"b" "c"`, []string{`String:"a\"b"`, `String:"c"`}},
		{"a // c\n/* x\ny */ b", []string{"Ident:a", "Ident:b"}},
		{"x?: [T], {string: T}.", []string{"Ident:x", "Punct:?", "Punct::", "Punct:[", "Ident:T", "Punct:]", "Punct:,", "Punct:{", "Ident:string", "Punct::", "Ident:T", "Punct:}", "Punct:."}},
	}
	names := map[int]string{}
	for n, tt := range tokenSymbols {
		names[int(tt)] = n
	}
	for _, tt := range tests {
		var diags Diagnostics
		var got []string
		for _, tok := range scan("t.ff", []byte(tt.src), &diags) {
			if tok.EOF() {
				break
			}
			got = append(got, names[int(tok.Type)]+":"+tok.Value)
		}
		if len(diags) != 0 {
			t.Errorf("%q: unexpected diagnostics %v", tt.src, diags)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.src, diff)
		}
	}
}

func TestScanErrors(t *testing.T) {
	tests := []struct {
		src  string
		want string
	}{
		{"a @ b", "t.ff:1:3: error: invalid character '@'"},
		{"a \xff b", "t.ff:1:3: error: invalid UTF-8 byte 0xff"},
		{`"abc`, "t.ff:1:1: error: string literal is not terminated: add a closing \""},
		{"\"ab\ncd\"", "t.ff:1:1: error: string literal is not terminated"},
		{`"\q"`, "t.ff:1:2: error: invalid escape sequence \\q in string literal: write \\\\ for a backslash"},
		{"/* never", "t.ff:1:1: error: block comment is not terminated: add */"},
	}
	for _, tt := range tests {
		var diags Diagnostics
		scan("t.ff", []byte(tt.src), &diags)
		if got := diags.Error(); !strings.HasPrefix(got, tt.want) {
			t.Errorf("%q: got %q, want prefix %q", tt.src, got, tt.want)
		}
	}
}

// TestKeywordsAsNames checks that keywords are reserved only where the
// grammar expects them.
func TestKeywordsAsNames(t *testing.T) {
	src := `
type type { type: string, input: int, lane?: bool }
flow flow(type) {
  exec lane(type) {}
  exec result() {}
  exec on() {}
  exec exec() {}
  lane -> result, on
  exec -> on on done
  result result
}`
	f, diags := Parse("k.ff", []byte(src))
	if len(diags) != 0 {
		t.Fatalf("unexpected diagnostics:\n%v", diags)
	}
	fl := f.Decls[1].Flow
	var execs, edges []string
	var result string
	for _, it := range fl.Items {
		switch {
		case it.Exec != nil:
			execs = append(execs, it.Exec.Name.Name)
		case it.Edge != nil:
			e := it.Edge.From.Names[0].Name + "->" + it.Edge.To[0].Names[0].Name
			if it.Edge.On != nil {
				e += " on " + it.Edge.On.Name
			}
			edges = append(edges, e)
		case it.Result != nil:
			result = it.Result.Name
		}
	}
	if diff := cmp.Diff([]string{"lane", "result", "on", "exec"}, execs); diff != "" {
		t.Errorf("execs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"lane->result", "exec->on on done"}, edges); diff != "" {
		t.Errorf("edges (-want +got):\n%s", diff)
	}
	if result != "result" {
		t.Errorf("result = %q", result)
	}
	fields := f.Decls[0].Type.Fields
	if len(fields) != 3 || fields[0].Name.Name != "type" || !fields[2].Optional {
		t.Errorf("fields parsed wrong: %+v", fields)
	}
}

func TestParsePositions(t *testing.T) {
	src := "flow f() {\n  exec probe() {}\n}\n"
	f, diags := Parse("p.ff", []byte(src))
	if len(diags) != 0 {
		t.Fatal(diags)
	}
	id := f.Decls[0].Flow.Items[0].Exec.Name
	want := Range{Start: Position{File: "p.ff", Line: 2, Col: 8, Offset: 18}, End: Position{File: "p.ff", Line: 2, Col: 13, Offset: 23}}
	if diff := cmp.Diff(want, id.Range()); diff != "" {
		t.Errorf("range of probe (-want +got):\n%s", diff)
	}
}

// TestParseRecovery checks that a syntax error ends only its declaration.
func TestParseRecovery(t *testing.T) {
	src := "type A { x int }\ntype B { y: int }\nflow f( {}\nflow g() { exec a() {} }\n"
	f, diags := Parse("r.ff", []byte(src))
	var got []string
	for _, d := range f.Decls {
		name := ""
		switch {
		case d.Type != nil:
			name = "type " + d.Type.Name.Name
		case d.Flow != nil:
			name = "flow " + d.Flow.Name.Name
		}
		if d.Bad {
			name += " (bad)"
		}
		got = append(got, name)
	}
	if diff := cmp.Diff([]string{"type A (bad)", "type B", "flow f (bad)", "flow g"}, got); diff != "" {
		t.Errorf("declarations (-want +got):\n%s", diff)
	}
	if len(diags) != 2 {
		t.Errorf("want 2 syntax errors, got:\n%v", diags)
	}
}

func TestDiagnosticsSortAndFormat(t *testing.T) {
	at := func(file string, line, col, off int) Range {
		p := Position{File: file, Line: line, Col: col, Offset: off}
		return Range{Start: p, End: p}
	}
	var ds Diagnostics
	ds.Errorf(at("b.ff", 1, 1, 0), CodeUnknownType, "second file")
	ds.Warnf(at("a.ff", 3, 2, 20), CodeUnreachable, "a warning")
	ds.Errorf(at("a.ff", 3, 2, 20), CodeDuplicate, "dup").With(at("a.ff", 1, 1, 0), "previous declaration here")
	ds.Errorf(at("a.ff", 2, 5, 10), CodeSyntax, "first syntax error")
	ds.Errorf(at("a.ff", 2, 9, 14), CodeSyntax, "cascading syntax error")
	ds.Errorf(at("a.ff", 3, 2, 20), CodeDuplicate, "dup").With(at("a.ff", 1, 1, 0), "previous declaration here")
	ds.Sort()
	want := `a.ff:2:5: error: first syntax error
a.ff:3:2: error: dup
	a.ff:1:1: previous declaration here
a.ff:3:2: warning: a warning
b.ff:1:1: error: second file`
	if diff := cmp.Diff(want, ds.Error()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if e, w := ds.Count(); e != 3 || w != 1 || !ds.HasErrors() {
		t.Errorf("Count = %d, %d", e, w)
	}
	if (Diagnostics{{Severity: SeverityWarning}}).HasErrors() {
		t.Error("warnings alone are not errors")
	}
	if (Diagnostics{{Severity: SeverityWarning}}).Err() != nil {
		t.Error("Err of warnings must be nil")
	}
}

func TestDiagnosticJSON(t *testing.T) {
	d := Diagnostic{
		Range:    Range{Start: Position{File: "a.ff", Line: 2, Col: 3, Offset: 12}, End: Position{File: "a.ff", Line: 2, Col: 6, Offset: 15}},
		Severity: SeverityError, Code: CodeCycle, Message: "cycle: a -> b -> a",
	}
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		t.Fatal(err)
	}
	b := strings.TrimSpace(buf.String())
	want := `{"file":"a.ff","range":{"start":{"line":2,"col":3,"offset":12},"end":{"line":2,"col":6,"offset":15}},"severity":"error","code":"FF0401","message":"cycle: a -> b -> a"}`
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestSuggest(t *testing.T) {
	cands := []string{"priority", "transcode", "thumbnail", "gpu", "b"}
	tests := []struct{ name, want string }{
		{"prority", "priority"},
		{"transcod", "transcode"},
		{"gpx", "gpu"},
		{"bb", ""}, // too short to guess
		{"zzzzzz", ""},
		{"thumbnial", "thumbnail"},
	}
	for _, tt := range tests {
		if got := Suggest(tt.name, cands); got != tt.want {
			t.Errorf("Suggest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
