package flowinput_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/flowinput"
)

func ref(kind string) plan.TypeRef { return plan.TypeRef{Kind: kind} }

func elem(kind string, e plan.TypeRef) plan.TypeRef { return plan.TypeRef{Kind: kind, Elem: &e} }

func named(name string) plan.TypeRef { return plan.TypeRef{Kind: plan.KindNamed, Name: name} }

// clipFlow takes a record using every kind of type.
var clipFlow = &plan.Flow{
	Name:  "publish",
	Input: &plan.TypeRef{Kind: plan.KindNamed, Name: "Clip"},
	Types: []plan.Type{
		{Name: "Clip", Fields: []plan.Field{
			{Name: "id", Type: ref(plan.KindString)},
			{Name: "seconds", Type: ref(plan.KindFloat)},
			{Name: "count", Type: ref(plan.KindInt)},
			{Name: "ok", Type: ref(plan.KindBool)},
			{Name: "tags", Type: elem(plan.KindList, ref(plan.KindString))},
			{Name: "labels", Type: elem(plan.KindMap, ref(plan.KindString))},
			{Name: "thumb", Type: ref(plan.KindBytes), Optional: true},
			{Name: "meta", Type: ref(plan.KindJSON), Optional: true},
			{Name: "taken", Type: ref(plan.KindTime)},
			{Name: "ttl", Type: ref(plan.KindDuration)},
			{Name: "owner", Type: named("Owner"), Optional: true},
			{Name: "rows", Type: ref(plan.KindInt), Optional: true},
			{Name: "grid", Type: elem(plan.KindList, elem(plan.KindList, ref(plan.KindInt))), Optional: true},
		}},
		{Name: "Owner", Fields: []plan.Field{{Name: "name", Type: ref(plan.KindString)}}},
	},
}

const good = `{"id":"c","seconds":1.5,"count":3,"ok":true,"tags":["a","b"],"labels":{"k":"v"},` +
	`"taken":"2026-11-21T19:00:00Z","ttl":1000000000`

