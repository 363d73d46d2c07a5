package bind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/internal/goname"
	"github.com/flowfabric/ff/runtime/worker"
)

type item struct {
	N    int64    `json:"n"`
	Tags []string `json:"tags,omitempty"`
}

type ups struct {
	A *item   `json:"a,omitempty"`
	B *[]item `json:"b,omitempty"`
}

func call(t *testing.T, r worker.TestRegistrar, kind string, in string, up map[string]json.RawMessage) (string, error) {
	t.Helper()
	h, ok := r[kind]
	if !ok {
		t.Fatalf("kind %q not registered", kind)
	}
	var raw json.RawMessage
	if in != "" {
		raw = json.RawMessage(in)
	}
	out, err := h(context.Background(), worker.NewTestTask(raw, up))
	return string(out), err
}

// shapes has one method of each of the eight shapes a generated method
// can have, recording its calls, and the methods of the upstreams a and b.
type shapes struct{ got []string }

func (h *shapes) record(format string, args ...any) {
	h.got = append(h.got, fmt.Sprintf(format, args...))
}

func (h *shapes) A(context.Context) (item, error)   { return item{}, nil }
func (h *shapes) B(context.Context) ([]item, error) { return nil, nil }

func (h *shapes) InUpOut(_ context.Context, in item, up ups) (item, error) {
	h.record("inupout in=%d a=%v b=%v", in.N, up.A != nil, up.B != nil)
	in.N++
	return in, nil
}

func (h *shapes) InOut(_ context.Context, in item) (item, error) { in.N *= 2; return in, nil }

func (h *shapes) UpOut(_ context.Context, up ups) ([]string, error) {
	h.record("upout a=%d", up.A.N)
	return []string{"x"}, nil
}

func (h *shapes) Out(context.Context) (map[string]int64, error) { return map[string]int64{"k": 1}, nil }

func (h *shapes) InUp(_ context.Context, in item, up ups) error {
	h.record("inup in=%d", in.N)
	return nil
}

func (h *shapes) In(_ context.Context, in item) error { h.record("in in=%d", in.N); return nil }

func (h *shapes) Up(_ context.Context, up ups) error { h.record("up b=%d", len(*up.B)); return nil }

// Plain also checks that a method finds its task in its context, even
// when the binding is called with a context that does not carry it.
func (h *shapes) Plain(ctx context.Context) error {
	if _, ok := worker.TaskFrom(ctx); !ok {
		h.record("plain without its task")
	}
	h.record("plain")
	return nil
}

// Quiet has an upstream, plain, without output: nothing to read.
func (h *shapes) Quiet(context.Context) error { h.record("quiet"); return nil }

var (
	itemType = &plan.TypeRef{Kind: plan.KindNamed, Name: "Item"}
	listType = &plan.TypeRef{Kind: plan.KindList, Elem: itemType}
)

// exec returns an exec of flow "f" with kind "k.NAME", taking in (from an
// upstream when it has any, else from the flow) and returning out.
func exec(name string, in, out *plan.TypeRef, upstreams ...string) plan.Exec {
	from := plan.InputNone
	switch {
	case in != nil && len(upstreams) > 0:
		from = plan.InputExec
	case in != nil:
		from = plan.InputFlow
	}
	return plan.Exec{Name: name, Kind: "k." + name, Input: in, Output: out, InputFrom: from, Upstreams: upstreams}
}

// itemDecl declares the type Item, the .ff form of item.
var itemDecl = plan.Type{Name: "Item", Fields: []plan.Field{
	{Name: "n", Type: plan.TypeRef{Kind: plan.KindInt}},
	{Name: "tags", Type: plan.TypeRef{Kind: plan.KindList, Elem: &plan.TypeRef{Kind: plan.KindString}}, Optional: true},
}}

// shapesPlan is a flow with an exec per method of shapes.
func shapesPlan(name string) *plan.Flow {
	return &plan.Flow{Name: name, Types: []plan.Type{itemDecl}, Execs: []plan.Exec{
		exec("a", nil, itemType),
		exec("b", nil, listType),
		exec("in_up_out", itemType, itemType, "a", "b"),
		exec("in_out", itemType, itemType),
		exec("up_out", nil, &plan.TypeRef{Kind: plan.KindList, Elem: &plan.TypeRef{Kind: plan.KindString}}, "a"),
		exec("out", nil, &plan.TypeRef{Kind: plan.KindMap, Elem: &plan.TypeRef{Kind: plan.KindInt}}),
		exec("in_up", itemType, nil, "a"),
		exec("in", itemType, nil),
		exec("up", nil, nil, "b"),
		exec("plain", nil, nil),
		exec("quiet", nil, nil, "plain"),
	}}
}

