package flowinput_test

import (
	"encoding/json"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/flowinput"
)

// TestDataAfterValue checks that Flow refuses an input with
// anything after its JSON value, as encoding/json (the generated handlers'
// decoder) does. json.Decoder.More reports false before a closing ']' or
// '}', so such a stray closer must be caught another way.
func TestDataAfterValue(t *testing.T) {
	fl := &plan.Flow{
		Name:  "f",
		Input: &plan.TypeRef{Kind: plan.KindNamed, Name: "T"},
		Types: []plan.Type{{Name: "T", Fields: []plan.Field{{Name: "n", Type: plan.TypeRef{Kind: plan.KindInt}}}}},
	}
	list := &plan.Flow{Name: "l", Input: &plan.TypeRef{Kind: plan.KindList, Elem: &plan.TypeRef{Kind: plan.KindInt}}}
	for _, tt := range []struct {
		fl    *plan.Flow
		input string
	}{
		{fl, `{"n":1}]`},
		{fl, `{"n":1}}`},
		{fl, `{"n":1} ]`},
		{fl, `{"n":1} 2`},
		{list, `[1]]`},
		{list, `[1]}`},
	} {
		var v any
		if json.Unmarshal([]byte(tt.input), &v) == nil {
			t.Fatalf("%s: encoding/json accepts it; the case is wrong", tt.input)
		}
		err := flowinput.Flow(tt.fl, "input", []byte(tt.input))
		if err == nil {
			t.Errorf("Flow(%s) = nil, want an error: a handler cannot decode it", tt.input)
			continue
		}
		if want := "input: has data after the JSON value"; err.Error() != want {
			t.Errorf("Flow(%s) = %q, want %q", tt.input, err, want)
		}
	}
}
