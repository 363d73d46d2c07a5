package api_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/flowinput"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// orderFlow is a flow of one exec whose input is an Order: records
// nested in records, lists and maps, optional fields, and every scalar
// kind.
func orderFlow() *plan.Flow {
	named := func(n string) plan.TypeRef { return plan.TypeRef{Kind: plan.KindNamed, Name: n} }
	kind := func(k string) plan.TypeRef { return plan.TypeRef{Kind: k} }
	list := func(e plan.TypeRef) plan.TypeRef { return plan.TypeRef{Kind: plan.KindList, Elem: &e} }
	mapOf := func(e plan.TypeRef) plan.TypeRef { return plan.TypeRef{Kind: plan.KindMap, Elem: &e} }
	in := named("Order")
	out := kind(plan.KindJSON)
	return &plan.Flow{
		Schema: plan.SchemaVersion, Name: "order", Namespace: "default", Lane: "default", Input: &in, Output: &out, Result: "a",
		Execs: []plan.Exec{{Name: "a", Kind: "order.a", Lane: "default", Priority: 100, Input: &in, Output: &out,
			InputFrom: plan.InputFlow, Join: plan.Join{Kind: plan.JoinAll}, Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}}},
		Edges: []plan.Edge{},
		Types: []plan.Type{
			{Name: "Order", Fields: []plan.Field{
				{Name: "id", Type: kind(plan.KindString)},
				{Name: "qty", Type: kind(plan.KindInt)},
				{Name: "price", Type: kind(plan.KindFloat)},
				{Name: "paid", Type: kind(plan.KindBool)},
				{Name: "at", Type: kind(plan.KindTime)},
				{Name: "wait", Type: kind(plan.KindDuration)},
				{Name: "blob", Type: kind(plan.KindBytes)},
				{Name: "meta", Type: kind(plan.KindJSON)},
				{Name: "items", Type: list(named("Item"))},
				{Name: "tags", Type: mapOf(kind(plan.KindString))},
				{Name: "grid", Type: list(list(kind(plan.KindInt))), Optional: true},
				{Name: "customer", Type: named("Customer")},
				{Name: "note", Type: kind(plan.KindString), Optional: true},
			}},
			{Name: "Item", Fields: []plan.Field{
				{Name: "sku", Type: kind(plan.KindString)},
				{Name: "n", Type: kind(plan.KindInt)},
				{Name: "opts", Type: list(kind(plan.KindInt)), Optional: true},
			}},
			{Name: "Customer", Fields: []plan.Field{
				{Name: "name", Type: kind(plan.KindString)},
				{Name: "address", Type: named("Address"), Optional: true},
				{Name: "by_site", Type: mapOf(named("Address")), Optional: true},
			}},
			{Name: "Address", Fields: []plan.Field{
				{Name: "city", Type: kind(plan.KindString)},
				{Name: "zip", Type: kind(plan.KindString)},
			}},
		},
	}
}

// goodOrder is an Order with every field.
const goodOrder = `{"id": "o1", "qty": 2, "price": 9.5, "paid": true, "at": "2026-01-02T03:04:05Z", "wait": 1000,
 "blob": "aGk=", "meta": {"any": [1, "x"]}, "items": [{"sku": "a", "n": 1}, {"sku": "b", "n": 2, "opts": [1, 2]}],
 "tags": {"k": "v"}, "grid": [[1], [2, 3]],
 "customer": {"name": "acme", "address": {"city": "c", "zip": "z"}, "by_site": {"s1": {"city": "c", "zip": "z"}}}}`