func TestMethodOf(t *testing.T) {
	fl := shapesPlan("f")
	// An exec with an input type that receives no input takes none.
	fl.Execs = append(fl.Execs, plan.Exec{Name: "no_input", Input: itemType, InputFrom: plan.InputNone, Upstreams: []string{"a", "b", "plain"}})
	outputs := goname.Outputs(fl)
	var got []Method
	for i := range fl.Execs {
		got = append(got, MethodOf(&fl.Execs[i], outputs))
	}
	want := []Method{
		{Name: "A", Out: true},
		{Name: "B", Out: true},
		{Name: "InUpOut", In: true, Out: true, Upstreams: []string{"a", "b"}},
		{Name: "InOut", In: true, Out: true},
		{Name: "UpOut", Out: true, Upstreams: []string{"a"}},
		{Name: "Out", Out: true},
		{Name: "InUp", In: true, Upstreams: []string{"a"}},
		{Name: "In", In: true},
		{Name: "Up", Upstreams: []string{"b"}},
		{Name: "Plain"},
		{Name: "Quiet"},
		{Name: "NoInput", Upstreams: []string{"a", "b"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MethodOf (-want +got):\n%s", diff)
	}
}

func TestShapes(t *testing.T) {
	h := &shapes{}
	r := worker.TestRegistrar{}
	if err := Register(r, shapesPlan("f"), h); err != nil {
		t.Fatal(err)
	}
	a := map[string]json.RawMessage{"a": json.RawMessage(`{"n": 7}`)}
	b := map[string]json.RawMessage{"b": json.RawMessage(`[{"n": 1}, {"n": 2}]`)}
	for _, tt := range []struct {
		kind, in string
		up       map[string]json.RawMessage
		want     string
	}{
		{"k.in_up_out", `{"n": 1}`, a, `{"n":2}`},
		{"k.in_up_out", `{"n": 1}`, nil, `{"n":2}`},
		{"k.in_out", `{"n": 3, "tags": ["t"]}`, nil, `{"n":6,"tags":["t"]}`},
		{"k.up_out", "", a, `["x"]`},
		{"k.out", "", nil, `{"k":1}`},
		{"k.in_up", `{"n": 4}`, a, ``},
		{"k.in", `{"n": 5}`, nil, ``},
		{"k.up", "", b, ``},
		{"k.plain", "", nil, ``},
		{"k.quiet", "", nil, ``},
	} {
		out, err := call(t, r, tt.kind, tt.in, tt.up)
		if err != nil {
			t.Fatalf("%s: %v", tt.kind, err)
		}
		if out != tt.want {
			t.Errorf("%s: output %q, want %q", tt.kind, out, tt.want)
		}
	}
	want := []string{
		"inupout in=1 a=true b=false", "inupout in=1 a=false b=false", "upout a=7",
		"inup in=4", "in in=5", "up b=2", "plain", "quiet",
	}
	if diff := cmp.Diff(want, h.got); diff != "" {
		t.Fatalf("calls (-want +got):\n%s", diff)
	}
}

func TestDecodeFailuresArePermanent(t *testing.T) {
	r := worker.TestRegistrar{}
	if err := Register(r, shapesPlan("flowx"), &shapes{}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, in string
		up       map[string]json.RawMessage
		want     []string
	}{
		{"wrong field type", `{"n": "seven"}`, nil, []string{"flow flowx: exec in_up_out: the input does not match its type Item: input.n: want int (an integer), got a string"}},
		{"not JSON", `{`, nil, []string{"flow flowx: exec in_up_out: the input does not match its type Item: input: is not valid JSON"}},
		{"missing input", ``, nil, []string{"flow flowx: exec in_up_out: the input does not match its type Item: input: is required (Item (an object)) but missing"}},
		{"bad upstream", `{"n": 1}`, map[string]json.RawMessage{"a": json.RawMessage(`"text"`)}, []string{"flow flowx: exec in_up_out: the output of upstream a does not match its type Item: a: want Item (an object), got a string"}},
		{"truncated upstream", `{"n": 1}`, map[string]json.RawMessage{"a": json.RawMessage(`{"n":`)}, []string{"the output of upstream a does not match its type Item: a: is not valid JSON"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, r, "k.in_up_out", tt.in, tt.up)
			if !worker.IsPermanent(err) {
				t.Fatalf("err = %v, want a permanent error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// failing returns its error from every method.
type failing struct{ err error }

func (h failing) Retry(context.Context) error        { return h.err }
func (h failing) Perm(context.Context) (item, error) { return item{}, worker.Permanent(h.err) }
func (h failing) Broken(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`{broken`), nil
}

func TestHandlerErrorsPassThrough(t *testing.T) {
	boom := errors.New("boom")
	r := worker.TestRegistrar{}
	fl := &plan.Flow{Name: "f", Execs: []plan.Exec{exec("retry", nil, nil), exec("perm", nil, itemType)}}
	if err := Register(r, fl, failing{boom}); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, r, "k.retry", "", nil); !errors.Is(err, boom) || worker.IsPermanent(err) {
		t.Fatalf("retryable: err = %v", err)
	}
	if _, err := call(t, r, "k.perm", "", nil); !errors.Is(err, boom) || !worker.IsPermanent(err) {
		t.Fatalf("permanent: err = %v", err)
	}
}

func TestRegisterErrors(t *testing.T) {
	flow := func(execs ...plan.Exec) *plan.Flow { return &plan.Flow{Name: "f", Execs: execs} }
	plain := flow(exec("plain", nil, nil))
	for _, tt := range []struct {
		name string
		w    worker.Registrar
		fl   *plan.Flow
		h    any
		want string
	}{
		{"nil plan", worker.TestRegistrar{}, nil, &shapes{}, "register: nil plan"},
		{"nil registrar", nil, plain, &shapes{}, "register flow f: nil worker.Registrar"},
		{"nil handlers", worker.TestRegistrar{}, plain, nil, "register flow f: nil handlers"},
		{"no such method", worker.TestRegistrar{}, flow(exec("missing", nil, nil)), &shapes{},
			"register flow f: exec missing: *bind.shapes has no method Missing"},
		{"input not taken", worker.TestRegistrar{}, flow(plan.Exec{Name: "plain", Input: itemType, InputFrom: plan.InputFlow}), &shapes{},
			"register flow f: exec plain: method Plain: takes func(context.Context) error, want context.Context and 1 more parameters"},
		{"output not returned", worker.TestRegistrar{}, flow(exec("in", itemType, itemType)), &shapes{},
			"register flow f: exec in: method In: returns func(context.Context, bind.item) error, want 2 results, the last an error"},
		{"upstreams not taken", worker.TestRegistrar{}, flow(exec("a", nil, itemType), exec("in_out", itemType, itemType, "a")), &shapes{},
			"register flow f: exec in_out: method InOut: takes func(context.Context, bind.item) (bind.item, error), want context.Context and 2 more parameters"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Register(tt.w, tt.fl, tt.h)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("err = %v\nwant %s", err, tt.want)
			}
		})
	}

	// A bad method anywhere in the flow binds nothing.
	r := worker.TestRegistrar{}
	err := Register(r, flow(exec("plain", nil, nil), exec("missing", nil, nil)), &shapes{})
	if err == nil || len(r) != 0 {
		t.Fatalf("err = %v, %d handlers registered; want an error and none", err, len(r))
	}
	// Registration errors stop at the first.
	if err := Register(r, plain, &shapes{}); err != nil {
		t.Fatal(err)
	}
	again := flow(plan.Exec{Name: "quiet", Kind: "k.plain"})
	err = Register(r, again, &shapes{})
	if err == nil || err.Error() != `register flow f: exec quiet (kind "k.plain"): kind "k.plain" registered twice` {
		t.Fatalf("err = %v", err)
	}
}

func TestEncodeFailure(t *testing.T) {
	r := worker.TestRegistrar{}
	if err := Register(r, &plan.Flow{Name: "f", Execs: []plan.Exec{exec("broken", nil, itemType)}}, failing{}); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, r, "k.broken", "", nil); err == nil || !strings.Contains(err.Error(), "flow f: exec broken: encode output") {
		t.Fatalf("err = %v", err)
	}
}
