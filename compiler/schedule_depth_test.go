package compiler

import (
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

// TestScheduleInputDepthAgrees: ffc and ffrun (PUT /v1/schedules, the
// route ffrun --flows goes through) agree on how deep a schedule's input
// may nest: its typed levels at most 64, while a value of type json may
// nest deeper.
func TestScheduleInputDepthAgrees(t *testing.T) {
	const types = "type N { a?: N }\n"
	for _, c := range []struct {
		flow, in string
		ok       bool
	}{
		{"flow f(json) { exec a(json) {} }", strings.Repeat("[", 70) + strings.Repeat("]", 70), true},
		{"flow f(json) { exec a(json) {} }", strings.Repeat("{ a: ", 200) + "1" + strings.Repeat(" }", 200), true},
		{"flow f(N) { exec a(N) {} }", strings.Repeat("{ a: ", plan.MaxInputDepth) + "{}" + strings.Repeat(" }", plan.MaxInputDepth), true},
		{"flow f(N) { exec a(N) {} }", strings.Repeat("{ a: ", plan.MaxInputDepth+1) + "{}" + strings.Repeat(" }", plan.MaxInputDepth+1), false},
		{"flow f([[json]]) { exec a([[json]]) {} }", "[[" + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "]]", true},
	} {
		src := types + c.flow + "\nschedule s { flow f cron \"@daily\" input " + c.in + " }\n"
		pkg, diags := Compile([]dsl.Source{{Name: "r.ff", Data: []byte(src)}})
		if ffc := !diags.HasErrors(); ffc != c.ok {
			t.Errorf("%s, input %d bytes: ffc accepts: %v, want %v: %v", c.flow, len(c.in), ffc, c.ok, diags)
			continue
		}
		// The template and the input as ffc compiles them, for ffrun.
		fpkg, fdiags := Compile([]dsl.Source{{Name: "r.ff", Data: []byte(types + c.flow + "\n")}})
		if fdiags.HasErrors() {
			t.Fatal(fdiags)
		}
		env := servertest.Start(t, func(cfg *server.Config) { cfg.Templates = []*plan.Flow{&fpkg.Flows[0]} })
		in := c.in
		if pkg != nil {
			in = string(pkg.Schedules[0].Input)
		} else {
			in = strings.ReplaceAll(strings.ReplaceAll(in, "{ a: ", `{"a":`), " }", "}")
		}
		r := env.Do(t, "PUT", "/v1/schedules/s", nil, `{"template":"f","cron":"@daily","input":`+in+`}`)
		if ffrun := r.Status == 201; ffrun != c.ok {
			t.Errorf("%s, input %d bytes: ffrun accepts: %v, want %v: %d %s", c.flow, len(c.in), ffrun, c.ok, r.Status, r.Body)
		}
	}
}
