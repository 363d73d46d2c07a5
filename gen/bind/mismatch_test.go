package bind

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/worker"
)

type order struct {
	ID    string `json:"id"`
	Cents int64  `json:"cents"`
}

type orderUps struct {
	A *order `json:"a,omitempty"`
}

// shop records the values its methods get.
type shop struct{ got []string }

func (h *shop) A(context.Context) (order, error) { return order{}, nil }

func (h *shop) B(_ context.Context, in order, up orderUps) (order, error) {
	h.got = append(h.got, "b "+in.ID)
	return in, nil
}

func (h *shop) C(_ context.Context, up orderUps) error {
	h.got = append(h.got, "c "+up.A.ID)
	return nil
}

// shopPlan: b takes its input from a and reads a's output; c reads a's
// output only.
func shopPlan() *plan.Flow {
	orderType := &plan.TypeRef{Kind: plan.KindNamed, Name: "Order"}
	b := exec("b", orderType, orderType, "a")
	b.InputExec = "a"
	return &plan.Flow{
		Name: "shop",
		Types: []plan.Type{{Name: "Order", Fields: []plan.Field{
			{Name: "id", Type: plan.TypeRef{Kind: plan.KindString}},
			{Name: "cents", Type: plan.TypeRef{Kind: plan.KindInt}},
		}}},
		Execs: []plan.Exec{exec("a", nil, orderType), b, exec("c", nil, nil, "a")},
	}
}

// TestMismatchedValuesFailPermanently: an input or upstream output that
// does not match its type in the plan (a field missing, unknown, spelt in
// another case or given twice, of another type, or null for a record),
// which encoding/json alone would decode as zero values, fails the
// attempt permanently, without calling the method, with an error naming
// the flow, the exec, the value and the field. Values that match reach
// the method.
func TestMismatchedValuesFailPermanently(t *testing.T) {
	h := &shop{}
	r := worker.TestRegistrar{}
	if err := Register(r, shopPlan(), h); err != nil {
		t.Fatal(err)
	}
	const good = `{"id":"o-1","cents":100}`
	ups := func(a string) map[string]json.RawMessage { return map[string]json.RawMessage{"a": json.RawMessage(a)} }
	for _, tt := range []struct {
		name, kind, in string
		up             map[string]json.RawMessage
		want           string // "": success
	}{
		{"renamed field", "k.b", `{"order_id":"o-1"}`, ups(`{"order_id":"o-1"}`),
			`flow shop: exec b: the input (the output of upstream a) does not match its type Order: input.id: is required (string) but missing`},
		{"renamed field upstream", "k.c", "", ups(`{"order_id":"o-1","cents":1}`),
			`flow shop: exec c: the output of upstream a does not match its type Order: a.id: is required (string) but missing`},
		{"other case", "k.c", "", ups(`{"ID":"o-1","cents":1}`), `flow shop: exec c: the output of upstream a does not match its type Order: a.id: is required`},
		{"unknown field", "k.c", "", ups(`{"id":"o-1","cents":1,"note":"x"}`), `a.note: unknown field of Order (fields: id, cents)`},
		{"repeated field", "k.c", "", ups(`{"id":"o-1","cents":1,"cents":2}`), `a.cents: is given more than once in its object`},
		{"wrong type", "k.c", "", ups(`{"id":"o-1","cents":1.5}`), `a.cents: want int (an integer), got 1.5 (not an integer literal)`},
		{"null record", "k.c", "", ups(`null`), `a: want Order (an object), got null`},
		// The input is checked; a's output, other bytes here, is too.
		{"bad upstream beside a good input", "k.b", good, ups(`{"id":"o-1"}`),
			`flow shop: exec b: the output of upstream a does not match its type Order: a.cents: is required (int (an integer)) but missing`},
		{"good", "k.b", good, ups(good), ""},
		{"good upstream", "k.c", "", ups(` {"cents":100, "id":"o-1"} `), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h.got = nil
			_, err := call(t, r, tt.kind, tt.in, tt.up)
			if tt.want == "" {
				if err != nil || len(h.got) != 1 || !strings.HasSuffix(h.got[0], " o-1") {
					t.Fatalf("err = %v, calls %q; want one call with o-1", err, h.got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to contain %s", err, tt.want)
			}
			if !worker.IsPermanent(err) {
				t.Errorf("err = %v is not permanent: the same data would fail again", err)
			}
			if len(h.got) != 0 {
				t.Errorf("the method was called with %q", h.got)
			}
		})
	}
}

// TestRegisterUndeclaredType: a plan whose exec reads a value of a type
// it does not declare binds nothing.
func TestRegisterUndeclaredType(t *testing.T) {
	fl := shopPlan()
	fl.Types = nil
	r := worker.TestRegistrar{}
	err := Register(r, fl, &shop{})
	want := `register flow shop: exec b: input: flowinput: type "Order" is not declared in the plan`
	if err == nil || err.Error() != want || len(r) != 0 {
		t.Fatalf("err = %v, %d handlers bound; want %s and none", err, len(r), want)
	}
}
