package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/wire"
)

func TestDecodeErrors(t *testing.T) {
	type body struct {
		Kind string `json:"kind"`
		N    int    `json:"n"`
	}
	tests := []struct {
		name     string
		in       string
		optional bool
		want     *Error // nil: success
	}{
		{"ok", `{"kind":"a","n":1}`, false, nil},
		{"empty optional", ``, true, nil},
		{"empty required", `  `, false, &Error{Status: 400, Code: wire.CodeInvalidJSON}},
		{"null required", " null\n", false, &Error{Status: 400, Code: wire.CodeInvalidJSON}},
		{"null optional", `null`, true, nil},
		{"syntax", `{"kind":}`, false, &Error{Status: 400, Code: wire.CodeInvalidJSON, Details: map[string]any{"offset": int64(9)}}},
		{"truncated", `{"kind":"a"`, false, &Error{Status: 400, Code: wire.CodeInvalidJSON}},
		{"type", `{"n":"x"}`, false, &Error{Status: 400, Code: wire.CodeInvalidJSON, Details: map[string]any{"field": "n"}}},
		{"unknown", `{"kind":"a","extra":true}`, false, &Error{Status: 400, Code: wire.CodeUnknownField, Details: map[string]any{"field": "extra"}}},
		{"trailing", `{"kind":"a"}x`, false, &Error{Status: 400, Code: wire.CodeInvalidJSON}},
		{"too large", `{"kind":"` + strings.Repeat("a", 100) + `"}`, false, &Error{Status: 413, Code: wire.CodePayloadTooLarge, Details: map[string]any{"limit_bytes": int64(64)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.in))
			c := echo.New().NewContext(req, httptest.NewRecorder())
			var b body
			err := Decode(c, 64, tt.optional, &b)
			var got *Error
			if err != nil {
				got = asError(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.FilterPath(func(p cmp.Path) bool {
				f := p.Last().String()
				return f == ".Message" || f == ".Err"
			}, cmp.Ignore())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got != nil && got.Message == "" {
				t.Error("error without a message")
			}
		})
	}
}

func TestNormalizeCreateDefaults(t *testing.T) {
	r := wire.CreateExecution{Kind: "k"}
	if e := normalizeCreate("", &r); e != nil {
		t.Fatal(e)
	}
	prio := plan.PriorityDefault
	want := wire.CreateExecution{
		Namespace: plan.DefaultNamespace, Lane: plan.DefaultLane, Kind: "k", Priority: &prio,
		Retry: &plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed, DelayMs: plan.DefaultDelayMs, MaxDelayMs: plan.DefaultMaxDelayMs},
	}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Fatalf("defaults (-want +got):\n%s", diff)
	}
	bad := []struct {
		req   wire.CreateExecution
		field string
	}{
		{wire.CreateExecution{}, "x.kind"},
		{wire.CreateExecution{Kind: "k", Lane: "a b"}, "x.lane"},
		{wire.CreateExecution{Kind: "k", Namespace: strings.Repeat("n", NameMaxBytes+1)}, "x.namespace"},
		{wire.CreateExecution{Kind: "k", Retry: &plan.Retry{Attempts: plan.MaxAttempts + 1}}, "x.retry.attempts"},
		{wire.CreateExecution{Kind: "k", Retry: &plan.Retry{DelayMs: 10, MaxDelayMs: 5}}, "x.retry.max_delay_ms"},
		{wire.CreateExecution{Kind: "k", TimeoutMs: -1}, "x.timeout_ms"},
		{wire.CreateExecution{Kind: "k", Requires: []string{""}}, "x.requires"},
		{wire.CreateExecution{Kind: "k", Tags: map[string]string{"": "v"}}, "x.tags"},
	}
	for _, b := range bad {
		e := normalizeCreate("x.", &b.req)
		if e == nil || e.Details["field"] != b.field {
			t.Errorf("%+v: got %v, want an error on %s", b.req, e, b.field)
		}
	}
}

