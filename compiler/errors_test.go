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

// dimensions returns n dimension declarations d0, d1, ...: the one past
// plan.MaxDimensions is expected to be refused.
func dimensions(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "dimension d%d { hard 1 }", i)
		if i == plan.MaxDimensions {
			fmt.Fprintf(&b, "  // ERROR FF0508 \"^dimension \\\"d%d\\\" is one too many: a budget has at most %d dimensions$\"", i, plan.MaxDimensions)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// denseFlow returns a flow of 2n execs, an edge from each of the first n
// to each of the others: its plan takes about 93 n² bytes, over
// plan.MaxPlanBytes for n = 450 (expected to be refused), far below it for
// n = 40.
func denseFlow(name string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "flow %s() {", name)
	if n*n*93 > plan.MaxPlanBytes {
		fmt.Fprintf(&b, `  // ERROR FF0513 "^the plan of flow \"%s\" is \d+ bytes; ffrun stages plans of at most %d bytes: split it"`, name, plan.MaxPlanBytes)
	}
	b.WriteString("\n")
	var from, to []string
	for i := range n {
		fmt.Fprintf(&b, "  exec a%d() {}\n  exec b%d() {}\n", i, i)
		from, to = append(from, fmt.Sprintf("a%d", i)), append(to, fmt.Sprintf("b%d", i))
	}
	fmt.Fprintf(&b, "  %s -> %s\n}\n", strings.Join(from, ", "), strings.Join(to, ", "))
	return b.String()
}

