package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/wire"
)

// itemsFlow is chainPlan("items", 2) taking a list of Item records.
func itemsFlow() *plan.Flow {
	f := chainPlan("items", 2)
	item := plan.TypeRef{Kind: plan.KindNamed, Name: "Item"}
	f.Input = &plan.TypeRef{Kind: plan.KindList, Elem: &item}
	f.Execs[0].Input = f.Input
	f.Types = []plan.Type{{Name: "Item", Fields: []plan.Field{
		{Name: "sku", Type: plan.TypeRef{Kind: plan.KindString}},
		{Name: "n", Type: plan.TypeRef{Kind: plan.KindInt}},
		{Name: "opts", Type: plan.TypeRef{Kind: plan.KindMap, Elem: &plan.TypeRef{Kind: plan.KindInt}}, Optional: true},
	}}}
	return f
}

// TestRunInputCheckedInOnePass: the stage routes check a run's input
// against the input checker prepared with the plan (cached, or a
// template's), which goes over an input that matches without decoding
// it: staging allocates as much for an input of many records as for one
// record of the same size (flowinput.Flow decoded every record, string
// and number of it).
func TestRunInputCheckedInOnePass(t *testing.T) {
	fl := itemsFlow()
	many := "[" + strings.Repeat(`{"sku": "a", "n": 1, "opts": {"x": 2}}, `, 39) + `{"sku": "a", "n": 1}]`
	one := `[{"sku": "", "n": 1}]`
	one = strings.Replace(one, `""`, `"`+strings.Repeat("a", len(many)-len(one))+`"`, 1)
	if len(one) != len(many) {
		t.Fatalf("inputs of %d and %d bytes", len(one), len(many))
	}
	rec := &recordingFlows{}
	f, err := newFlows(&Server{cfg: Config{}.withDefaults(), echo: echo.New()}, rec, []*plan.Flow{fl})
	if err != nil {
		t.Fatal(err)
	}
	stagePlan := func(input string) func() {
		body := planBody(t, fl, `, "input": `+input)
		return func() {
			rec.got = rec.got[:0]
			if status, _, e := post(f, body); e != nil || status != http.StatusCreated {
				t.Fatalf("stage: %d %v", status, e)
			}
		}
	}
	stageTemplate := func(input string) func() {
		body := `{"input": ` + input + `}`
		return func() {
			rec.got = rec.got[:0]
			req := httptest.NewRequest(http.MethodPost, "/v1/templates/items/runs", strings.NewReader(body))
			req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
			c := f.s.echo.NewContext(req, httptest.NewRecorder())
			c.SetParamNames("name")
			c.SetParamValues("items")
			if err := f.stageTemplate(c); err != nil {
				t.Fatalf("stage template: %v", err)
			}
		}
	}
	for _, route := range []struct {
		name  string
		stage func(input string) func()
	}{{"POST /v1/flows (a cached plan)", stagePlan}, {"POST /v1/templates/items/runs", stageTemplate}} {
		allocsOne := testing.AllocsPerRun(20, route.stage(one))
		allocsMany := testing.AllocsPerRun(20, route.stage(many))
		if allocsMany > allocsOne+2 {
			t.Errorf("%s: %.0f allocations for an input of 40 records, %.0f for one record of the same size: the input was decoded",
				route.name, allocsMany, allocsOne)
		}
	}
	if !rec.got[0].Shared {
		t.Error("a template's run is not marked shared")
	}
}

// TestRunInputCheckAnswersAsFlow: checkRunInput (the prepared checker)
// answers every input as checkInput (flowinput.Flow) does, including
// what no stage body can carry (a body's input is one JSON value): no
// JSON, data after the value, white space JSON does not have, invalid
// UTF-8; and absent or only white space (the message names the flow).
func TestRunInputCheckAnswersAsFlow(t *testing.T) {
	fl := itemsFlow()
	chk := newRunPlan(fl).input
	if chk == nil {
		t.Fatal("no input checker prepared for a flow with an input type")
	}
	for _, input := range []string{
		``, ` `, "\t\n", `null`, `[]`, `[{"sku": "a", "n": 1}]`, ` [{"sku": "a", "n": 1}] `,
		"\v[{\"sku\": \"a\", \"n\": 1}]", "[{\"sku\": \"a\", \"n\": 1}]\u00a0",
		`[{"sku": "a", "n": 1}] x`, `[{"sku": "a", "n": 1}]]`, `[{"sku": "a", "n": 1},]`, `[{"sku": "a", "n": }]`,
		`[{"sku": "a", "n": 1`, `{`, `x`, "[{\"sku\": \"\xff\", \"n\": 1}]", "[{\"s\xffku\": \"a\", \"n\": 1}]",
		`[{"sku": "a", "n": 1, "n": 2}]`, `[{"sku": "a", "n": 1, "opts": {"k": 1, "k": 2}}]`,
		`[{"sku": "a", "n": 1, "opts": {"k": "1"}}]`, `[{"sku": "a", "n": 1, "opt": {}}]`, `[{"\u0073ku": "a", "n": 1}]`,
		`[{"sku": "a", "n": 01}]`, `[{"sku": "a", "n": -0}]`, `[{"sku": "a", "n": 1e0}]`, `[{"sku": "a\u0000", "n": 1}]`,
	} {
		want := checkInput(fl, []byte(input))
		got := checkRunInput(fl, chk, []byte(input))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("input %q (-flowinput.Flow +checker):\n%s", input, diff)
		}
	}
	// A flow without an input type has no checker: checkInput answers.
	none := chainPlan("none", 2)
	none.Input = nil
	if rp := newRunPlan(none); rp.input != nil {
		t.Error("an input checker prepared for a flow without an input type")
	}
}

// TestScheduleInputCheckedInOnePass: PUT /v1/schedules/{name} checks its
// input against the template's prepared checker, as the stage routes do:
// beyond the two fills of its placeholders (ScheduleInput, which decodes
// it), the check of an input of many records allocates no more than of
// one record of the same size (flowinput.Flow decoded it a third time).
func TestScheduleInputCheckedInOnePass(t *testing.T) {
	fl := itemsFlow()
	many := "[" + strings.Repeat(`{"sku": "a", "n": 1, "opts": {"x": 2}}, `, 39) + `{"sku": "a", "n": 1}]`
	one := `[{"sku": "", "n": 1}]`
	one = strings.Replace(one, `""`, `"`+strings.Repeat("a", len(many)-len(one))+`"`, 1)
	f, err := newFlows(&Server{cfg: Config{}.withDefaults(), echo: echo.New()}, &recordingFlows{}, []*plan.Flow{fl})
	if err != nil {
		t.Fatal(err)
	}
	sc := &schedules{s: f.s, f: f}
	check := func(input string) func() {
		return func() {
			if _, e := sc.check("s", &wire.PutSchedule{Template: "items", Cron: "@hourly", Input: []byte(input)}); e != nil {
				t.Fatalf("check: %v", e)
			}
		}
	}
	fill := func(input string) func() {
		return func() {
			if _, err := ScheduleInput([]byte(input), time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkMore := testing.AllocsPerRun(20, check(many)) - testing.AllocsPerRun(20, check(one))
	fillMore := testing.AllocsPerRun(20, fill(many)) - testing.AllocsPerRun(20, fill(one))
	if checkMore > 2*fillMore+2 {
		t.Errorf("the check allocates %.0f more for an input of 40 records than for one record of the same size, its two fills %.0f: the input was decoded again",
			checkMore, 2*fillMore)
	}
}