func TestFlow(t *testing.T) {
	for _, tt := range []struct {
		name, input string
		want        *flowinput.Error // nil: valid
	}{
		{"minimal", good + `}`, nil},
		{"optional values", good + `,"thumb":"aGVsbG8=","meta":{"x":[1]},"owner":{"name":"n"},"rows":7,"grid":[[1,2],[3]]}`, nil},
		{"optional nulls", good + `,"thumb":null,"meta":null,"owner":null,"rows":null}`, nil},
		{"null list and map", `{"id":"c","seconds":1,"count":3,"ok":false,"tags":null,"labels":null,"taken":"2026-11-21T19:00:00.123+01:00","ttl":0}`, nil},
		{"missing required", `{"id":"c"}`, &flowinput.Error{Path: "input.seconds", Msg: "is required (float) but missing"}},
		{"null required scalar", `{"id":null}`, &flowinput.Error{Path: "input.id", Msg: "is required (string) and must not be null"}},
		{"list element", good[:len(good)-len(`,"taken":"2026-11-21T19:00:00Z","ttl":1000000000`)] + `}`, &flowinput.Error{Path: "input.taken", Msg: "is required (time) but missing"}},
		{"bad list element", `{"id":"c","seconds":1,"count":3,"ok":true,"tags":["a","b",3],"labels":{},"taken":"2026-11-21T19:00:00Z","ttl":1}`,
			&flowinput.Error{Path: "input.tags[2]", Msg: "want string, got a number"}},
		{"bad map value", `{"id":"c","seconds":1,"count":3,"ok":true,"tags":[],"labels":{"a b":1},"taken":"2026-11-21T19:00:00Z","ttl":1}`,
			&flowinput.Error{Path: `input.labels["a b"]`, Msg: "want string, got a number"}},
		{"unknown field", good + `,"colour":"red"}`, &flowinput.Error{Path: "input.colour", Msg: "unknown field of Clip (fields: id, seconds, count, ok, tags, labels, thumb, meta, taken, ttl, owner, rows, grid)"}},
		{"nested unknown field", good + `,"owner":{"name":"n","age":3}}`, &flowinput.Error{Path: "input.owner.age", Msg: "unknown field of Owner (fields: name)"}},
		{"nested missing", good + `,"owner":{}}`, &flowinput.Error{Path: "input.owner.name", Msg: "is required (string) but missing"}},
		{"fractional int", `{"id":"c","seconds":1,"count":3.5}`, &flowinput.Error{Path: "input.count", Msg: "want int (an integer), got 3.5 (not an integer literal)"}},
		{"exponent int", `{"id":"c","seconds":1,"count":1e3}`, &flowinput.Error{Path: "input.count", Msg: "want int (an integer), got 1e3 (not an integer literal)"}},
		{"int overflow", `{"id":"c","seconds":1,"count":9223372036854775808}`, &flowinput.Error{Path: "input.count", Msg: "9223372036854775808 is outside the int64 range"}},
		{"int as string", `{"id":"c","seconds":1,"count":"3"}`, &flowinput.Error{Path: "input.count", Msg: "want int (an integer), got a string"}},
		{"bad base64", good + `,"thumb":"not base64!"}`, &flowinput.Error{Path: "input.thumb", Msg: "want base64 (standard, padded) bytes: illegal base64 data at input byte 3"}},
		{"bad time", `{"id":"c","seconds":1,"count":3,"ok":true,"tags":[],"labels":{},"taken":"yesterday","ttl":1}`,
			&flowinput.Error{Path: "input.taken", Msg: `want an RFC 3339 time like 2026-11-21T19:00:00Z, got "yesterday"`}},
		{"duration as string", `{"id":"c","seconds":1,"count":3,"ok":true,"tags":[],"labels":{},"taken":"2026-11-21T19:00:00Z","ttl":"1s"}`,
			&flowinput.Error{Path: "input.ttl", Msg: "want duration (integer nanoseconds), got a string"}},
		{"nested list", good + `,"grid":[[1],[2,"x"]]}`, &flowinput.Error{Path: "input.grid[1][1]", Msg: "want int (an integer), got a string"}},
		{"not an object", `[1]`, &flowinput.Error{Path: "input", Msg: "want Clip (an object), got an array"}},
		{"null input", `null`, &flowinput.Error{Path: "input", Msg: "want Clip (an object), got null"}},
		{"absent input", ``, &flowinput.Error{Path: "input", Msg: `is required: flow "publish" takes Clip`}},
		{"trailing data", good + `} {}`, &flowinput.Error{Path: "input", Msg: "has data after the JSON value"}},
		// Go's decoder assigns each occurrence of a key in turn: the first
		// "count" would fail the handler's decode though the last one is good.
		{"repeated field", `{"count":"x","id":"c","seconds":1,"count":3,"ok":true,"tags":[],"labels":{},"taken":"2026-11-21T19:00:00Z","ttl":1}`,
			&flowinput.Error{Path: "input.count", Msg: "is given more than once in its object"}},
		{"repeated map key", `{"id":"c","seconds":1,"count":3,"ok":true,"tags":[],"labels":{"k":"v","k":"w"},"taken":"2026-11-21T19:00:00Z","ttl":1}`,
			&flowinput.Error{Path: `input.labels["k"]`, Msg: "is given more than once in its object"}},
		{"repeated list field", good + `,"tags":["a"]}`, &flowinput.Error{Path: "input.tags", Msg: "is given more than once in its object"}},
		{"repeated nested field", good + `,"owner":{"name":"n","name":"m"}}`, &flowinput.Error{Path: "input.owner.name", Msg: "is given more than once in its object"}},
		{"repeated key inside json", good + `,"meta":{"x":1,"x":2}}`, nil}, // json keeps the text: the handler decides
		{"deep json", good + `,"meta":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`, nil},
		{"too deep", good + `,"meta":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, &flowinput.Error{Path: "input", Msg: "is not valid JSON: exceeded max depth"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := flowinput.Flow(clipFlow, "input", []byte(tt.input))
			var got *flowinput.Error
			if err != nil && !errors.As(err, &got) {
				t.Fatalf("error %v is not a *flowinput.Error", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFlowWithoutInput(t *testing.T) {
	f := &plan.Flow{Name: "tick"}
	for _, in := range []string{"", "null", " null "} {
		if err := flowinput.Flow(f, "input", []byte(in)); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
	err := flowinput.Flow(f, "input", []byte(`{}`))
	want := &flowinput.Error{Path: "input", Msg: `flow "tick" takes no input; send none or null`}
	var got *flowinput.Error
	if !errors.As(err, &got) || !cmp.Equal(want, got) {
		t.Fatalf("got %v, want %v", err, want)
	}
}

func TestScalarRoots(t *testing.T) {
	for _, tt := range []struct {
		t     plan.TypeRef
		input string
		ok    bool
	}{
		{ref(plan.KindInt), `-42`, true},
		{ref(plan.KindInt), `4.0`, false},
		{ref(plan.KindFloat), `4e300`, true},
		{ref(plan.KindFloat), `4e400`, false},
		{ref(plan.KindJSON), `null`, true},
		{ref(plan.KindBytes), `null`, true},
		{elem(plan.KindMap, ref(plan.KindBool)), `{"a":true,"b":false}`, true},
		{elem(plan.KindMap, ref(plan.KindBool)), `{"a":true,"b":0}`, false},
		{named("Nope"), `{}`, false},
	} {
		err := flowinput.Flow(&plan.Flow{Name: "value", Input: &tt.t}, "input", []byte(tt.input))
		if (err == nil) != tt.ok {
			t.Errorf("%s %s: err = %v, want ok=%v", plan.TypeString(&tt.t), tt.input, err, tt.ok)
		}
	}
}

// FuzzFlow: the check never panics, and whatever it accepts is one valid
// JSON value (what the server stages and the handler decodes).
func FuzzFlow(f *testing.F) {
	for _, s := range []string{good + `}`, good + `,"owner":{"name":"n"}}`, `{"id":"c","id":"d"}`, `[1]]`, `"x"`, `null`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		err := flowinput.Flow(clipFlow, "input", []byte(input))
		if err == nil && !json.Valid([]byte(input)) {
			t.Fatalf("accepted %q, which is not valid JSON", input)
		}
		var fe *flowinput.Error
		if err != nil && !errors.As(err, &fe) {
			t.Fatalf("error %v is not a *flowinput.Error", err)
		}
		// FlowErrors agrees: no error exactly when Flow has none, and
		// Flow's error first.
		errs, _ := flowinput.FlowErrors(clipFlow, "input", []byte(input), 5)
		if (len(errs) == 0) != (err == nil) || len(errs) > 0 && !cmp.Equal(fe, errs[0]) {
			t.Fatalf("FlowErrors %v disagrees with Flow %v", errs, err)
		}
	})
}

// TestFlowErrors: FlowErrors goes on past a mismatch, within a record, a
// list and a nested record, and returns every one in the order Flow meets
// them (Flow's error is the first), up to its limit, saying whether there
// were more.
func TestFlowErrors(t *testing.T) {
	in := `{"id":1,"seconds":"x","ok":true,"tags":["a",2,3],"labels":{},"taken":"2026-11-21T19:00:00Z","ttl":1,"owner":{"age":3},"zz":1,"aa":2}`
	clip := "unknown field of Clip (fields: id, seconds, count, ok, tags, labels, thumb, meta, taken, ttl, owner, rows, grid)"
	all := []*flowinput.Error{
		{Path: "input.id", Msg: "want string, got a number"},
		{Path: "input.seconds", Msg: "want float, got a string"},
		{Path: "input.count", Msg: "is required (int (an integer)) but missing"},
		{Path: "input.tags[1]", Msg: "want string, got a number"},
		{Path: "input.tags[2]", Msg: "want string, got a number"},
		{Path: "input.owner.name", Msg: "is required (string) but missing"},
		{Path: "input.owner.age", Msg: "unknown field of Owner (fields: name)"},
		{Path: "input.aa", Msg: clip},
		{Path: "input.zz", Msg: clip},
	}
	for _, tt := range []struct {
		limit int
		want  []*flowinput.Error
		more  bool
	}{
		{100, all, false},
		{len(all), all, false},
		{3, all[:3], true},
		{0, all[:1], true}, // a limit below 1 counts as 1
	} {
		got, more := flowinput.FlowErrors(clipFlow, "input", []byte(in), tt.limit)
		if diff := cmp.Diff(tt.want, got); diff != "" || more != tt.more {
			t.Errorf("limit %d: more = %v, want %v; errors (-want +got):\n%s", tt.limit, more, tt.more, diff)
		}
	}
	var first *flowinput.Error
	if err := flowinput.Flow(clipFlow, "input", []byte(in)); !errors.As(err, &first) || !cmp.Equal(all[0], first) {
		t.Errorf("Flow: got %v, want %v", err, all[0])
	}
	// An input that is not one JSON value has one error, as with Flow.
	got, more := flowinput.FlowErrors(clipFlow, "input", []byte(good+`} {}`), 20)
	if want := []*flowinput.Error{{Path: "input", Msg: "has data after the JSON value"}}; !cmp.Equal(want, got) || more {
		t.Errorf("trailing data: got %v (more %v), want %v", got, more, want)
	}
	if got, more := flowinput.FlowErrors(clipFlow, "input", []byte(good+`}`), 20); len(got) != 0 || more {
		t.Errorf("valid input: got %v (more %v)", got, more)
	}
}

// TestMisspeltFieldNamed: the input {"id": "d1", "txt": "hello"} for a
// flow taking Doc { id: string, text: string } is one typo. The API (which
// answers with the first problem) said only "input.text: is required
// (string) but missing", not that "txt" was the problem. The error for a
// missing required field now names an unknown field of the same object
// close to it, and the error for an unknown field suggests the close one.
func TestMisspeltFieldNamed(t *testing.T) {
	doc := &plan.Flow{
		Name:  "review",
		Input: &plan.TypeRef{Kind: plan.KindNamed, Name: "Doc"},
		Types: []plan.Type{{Name: "Doc", Fields: []plan.Field{
			{Name: "id", Type: ref(plan.KindString)},
			{Name: "text", Type: ref(plan.KindString)},
			{Name: "words", Type: ref(plan.KindInt), Optional: true},
		}}},
	}
	err := flowinput.Flow(doc, "input", []byte(`{"id": "d1", "txt": "hello"}`))
	want := &flowinput.Error{Path: "input.text", Msg: `is required (string) but missing; the object has an unknown field "txt": did you mean "text"?`}
	if diff := cmp.Diff(want, err); diff != "" {
		t.Errorf("Flow (-want +got):\n%s", diff)
	}
	// FlowErrors reports the unknown field on its own, with the suggestion.
	errs, _ := flowinput.FlowErrors(doc, "input", []byte(`{"id": "d1", "txt": "hello"}`), 10)
	wantAll := []*flowinput.Error{
		{Path: "input.text", Msg: "is required (string) but missing"},
		{Path: "input.txt", Msg: `unknown field of Doc (fields: id, text, words); did you mean "text"?`},
	}
	if diff := cmp.Diff(wantAll, errs); diff != "" {
		t.Errorf("FlowErrors (-want +got):\n%s", diff)
	}
	// An unknown field not close to the missing one is not named with it.
	err = flowinput.Flow(doc, "input", []byte(`{"id": "d1", "colour": "red"}`))
	want = &flowinput.Error{Path: "input.text", Msg: "is required (string) but missing"}
	if diff := cmp.Diff(want, err); diff != "" {
		t.Errorf("Flow with an unrelated unknown field (-want +got):\n%s", diff)
	}
}