// BenchmarkDecodeBody measures the strict decoding of bodies that take no
// fast path, and what checking member names exactly adds to it (inexact:
// the walk alone, which runs when a member name holds an upper-case
// letter; mayfold: the scan of the names that decides).
func BenchmarkDecodeBody(b *testing.B) {
	claim := []byte(`{"worker_id":"Host-1","instance_id":"Host-1-0a1b2c3d4e5f","namespace":"default","lanes":["default"],` +
		`"kinds":["mail","resize","thumb"],"max":16,"wait_ms":30000,"lease_ms":30000}`)
	var batch strings.Builder
	batch.WriteString(`{"executions":[`)
	for i := range 1000 {
		if i > 0 {
			batch.WriteByte(',')
		}
		fmt.Fprintf(&batch, `{"kind":"mail","input":{"to":"User%d@Example.com","body":"Hello World"},"tags":{"team":"A"},"idempotency_key":"K%d"}`, i, i)
	}
	batch.WriteString(`]}`)
	for _, bc := range []struct {
		name string
		data []byte
		v    func() any
	}{
		{"claim", claim, func() any { return new(wire.ClaimRequest) }},
		{"create_batch_1000", []byte(batch.String()), func() any { return new(wire.CreateBatchRequest) }},
	} {
		b.Run(bc.name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(bc.data)))
			for b.Loop() {
				if err := decodeBody(bc.data, false, bc.v()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/mayfold", func(b *testing.B) {
			b.SetBytes(int64(len(bc.data)))
			for b.Loop() {
				if mayFoldKey(bc.data) {
					b.Fatal("mayFoldKey")
				}
			}
		})
		b.Run(bc.name+"/inexact", func(b *testing.B) {
			b.SetBytes(int64(len(bc.data)))
			t := reflect.TypeOf(bc.v())
			for b.Loop() {
				if _, _, bad := inexactKey(bc.data, t); bad {
					b.Fatal("inexact key")
				}
			}
		})
	}
}

func TestMayFoldKey(t *testing.T) {
	for in, want := range map[string]bool{
		`{"kind":"K","input":{"To":"X"}}`:            true,
		`{"kind":"K","input":{"to":"X","s":"A\":"}}`: false,
		`{"kind":"K","tags":{"a":"B"}}`:              false,
		`{"k\u0069nd":"k"}`:                          true,
		`{"ſ":1}`:                                    true,
		`["A","B"]`:                                  false,
	} {
		if got := mayFoldKey([]byte(in)); got != want {
			t.Errorf("mayFoldKey(%s) = %v, want %v", in, got, want)
		}
	}
}

func TestMayFoldKeyEscapes(t *testing.T) {
	for in, want := range map[string]bool{
		`{"a":"x\\","B":1}`:   true,  // the value ends with an escaped backslash
		`{"a":"x\"B\":1"}`:    false, // "B": is inside the value
		`{"a\\":1,"b":"C"}`:   true,  // a name with an escape
		`{"a":"\\\\","b":""}`: false,
	} {
		if got := mayFoldKey([]byte(in)); got != want {
			t.Errorf("mayFoldKey(%s) = %v, want %v", in, got, want)
		}
	}
}

// TestRequestNamesAreLowerCase guards what mayFoldKey relies on: every
// JSON name of a request body is lower case, so a member name without an
// upper-case letter or escape is exact or unknown, never a case variant.
func TestRequestNamesAreLowerCase(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var check func(path string, t reflect.Type)
	check = func(path string, typ reflect.Type) {
		typ = concrete(typ)
		if typ == nil || seen[typ] {
			return
		}
		seen[typ] = true
		switch typ.Kind() {
		case reflect.Slice, reflect.Array, reflect.Map:
			check(path+"[]", typ.Elem())
		case reflect.Struct:
			names := map[string]reflect.Type{}
			addFields(names, typ, 0)
			for name, ft := range names {
				if strings.ToLower(name) != name {
					t.Errorf("%s.%s: JSON name is not lower case", path, name)
				}
				check(path+"."+name, ft)
			}
		}
	}
	for _, v := range []any{
		wire.BudgetUsageReport{}, wire.Cancel{}, wire.ClaimRequest{}, wire.CreateBatchRequest{}, wire.CreateExecution{},
		wire.ExecutionUsageReport{}, wire.FailRequest{}, wire.CompleteRequest{}, wire.PutBudget{}, wire.PutQuota{},
		wire.RenewRequest{}, wire.RevokeLease{}, wire.SetPriority{}, wire.SingleComplete{}, wire.SingleFail{},
		wire.SingleRenew{}, wire.StageFlow{}, wire.StageTemplate{}, wire.WorkerHeartbeat{}, stageBody{},
	} {
		check(reflect.TypeOf(v).Name(), reflect.TypeOf(v))
	}
	if !seen[reflect.TypeFor[plan.Exec]()] {
		t.Error("the walk did not reach plan.Exec")
	}
}
