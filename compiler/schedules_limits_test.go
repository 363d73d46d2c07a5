package compiler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
)

// compileOne compiles one file and returns its diagnostics.
func compileOne(src string) dsl.Diagnostics {
	_, diags := Compile([]dsl.Source{{Name: "s.ff", Data: []byte(src)}})
	return diags
}

// TestScheduleWhatFfrunRefuses: what ffrun would refuse at start, ffc
// refuses: an expression that never fires, an input over the payload limit
// once its placeholders are filled, more schedules than ffrun keeps, and a
// scheduled flow whose name is longer than a schedule's template may be.
func TestScheduleWhatFfrunRefuses(t *testing.T) {
	var many strings.Builder
	many.WriteString("flow f() { exec a() {} }\n")
	for i := range plan.MaxSchedules + 1 {
		fmt.Fprintf(&many, "schedule s%d { flow f cron \"@daily\" }\n", i)
	}
	long := "f" + strings.Repeat("x", plan.MaxScheduleNameLen)
	for name, tc := range map[string]struct{ src, want string }{
		"feb30":  {"flow f() { exec a() {} }\nschedule s { flow f cron \"0 0 30 2 *\" }\n", "never fires"},
		"apr31":  {"flow f() { exec a() {} }\nschedule s { flow f cron \"0 0 31 4,6,9,11 *\" }\n", "never fires"},
		"filled": {"flow f(string) { exec a(string) {} }\nschedule s { flow f cron \"@daily\" input \"" + strings.Repeat("{{fire_time}}", 50_000) + "\" }\n", "with its placeholders filled in; the limit is 1048576"},
		"plain":  {"flow f(string) { exec a(string) {} }\nschedule s { flow f cron \"@daily\" input \"" + strings.Repeat("x", 1<<20) + "\" }\n", "the limit is 1048576"},
		"many":   {many.String(), "ffrun keeps at most 1000 schedules"},
		"longflow": {"flow " + long + "() { exec a() {} }\nschedule s { flow " + long + " cron \"@daily\" }\n",
			"a scheduled flow's name may be at most 64"},
		"longname": {"flow g() { exec a() {} }\nschedule s" + strings.Repeat("x", 130) + " { flow g cron \"@hourly\" }\n", "the limit is 64"},
		"utf8":     {"flow g(string) { exec a(string) {} }\nschedule s { flow g cron \"@daily\" input \"a\\xffb\" }\n", "not UTF-8"},
		"utf8key":  {"flow g(json) { exec a(json) {} }\nschedule s { flow g cron \"@daily\" input { \"a\\xff\": 1 } }\n", "not UTF-8"},
	} {
		diags := compileOne(tc.src)
		if n, _ := diags.Count(); n != 1 || !strings.Contains(diags[0].Message, tc.want) {
			t.Errorf("%s: %v; want one error saying %q", name, diags, tc.want)
		}
	}
}

// TestScheduleOfFlowWithBrokenType: the input of a schedule whose flow's
// type has an error is not checked: the check would repeat the type's
// error in a misleading form ("unknown field of T (fields: )"), or say
// that the flow takes no input when its input type is what is broken. A
// type is broken by an error of the checker, a syntax error or a name
// refused for its length, and a flow's input type by naming a declaration
// refused for its length that is not a type.
func TestScheduleOfFlowWithBrokenType(t *testing.T) {
	long := strings.Repeat("T", MaxNameLen+1)
	for name, src := range map[string]string{
		"unknown_field_type.ff": `
type T { x: Nope }                                   // ERROR FF0202 "unknown type \"Nope\""
flow g(T) { exec a(T) {} }
schedule s { flow g cron "@hourly" input { x: 1 } }
`,
		"map_key.ff": `
type T { x: {int: string} }                          // ERROR FF0301 "map keys must be string"
flow g(T) { exec a(T) {} }
schedule s { flow g cron "@hourly" input { x: 1 } }
`,
		"syntax_broken_field_type.ff": `
type B { id: string oops }                           // ERROR FF0101 "syntax error"
type T { k: B, name: string }
flow g(T) { exec a(T) {} }
schedule s { flow g cron "@daily" input { k: { id: "x" }, name: "n" } }
`,
		"syntax_broken_input_type.ff": `
type T { x: int y }                                  // ERROR FF0101 "syntax error"
flow g(T) { exec a(T) {} }
schedule s { flow g cron "@daily" input { x: 1 } }
`,
		"overlong_input_type.ff": fmt.Sprintf(`
type %[1]s { x: int }                                  // ERROR FF0107 "name is 129 bytes long"
flow g(%[1]s) { exec a(%[1]s) {} }
schedule s { flow g cron "@daily" input { x: 1 } }
`, long),
		// No type is broken here: the flow's own input type is.
		"overlong_flow_as_input_type.ff": fmt.Sprintf(`
flow %[1]s() { exec a() {} }                           // ERROR FF0107 "name is 129 bytes long"
flow g(%[1]s) { exec a(%[1]s) {} }
schedule s { flow g cron "@daily" input { x: 1 } }
`, long),
	} {
		t.Run(name, func(t *testing.T) { checkSource(t, name, src) })
	}
}