// badOrderInputs are run inputs of orderFlow that do not match its type
// (and one that does), each a JSON value a stage body can carry.
func badOrderInputs() map[string]string {
	with := func(old, new string) string {
		if !strings.Contains(goodOrder, old) {
			panic("no " + old + " in the good order")
		}
		return strings.Replace(goodOrder, old, new, 1)
	}
	return map[string]string{
		"good":                      goodOrder,
		"absent":                    ``,
		"null":                      `null`,
		"a number":                  `1`,
		"a list":                    `[]`,
		"an empty object":           `{}`,
		"a field of another kind":   with(`"id": "o1"`, `"id": 1`),
		"a required field null":     with(`"id": "o1"`, `"id": null`),
		"a required field missing":  with(`"id": "o1", `, ``),
		"an unknown field":          with(`"id": "o1"`, `"id": "o1", "idd": 1`),
		"a misspelt field":          with(`"qty": 2`, `"qtty": 2`),
		"a key twice":               with(`"id": "o1"`, `"id": "o1", "id": "o2"`),
		"int past int64":            with(`"qty": 2`, `"qty": 9223372036854775808`),
		"int with a fraction":       with(`"qty": 2`, `"qty": 2.5`),
		"int with an exponent":      with(`"qty": 2`, `"qty": 2e3`),
		"float as a string":         with(`"price": 9.5`, `"price": "9.5"`),
		"bool as a number":          with(`"paid": true`, `"paid": 1`),
		"time not RFC 3339":         with(`"at": "2026-01-02T03:04:05Z"`, `"at": "yesterday"`),
		"duration with a fraction":  with(`"wait": 1000`, `"wait": 1.5`),
		"bytes not base64":          with(`"blob": "aGk="`, `"blob": "a!"`),
		"a list element's field":    with(`{"sku": "b", "n": 2`, `{"sku": "b", "n": "2"`),
		"a list element missing":    with(`{"sku": "a", "n": 1}`, `{"sku": "a"}`),
		"a nested list's element":   with(`"opts": [1, 2]`, `"opts": [1, "two"]`),
		"a list of lists' element":  with(`[[1], [2, 3]]`, `[[1], [2, true]]`),
		"a list element unknown":    with(`{"sku": "a", "n": 1}`, `{"sku": "a", "n": 1, "skuu": "x"}`),
		"a list as an object":       with(`"items": [{"sku": "a", "n": 1}, `, `"items": {"x": {"sku": "a", "n": 1}}, "no": [`),
		"a map value":               with(`"tags": {"k": "v"}`, `"tags": {"k": 1}`),
		"a map as a list":           with(`"tags": {"k": "v"}`, `"tags": ["v"]`),
		"a nested record's field":   with(`"zip": "z"}, "by_site"`, `"zip": 5}, "by_site"`),
		"a nested record unknown":   with(`"zip": "z"}, "by_site"`, `"zip": "z", "country": "x"}, "by_site"`),
		"a nested record missing":   with(`"city": "c", "zip": "z"}, "by_site"`, `"city": "c"}, "by_site"`),
		"a record in a map":         with(`{"s1": {"city": "c", "zip": "z"}}`, `{"s1": {"city": "c", "zip": []}}`),
		"a record as a string":      with(`"customer": {"name": "acme", `, `"customer": "acme", "x": {`),
		"an optional field null":    with(`"grid": [[1], [2, 3]]`, `"grid": null`),
		"an optional field of kind": with(`"grid": [[1], [2, 3]],`, `"grid": [[1], [2, 3]], "note": 5,`),
		"escapes in keys":           with(`"id": "o1"`, `"\u0069d": "o1"`),
		"an escaped unknown key":    with(`"id": "o1"`, `"id": "o1", "\u0078": 1`),
		"deep json":                 with(`"meta": {"any": [1, "x"]}`, `"meta": `+strings.Repeat("[", 40)+strings.Repeat("]", 40)),
		"too deep json":             with(`"meta": {"any": [1, "x"]}`, `"meta": `+strings.Repeat("[", 200)+strings.Repeat("]", 200)),
	}
}

// oldInputAnswer is the answer the stage routes gave a run input before
// they checked it with a flowinput.Checker: flowinput.Flow's mismatch as
// a 400 validation error of its path.
func oldInputAnswer(t *testing.T, f *plan.Flow, input string) (field, message string) {
	t.Helper()
	err := flowinput.Flow(f, "input", []byte(input))
	if err == nil {
		return "", ""
	}
	var fe *flowinput.Error
	if !errors.As(err, &fe) {
		return "input", "input: " + err.Error()
	}
	return fe.Path, fe.Path + ": " + fe.Msg
}

