package bind

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
)

func TestDecodePlan(t *testing.T) {
	want := &plan.Flow{
		Schema: plan.SchemaVersion, Name: "publish", Namespace: "media", Lane: "default",
		Execs: []plan.Exec{{Name: "probe", Kind: "media.probe", Lane: "default", Priority: 100, InputFrom: plan.InputNone,
			Join: plan.Join{Kind: plan.JoinAll}, Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed, DelayMs: 1000}}},
		Edges: []plan.Edge{},
	}
	text, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	good := string(text)
	got, err := DecodePlan("publish", good)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded plan (-want +got):\n%s", diff)
	}

	for _, tt := range []struct {
		name, flow, text string
		want             []string // substrings of the error
	}{
		{
			name: "field from a newer schema",
			flow: "publish",
			text: strings.Replace(good, `"name": "publish",`, `"name": "publish", "sla_ms": 5,`, 1),
			want: []string{`plan of flow publish: json: unknown field "sla_ms"`, "regenerate"},
		},
		{
			name: "newer schema version",
			flow: "publish",
			text: strings.Replace(good, `"schema": 1,`, `"schema": 2, "sla_ms": 5,`, 1),
			want: []string{"plan of flow publish: plan schema version 2, but this program reads version 1"},
		},
		{
			name: "missing schema version",
			flow: "publish",
			text: strings.Replace(good, `"schema": 1,`, ``, 1),
			want: []string{"plan schema version 0"},
		},
		{
			name: "plan of another flow",
			flow: "other",
			text: good,
			want: []string{`plan of flow other: the embedded plan is of flow "publish"`},
		},
		{
			name: "trailing data",
			flow: "publish",
			text: good + "{}",
			want: []string{"plan of flow publish: data after the plan"},
		},
		{
			name: "not JSON",
			flow: "publish",
			text: "{",
			want: []string{"plan of flow publish: unexpected EOF"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fl, err := DecodePlan(tt.flow, tt.text)
			if err == nil {
				t.Fatalf("DecodePlan succeeded with %+v, want an error", fl)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}