// selfLoops returns a flow of n execs, each with an edge to itself: one
// cycle each, of which the first maxCycleReports are reported and the
// others counted.
func selfLoops(n int) string {
	var b strings.Builder
	b.WriteString("flow loops() {")
	if n > maxCycleReports {
		fmt.Fprintf(&b, `  // ERROR FF0401 "^flow \"loops\" has %d cycles more than the %d reported: break those and check again$"`, n-maxCycleReports, maxCycleReports)
	}
	b.WriteString("\n")
	for i := range n {
		fmt.Fprintf(&b, "  exec e%d() {}\n", i)
	}
	for i := range n {
		fmt.Fprintf(&b, "  e%[1]d -> e%[1]d", i)
		if i < maxCycleReports {
			fmt.Fprintf(&b, `  // ERROR FF0401 "^cycle in flow \"loops\": e%[1]d -> e%[1]d$"`, i)
		}
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// wrongInput returns a schedule whose input gives a string to each of the
// n int fields of its flow's input type: the first maxScheduleInputErrors
// mismatches are reported, then that there are more.
func wrongInput(n int) string {
	var b strings.Builder
	b.WriteString("type Wide {")
	for i := range n {
		fmt.Fprintf(&b, " f%d: int", i)
	}
	b.WriteString(" }\nflow wide(Wide) { exec a(Wide) {} }\nschedule s {\n  flow wide\n  cron \"@daily\"\n  input {")
	if n > maxScheduleInputErrors {
		fmt.Fprintf(&b, `  // ERROR FF0310 "^input of schedule \"s\" has more mismatches with flow \"wide\" than the %d reported$"`, maxScheduleInputErrors)
	}
	b.WriteString("\n")
	for i := range n {
		fmt.Fprintf(&b, "    f%d: \"x\"", i)
		if i < maxScheduleInputErrors {
			fmt.Fprintf(&b, `  // ERROR FF0310 "input\.f%d: want int"`, i)
		}
		b.WriteString("\n")
	}
	b.WriteString("  }\n}\n")
	return b.String()
}

// generatedCases are error cases too large to write by hand: limits on
// execs, names, capabilities, resources, nesting, plan size and on how
// many cycles and input mismatches are reported.
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
  exec %[2]s() {}           // ERROR FF0507 "^the default kind \"f\.n{128}\" of exec \"n{128}\" is 130 bytes long; the limit is 128: set a shorter one with .kind"
  exec k() { kind "k" }
  %[1]s -> k
}
flow g(%[1]s) { exec %[2]s(%[1]s) { kind "g.k" } }
budget b {
  dimension %[3]s { hard 1 } // ERROR FF0107 "^dimension name is 65 bytes long; the limit is 64$"
  dimension %[4]s { hard 1 }
}
budget %[3]s { dimension d { hard 1 } }  // ERROR FF0107 "^budget name is 65 bytes long; the limit is 64$"
quota %[5]s { concurrency 1 }            // ERROR FF0107 "^quota name is 65 bytes long; the limit is 64$"
budget %[4]s { dimension d { hard 1 } }
quota %[6]s { concurrency 1 }
flow h() { budget %[3]s, %[4]s quota %[5]s, %[6]s exec a() {} }
`, long, ok, strings.Repeat("r", plan.MaxResourceNameLen+1), strings.Repeat("r", plan.MaxResourceNameLen),
			strings.Repeat("s", plan.MaxResourceNameLen+1), strings.Repeat("s", plan.MaxResourceNameLen)))},
		// An exec whose name is refused for its length still takes part
		// in its flow: its uses are not unknown execs (FF0205), its long
		// default kind is not reported again (FF0507), and the exec it
		// feeds is not taken for a root (FF0304).
		{Name: "long_exec_name.ff", Data: []byte(fmt.Sprintf(`
type T { x: int }
flow f() -> T {
  exec a() -> T {}
  exec %[1]s() -> T {}      // ERROR FF0107 "^name is 129 bytes long; the limit is 128$"
  exec b(T) {}
  a -> %[1]s -> b
  result %[1]s
}
`, strings.Repeat("e", MaxNameLen+1)))},
		{Name: "many_cycles.ff", Data: []byte(selfLoops(maxCycleReports + 5))},
		{Name: "many_mismatches.ff", Data: []byte(wrongInput(maxScheduleInputErrors + 3))},
		{Name: "resource_limits.ff", Data: []byte(fmt.Sprintf(`
budget dims { %[1]s}
type A { %[2]s: B }
type B { %[3]s: string }
type K { %[4]s: string }
quota long_key { concurrency 1 key %[2]s.%[3]s }  // ERROR FF0306 "^key path \"a{100}\.b{100}\" is 201 bytes long; the limit is 128$"
quota %[5]s { concurrency 1 key %[4]s }
flow deferred(K) {
  namespace "%[6]s"
  exec x(K) -> K {}
  exec y(K) { quota %[5]s }  // ERROR FF0306 "makes a reference of 258 bytes for exec \"y\", which takes its input from an upstream; the limit is 256"
  x -> y
}
flow direct(K) { namespace "%[6]s" exec y(K) { quota %[5]s } }
flow long_key_use(A) { exec x(A) -> A {} exec y(A) { quota long_key } x -> y }
`, dimensions(plan.MaxDimensions+1), strings.Repeat("a", 100), strings.Repeat("b", 100),
			strings.Repeat("k", plan.MaxQuotaKeyLen), strings.Repeat("q", plan.MaxResourceNameLen), strings.Repeat("n", plan.MaxLaneLen)))},
		{Name: "nesting.ff", Data: []byte(fmt.Sprintf(`
type T { a: %[1]sstring%[2]s }  // ERROR FF0108 "^brackets nest more than 256 levels deep here; ffc reads at most 256$"
flow f(T) { exec a(T) {} }
flow j(json) { exec a(json) {} }
schedule s { flow j cron "@daily" input %[3]s1%[4]s }
schedule t { flow j cron "@daily" input %[1]s1%[2]s }  // ERROR FF0108 "^brackets nest more than 256 levels deep here"
`, strings.Repeat("[", dsl.MaxNesting), strings.Repeat("]", dsl.MaxNesting), strings.Repeat("[", dsl.MaxNesting-1), strings.Repeat("]", dsl.MaxNesting-1)))},
		{Name: "plan_size.ff", Data: []byte(denseFlow("dense", 450) + denseFlow("sparse", 40))},
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
