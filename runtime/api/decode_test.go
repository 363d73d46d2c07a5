package api

import (
	"net/http"
	"net/http/httptest"
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
