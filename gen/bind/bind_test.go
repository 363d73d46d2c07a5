package bind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/runtime/worker"
)

type registrar map[string]worker.Handler

func (r registrar) Handle(kind string, h worker.Handler) error {
	if _, dup := r[kind]; dup {
		return errors.New("already registered")
	}
	r[kind] = h
	return nil
}

type item struct {
	N    int64    `json:"n"`
	Tags []string `json:"tags,omitempty"`
}

type ups struct {
	A *item   `json:"a,omitempty"`
	B *[]item `json:"b,omitempty"`
}

func call(t *testing.T, r registrar, kind string, in string, up map[string]json.RawMessage) (string, error) {
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

func TestShapes(t *testing.T) {
	var got []string
	record := func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) }
	r := registrar{}
	err := Register(r, "f",
		InUpOut("e1", "k.inupout", func(_ context.Context, in item, up ups) (item, error) {
			record("inupout in=%d a=%v b=%v", in.N, up.A != nil, up.B != nil)
			in.N++
			return in, nil
		}, "a", "b"),
		InOut("e2", "k.inout", func(_ context.Context, in item) (item, error) { in.N *= 2; return in, nil }),
		UpOut("e3", "k.upout", func(_ context.Context, up ups) ([]string, error) {
			record("upout a=%d", up.A.N)
			return []string{"x"}, nil
		}, "a"),
		Out("e4", "k.out", func(context.Context) (map[string]int64, error) { return map[string]int64{"k": 1}, nil }),
		InUp("e5", "k.inup", func(_ context.Context, in item, up ups) error { record("inup in=%d", in.N); return nil }, "a"),
		In("e6", "k.in", func(_ context.Context, in item) error { record("in in=%d", in.N); return nil }),
		Up("e7", "k.up", func(_ context.Context, up ups) error { record("up b=%d", len(*up.B)); return nil }, "b"),
		Plain("e8", "k.plain", func(context.Context) error { record("plain"); return nil }),
	)
	if err != nil {
		t.Fatal(err)
	}
	a := map[string]json.RawMessage{"a": json.RawMessage(`{"n": 7}`)}
	b := map[string]json.RawMessage{"b": json.RawMessage(`[{"n": 1}, {"n": 2}]`)}
	for _, tt := range []struct {
		kind, in string
		up       map[string]json.RawMessage
		want     string
	}{
		{"k.inupout", `{"n": 1}`, a, `{"n":2}`},
		{"k.inupout", `{"n": 1}`, nil, `{"n":2}`},
		{"k.inout", `{"n": 3, "tags": ["t"]}`, nil, `{"n":6,"tags":["t"]}`},
		{"k.upout", "", a, `["x"]`},
		{"k.out", "", nil, `{"k":1}`},
		{"k.inup", `{"n": 4}`, a, ``},
		{"k.in", `{"n": 5}`, nil, ``},
		{"k.up", "", b, ``},
		{"k.plain", "", nil, ``},
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
		"inup in=4", "in in=5", "up b=2", "plain",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("calls (-want +got):\n%s", diff)
	}
}

func TestDecodeFailuresArePermanent(t *testing.T) {
	r := registrar{}
	if err := Register(r, "flowx",
		InUpOut("ex", "k", func(_ context.Context, in item, up ups) (item, error) { return in, nil }, "a"),
	); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, in string
		up       map[string]json.RawMessage
		want     []string
	}{
		{"wrong field type", `{"n": "seven"}`, nil, []string{"flow flowx: exec ex: decode input", "item.n"}},
		{"not JSON", `{`, nil, []string{"flow flowx: exec ex: decode input"}},
		{"missing input", ``, nil, []string{"flow flowx: exec ex: decode input"}},
		{"bad upstream", `{"n": 1}`, map[string]json.RawMessage{"a": json.RawMessage(`"text"`)}, []string{"flow flowx: exec ex: decode output of upstream a"}},
		{"truncated upstream", `{"n": 1}`, map[string]json.RawMessage{"a": json.RawMessage(`{"n":`)}, []string{"decode output of upstream a"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, r, "k", tt.in, tt.up)
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

func TestHandlerErrorsPassThrough(t *testing.T) {
	boom := errors.New("boom")
	r := registrar{}
	if err := Register(r, "f",
		Plain("a", "k.retry", func(context.Context) error { return boom }),
		Out("b", "k.perm", func(context.Context) (item, error) { return item{}, worker.Permanent(boom) }),
	); err != nil {
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
	r := registrar{}
	plain := Plain("a", "k", func(context.Context) error { return nil })
	if err := Register(r, "f", plain); err != nil {
		t.Fatal(err)
	}
	err := Register(r, "f", Plain("b", "k", func(context.Context) error { return nil }))
	if err == nil || err.Error() != `register flow f: exec b (kind "k"): already registered` {
		t.Fatalf("err = %v", err)
	}
	if err := Register(nil, "f", plain); err == nil || !strings.Contains(err.Error(), "nil worker.Registrar") {
		t.Fatalf("nil registrar: err = %v", err)
	}
}

func TestEncodeFailure(t *testing.T) {
	r := registrar{}
	if err := Register(r, "f", Out("e", "k", func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{broken`), nil
	})); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, r, "k", "", nil); err == nil || !strings.Contains(err.Error(), "flow f: exec e: encode output") {
		t.Fatalf("err = %v", err)
	}
}
