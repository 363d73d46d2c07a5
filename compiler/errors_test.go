package compiler

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
)

// TestErrors compiles each file of testdata/errors (and each directory
// there, as one package) and checks its diagnostics against the inline
// expectations. It also checks that, together, the cases produce every
// diagnostic code but FF0001.
func TestErrors(t *testing.T) {
	entries, err := os.ReadDir("testdata/errors")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[dsl.Code]bool{}
	for _, e := range entries {
		path := filepath.Join("testdata/errors", e.Name())
		t.Run(e.Name(), func(t *testing.T) {
			srcs, diags := ReadSources(path)
			if len(diags) > 0 {
				t.Fatalf("reading: %v", diags)
			}
			var exps []*expectation
			for _, s := range srcs {
				exps = append(exps, parseExpectations(t, s.Name, s.Data)...)
			}
			if len(exps) == 0 {
				t.Fatal("no expectations")
			}
			pkg, diags := Compile(srcs)
			checkExpectations(t, diags, exps)
			if diags.HasErrors() != (pkg == nil) {
				t.Errorf("errors: %v, plan: %v; want a plan exactly when there is no error", diags.HasErrors(), pkg != nil)
			}
			for _, d := range diags {
				seen[d.Code] = true
			}
		})
	}
	for _, tc := range generatedCases() {
		t.Run(tc.Name, func(t *testing.T) {
			exps := parseExpectations(t, tc.Name, tc.Data)
			_, diags := Compile([]dsl.Source{tc})
			checkExpectations(t, diags, exps)
			for _, d := range diags {
				seen[d.Code] = true
			}
		})
	}
	for _, c := range dsl.Codes {
		if c.Code != dsl.CodeIO && !seen[c.Code] {
			t.Errorf("no test case produces %s (%s)", c.Code, c.Summary)
		}
	}
}

// TestCodes checks the code table: unique, ordered, and severities match
// how the codes are used.
func TestCodes(t *testing.T) {
	var codes []string
	for _, c := range dsl.Codes {
		codes = append(codes, string(c.Code))
	}
	if !slices.IsSorted(codes) {
		t.Errorf("dsl.Codes is not sorted: %v", codes)
	}
	if len(slices.Compact(slices.Clone(codes))) != len(codes) {
		t.Errorf("dsl.Codes has duplicates: %v", codes)
	}
}

// generatedCases are error cases too large to write by hand: limits on
// execs, names and capabilities.
func generatedCases() []dsl.Source {
	long := strings.Repeat("n", MaxNameLen+1)
	ok := strings.Repeat("n", MaxNameLen)
	var many []string
	for i := range plan.MaxCapabilities + 1 {
		many = append(many, fmt.Sprintf("%q", fmt.Sprintf("cap%d", i)))
	}
	var wide []string
	for i := range 40 {
		wide = append(wide, fmt.Sprintf("%q", fmt.Sprintf("%0100d", i)))
	}
	var flowWide []string
	for i := range 30 {
		flowWide = append(flowWide, fmt.Sprintf("%q", fmt.Sprintf("f%0100d", i)))
	}
	var huge, limit strings.Builder
	for i := range plan.MaxExecs + 1 {
		fmt.Fprintf(&huge, "  exec e%d() {}\n", i)
		if i < plan.MaxExecs {
			fmt.Fprintf(&limit, "  exec e%d() {}\n", i)
		}
	}
	return []dsl.Source{
		{Name: "too_many_execs.ff", Data: []byte(fmt.Sprintf(`
flow huge() {                  // ERROR FF0510 "^flow \"huge\" has 10001 execs: a run stages at most 10000; split it into several flows$"
%s}
flow limit() {
%s}
`, huge.String(), limit.String()))},
		{Name: "long_names.ff", Data: []byte(fmt.Sprintf(`
type %[1]s { x: int }       // ERROR FF0107 "name is 129 bytes long; the limit is 128"
type T { %[1]s: int }       // ERROR FF0107 "name is 129 bytes long"
flow f() {
  exec %[1]s() {}           // ERROR FF0107 "name is 129 bytes long"
  exec %[2]s() {}
}
budget b {
  dimension %[1]s { hard 1 } // ERROR FF0107 "name is 129 bytes long"
  dimension %[2]s { hard 1 }
}
`, long, ok))},
		{Name: "capabilities.ff", Data: []byte(fmt.Sprintf(`
flow f() {
  requires [%[3]s]
  exec a() {
    requires [%[1]s]        // ERROR FF0502 "257 capabilities required: at most 256 are allowed"
  }
  exec b() {
    requires [%[2]s]        // ERROR FF0502 "exec \"b\" requires too many capabilities: capabilities are 7099 bytes when joined: at most 4096"
  }
}
`, strings.Join(many, ", "), strings.Join(wide, ", "), strings.Join(flowWide, ", ")))},
	}
}
