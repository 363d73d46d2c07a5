package compiler

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
)

const scheduleTypes = `type In {
  name: string
  tags: [string]
  n?: int
  wait?: duration
  labels?: {string: int}
  sub?: Sub
}
type Sub { id: int }
flow f(In) {
  exec a(In) {}
}
`

// TestScheduleInputPositions checks that an input that does not fit its
// flow's type is reported at the offending value: the key of an unknown
// field, the object that lacks a required one, the value of a wrong type,
// in records, lists and maps at any depth.
func TestScheduleInputPositions(t *testing.T) {
	for _, tc := range []struct {
		input string
		col   int // of the diagnostic, on the input's line (15)
		msg   string
	}{
		{`{ name: 1, tags: [] }`, 17, `input.name: want string, got a number`},
		{`{ name: "a", tags: ["x", 2] }`, 34, `input.tags[1]: want string, got a number`},
		{`{ name: "a", tags: [], bogus: 1 }`, 32, `input.bogus: unknown field of In (fields: name, tags, n, wait, labels, sub)`},
		{`{ tags: [] }`, 9, `input.name: is required (string) but missing`},
		{`{ name: "a", tags: [], labels: { "k": "v" } }`, 47, `input.labels["k"]: want int (an integer), got a string`},
		{`{ name: "a", tags: [], sub: { } }`, 37, `input.sub.id: is required (int (an integer)) but missing`},
		{`{ name: "a", tags: [], sub: { id: "x" } }`, 43, `input.sub.id: want int (an integer), got a string`},
		{`{ name: "a", tags: [], sub: { id: 1, no: 2 } }`, 46, `input.sub.no: unknown field of Sub (fields: id)`},
		{`{ name: "a", tags: [], wait: "3s" }`, 38, `input.wait: want duration (integer nanoseconds), got a string`},
		{`{ name: "a", tags: [], labels: { "a.b[\"c\"]": "v" } }`, 56, `input.labels["a.b[\"c\"]"]: want int (an integer), got a string`},
		{`["a"]`, 9, `input: want In (an object), got an array`},
		{`"{{fire_date}}"`, 9, `input: want In (an object), got a string`},
	} {
		t.Run(tc.input, func(t *testing.T) {
			src := scheduleTypes + "schedule s {\n  flow f cron \"@hourly\"\n  input " + tc.input + "\n}\n"
			_, diags := Compile([]dsl.Source{{Name: "s.ff", Data: []byte(src)}})
			if len(diags) != 1 {
				t.Fatalf("want 1 diagnostic, got:\n%v", diags)
			}
			d := diags[0]
			got := fmt.Sprintf("%d:%d: %s [%s]", d.Range.Start.Line, d.Range.Start.Col, d.Message, d.Code)
			want := fmt.Sprintf(`15:%d: input of schedule "s" does not fit flow "f": %s [%s]`, tc.col, tc.msg, dsl.CodeScheduleInput)
			if got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// TestScheduleInputJSON checks the JSON a schedule's input literal
// compiles to: declaration order, durations in nanoseconds, strings
// escaped as JSON, placeholders left for each fire.
func TestScheduleInputJSON(t *testing.T) {
	src := scheduleTypes + `schedule s {
  flow f
  cron "@hourly"
  timezone "America/New_York"
  input { name: "q\"\n{{fire_time}}", "tags": ["<b>",], wait: 1h30m, labels: { "a b": -2, c: 0 }, sub: { id: 9_000 } n: 1 }
}
`
	pkg, diags := Compile([]dsl.Source{{Name: "s.ff", Data: []byte(src)}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := []plan.Schedule{{
		Name: "s", Flow: "f", Cron: "@hourly", Timezone: "America/New_York",
		Input: json.RawMessage(`{"name":"q\"\n{{fire_time}}","tags":["<b>"],"wait":5400000000000,"labels":{"a b":-2,"c":0},"sub":{"id":9000},"n":1}`),
	}}
	if diff := cmp.Diff(want, pkg.Schedules); diff != "" {
		t.Errorf("schedules (-want +got):\n%s", diff)
	}
	if err := pkg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestPackageValidateSchedules: a plan from elsewhere whose schedule
// names no flow of the package, or has no name or expression, is refused.
func TestPackageValidateSchedules(t *testing.T) {
	pkg, diags := Compile([]dsl.Source{{Name: "s.ff", Data: []byte(scheduleTypes)}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	pkg.Schedules = []plan.Schedule{{Name: "", Flow: "g", Cron: ""}}
	err := pkg.Validate()
	if err == nil {
		t.Fatal("Validate accepted a schedule without name, flow or expression")
	}
	for _, want := range []string{"schedules[0].name", `schedules[0].flow: no flow "g"`, "schedules[0].cron: is empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error %q does not name %q", err, want)
		}
	}
}

// TestScheduleInputDeep: a schedule's input is refused when its typed
// levels nest deeper than ffrun's check takes (plan.MaxInputDepth), once;
// a value of type json may nest deeper, as ffrun accepts. A deep input
// compiles in linear time (each value's position is recorded once).
func TestScheduleInputDeep(t *testing.T) {
	compile := func(flow string, depth int) (*plan.Package, dsl.Diagnostics) {
		in := strings.Repeat("{ a: ", depth) + "{}" + strings.Repeat(" }", depth)
		src := "type N { a?: N }\n" + flow + "\nschedule s { flow j cron \"@daily\" input " + in + " }\n"
		return Compile([]dsl.Source{{Name: "s.ff", Data: []byte(src)}})
	}
	const typed, untyped = "flow j(N) { exec a(N) {} }", "flow j(json) { exec a(json) {} }"
	depth := plan.MaxInputDepth
	for _, tc := range []struct {
		flow  string
		depth int
	}{{typed, depth}, {untyped, depth}, {untyped, 200}} {
		pkg, diags := compile(tc.flow, tc.depth)
		if diags.HasErrors() || len(pkg.Schedules) != 1 {
			t.Fatalf("%s: input %d deep: %v", tc.flow, tc.depth, diags)
		}
		if want := strings.Repeat(`{"a":`, tc.depth) + "{}" + strings.Repeat("}", tc.depth); string(pkg.Schedules[0].Input) != want {
			t.Errorf("deep input compiled to %s", pkg.Schedules[0].Input)
		}
	}
	for _, d := range []int{depth + 1, 200} {
		_, diags := compile(typed, d)
		if n, _ := diags.Count(); n != 1 || !strings.Contains(diags[0].Message, "nests deeper than 64 levels") {
			t.Fatalf("typed input %d deep: %v", d, diags)
		}
	}
}

// TestSplitPath reads flowinput's paths back into steps.
func TestSplitPath(t *testing.T) {
	for _, tc := range []struct {
		path  string
		steps []string
		whole bool
	}{
		{"input", nil, true},
		{"input.a.b", []string{"a", "b"}, true},
		{"input.tags[12]", []string{"tags", "12"}, true},
		{`input.m["a.b[\"]"].x`, []string{"m", `a.b["]`, "x"}, true},
		{`input.m["open`, []string{"m"}, false},
		{`input.l[3`, []string{"l"}, false},
	} {
		steps, whole := splitPath(tc.path)
		if !cmp.Equal(steps, tc.steps) || whole != tc.whole {
			t.Errorf("splitPath(%q) = %q, %v; want %q, %v", tc.path, steps, whole, tc.steps, tc.whole)
		}
	}
}

// TestScheduleOfBrokenFlow: a schedule of a flow with errors reports none
// of its own about the flow or its input (the flow's errors say it all).
func TestScheduleOfBrokenFlow(t *testing.T) {
	for _, src := range []string{
		"flow f( { }\nschedule s { flow f cron \"@daily\" input { a: 1 } }\n",
		"flow f(Nope) { exec a(Nope) {} }\nschedule s { flow f cron \"@daily\" input { a: 1 } }\n",
	} {
		_, diags := Compile([]dsl.Source{{Name: "s.ff", Data: []byte(src)}})
		if !diags.HasErrors() {
			t.Errorf("%q: no error", src)
		}
		for _, d := range diags {
			if d.Range.Start.Line == 2 {
				t.Errorf("%q: a diagnostic of the schedule: %s", src, d)
			}
		}
	}
}