// TestStageInputAnswersUnchanged: POST /v1/flows (a plan seen for the
// first time, then from the cache of plans) and POST
// /v1/templates/{name}/runs check the run input with the checker
// prepared for the plan, and answer every input that does not match as
// flowinput.Flow did: the same 400, field path and message, for
// mismatches at the top, in nested records, lists, maps, unknown fields
// and keys given twice. PUT /v1/schedules/{name} checks its input (null
// when absent) with the template's checker too, and answers as
// flowinput.Flow did.
func TestStageInputAnswersUnchanged(t *testing.T) {
	t.Parallel()
	fl := orderFlow()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{fl} })
	p := planJSON(t, fl)
	for name, input := range badOrderInputs() {
		field, msg := oldInputAnswer(t, fl, input)
		member := ""
		if input != "" {
			member = `"input":` + input
		}
		for _, route := range []struct{ how, path, body string }{
			{"a new plan", "/v1/flows", `{"plan":` + p + "," + member + `}`},
			{"a cached plan", "/v1/flows", `{"plan":` + p + "," + member + `}`},
			{"a template", "/v1/templates/order/runs", `{` + member + `}`},
		} {
			route.body = strings.Replace(route.body, ",}", "}", 1)
			r := env.Do(t, http.MethodPost, route.path, nil, route.body)
			if msg == "" {
				if r.Status != http.StatusCreated {
					t.Errorf("%s, %s: %d %+v, want the run staged", name, route.how, r.Status, r.Err)
				}
				continue
			}
			if r.Status != http.StatusBadRequest || r.Err.Code != wire.CodeValidation || r.Field() != field || r.Err.Message != msg {
				t.Errorf("%s, %s: %d %s field %q %q;\nwant 400 %s field %q %q", name, route.how, r.Status, r.Err.Code, r.Field(),
					r.Err.Message, wire.CodeValidation, field, msg)
			}
		}
		scheduled := input
		if scheduled == "" {
			scheduled = "null"
		}
		field, msg = oldInputAnswer(t, fl, scheduled)
		r := env.Do(t, http.MethodPut, "/v1/schedules/order", nil, `{"template":"order","cron":"@hourly"`+strings.TrimSuffix(","+member, ",")+`}`)
		switch {
		case msg == "" && r.Status != http.StatusCreated && r.Status != http.StatusOK:
			t.Errorf("%s, a schedule: %d %+v, want it put", name, r.Status, r.Err)
		case msg != "" && (r.Status != http.StatusBadRequest || r.Err.Code != wire.CodeValidation || r.Field() != field || r.Err.Message != msg):
			t.Errorf("%s, a schedule: %d %s field %q %q;\nwant 400 %s field %q %q", name, r.Status, r.Err.Code, r.Field(),
				r.Err.Message, wire.CodeValidation, field, msg)
		}
	}
}

// TestStageInputAnswersUnchangedWithoutInputType: a flow without an input
// type still takes only an absent or null input, on every route.
func TestStageInputAnswersUnchangedWithoutInputType(t *testing.T) {
	t.Parallel()
	fl := oneStep()
	fl.Name, fl.Input = "noinput", nil
	fl.Execs[0].Kind, fl.Execs[0].InputFrom, fl.Execs[0].Input = "noinput.a", plan.InputNone, nil
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{fl} })
	p := planJSON(t, fl)
	for _, input := range []string{"", "null", "1", `{"s": "x"}`} {
		field, msg := oldInputAnswer(t, fl, input)
		member := ""
		if input != "" {
			member = `,"input":` + input
		}
		for _, route := range []struct{ path, body string }{
			{"/v1/flows", `{"plan":` + p + member + `}`},
			{"/v1/flows", `{"plan":` + p + member + `}`},
			{"/v1/templates/noinput/runs", `{` + strings.TrimPrefix(member, ",") + `}`},
		} {
			r := env.Do(t, http.MethodPost, route.path, nil, route.body)
			got := fmt.Sprintf("%d %q %q", r.Status, r.Field(), r.Err.Message)
			want := fmt.Sprintf("%d %q %q", http.StatusBadRequest, field, msg)
			if msg == "" {
				want = fmt.Sprintf("%d %q %q", http.StatusCreated, "", "")
			}
			if got != want {
				t.Errorf("input %q, %s: %s, want %s", input, route.path, got, want)
			}
		}
	}
}
